"""SQL cursors over the wire (DECLARE / FETCH / MOVE / CLOSE): the query is answered once at DECLARE, exactly as
the plain query (checked, charged, released), and FETCH pages through the released rows."""

from __future__ import annotations

from decimal import Decimal

import pytest
from frontdoors.fakes import FakeWorld

from dpsql.server.cursors import Close, Cursor, CursorError, Declare, Fetch, parse
from server.test_pgwire import dsn

psycopg = pytest.importorskip("psycopg")

DP = "SELECT month, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights GROUP BY month ORDER BY month"


@pytest.mark.parametrize(("sql", "stmt"), [
    ('DECLARE "c_1" CURSOR WITHOUT HOLD FOR SELECT 1', Declare("c_1", "SELECT 1", False, None, False)),
    ("declare C binary no scroll cursor with hold for\nselect 1", Declare("c", "select 1", True, False, True)),
    ("DECLARE c SCROLL CURSOR FOR VALUES (1)", Declare("c", "VALUES (1)", False, True, False)),
    ('DECLARE "a""b" INSENSITIVE CURSOR FOR SELECT 1', Declare('a"b', "SELECT 1", False, None, False)),
    ("FETCH c", Fetch("c", False, "forward", 1)),
    ('FETCH FORWARD 2000 FROM "c_7f4f0abeadd0_1"', Fetch("c_7f4f0abeadd0_1", False, "forward", 2000)),
    ("FETCH ALL IN c", Fetch("c", False, "forward", None)),
    ("FETCH FORWARD ALL FROM c", Fetch("c", False, "forward", None)),
    ("FETCH 5 c", Fetch("c", False, "forward", 5)),
    ("FETCH -2 FROM c", Fetch("c", False, "backward", 2)),
    ("FETCH BACKWARD FROM c", Fetch("c", False, "backward", 1)),
    ("FETCH PRIOR FROM c", Fetch("c", False, "backward", 1)),
    ("FETCH FIRST FROM c", Fetch("c", False, "absolute", 1)),
    ("FETCH LAST FROM c", Fetch("c", False, "absolute", -1)),
    ("FETCH ABSOLUTE -2 FROM c", Fetch("c", False, "absolute", -2)),
    ("MOVE RELATIVE 3 IN c", Fetch("c", True, "relative", 3)),
    ("MOVE 0 FROM c", Fetch("c", True, "forward", 0)),
    ("FETCH next", Fetch("next", False, "forward", 1)),
    ("CLOSE c", Close("c")),
    ("CLOSE ALL", Close(None)),
    ('CLOSE "Mixed"', Close("Mixed")),
])
def test_cursor_statements_parse(sql: str, stmt: object) -> None:
    assert parse(sql) == stmt


@pytest.mark.parametrize("sql", ["DECLARE c FOR SELECT 1", "FETCH FORWARD x y FROM c", "CLOSE", "MOVE"])
def test_malformed_cursor_statements_are_syntax_errors(sql: str) -> None:
    with pytest.raises(CursorError) as e:
        parse(sql)
    assert e.value.sqlstate == "42601"


def _moves(scroll: bool | None, *steps: tuple[str, int | None]) -> list[list[int]]:
    cur = Cursor("c", "", [("x", 23)], [(i,) for i in range(1, 6)], scroll=scroll)
    return [[cur.rows[i][0] for i in cur.indices(kind, count)] for kind, count in steps]


def test_cursor_positions_follow_postgresql() -> None:
    """Five rows 1..5; the answers PostgreSQL 15 gives to the same FETCH sequence on a SCROLL cursor."""
    assert _moves(True, ("forward", 2), ("forward", 0), ("backward", 1), ("forward", None), ("forward", 1),
                  ("backward", 2), ("absolute", 1), ("absolute", -1), ("absolute", 9), ("backward", 1),
                  ("relative", -2), ("relative", 0), ("absolute", 0), ("forward", 1), ("backward", 9),
                  ("relative", 9), ("backward", None)) == [
        [1, 2], [2], [1], [2, 3, 4, 5], [], [5, 4], [1], [5], [], [5], [3], [3], [], [1], [], [], [5, 4, 3, 2, 1]]


def test_no_scroll_cursor_only_moves_forward() -> None:
    assert _moves(False, ("forward", 2), ("absolute", 4), ("relative", 1)) == [[1, 2], [4], [5]]
    for step in [("backward", 1), ("absolute", 1), ("relative", -1)]:
        with pytest.raises(CursorError) as e:
            _moves(False, ("forward", 3), step)
        assert e.value.sqlstate == "55000"


def test_declare_charges_once_and_fetch_pages(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server), autocommit=True) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        c.execute("BEGIN")
        assert c.execute(f"DECLARE c CURSOR FOR {DP}").statusmessage == "DECLARE CURSOR"
        assert notices == ["dpsql: charged epsilon 0.5, remaining 9.5"]  # the cost, at DECLARE
        cur = c.execute("FETCH 2 FROM c")
        assert cur.statusmessage == "FETCH 2" and [d.name for d in cur.description] == ["month", "n"]
        assert cur.fetchall() == [(0, 100.0), (1, 100.0)]
        assert c.execute("MOVE BACKWARD 1 IN c").statusmessage == "MOVE 1"
        assert c.execute("FETCH ALL FROM c").fetchall() == [(1, 100.0), (2, 100.0)]
        assert c.execute("FETCH NEXT FROM c").fetchall() == []
        assert c.execute("FETCH FIRST FROM c").fetchall() == [(0, 100.0)]
        c.execute("CLOSE c")
        with pytest.raises(psycopg.errors.InvalidCursorName):
            c.execute("FETCH c")
        c.execute("ROLLBACK")
    assert [ch[1] for ch in world.charges] == [Decimal("0.5")]


def test_psycopg_server_cursor_streams_a_dp_query(server, world: FakeWorld) -> None:
    """psycopg 3's ServerCursor: DECLARE with a bound parameter (extended protocol), Describe of the cursor's
    portal, FETCH FORWARD itersize at a time, the pg_cursors check and CLOSE."""
    with psycopg.connect(dsn(server)) as c:
        for binary in (False, True):
            with c.cursor(name="stream", binary=binary) as cur:
                cur.itersize = 1
                cur.execute("SELECT carrier, dp_mean(dep_delay, epsilon := %s) AS m FROM flights "
                            "GROUP BY carrier ORDER BY carrier", (0.25,))
                assert [d.name for d in cur.description] == ["carrier", "m"]
                assert [r[0] for r in cur] == ["AA", "DL", "UA"]
                assert c.execute("SELECT name FROM pg_catalog.pg_cursors").fetchall() == [("stream",)]
            assert c.execute("SELECT count(*) FROM pg_catalog.pg_cursors").fetchone() == (0,)
        c.commit()
    assert [ch[1] for ch in world.charges] == [Decimal("0.25")] * 2


def test_refusal_inside_declare_keeps_its_code(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server)) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
            c.execute("DECLARE c CURSOR FOR SELECT dep_delay FROM flights")
        assert str(e.value).startswith("DPSQL-E021: ") and e.value.diag.message_detail == "dpsql error code DPSQL-E021"
        c.rollback()
        with pytest.raises(psycopg.errors.InvalidCursorName):
            c.execute("FETCH ALL FROM c")  # nothing was declared
        c.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("DECLARE c CURSOR FOR SELECT dp_count(dep_delay, epsilon := -1) FROM flights")
    assert world.charges == []


def test_transaction_rules(server, world: FakeWorld) -> None:
    """As in PostgreSQL: WITHOUT HOLD needs a transaction block (an explicit one, or a multi-statement simple
    query) and ends with it; WITH HOLD outlives COMMIT; ROLLBACK drops what the transaction declared."""
    with psycopg.connect(dsn(server), autocommit=True) as c:
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
            c.execute("DECLARE c CURSOR FOR SELECT 1 AS one")
        cur = c.execute("DECLARE c CURSOR FOR SELECT 1 AS one; FETCH ALL FROM c", prepare=False)
        assert cur.nextset() and cur.fetchall() == [(1,)]
        with pytest.raises(psycopg.errors.InvalidCursorName):
            c.execute("FETCH c")  # the implicit block ended
        c.execute("DECLARE h CURSOR WITH HOLD FOR SELECT carrier, name FROM airlines ORDER BY carrier")
        c.execute("BEGIN")
        c.execute("DECLARE t CURSOR FOR SELECT 2 AS two")
        c.execute("DECLARE th CURSOR WITH HOLD FOR SELECT 3 AS three")
        with pytest.raises(psycopg.errors.DuplicateCursor):
            c.execute("DECLARE t CURSOR FOR SELECT 2 AS two")
        c.execute("ROLLBACK")
        assert c.execute("SELECT name FROM pg_cursors ORDER BY 1").fetchall() == [("h",)]
        c.execute("BEGIN")
        c.execute("DECLARE t CURSOR FOR SELECT 2 AS two")
        c.execute("COMMIT")
        assert c.execute("SELECT name, is_holdable FROM pg_cursors").fetchall() == [("h", True)]
        assert c.execute("FETCH 2 FROM h").fetchall() == [("AA", "American"), ("DL", "Delta")]
        c.execute("CLOSE ALL")
        assert c.execute("SELECT count(*) FROM pg_cursors").fetchone() == (0,)
    assert world.charges == []


def test_binary_and_no_scroll_cursors(server) -> None:
    with psycopg.connect(dsn(server), autocommit=True) as c:
        c.execute("BEGIN")
        c.execute("DECLARE b BINARY NO SCROLL CURSOR FOR SELECT 7::INTEGER AS i, 2.5::DOUBLE AS f")
        res = c.pgconn.exec_(b"FETCH ALL FROM b")  # simple protocol: the rows come in binary
        assert res.fformat(0) == 1 and res.get_value(0, 0) == b"\x00\x00\x00\x07"
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            c.execute("FETCH PRIOR FROM b")
        c.execute("ROLLBACK")


def test_catalog_query_in_a_cursor_and_describe_never_runs(server, world: FakeWorld) -> None:
    with psycopg.connect(dsn(server), prepare_threshold=0) as c:
        c.execute("DECLARE k CURSOR FOR SELECT relname FROM pg_catalog.pg_class ORDER BY 1")
        assert c.execute("FETCH ALL FROM k").fetchall() == [("airlines",), ("flights",)]
        c.execute("DECLARE d CURSOR FOR SELECT dp_sum(dep_delay, epsilon := 0.5) AS s FROM flights")
        assert len(world.charges) == 1 and world.describes == []  # DECLARE is described without running
        assert c.execute("FETCH d").fetchall() == [(7350.0,)]
    assert len(world.charges) == 1
