"""The hash chain: each entry's ``row_hash = sha256(prev_hash, immutable fields)`` from a genesis hash bound to
the dataset, appending an entry, replaying the whole log to check it (hashes, budgets, dataset-wide limits, data
versions, replays) and the anchor file that catches a truncated or restored log."""

from __future__ import annotations

import decimal
import hashlib
import os
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from .records import (
    _BUDGET_COLS,
    _CTX,
    _ENTRY_COLS,
    AMOUNT_PLACES,
    DELTA_PLACES,
    Entry,
    _budget,
    _entry,
    _fmt,
    _now,
    _unavailable,
)

_EPOCH = datetime(1970, 1, 1)  # timestamps are naive UTC (no pytz needed to read them)


def _micros(ts: datetime) -> int:
    return (ts - _EPOCH) // timedelta(microseconds=1)


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


def read_data_version(con: duckdb.DuckDBPyConnection, text: bool = False) -> Any:
    """The data version recorded in ``meta`` (1 when none is), as an int or, with ``text``, as stored."""
    row = con.execute("SELECT value FROM meta WHERE key = 'data_version'").fetchone()
    value = "1" if row is None else row[0]
    return value if text else int(value)


def append(con: duckdb.DuckDBPyConnection, dataset_id: str, **fields: Any) -> Entry:
    """Append one entry after the current head (checking the head's hash first), in the caller's transaction."""
    head = con.execute(f"SELECT {_ENTRY_COLS} FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    if head is None:
        prev, seq = genesis_hash(dataset_id), 1
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


def verify(con: duckdb.DuckDBPyConnection, dataset_id: str, anchor_path: Path) -> None:
    """Replay the whole log (hash chain and amounts), compare the result with the budget rows, then check the
    anchor; DPSQL-E090 on any mismatch.  Linear in the log's length: about 60 µs per entry."""
    with decimal.localcontext(_CTX):
        _verify_exact(con, dataset_id, anchor_path)


def _verify_exact(con: duckdb.DuckDBPyConnection, dataset_id: str, anchor_path: Path) -> None:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'dataset_id'").fetchone()
        if row is None or row[0] != dataset_id:
            raise _unavailable("the ledger belongs to another dataset")
        replay = _Replay(dataset_id)
        tail = con.execute(f"SELECT {_ENTRY_COLS} FROM entries ORDER BY seq").fetchall()
        budgets = {r[0]: _budget(r) for r in con.execute(f"SELECT {_BUDGET_COLS} FROM budgets").fetchall()}
        glob = {r[0]: list(r[1:]) for r in con.execute(
            "SELECT accounting, limit_, spent, delta_limit, delta_spent FROM global_budgets").fetchall()}
        for r in tail:
            replay.apply(_entry(r))
        version = read_data_version(con, text=True)
        anchor = read_anchor(anchor_path)
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


def read_anchor(path: Path) -> tuple[int, str] | None:
    """The last ``(seq, row_hash)`` of the anchor file, or None if there is none."""
    try:
        with open(path, "rb") as f:
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


def write_anchor(path: Path, seq: int, digest: str) -> None:
    """Append ``seq row_hash`` to the anchor file (after a commit)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{seq} {digest}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
