"""PostgreSQL wire framing (protocol v3): typed, length-prefixed messages on one client stream.

Sends are buffered until :meth:`Wire.flush`; a read refuses a declared length over the limit (a small one before
authentication, issue 13).  No SQL and no session here.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from . import types as t

#: Limits (issue 13): a message before authentication is at most PRE_AUTH_MAX_MESSAGE bytes (SCRAM messages
#: are ~100 bytes; a declared 300 MiB SASL message used to be read into memory); after it, ``max_message``.
PRE_AUTH_MAX_MESSAGE = 8192


class WireError(Exception):
    """An error to report to the client as an ErrorResponse."""

    def __init__(self, sqlstate: str, message: str, detail: str | None = None, severity: str = "ERROR") -> None:
        super().__init__(message)
        self.sqlstate, self.message, self.detail, self.severity = sqlstate, message, detail, severity


class Wire:
    """One client stream: buffered, framed messages out; length-checked messages in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_message: int) -> None:
        self.reader, self.writer = reader, writer
        self.max_message = max_message
        self.authenticated = False  # the larger read limit applies from now on
        self._out: list[bytes] = []

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        self._out.append(kind + struct.pack("!i", len(payload) + 4) + payload)

    async def flush(self) -> None:
        if self._out:
            self.writer.write(b"".join(self._out))
            self._out.clear()
        await self.writer.drain()

    async def read_message(self) -> tuple[bytes, bytes]:
        head = await self.reader.readexactly(5)
        (length,) = struct.unpack("!i", head[1:])
        limit = self.max_message if self.authenticated else PRE_AUTH_MAX_MESSAGE
        if length < 4 or length > limit:
            raise ConnectionError("bad message length")
        return head[:1], await self.reader.readexactly(length - 4)

    def send_error(self, err: WireError) -> None:
        fields = [b"S" + err.severity.encode(), b"V" + err.severity.encode(), b"C" + err.sqlstate.encode(),
                  b"M" + err.message.encode()]
        if err.detail:
            fields.append(b"D" + err.detail.encode())
        self.send(b"E", b"\0".join(fields) + b"\0\0")

    def send_notice(self, message: str) -> None:
        self.send(b"N", b"SNOTICE\0VNOTICE\0C00000\0M" + message.encode() + b"\0\0")

    def send_parameter(self, name: str, value: str) -> None:
        self.send(b"S", name.encode() + b"\0" + value.encode() + b"\0")

    def send_row_description(self, cols: list[tuple[str, int]], formats: list[int]) -> None:
        parts = [struct.pack("!h", len(cols))]
        for i, (name, oid) in enumerate(cols):
            fmt = format_for(formats, i)
            parts.append(name.encode() + b"\0" + struct.pack("!ihihih", 0, 0, oid, t.type_size(oid), -1, fmt))
        self.send(b"T", b"".join(parts))

    def send_rows(self, cols: list[tuple[str, int]], rows: list[tuple[Any, ...]], formats: list[int]) -> None:
        encoders = [t.encoder(oid, format_for(formats, i) == 1) for i, (_, oid) in enumerate(cols)]
        head = struct.pack("!h", len(cols))
        for row in rows:
            parts = [head]
            for enc, value in zip(encoders, row, strict=True):
                if value is None:
                    parts.append(b"\xff\xff\xff\xff")
                else:
                    data = enc(value)
                    parts.append(struct.pack("!i", len(data)) + data)
            self.send(b"D", b"".join(parts))


def cstr(data: bytes) -> tuple[str, bytes]:
    i = data.index(b"\0")
    return data[:i].decode(), data[i + 1:]


def format_for(formats: list[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i]
