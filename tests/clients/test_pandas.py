"""pandas ``read_sql(..., chunksize=...)`` streaming a dp query through SQLAlchemy's ``stream_results`` and a
psycopg2 named cursor: DECLARE charges once, each chunk is a FETCH of released rows."""

from __future__ import annotations

import importlib.util
from decimal import Decimal

import pytest
from frontdoors.harness import PASSWORD

pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas not installed"),
    pytest.mark.skipif(importlib.util.find_spec("psycopg2") is None,
                       reason="psycopg2 not installed (pip install psycopg2-binary)"),
    pytest.mark.skipif(importlib.util.find_spec("sqlalchemy") is None, reason="SQLAlchemy not installed"),
]

DP = "SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights GROUP BY carrier ORDER BY carrier"


def test_read_sql_chunksize_streams_a_dp_query(real_server: tuple[str, int], real_db: str) -> None:
    import pandas as pd
    import sqlalchemy as sa

    import dpsql

    engine = sa.create_engine(f"postgresql+psycopg2://alice:{PASSWORD}@{real_server[0]}:{real_server[1]}/flights")
    try:
        with engine.connect().execution_options(stream_results=True) as conn:
            chunks = list(pd.read_sql(DP, conn, chunksize=2))
    finally:
        engine.dispose()
    assert [len(c) for c in chunks] == [2, 1]
    frame = pd.concat(chunks)
    assert list(frame.columns) == ["carrier", "n"] and list(frame["carrier"]) == ["AA", "DL", "UA"]
    assert all(abs(n - 1000) < 60 for n in frame["n"])
    assert [e.amount for e in dpsql.admin(real_db).charges("alice")] == [Decimal("0.5")]


def test_psycopg2_named_cursor(real_server: tuple[str, int], real_db: str) -> None:
    import psycopg2

    import dpsql

    con = psycopg2.connect(host=real_server[0], port=real_server[1], user="alice", password=PASSWORD,
                           dbname="flights")
    try:
        cur = con.cursor("pages")
        cur.itersize = 1
        cur.execute("SELECT carrier, dp_mean(dep_delay, epsilon := 0.25) AS m FROM flights GROUP BY carrier "
                    "ORDER BY carrier")
        assert cur.fetchmany(2)[1][0] == "DL" and [r[0] for r in cur] == ["UA"]
        assert con.notices[-1].startswith("NOTICE:  dpsql: charged epsilon 0.25, remaining ")
        cur.close()
        con.commit()
        refused = con.cursor("refused")
        with pytest.raises(psycopg2.errors.InsufficientPrivilege) as e:
            refused.execute("SELECT dep_delay FROM flights")  # raw rows of a protected table: refused at DECLARE
        assert e.value.pgcode == "42501" and str(e.value).startswith("DPSQL-E0")
        con.rollback()
    finally:
        con.close()
    assert [e.amount for e in dpsql.admin(real_db).charges("alice")] == [Decimal("0.25")]
