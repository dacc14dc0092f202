"""SQLAlchemy 2 with the postgresql+psycopg dialect (the path Superset takes)."""

from __future__ import annotations

import pytest
from frontdoors.harness import PASSWORD

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")
pytestmark = pytest.mark.clients


def engine(addr: tuple[str, int], query: str = "sslmode=disable"):  # noqa: ANN201
    return sa.create_engine(f"postgresql+psycopg://alice:{PASSWORD}@{addr[0]}:{addr[1]}/flights?{query}")


def test_query_parameters_rejection(server) -> None:
    eng = engine(server)
    try:
        with eng.connect() as conn:
            rows = conn.execute(sa.text("SELECT carrier, dp_count(dep_delay, epsilon := :e) AS n FROM flights "
                                        "GROUP BY carrier ORDER BY carrier"), {"e": 0.3}).all()
            assert [tuple(r) for r in rows] == [("AA", 100.0), ("DL", 100.0), ("UA", 100.0)]
            with pytest.raises(sa.exc.ProgrammingError, match="DPSQL-E021"):
                conn.execute(sa.text("SELECT dep_delay FROM flights"))
    finally:
        eng.dispose()


def test_reflection(server) -> None:
    eng = engine(server)
    try:
        insp = sa.inspect(eng)
        assert "main" in insp.get_schema_names()
        assert sorted(insp.get_table_names()) == ["airlines", "flights"]  # SQLAlchemy 2.1 no longer sorts
        cols = {c["name"]: c["type"] for c in insp.get_columns("flights")}
        assert list(cols) == ["month", "carrier", "dep_delay", "day"]
        assert isinstance(cols["dep_delay"], sa.Double) or "DOUBLE" in str(cols["dep_delay"])
        assert insp.get_pk_constraint("flights")["constrained_columns"] == []
        assert insp.get_foreign_keys("flights") == []
        assert insp.get_indexes("flights") == []
        meta = sa.MetaData()
        flights = sa.Table("flights", meta, autoload_with=eng)
        assert [c.name for c in flights.columns] == ["month", "carrier", "dep_delay", "day"]
    finally:
        eng.dispose()


def test_tls(tls_server, tls_files) -> None:
    eng = engine(tls_server, f"sslmode=verify-full&sslrootcert={tls_files[0]}")
    try:
        with eng.connect() as conn:
            assert conn.execute(sa.text("SELECT dp_count(dep_delay, epsilon := 0.1) AS n FROM flights")).scalar() \
                == 300.0
    finally:
        eng.dispose()
