"""The ledger's store and transactions: every access holds a process-wide lock and an exclusive ``flock`` on
``<ledger>.lock``, opens the file (waiting while another program holds it), runs one transaction and closes it;
write conflicts are retried, then DPSQL-E071.  :func:`transaction` is the one BEGIN / COMMIT / ROLLBACK helper
(the admin's policy writes use it too)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from ..errors import PrivacyError
from .chain import write_anchor
from .records import _contention, _unavailable

_RETRIES = 3
_CONFLICT_TEXT = ("conflict", "write-write", "Could not set lock", "Conflicting lock")

_PROCESS_LOCKS: dict[str, _PriorityLock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


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




@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """``BEGIN``; ``COMMIT`` when the block ends, ``ROLLBACK`` on any error (a failing ROLLBACK is ignored)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


class Store:
    """One ledger file and its locks.  Each access: lock, open, one transaction, close (see the module).

    Deferred status marks (``_pending``: charge seq -> status) are written with the next transaction."""

    def __init__(self, path: str | os.PathLike[str], lock_timeout: float) -> None:
        self.path = Path(path)
        self.lock_timeout = float(lock_timeout)
        self._pending: list[tuple[int, str]] = []  # deferred status marks, written with the next transaction
        self._pending_lock = threading.Lock()
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._anchor_path = self.path.with_name(self.path.name.removesuffix(".duckdb") + ".anchor")

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
            with transaction(con):
                yield con
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
                        write_anchor(self._anchor_path, entry.seq, entry.row_hash)
                return out
        raise _contention()
