"""The budget ledger: budgets and an append-only, hash-chained log of grants and charges.

Design (``threat-classes.md`` section 5):

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
"""

from __future__ import annotations

import contextlib
import decimal
import fcntl
import hashlib
import json
import math
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

import duckdb

from .errors import PrivacyError
from .sqltext import script

__all__ = ["Ledger", "Budget", "Entry", "Charge", "StoredRelease", "ledger_path", "round_up", "to_decimal",
           "entry_hash", "clean", "RELEASE_CAP", "RELEASE_BYTES"]

Accounting = Literal["pure", "zcdp"]
AMOUNT_PLACES = 18
DELTA_PLACES = 30
_Q_AMOUNT = Decimal(1).scaleb(-AMOUNT_PLACES)
_Q_DELTA = Decimal(1).scaleb(-DELTA_PLACES)
_MAX_AMOUNT = Decimal(10) ** 12
# DECIMAL(38, 18) needs more than the default 28 significant digits: do all ledger arithmetic in this context
_CTX = decimal.Context(prec=100, traps=[decimal.InvalidOperation, decimal.Inexact, decimal.Overflow])
_EPOCH = datetime(1970, 1, 1)  # timestamps are naive UTC (no pytz needed to read them)
_RETRIES = 3
_CONFLICT_TEXT = ("conflict", "write-write", "Could not set lock", "Conflicting lock")
SCHEMA_VERSION = 2
#: the store of releases kept for replay, per principal: at most this many releases and this many bytes
#: (Arrow IPC) together; the least recently used are evicted first, and a release larger than
#: RELEASE_BYTES is not stored at all.  An evicted release is simply charged again when asked again.
RELEASE_CAP = 500
RELEASE_BYTES = 16 * 2**20

_PROCESS_LOCKS: dict[str, _PriorityLock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def ledger_path(database: str | os.PathLike[str]) -> Path:
    """The ledger file of a data file: ``hospital.duckdb`` -> ``hospital.ledger.duckdb``."""
    p = Path(database)
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return p.with_name(f"{stem}.ledger.duckdb")


def to_decimal(value: Decimal | float | int | str, what: str = "amount") -> Decimal:
    """An exact decimal from a user value; refuses NaN, infinities and negatives.

    Floats go through ``repr`` (``0.1`` becomes ``Decimal('0.1')``, not its binary expansion)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what} must be finite")
        value = repr(value)
    try:
        d = Decimal(value)
    except (InvalidOperation, TypeError, ValueError):
        raise ValueError(f"{what} must be a number") from None
    if not d.is_finite() or d < 0:
        raise ValueError(f"{what} must be a finite, non-negative number")
    if d > _MAX_AMOUNT:
        raise ValueError(f"{what} is too large")
    return d


def round_up(value: Decimal, places: int = AMOUNT_PLACES) -> Decimal:
    """``value`` rounded up (towards +infinity) to ``places`` decimal places."""
    with decimal.localcontext(_CTX) as ctx:
        ctx.traps[decimal.Inexact] = False
        return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_CEILING)


def _fmt(d: Decimal | None, places: int) -> str:
    if d is None:
        return ""
    with decimal.localcontext(_CTX):
        return format(d.quantize(Decimal(1).scaleb(-places)), "f")


def _micros(ts: datetime) -> int:
    return (ts - _EPOCH) // timedelta(microseconds=1)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def genesis_hash(dataset_id: str) -> str:
    """The ``prev_hash`` of the first entry: binds the chain to one dataset."""
    return hashlib.sha256(f"dpsql-ledger-v1\x1f{dataset_id}".encode()).hexdigest()


def entry_hash(prev_hash: str, e: Entry) -> str:
    """``sha256(prev_hash || canonical immutable fields)`` of one log entry, hex."""
    fields = [str(e.seq), e.entry_id, e.kind, str(_micros(e.ts)), e.principal, e.session_id or "", e.accounting,
              _fmt(e.amount, AMOUNT_PLACES), _fmt(e.delta, DELTA_PLACES), _fmt(e.cap, AMOUNT_PLACES),
              _fmt(e.delta_cap, DELTA_PLACES), e.query_sha256 or "", e.mechanisms or ""]
    if e.ref_seq is not None:  # replays only: entries of schema version 1 hash exactly as before
        fields.append(str(e.ref_seq))
    payload = prev_hash + "\x1e" + "\x1f".join(fields)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class Budget:
    """A principal's budget: ``limit``/``spent``/``remaining`` in ε ('pure') or ρ ('zcdp')."""

    principal: str
    accounting: Accounting
    limit: Decimal
    spent: Decimal
    remaining: Decimal
    delta_limit: Decimal
    delta_spent: Decimal
    per_query_cap: Decimal | None = None
    delta_per_query: Decimal | None = None

    def query_delta(self) -> Decimal:
        """The delta one query may spend now: the per-query delta (default: all of it), at most what remains."""
        left = max(self.delta_limit - self.delta_spent, Decimal(0))
        return left if self.delta_per_query is None else min(self.delta_per_query, left)


@dataclass(frozen=True)
class Entry:
    """One row of the hash-chained log (a grant, a global limit, a charge, a replay or a data version)."""

    seq: int
    entry_id: str
    kind: str
    ts: datetime
    principal: str
    session_id: str | None
    accounting: str
    amount: Decimal
    delta: Decimal
    cap: Decimal | None
    delta_cap: Decimal | None
    query_sha256: str | None
    mechanisms: str | None
    status: str
    prev_hash: str = ""
    row_hash: str = ""
    ref_seq: int | None = None


@dataclass(frozen=True)
class Charge:
    """A committed charge: the log entry's ``seq`` and the principal's budget right after it.

    For a replay (see :meth:`Ledger.charge`'s ``release_key``) ``seq`` is the replay entry, ``cost``
    and ``delta`` are 0, ``replayed_from`` is the original charge and ``stored`` its released rows."""

    seq: int
    cost: Decimal
    delta: Decimal
    budget: Budget
    data_version: int = 1
    replayed_from: int | None = None
    stored: bytes | None = None


@dataclass(frozen=True)
class StoredRelease:
    """A release kept for replay (its rows stay in the ledger file)."""

    seq: int
    principal: str
    data_version: int
    query_key: str
    stored_at: datetime
    used_at: datetime
    nbytes: int


_BUDGET_COLS = "principal, accounting, limit_, spent, delta_limit, delta_spent, per_query_cap, delta_per_query"
_ENTRY_COLS = ("seq, entry_id, kind, ts, principal, session_id, accounting, amount, delta, cap, delta_cap, "
               "query_sha256, mechanisms, status, prev_hash, row_hash, ref_seq")


def _entry(row: tuple[Any, ...]) -> Entry:
    return Entry(int(row[0]), str(row[1]), *row[2:])


def clean(d: Decimal) -> Decimal:
    """The same value without trailing zeros or exponent notation (``3.000`` -> ``3``, ``0E-18`` -> ``0``)."""
    with decimal.localcontext(_CTX):
        return d.quantize(Decimal(1)) if d == d.to_integral_value() else d.normalize()


def _budget(row: tuple[Any, ...]) -> Budget:
    principal, accounting, limit, spent, dl, ds, cap, dq = row
    with decimal.localcontext(_CTX):
        return Budget(principal, accounting, clean(limit), clean(spent), clean(max(limit - spent, Decimal(0))),
                      clean(dl), clean(ds), None if cap is None else clean(cap), None if dq is None else clean(dq))


class _PriorityLock:
    """A mutex whose urgent waiters (session opens: logins) go before the others (charges, reads), so a
    login never queues behind a stream of queries' charges (issue 13).  Not reentrant."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._urgent = 0

    def acquire(self, timeout: float, urgent: bool = False) -> bool:
        end = time.monotonic() + timeout
        with self._cond:
            if urgent:
                self._urgent += 1
            try:
                while self._held or (not urgent and self._urgent):
                    left = end - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
                self._held = True
                return True
            finally:
                if urgent:
                    self._urgent -= 1
                    self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()


def _process_lock(path: Path) -> _PriorityLock:
    key = str(path.resolve())
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(key, _PriorityLock())


def _unavailable(what: str) -> PrivacyError:
    return PrivacyError("DPSQL-E090", f"ledger unavailable: {what}; nothing was run or charged")


def _contention() -> PrivacyError:
    return PrivacyError("DPSQL-E071", "the budget ledger is busy; nothing was charged, the query is safe to retry")


class _Replay:
    """What the log implies so far: budgets per principal, dataset-wide limits and the data version, up to
    entry ``seq`` (a replay of the log, not to be confused with replayed releases, which it also checks)."""

    def __init__(self, dataset_id: str) -> None:
        self.dataset_id = dataset_id
        self.seq = 0
        self.head = genesis_hash(dataset_id)
        self.expect: dict[str, list[Any]] = {}  # principal -> [accounting, limit, spent, dlimit, dspent, cap, dcap]
        self.gexp: dict[str, list[Decimal]] = {}  # accounting -> [limit, spent, dlimit, dspent]
        self.spent = {"pure": [Decimal(0), Decimal(0)], "zcdp": [Decimal(0), Decimal(0)]}  # [amount, delta]
        self.version = 1  # the data version
        self.charges: dict[int, tuple[str, int]] = {}  # charge seq -> (principal, data version)

    def apply(self, e: Entry) -> None:
        """Check ``e`` continues the chain and fold it in (DPSQL-E090 if not)."""
        if e.seq != self.seq + 1 or e.prev_hash != self.head or entry_hash(self.head, e) != e.row_hash:
            raise _unavailable(f"hash chain broken at entry {self.seq + 1}")
        self.seq, self.head = e.seq, e.row_hash
        if e.kind == "grant":
            old = self.expect.get(e.principal)
            self.expect[e.principal] = [e.accounting, e.amount, old[2] if old else Decimal(0), e.delta,
                                        old[4] if old else Decimal(0), e.cap, e.delta_cap]
        elif e.kind == "global_limit":
            spent, dspent = self.spent[e.accounting]
            self.gexp[e.accounting] = [e.amount, spent, e.delta, dspent]
        elif e.kind == "data_version":
            if e.amount != self.version + 1:
                raise _unavailable(f"data version out of order at entry {e.seq}")
            self.version += 1
        elif e.kind == "replay":
            if e.amount != 0 or e.delta != 0 or self.charges.get(e.ref_seq or 0) != (e.principal, self.version):
                raise _unavailable(f"replay at entry {e.seq} does not name an earlier charge of the same "
                                   "principal and data version")
        elif e.kind != "charge":
            raise _unavailable(f"unknown entry kind at entry {e.seq}")
        else:
            b = self.expect.get(e.principal)
            if b is None or b[0] != e.accounting:
                raise _unavailable(f"charge without a matching grant at entry {e.seq}")
            self.charges[e.seq] = (e.principal, self.version)
            b[2] += e.amount
            b[4] += e.delta
            self.spent[e.accounting][0] += e.amount
            self.spent[e.accounting][1] += e.delta
            if e.accounting in self.gexp:
                self.gexp[e.accounting][1] += e.amount
                self.gexp[e.accounting][3] += e.delta


class Ledger:
    """The budget ledger of one dataset.  Opening it verifies the whole chain (DPSQL-E090 on mismatch).

    ``Ledger(path, dataset_id, create=True)`` creates the file if it is missing (admin only)."""

    def __init__(self, path: str | os.PathLike[str], dataset_id: str, *, create: bool = False,
                 lock_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.dataset_id = dataset_id
        self.lock_timeout = float(lock_timeout)
        self._pending: list[tuple[int, str]] = []  # deferred status marks, written with the next transaction
        self._pending_lock = threading.Lock()
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._anchor_path = self.path.with_name(self.path.name.removesuffix(".duckdb") + ".anchor")
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

    # ----------------------------------------------------------------- locking and transactions

    @contextlib.contextmanager
    def _locked(self, urgent: bool = False) -> Iterator[None]:
        deadline = time.monotonic() + self.lock_timeout
        plock = _process_lock(self.path)
        if not plock.acquire(max(self.lock_timeout, 0.0), urgent):
            raise _contention()
        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                pause = 0.002
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise _contention() from None
                        time.sleep(pause)
                        pause = min(pause * 2, 0.05)
                yield
            finally:
                os.close(fd)  # releases the flock
        finally:
            plock.release()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                old = os.umask(0o077)
                try:
                    con = duckdb.connect(str(self.path), config={"enable_external_access": False,
                                                                 "autoload_known_extensions": False,
                                                                 "autoinstall_known_extensions": False})
                finally:
                    os.umask(old)
                break
            except duckdb.IOException as exc:
                # another program (not dpsql) holds the file open: wait like for the flock
                if any(t in str(exc) for t in _CONFLICT_TEXT) and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                if any(t in str(exc) for t in _CONFLICT_TEXT):
                    raise _contention() from None
                raise _unavailable("the ledger file cannot be opened") from None
            except duckdb.Error:
                raise _unavailable("the ledger file cannot be opened") from None
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o600)
        return con

    @contextlib.contextmanager
    def _open_transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open, ``BEGIN``; ``COMMIT`` on success, ``ROLLBACK`` on any error; close.  Caller holds the locks."""
        con = self._connect()
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
        finally:
            con.close()

    @contextlib.contextmanager
    def _transaction(self, urgent: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Lock, then one transaction (used for reads and for creation); DuckDB failures are DPSQL-E090."""
        with self._locked(urgent):
            try:
                with self._open_transaction() as con:
                    yield con
            except duckdb.Error:
                raise _unavailable("the ledger could not be read") from None

    def _retrying(self, fn: Any, urgent: bool = False) -> Any:
        """Under the locks, run ``fn(con)`` in a transaction, retrying write conflicts (DPSQL-E071 after
        the retries).  ``fn`` returns ``(result, appended entry or None)``; the entry is anchored after
        the commit, still under the locks.  Deferred status marks ride along in the same transaction."""
        with self._locked(urgent):
            for _ in range(_RETRIES):
                with self._pending_lock:
                    pending = list(self._pending)
                try:
                    with self._open_transaction() as con:
                        for seq, status in pending:
                            con.execute("UPDATE entries SET status = ? WHERE seq = ? AND kind = 'charge' "
                                        "AND status = 'reserved'", [status, seq])
                        out, entry = fn(con)
                except duckdb.TransactionException:
                    continue
                except PrivacyError:
                    raise
                except duckdb.Error as exc:
                    if any(t in str(exc) for t in _CONFLICT_TEXT):
                        continue
                    raise _unavailable("the ledger could not be written") from None
                with self._pending_lock:
                    self._pending = [p for p in self._pending if p not in pending]
                if entry is not None:
                    with contextlib.suppress(OSError):  # a lagging anchor stays consistent (seq <= head)
                        self._anchor(entry.seq, entry.row_hash)
                return out
        raise _contention()

    # ----------------------------------------------------------------- verification

    def _verify(self, con: duckdb.DuckDBPyConnection) -> None:
        with decimal.localcontext(_CTX):
            self._verify_exact(con)

    def _verify_exact(self, con: duckdb.DuckDBPyConnection) -> None:
        """Replay the whole log (hash chain and amounts), compare the result with the budget rows, then
        check the anchor.  Linear in the log's length: about 60 µs per entry."""
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'dataset_id'").fetchone()
            if row is None or row[0] != self.dataset_id:
                raise _unavailable("the ledger belongs to another dataset")
            replay = _Replay(self.dataset_id)
            tail = con.execute(f"SELECT {_ENTRY_COLS} FROM entries ORDER BY seq").fetchall()
            budgets = {r[0]: _budget(r) for r in con.execute(f"SELECT {_BUDGET_COLS} FROM budgets").fetchall()}
            glob = {r[0]: list(r[1:]) for r in con.execute(
                "SELECT accounting, limit_, spent, delta_limit, delta_spent FROM global_budgets").fetchall()}
            for r in tail:
                replay.apply(_entry(r))
            version = self._data_version(con, text=True)
            anchor = self._read_anchor()
            anchored = None
            if anchor is not None:
                anchored = con.execute("SELECT row_hash FROM entries WHERE seq = ?", [anchor[0]]).fetchone()
        except duckdb.Error:
            raise _unavailable("the ledger's tables cannot be read") from None
        actual = {p: [b.accounting, b.limit, b.spent, b.delta_limit, b.delta_spent, b.per_query_cap, b.delta_per_query]
                  for p, b in budgets.items()}
        if actual != replay.expect:
            raise _unavailable("budgets do not match the charge log")
        if glob != replay.gexp:
            raise _unavailable("dataset-wide limits do not match the charge log")
        if version != str(replay.version):
            raise _unavailable("the data version does not match the log")
        if anchor is not None and (anchored is None or anchored[0] != anchor[1]):
            raise _unavailable("the charge log does not match its anchor (truncated or restored)")

    def _read_anchor(self) -> tuple[int, str] | None:
        """The last ``(seq, row_hash)`` of the anchor file, or None if there is none."""
        try:
            with open(self._anchor_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(f.tell() - 256, 0))
                lines = f.read().decode("ascii").split()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError):
            raise _unavailable("the anchor file cannot be read") from None
        if not lines:
            return None
        try:
            return int(lines[-2]), lines[-1]
        except (IndexError, ValueError):
            raise _unavailable("the anchor file is malformed") from None

    def _anchor(self, seq: int, digest: str) -> None:
        fd = os.open(self._anchor_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{seq} {digest}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def verify(self) -> None:
        """Recompute the hash chain and the budgets from the log; DPSQL-E090 on any mismatch."""
        with self._transaction() as con:
            self._verify(con)

    # ----------------------------------------------------------------- appending entries

    def _append(self, con: duckdb.DuckDBPyConnection, **fields: Any) -> Entry:
        head = con.execute(f"SELECT {_ENTRY_COLS} FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        if head is None:
            prev, seq = genesis_hash(self.dataset_id), 1
        else:
            h = _entry(head)
            if entry_hash(h.prev_hash, h) != h.row_hash:
                raise _unavailable("hash chain broken at the last entry")
            prev, seq = h.row_hash, h.seq + 1
        e = Entry(seq=seq, entry_id=str(uuid.uuid4()), ts=_now(), prev_hash=prev, **fields)
        digest = entry_hash(prev, e)
        con.execute(f"INSERT INTO entries ({_ENTRY_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, CAST(? AS DECIMAL(38, 18)), "
                    "CAST(? AS DECIMAL(38, 30)), CAST(? AS DECIMAL(38, 18)), CAST(? AS DECIMAL(38, 30)), "
                    "?, ?, ?, ?, ?, ?)",
                    [e.seq, e.entry_id, e.kind, e.ts, e.principal, e.session_id, e.accounting, e.amount, e.delta,
                     e.cap, e.delta_cap, e.query_sha256, e.mechanisms, e.status, prev, digest, e.ref_seq])
        return Entry(**{**e.__dict__, "row_hash": digest})

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

    @staticmethod
    def _data_version(con: duckdb.DuckDBPyConnection, text: bool = False) -> Any:
        row = con.execute("SELECT value FROM meta WHERE key = 'data_version'").fetchone()
        value = "1" if row is None else row[0]
        return value if text else int(value)

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
