"""Start-up and authentication of one client connection: TLS (SSLRequest), GSSAPI refused, CancelRequest,
the startup packet, SCRAM-SHA-256 (or trust), then a guarded session opened in the server's login pool.

:func:`negotiate` turns a client away (telling it why, FATAL) or returns its :class:`Login`; :func:`welcome`
sends what a client expects once logged in (AuthenticationOk, ParameterStatus, BackendKeyData, ReadyForQuery).
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any

from ..errors import PrivacyError
from .auth import MECHANISM, ScramExchange, mock_verifier
from .wire import Wire, WireError

log = logging.getLogger("dpsql.server.pgwire")  # the server's log, as before the split

SSL_REQUEST, GSSENC_REQUEST, CANCEL_REQUEST, PROTOCOL_3 = 80877103, 80877104, 80877102, 196608


@dataclass
class Login:
    """An authenticated client and its open session."""

    user: str
    session: Any
    application_name: str


async def negotiate(wire: Wire, server: Any) -> Login | None:
    """From the first packet to an open session (``server`` is the :class:`~dpsql.server.pgwire.PgServer`)."""
    reader, writer = wire.reader, wire.writer
    tls = False
    while True:
        (length,) = struct.unpack("!i", await reader.readexactly(4))
        if length < 8 or length > 10000:
            return None
        body = await reader.readexactly(length - 4)
        (code,) = struct.unpack("!i", body[:4])
        if code == SSL_REQUEST:
            if server.ssl_context is not None and not tls:
                writer.write(b"S")
                await writer.drain()
                await writer.start_tls(server.ssl_context)
                tls = True
            else:
                writer.write(b"N")
                await writer.drain()
            continue
        if code == GSSENC_REQUEST:
            writer.write(b"N")
            await writer.drain()
            continue
        if code == CANCEL_REQUEST:  # interrupt the query of the connection holding this key, if any
            if len(body) >= 12:
                target = server.cancel_keys.get(struct.unpack("!ii", body[4:12]))
                if target is not None:
                    target.interrupt()
            return None
        if code != PROTOCOL_3:
            wire.send_error(WireError("0A000", "unsupported frontend protocol", severity="FATAL"))
            await wire.flush()
            return None
        break
    items = body[4:].split(b"\0")
    try:
        params = {items[i].decode(): items[i + 1].decode() for i in range(0, len(items) - 1, 2) if items[i]}
    except UnicodeDecodeError:
        wire.send_error(WireError("08P01", "invalid startup packet: names and values must be UTF-8",
                                  severity="FATAL"))
        await wire.flush()
        return None
    user = params.get("user", "")
    if server.ssl_context is not None and server.require_tls and not tls:
        wire.send_error(WireError("28000", "dpsql requires TLS (connect with sslmode=require)", severity="FATAL"))
        await wire.flush()
        return None
    if not user or not await authenticate(wire, server, user):
        return None
    try:
        session = await server.in_login_pool(server.session_factory, user)
    except PrivacyError as e:
        wire.send_error(WireError("28000", f"{e.code}: {e.message}", severity="FATAL"))
        await wire.flush()
        return None
    except Exception:  # noqa: BLE001 - never leak internals to an unauthenticated-ish client
        log.exception("could not open a session for %r", user)
        wire.send_error(WireError("28000", "could not open a dpsql session", severity="FATAL"))
        await wire.flush()
        return None
    return Login(user, session, params.get("application_name", ""))


async def authenticate(wire: Wire, server: Any, user: str) -> bool:
    """SCRAM-SHA-256 against the server's password store (an unknown user runs the same exchange against a
    mock verifier, so the answer does not tell who exists); always True under ``auth='trust'``."""
    if server.auth == "trust":
        return True
    store = server.passwords
    verifier = store.verifier(user) if store is not None else None
    known = verifier is not None
    scram = ScramExchange(verifier if known else mock_verifier(server.mock_secret, user), known)
    wire.send(b"R", struct.pack("!i", 10) + MECHANISM.encode() + b"\0\0")
    await wire.flush()
    fail = WireError("28P01", f'password authentication failed for user "{user}"', severity="FATAL")
    try:
        kind, body = await wire.read_message()
        if kind != b"p":
            return False
        mech, _, rest = body.partition(b"\0")
        if mech.decode() != MECHANISM:
            raise ValueError("mechanism")
        (n,) = struct.unpack("!i", rest[:4])
        server_first = scram.first(rest[4:4 + n])
        wire.send(b"R", struct.pack("!i", 11) + server_first)
        await wire.flush()
        kind, body = await wire.read_message()
        if kind != b"p":
            return False
        server_final = scram.final(body)
    except (ValueError, struct.error, UnicodeDecodeError):
        server_final = None
    if server_final is None:
        wire.send_error(fail)
        await wire.flush()
        return False
    wire.send(b"R", struct.pack("!i", 12) + server_final)
    return True


def welcome(wire: Wire, login: Login, settings: dict[str, str], cancel_key: tuple[int, int], txn: str) -> None:
    """AuthenticationOk, the ParameterStatus messages, BackendKeyData and ReadyForQuery (not yet flushed)."""
    wire.send(b"R", struct.pack("!i", 0))
    for name in ("server_version", "server_encoding", "client_encoding", "DateStyle", "TimeZone",
                 "integer_datetimes", "standard_conforming_strings", "IntervalStyle", "is_superuser"):
        wire.send_parameter(name, settings[name.lower()])
    wire.send_parameter("application_name", login.application_name)
    wire.send_parameter("session_authorization", login.user)
    wire.send(b"K", struct.pack("!ii", *cancel_key))
    wire.send(b"Z", txn.encode())
