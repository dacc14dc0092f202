"""The admin API: policy validation, grants, catalog, and the CLI-facing reads."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from session_fakes import fake_install

import dpsql
import dpsql.administration
from dpsql.errors import PrivacyError


def test_dpsql_admin_stays_callable_after_importing_the_module(db: Path) -> None:
    assert isinstance(dpsql.admin(db), dpsql.administration.Admin)


def test_catalog_from_metadata(db: Path) -> None:
    cat = dpsql.admin(db).catalog()
    assert set(cat.tables) == {"visits", "clinics"}
    assert cat.tables["visits"].public_keys == {"clinic": ("A", "B", "C")}
    assert (cat.accounting, cat.delta, cat.max_query_epsilon) == ("pure", 0.0, None)


def test_catalog_for_a_principal_carries_its_budget(db: Path) -> None:
    adm = dpsql.admin(db)
    adm.grant("zoe", rho="0.5", delta="1e-6", per_query_cap="0.1", delta_per_query="1e-7")
    cat = adm.catalog("zoe")
    assert (cat.accounting, cat.delta, cat.max_query_epsilon) == ("zcdp", pytest.approx(1e-7), 0.1)


@pytest.mark.parametrize(("call", "error"), [
    (lambda a: a.protect("nope"), ValueError),
    (lambda a: a.protect("visits", privacy_unit="nope"), ValueError),
    (lambda a: a.protect("visits", max_rows_per_unit=0), ValueError),
    (lambda a: a.protect("visits", max_rows_per_unit=2.5), ValueError),
    (lambda a: a.protect("visits; DROP TABLE x"), ValueError),
    (lambda a: a.public_keys("visits", "clinic", []), ValueError),
    (lambda a: a.public_keys("visits", "clinic", ["A", "A"]), ValueError),
    (lambda a: a.public_keys("visits", "patient_id", ["x"]), ValueError),
    (lambda a: a.public_keys("clinics", "clinic", ["A"]), ValueError),
    (lambda a: a.grant("bob"), ValueError),
    (lambda a: a.grant("bob", epsilon=1, rho=1), ValueError),
    (lambda a: a.grant("bob", epsilon=-1), ValueError),
    (lambda a: a.grant("bob", epsilon=float("nan")), ValueError),
    (lambda a: a.grant("bob", epsilon=1, delta=1), ValueError),
    (lambda a: a.grant("bad name", epsilon=1), ValueError),
    (lambda a: a.grant("alice", rho=1), ValueError),
])
def test_invalid_declarations_are_refused(db: Path, call, error) -> None:  # noqa: ANN001
    with pytest.raises(error):
        call(dpsql.admin(db))


def test_typed_public_keys(db: Path) -> None:
    adm = dpsql.admin(db)
    adm.public_keys("visits", "patient_id", [1, 2, 3])
    assert adm.catalog().tables["visits"].public_keys["patient_id"] == (1, 2, 3)


def test_unprotect_and_public_table(db: Path) -> None:
    adm = dpsql.admin(db)
    adm.unprotect("visits")
    assert set(adm.catalog().tables) == {"clinics"}
    adm.public_table("visits")
    assert adm.catalog().tables["visits"].kind == "public"
    adm.protect("visits", privacy_unit="patient_id")
    assert adm.catalog().tables["visits"].kind == "protected"


def test_dropped_table_leaves_the_catalog(db: Path) -> None:
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE clinics")
    con.close()
    assert "clinics" not in dpsql.admin(db).catalog().tables


def test_budgets_and_charges_for_the_cli(db: Path) -> None:
    adm = dpsql.admin(db)
    adm.grant("bob", epsilon="2.5")
    with dpsql.connect(db, analyst="bob", install=fake_install) as s:
        s.sql("SELECT dp_count(cost, epsilon := 0.1) FROM visits")
    assert [(b.principal, b.limit, b.spent, b.remaining) for b in adm.budgets()] == [
        ("alice", Decimal(3), Decimal(0), Decimal(3)), ("bob", Decimal("2.5"), Decimal("0.3"), Decimal("2.2"))]
    [c] = adm.charges("bob")
    assert (c.kind, c.amount, c.status) == ("charge", Decimal("0.3"), "released")
    assert adm.charges("alice") == []
    adm.verify()


def test_regrant_while_a_session_is_open(db: Path) -> None:
    with dpsql.connect(db, analyst="alice", install=fake_install) as s:
        dpsql.admin(db).grant("alice", epsilon=5)
        assert s.budget().limit == Decimal(5)


def test_policy_change_while_a_session_is_open_is_refused_clearly(db: Path) -> None:
    with dpsql.connect(db, analyst="alice", install=fake_install), pytest.raises(RuntimeError, match="close"):
        dpsql.admin(db).protect("clinics")


def test_global_limit(db: Path) -> None:
    adm = dpsql.admin(db)
    adm.grant("bob", epsilon=3)
    adm.global_limit(epsilon="0.5")
    with dpsql.connect(db, analyst="alice", install=fake_install) as s:
        s.sql("SELECT dp_count(cost, epsilon := 0.1) FROM visits")  # 0.3
    with dpsql.connect(db, analyst="bob", install=fake_install) as s, pytest.raises(PrivacyError) as err:
        s.sql("SELECT dp_count(cost, epsilon := 0.1) FROM visits")  # 0.6 > 0.5 in total
    assert err.value.code == "DPSQL-E070"


def test_no_ledger_yet(tmp_path: Path) -> None:
    p = tmp_path / "x.duckdb"
    con = duckdb.connect(str(p))
    con.execute("CREATE TABLE t AS SELECT 1 AS a")
    con.close()
    adm = dpsql.admin(p)
    assert adm.budgets() == [] and adm.charges() == []
    with pytest.raises(FileNotFoundError):
        dpsql.admin(tmp_path / "missing.duckdb")
