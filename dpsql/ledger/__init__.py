"""The budget ledger: budgets and an append-only, hash-chained log of grants and charges.

Design (docs/operations.md, "The ledger"; from the threat model's section 5, external material):

* Its own DuckDB file next to the data file (``hospital.duckdb`` -> ``hospital.ledger.duckdb``, mode
  0600), never attached to the executor that runs analyst-derived SQL.
* Every access holds a process-wide lock (one per ledger file) and an exclusive ``flock`` on
  ``<ledger>.lock``, opens the file, runs one transaction and closes it, so other processes can take
  their turn: a second process waits, then fails cleanly with DPSQL-E071 after ``lock_timeout``.
* Amounts are exact ``DECIMAL(38, 18)`` (bound as :class:`decimal.Decimal`); costs are rounded up.
* A charge is one transaction: a conditional ``UPDATE budgets ... WHERE spent + c <= limit_`` (and the
  same on the optional dataset-wide limit), then the log entry; it commits before anything runs.
  Nothing is refunded afterwards: the entry only moves from ``reserved`` to ``released`` or
  ``failed_after_start``.
* Each entry carries ``row_hash = sha256(prev_hash, immutable fields)``; the genesis hash is bound to
  the dataset id.  After each commit ``(seq, row_hash)`` is appended to ``<ledger>.anchor``.  Opening
  the ledger recomputes the chain, checks it against the anchor (catching truncation or a restored
  old copy) and checks that the budget rows equal what the log implies; any mismatch is DPSQL-E090.
* Replays (issue 19): the ``releases`` table keeps released results, and a charge given a
  ``release_key`` that matches a stored release of the same principal and data version appends a
  zero-cost ``replay`` entry naming the original charge (``ref_seq``) instead of charging.  The data
  version is declared by the data owner (:meth:`Ledger.bump_data_version`, a ``data_version`` entry).
  Opening checks that every replay refers to an earlier charge of its principal at the same version.
* Schema version 2 (replays, data versions, releases); a version-1 file is migrated when opened.

Layout: :mod:`.records` (amounts, budgets, entries), :mod:`.store` (locks, connections, transactions and
retries: :class:`~dpsql.ledger.store.Store`, :func:`~dpsql.ledger.store.transaction`), :mod:`.chain` (the hash
chain, the log's replay check and the anchor); here, :class:`Ledger`: the budget verbs (grant, charge, replays,
data versions, sessions, reads) over a store.
"""

from __future__ import annotations

import json
import os
import uuid
from decimal import Decimal
from typing import Any

import duckdb

from ..core.accounting import round_up  # the one rounding of an amount (a cost, a limit, a delta)
from ..errors import PrivacyError
from ..sqltext import script
from .chain import append, entry_hash, genesis_hash, read_data_version, verify
from .records import (
    _BUDGET_COLS,
    _ENTRY_COLS,
    _MAX_AMOUNT,
    DELTA_PLACES,
    Accounting,
    Budget,
    Charge,
    Entry,
    StoredRelease,
    _budget,
    _entry,
    _now,
    _unavailable,
    clean,
    ledger_path,
    to_decimal,
)
from .store import Store, transaction

__all__ = ["Ledger", "Budget", "Entry", "Charge", "StoredRelease", "ledger_path", "round_up", "to_decimal",
           "entry_hash", "genesis_hash", "clean", "transaction", "RELEASE_CAP", "RELEASE_BYTES"]

SCHEMA_VERSION = 2
#: the store of releases kept for replay, per principal: at most this many releases and this many bytes
#: (Arrow IPC) together; the least recently used are evicted first, and a release larger than
#: RELEASE_BYTES is not stored at all.  An evicted release is simply charged again when asked again.
RELEASE_CAP = 500
RELEASE_BYTES = 16 * 2**20


class Ledger(Store):
    """The budget ledger of one dataset.  Opening it verifies the whole chain (DPSQL-E090 on mismatch).

    ``Ledger(path, dataset_id, create=True)`` creates the file if it is missing (admin only)."""

    def __init__(self, path: str | os.PathLike[str], dataset_id: str, *, create: bool = False,
                 lock_timeout: float = 30.0) -> None:
        super().__init__(path, lock_timeout)
        self.dataset_id = dataset_id
        if not self.path.exists() and not create:
            raise _unavailable("no ledger file (the admin has not granted any budget yet)")
        with self._transaction(urgent=True) as con:
            if create:
                for stmt in script("ledger.sql"):
                    con.execute(stmt)
                if con.execute("SELECT count(*) FROM meta WHERE key = 'dataset_id'").fetchone()[0] == 0:
                    con.execute("INSERT INTO meta VALUES ('dataset_id', ?), ('schema_version', ?), "
                                "('data_version', '1')", [dataset_id, str(SCHEMA_VERSION)])
            self._migrate(con)
            self._verify(con)

    @staticmethod
    def _migrate(con: duckdb.DuckDBPyConnection) -> None:
        """Bring a ledger written by an older dpsql to :data:`SCHEMA_VERSION`, in the caller's transaction.

        1 -> 2: ``entries`` gains the kinds ``replay`` and ``data_version``, the accounting ``none`` and
        the column ``ref_seq`` (DuckDB cannot alter a CHECK, so the table is copied); ``releases`` is
        created; the data version starts at 1.  Old entries keep their hashes (``ref_seq`` is NULL)."""
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row is not None else SCHEMA_VERSION
        except (duckdb.Error, ValueError):
            raise _unavailable("the ledger's schema version cannot be read") from None
        if version > SCHEMA_VERSION:
            raise _unavailable("the ledger was written by a newer dpsql")
        if version == SCHEMA_VERSION:
            return
        cols = _ENTRY_COLS.removesuffix(", ref_seq")
        con.execute("ALTER TABLE entries RENAME TO entries_v1")
        for stmt in script("ledger.sql"):
            con.execute(stmt)
        con.execute(f"INSERT INTO entries ({cols}) SELECT {cols} FROM entries_v1")
        con.execute("DROP TABLE entries_v1")
        con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?), ('data_version', '1')",
                    [str(SCHEMA_VERSION)])

    # ----------------------------------------------------------------- verification (the hash chain: .chain)

    def _verify(self, con: duckdb.DuckDBPyConnection) -> None:
        verify(con, self.dataset_id, self._anchor_path)

    def verify(self) -> None:
        """Recompute the hash chain and the budgets from the log; DPSQL-E090 on any mismatch."""
        with self._transaction() as con:
            self._verify(con)

    # ----------------------------------------------------------------- appending entries

    def _append(self, con: duckdb.DuckDBPyConnection, **fields: Any) -> Entry:
        return append(con, self.dataset_id, **fields)

    def grant(self, principal: str, accounting: Accounting, limit: Decimal | float | str,
              delta_limit: Decimal | float | str = 0, per_query_cap: Decimal | float | str | None = None,
              delta_per_query: Decimal | float | str | None = None) -> Budget:
        """Set ``principal``'s limit (creating the budget); the change is itself a log entry.

        A principal keeps one accounting for life; the limit may be raised or lowered (never below 0)."""
        if accounting not in ("pure", "zcdp"):
            raise ValueError("accounting must be 'pure' or 'zcdp'")
        lim = round_up(to_decimal(limit, "limit"))
        dl = round_up(to_decimal(delta_limit, "delta"), DELTA_PLACES)
        cap = None if per_query_cap is None else round_up(to_decimal(per_query_cap, "per_query_cap"))
        dq = None if delta_per_query is None else round_up(to_decimal(delta_per_query, "delta_per_query"),
                                                           DELTA_PLACES)
        if dl >= 1 or (dq is not None and dq >= 1):
            raise ValueError("delta must be below 1")

        def run(con: duckdb.DuckDBPyConnection) -> Budget:
            row = con.execute("SELECT accounting FROM budgets WHERE principal = ?", [principal]).fetchone()
            if row is not None and row[0] != accounting:
                raise ValueError(f"principal {principal!r} already has a {row[0]!r} budget")
            e = self._append(con, kind="grant", principal=principal, session_id=None, accounting=accounting,
                             amount=lim, delta=dl, cap=cap, delta_cap=dq, query_sha256=None, mechanisms=None,
                             status="granted")
            if row is None:
                con.execute("INSERT INTO budgets (principal, accounting, limit_, delta_limit, per_query_cap, "
                            "delta_per_query) VALUES (?, ?, ?, ?, ?, ?)", [principal, accounting, lim, dl, cap, dq])
            else:
                con.execute("UPDATE budgets SET limit_ = ?, delta_limit = ?, per_query_cap = ?, delta_per_query = ? "
                            "WHERE principal = ?", [lim, dl, cap, dq, principal])
            return self._read_budget(con, principal), e

        return self._retrying(run)

    def set_global_limit(self, accounting: Accounting, limit: Decimal | float | str,
                         delta_limit: Decimal | float | str = 0) -> None:
        """Set the dataset-wide limit for one accounting (all principals together)."""
        if accounting not in ("pure", "zcdp"):
            raise ValueError("accounting must be 'pure' or 'zcdp'")
        lim = round_up(to_decimal(limit, "limit"))
        dl = round_up(to_decimal(delta_limit, "delta"), DELTA_PLACES)
        if lim > _MAX_AMOUNT or dl >= 1:
            raise ValueError("limit out of range")

        def run(con: duckdb.DuckDBPyConnection) -> None:
            e = self._append(con, kind="global_limit", principal="*", session_id=None, accounting=accounting,
                             amount=lim, delta=dl, cap=None, delta_cap=None, query_sha256=None, mechanisms=None,
                             status="granted")
            spent, dspent = con.execute(
                "SELECT coalesce(sum(amount), 0), coalesce(sum(delta), 0) FROM entries "
                "WHERE kind = 'charge' AND accounting = ?", [accounting]).fetchone()
            con.execute("DELETE FROM global_budgets WHERE accounting = ?", [accounting])
            con.execute("INSERT INTO global_budgets VALUES (?, ?, ?, ?, ?)", [accounting, lim, spent, dl, dspent])
            return None, e

        self._retrying(run)

    def charge(self, principal: str, cost: Decimal, delta: Decimal = Decimal(0), *, accounting: str | None = None,
               query_sha256: str | None = None, mechanisms: Any = None, session_id: str | None = None,
               release_key: str | None = None) -> Charge:
        """Reserve ``cost`` (rounded up) and ``delta`` against ``principal``'s budget, durably, before release.

        DPSQL-E061 over the per-query cap, DPSQL-E070 if it would exceed the principal's or the dataset's
        limit (nothing is charged), DPSQL-E071 on contention (nothing is charged), DPSQL-E090 if the
        ledger is broken.  The returned :class:`Charge` must later be marked with :meth:`finish`.

        With ``release_key``, a release of ``principal`` stored under that key at the current data version
        (:meth:`store_release`) is replayed instead, in the same transaction: a zero-cost ``replay`` entry
        naming the original charge is appended and the stored rows are returned (``Charge.stored``); no
        limit or cap applies to it and it needs no :meth:`finish`.  Whether a release is replayed depends
        only on the principal, the key, the data version and the store's contents, never on data values."""
        try:
            c = round_up(to_decimal(cost, "cost"))
            d = round_up(to_decimal(delta, "delta"), DELTA_PLACES)
        except ValueError:
            raise PrivacyError("DPSQL-E060", "the query's privacy cost is not a finite, non-negative number") from None
        if c > _MAX_AMOUNT or d >= 1:
            raise PrivacyError("DPSQL-E060", "the query's privacy cost is out of range")
        mech = json.dumps(mechanisms if mechanisms is not None else [], sort_keys=True, default=str,
                          separators=(",", ":"))

        def run(con: duckdb.DuckDBPyConnection) -> Charge:
            row = con.execute("SELECT accounting, per_query_cap FROM budgets WHERE principal = ?",
                              [principal]).fetchone()
            if row is None:
                raise PrivacyError("DPSQL-E070", f"principal {principal!r} has no budget; nothing was charged")
            acc, cap = row
            if accounting is not None and accounting != acc:
                raise PrivacyError("DPSQL-E060", "the query was costed under another accounting than the budget's")
            version = self._data_version(con)
            if release_key is not None:
                hit = con.execute("SELECT seq, result FROM releases WHERE principal = ? AND data_version = ? "
                                  "AND query_key = ? ORDER BY seq DESC LIMIT 1",
                                  [principal, version, release_key]).fetchone()
                if hit is not None:
                    e = self._append(con, kind="replay", principal=principal, session_id=session_id,
                                     accounting=acc, amount=Decimal(0), delta=Decimal(0), cap=None, delta_cap=None,
                                     query_sha256=query_sha256, mechanisms=mech, status="released",
                                     ref_seq=int(hit[0]))
                    con.execute("UPDATE releases SET used_at = ? WHERE seq = ?", [e.ts, hit[0]])
                    return Charge(e.seq, Decimal(0), Decimal(0), self._read_budget(con, principal), version,
                                  int(hit[0]), bytes(hit[1])), e
            if cap is not None and c > cap:
                raise PrivacyError("DPSQL-E061", f"the query costs {clean(c)} {_unit(acc)}, over the "
                                   f"per-query cap of {clean(cap)}; nothing was charged")
            ok = con.execute(
                "UPDATE budgets SET spent = spent + CAST(? AS DECIMAL(38, 18)), "
                "delta_spent = delta_spent + CAST(? AS DECIMAL(38, 30)) "
                "WHERE principal = ? AND spent + CAST(? AS DECIMAL(38, 18)) <= limit_ "
                "AND delta_spent + CAST(? AS DECIMAL(38, 30)) <= delta_limit RETURNING spent",
                [c, d, principal, c, d]).fetchall()
            if not ok:
                b = self._read_budget(con, principal)
                raise PrivacyError("DPSQL-E070", f"budget exhausted: the query costs {clean(c)} {_unit(acc)}, "
                                   f"{b.remaining} remains; nothing was charged")
            if con.execute("SELECT count(*) FROM global_budgets WHERE accounting = ?", [acc]).fetchone()[0]:
                ok = con.execute(
                    "UPDATE global_budgets SET spent = spent + CAST(? AS DECIMAL(38, 18)), "
                    "delta_spent = delta_spent + CAST(? AS DECIMAL(38, 30)) "
                    "WHERE accounting = ? AND spent + CAST(? AS DECIMAL(38, 18)) <= limit_ "
                    "AND delta_spent + CAST(? AS DECIMAL(38, 30)) <= delta_limit RETURNING spent",
                    [c, d, acc, c, d]).fetchall()
                if not ok:
                    raise PrivacyError("DPSQL-E070", "the dataset-wide budget is exhausted; nothing was charged")
            e = self._append(con, kind="charge", principal=principal, session_id=session_id, accounting=acc,
                             amount=c, delta=d, cap=None, delta_cap=None, query_sha256=query_sha256, mechanisms=mech,
                             status="reserved")
            return Charge(e.seq, clean(c), clean(d), self._read_budget(con, principal), version), e

        return self._retrying(run)

    # ----------------------------------------------------------------- data versions and stored releases

    _data_version = staticmethod(read_data_version)

    def data_version(self) -> int:
        """The data version the data owner declared last (1 until the first :meth:`bump_data_version`)."""
        with self._transaction() as con:
            return self._data_version(con)

    def bump_data_version(self, note: str | None = None) -> int:
        """Declare that the data changed (after loading new rows): the version goes up by one, as a log
        entry (``data_version``, with the optional ``note``), and stored releases of older versions are
        dropped, so no earlier release is replayed from now on.  Returns the new version."""
        mech = None if note is None else json.dumps({"note": str(note)}, separators=(",", ":"))

        def run(con: duckdb.DuckDBPyConnection) -> tuple[int, Entry]:
            version = self._data_version(con) + 1
            e = self._append(con, kind="data_version", principal="*", session_id=None, accounting="none",
                             amount=Decimal(version), delta=Decimal(0), cap=None, delta_cap=None, query_sha256=None,
                             mechanisms=mech, status="granted")
            con.execute("INSERT OR REPLACE INTO meta VALUES ('data_version', ?)", [str(version)])
            con.execute("DELETE FROM releases WHERE data_version < ?", [version])
            return version, e

        return self._retrying(run)

    def store_release(self, principal: str, seq: int, release_key: str, data_version: int, data: bytes) -> bool:
        """Keep the released rows ``data`` of charge ``seq`` for replay under ``release_key``; False when not
        stored (larger than :data:`RELEASE_BYTES`, or the data version moved on since the charge).

        Call it only for rows that were released.  It replaces an earlier release of the same key, then
        evicts ``principal``'s least recently used releases beyond :data:`RELEASE_CAP` releases or
        :data:`RELEASE_BYTES` bytes.  Eviction depends on released outputs' sizes only (post-processing)."""
        size, cap, max_bytes = len(data), RELEASE_CAP, RELEASE_BYTES
        if size > max_bytes or cap < 1:
            return False

        def run(con: duckdb.DuckDBPyConnection) -> tuple[bool, None]:
            if self._data_version(con) != data_version:
                return False, None
            now = _now()
            con.execute("DELETE FROM releases WHERE seq = ? OR (principal = ? AND data_version = ? AND query_key = ?)",
                        [seq, principal, data_version, release_key])
            con.execute("INSERT INTO releases VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        [seq, principal, data_version, release_key, now, now, size, data])
            con.execute("DELETE FROM releases WHERE seq IN (SELECT seq FROM (SELECT seq, "
                        "row_number() OVER w AS n, sum(nbytes) OVER w AS total FROM releases WHERE principal = ? "
                        "WINDOW w AS (ORDER BY used_at DESC, seq DESC ROWS UNBOUNDED PRECEDING)) "
                        "WHERE n > ? OR total > ?)", [principal, cap, max_bytes])
            return True, None

        return self._retrying(run)

    def releases(self, principal: str | None = None) -> list[StoredRelease]:
        """The stored releases (optionally one principal's), most recently used first; rows not included."""
        cond, params = ("WHERE principal = ? ", [principal]) if principal is not None else ("", [])
        with self._transaction() as con:
            rows = con.execute("SELECT seq, principal, data_version, query_key, stored_at, used_at, nbytes "
                               f"FROM releases {cond}ORDER BY used_at DESC, seq DESC", params).fetchall()
        return [StoredRelease(*r) for r in rows]

    def finish(self, seq: int, released: bool, defer: bool = False) -> None:
        """Mark a reserved charge ``released`` or ``failed_after_start`` (never a refund).

        With ``defer`` the mark is written with this object's next transaction (or :meth:`flush`): the
        status is bookkeeping only (outside the hash, never changes a budget), so a release need not
        pay for a ledger round trip of its own.  A crash leaves the entry ``reserved``, charged."""
        status = "released" if released else "failed_after_start"
        with self._pending_lock:
            self._pending.append((seq, status))
        if not defer:
            self.flush()

    def flush(self) -> None:
        """Write deferred status marks now."""
        with self._pending_lock:
            if not self._pending:
                return
        self._retrying(lambda con: (None, None))

    # ----------------------------------------------------------------- sessions and reads

    def open_session(self, principal: str) -> tuple[str, Budget]:
        """Record a session start for ``principal`` (DPSQL-E070 if it has no budget); returns the
        session id and the budget, in one transaction."""
        sid = str(uuid.uuid4())

        def run(con: duckdb.DuckDBPyConnection) -> tuple[tuple[str, Budget], None]:
            budget = self._read_budget(con, principal)
            con.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, NULL)", [sid, principal, os.getpid(), _now()])
            return (sid, budget), None

        return self._retrying(run, urgent=True)

    def close_session(self, session_id: str) -> None:
        """Record a session end."""
        self._retrying(lambda con: (con.execute("UPDATE sessions SET closed_at = ? WHERE session_id = ?",
                                                [_now(), session_id]), None))

    def _read_budget(self, con: duckdb.DuckDBPyConnection, principal: str) -> Budget:
        row = con.execute(f"SELECT {_BUDGET_COLS} FROM budgets WHERE principal = ?", [principal]).fetchone()
        if row is None:
            raise PrivacyError("DPSQL-E070", f"principal {principal!r} has no budget")
        return _budget(row)

    def budget(self, principal: str) -> Budget:
        """``principal``'s budget (DPSQL-E070 if there is none)."""
        with self._transaction() as con:
            return self._read_budget(con, principal)

    def budgets(self) -> list[Budget]:
        """All principals' budgets, by name."""
        with self._transaction() as con:
            rows = con.execute(f"SELECT {_BUDGET_COLS} FROM budgets ORDER BY principal").fetchall()
        return [_budget(r) for r in rows]

    def global_limits(self) -> dict[str, tuple[Decimal, Decimal]]:
        """``{accounting: (limit, spent)}`` of the dataset-wide limits that are set."""
        with self._transaction() as con:
            rows = con.execute("SELECT accounting, limit_, spent FROM global_budgets").fetchall()
        return {a: (lim, sp) for a, lim, sp in rows}

    def last_entry(self, principal: str, kinds: tuple[str, ...] = ("charge", "replay")) -> Entry | None:
        """``principal``'s latest entry of one of ``kinds`` (with deferred status marks written first), or None."""
        marks = ", ".join("?" for _ in kinds)

        def run(con: duckdb.DuckDBPyConnection) -> tuple[Entry | None, None]:
            row = con.execute(f"SELECT {_ENTRY_COLS} FROM entries WHERE principal = ? AND kind IN ({marks}) "
                              "ORDER BY seq DESC LIMIT 1", [principal, *kinds]).fetchone()
            return (None if row is None else _entry(row)), None

        return self._retrying(run)

    def entries(self, principal: str | None = None, kind: str | None = None) -> list[Entry]:
        """Log entries in order, optionally for one principal and/or of one kind."""
        where, params = [], []
        if principal is not None:
            where.append("principal = ?")
            params.append(principal)
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        cond = " WHERE " + " AND ".join(where) if where else ""
        sql = f"SELECT {_ENTRY_COLS} FROM entries{cond} ORDER BY seq"
        with self._transaction() as con:
            return [_entry(r) for r in con.execute(sql, params).fetchall()]


def _unit(accounting: str) -> str:
    return "epsilon" if accounting == "pure" else "rho"
