"""An asyncio PostgreSQL wire-protocol (v3) server in front of guarded dpsql sessions.

One client connection = one authenticated principal = one guarded session.  The server and each connection's
main loop are here; a connection's parts are rooms of their own: framing (:mod:`dpsql.server.wire`), start-up
and authentication (:mod:`dpsql.server.startup`) and the query protocol, simple and extended, with where each
statement goes (:mod:`dpsql.server.protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .auth import PasswordStore
from .catalog import SETTINGS
from .protocol import MAX_CURSORS, Outcome, QueryProtocol, sqlstate_for
from .startup import negotiate, welcome
from .wire import PRE_AUTH_MAX_MESSAGE, Wire, WireError

__all__ = ["PgServer", "Connection", "running", "serve", "tls_context", "WireError", "Outcome", "sqlstate_for",
           "MAX_CURSORS", "PRE_AUTH_MAX_MESSAGE", "MAX_MESSAGE", "MAX_CONNECTIONS", "STARTUP_TIMEOUT"]

log = logging.getLogger(__name__)

MAX_MESSAGE = 64 << 20
MAX_CONNECTIONS = 128
STARTUP_TIMEOUT = 10.0  # seconds from accept to an authenticated session
#: Work runs in two thread pools, so that logins never wait behind queries (six slow queries used to
#: fill asyncio's shared default pool and time every new login out); a principal runs at most
#: PER_PRINCIPAL queries at once (the others wait their turn), so one analyst cannot take the whole pool.
LOGIN_WORKERS = 4
QUERY_WORKERS = 8
PER_PRINCIPAL = 2
DISCONNECT_POLL = 0.25  # seconds between checks that a client with a running query is still there

SessionFactory = Callable[[str], Any]


class Connection:
    """One client connection: start-up, then the main loop over its messages; runs its queries in the
    server's query pool (at most PER_PRINCIPAL at a time per principal) and stops them on a CancelRequest,
    when the client goes away, or when the server stops."""

    def __init__(self, server: PgServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.wire = Wire(reader, writer, server.max_message)
        self.session: Any = None
        self.user = ""
        self.cancelled = False
        self.active = False  # a call of this connection is in the query pool
        self.query_gen = 0
        self.cancel_key: tuple[int, int] | None = None  # BackendKeyData, once authenticated
        self.settings = {**SETTINGS, "dpsql.replay": "on"}  # SET dpsql.replay = off: fresh noise, charged
        self.protocol: QueryProtocol | None = None  # once authenticated

    async def startup(self) -> bool:
        """Start-up and authentication (:mod:`dpsql.server.startup`); False when the client was turned away."""
        login = await negotiate(self.wire, self.server)
        if login is None:
            return False
        self.user, self.session = login.user, login.session
        self.protocol = QueryProtocol(self.wire, self.session, user=self.user,
                                      database_name=self.server.database_name, settings=self.settings,
                                      in_pool=self.in_query_pool)
        self.cancel_key = (os.getpid() & 0x7FFFFFFF, secrets.randbits(31))
        self.server.cancel_keys[self.cancel_key] = self
        welcome(self.wire, login, self.settings, self.cancel_key, self.protocol.txn)
        await self.wire.flush()
        self.wire.authenticated = True
        return True

    async def serve(self) -> None:
        """The main loop: start-up (within the start-up timeout), then messages until Terminate.  After an
        error in an extended-protocol message, messages are skipped until the next Sync."""
        try:  # an unauthenticated client cannot hold a connection open
            async with asyncio.timeout(self.server.startup_timeout):
                if not await self.startup():
                    return
        except TimeoutError:
            return
        wire, protocol = self.wire, self.protocol
        assert protocol is not None
        skipping = False
        while True:
            kind, body = await wire.read_message()
            if kind == b"X":
                return
            if kind == b"Q":
                skipping = False
                await protocol.simple_query(body)
                continue
            if kind == b"S":
                skipping = False
                protocol.sync()
                await wire.flush()
                continue
            if kind == b"H":
                await wire.flush()
                continue
            if skipping:
                continue
            try:
                await protocol.extended(kind, body)
            except WireError as e:
                wire.send_error(e)
                skipping = True
            except (struct.error, UnicodeDecodeError, IndexError):
                wire.send_error(WireError("08P01", "malformed protocol message"))
                skipping = True

    async def in_query_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` in the server's query pool, at most PER_PRINCIPAL at a time for this principal; a
        CancelRequest that arrives while the call waits for its turn cancels it before it runs."""
        self.cancelled = False
        async with self.server.principal_slot(self.user):
            if self.cancelled:
                raise WireError("57014", "canceling statement due to user request")
            self.query_gen += 1
            self.active = True
            watch = asyncio.create_task(self._watch_client())
            try:
                return await asyncio.get_running_loop().run_in_executor(self.server.query_pool, fn, *args)
            finally:
                self.active = False
                watch.cancel()

    async def _watch_client(self) -> None:
        """While a query runs, interrupt it if the client goes away (nobody would read the answer)."""
        while True:
            await asyncio.sleep(DISCONNECT_POLL)
            if self.wire.reader.at_eof() or self.wire.writer.is_closing():
                self.interrupt()
                return

    def interrupt(self) -> None:
        """Stop the running query (a CancelRequest, or the server stopping): it ends as the charged E080.

        Called on the event loop.  DuckDB ignores an interrupt that arrives before its query has started,
        so while the same call is still in the pool the interrupt is repeated a few times."""
        self.cancelled = True
        self._stop()
        if self.active:
            gen, loop = self.query_gen, asyncio.get_running_loop()
            for delay in (0.05, 0.25, 1.0, 3.0):
                loop.call_later(delay, lambda: self.active and self.query_gen == gen and self._stop())

    def _stop(self) -> None:
        stop = getattr(self.session, "interrupt", None)
        if stop is not None:
            with contextlib.suppress(Exception):
                stop()

    async def close(self) -> None:
        if self.cancel_key is not None:
            self.server.cancel_keys.pop(self.cancel_key, None)
        if self.session is not None:
            with contextlib.suppress(Exception):
                self.session.interrupt()  # a query still running for a client that left stops now
            with contextlib.suppress(Exception):  # its own pool: a close waits for that query to end
                await asyncio.get_running_loop().run_in_executor(self.server.close_pool, self.session.close)
        with contextlib.suppress(Exception):
            self.wire.writer.close()
            await self.wire.writer.wait_closed()


class PgServer:
    """The PostgreSQL-wire front door: ``await server.start()`` then ``await server.serve_forever()``."""

    def __init__(self, session_factory: SessionFactory, *, host: str = "127.0.0.1", port: int = 5433,
                 passwords: PasswordStore | None = None, auth: str = "scram",
                 ssl_context: ssl.SSLContext | None = None, require_tls: bool = True,
                 database_name: str = "dpsql", max_connections: int = MAX_CONNECTIONS,
                 startup_timeout: float = STARTUP_TIMEOUT, max_message: int = MAX_MESSAGE,
                 query_workers: int = QUERY_WORKERS, per_principal: int = PER_PRINCIPAL) -> None:
        if auth not in ("scram", "trust"):
            raise ValueError("auth must be 'scram' or 'trust'")
        self.session_factory = session_factory
        self.host, self.port = host, port
        self.passwords, self.auth = passwords, auth
        self.ssl_context, self.require_tls = ssl_context, require_tls
        self.database_name = database_name
        self.max_connections, self.startup_timeout, self.max_message = max_connections, startup_timeout, max_message
        self.mock_secret = passwords.mock_secret() if passwords is not None else secrets.token_bytes(32)
        self.login_pool = ThreadPoolExecutor(LOGIN_WORKERS, thread_name_prefix="dpsql-login")
        self.query_pool = ThreadPoolExecutor(query_workers, thread_name_prefix="dpsql-query")
        # closing a session waits for its running query to stop: never in the login pool, so a client that
        # leaves in the middle of a slow query cannot hold up anybody's login
        self.close_pool = ThreadPoolExecutor(LOGIN_WORKERS, thread_name_prefix="dpsql-close")
        self.per_principal = per_principal
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.cancel_keys: dict[tuple[int, int], Connection] = {}
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        if len(self.connections) >= self.max_connections:
            conn.wire.send_error(WireError("53300", "too many connections", severity="FATAL"))
            with contextlib.suppress(Exception):
                await conn.wire.flush()
            await conn.close()
            return
        self.connections.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await conn.serve()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, OSError):
            pass
        except Exception:  # noqa: BLE001 - one broken client must not stop the server
            log.exception("connection handler crashed")
        except asyncio.CancelledError:
            pass
        finally:
            self.connections.discard(conn)
            try:
                await conn.close()
            finally:  # only now: a server stopping waits for (or cancels) the close too
                self._tasks.discard(task)  # type: ignore[arg-type]

    async def in_login_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.login_pool, fn, *args)

    @contextlib.asynccontextmanager
    async def principal_slot(self, user: str) -> Any:
        sem = self._slots.setdefault(user, asyncio.Semaphore(self.per_principal))
        async with sem:
            yield

    async def start(self) -> tuple[str, int]:
        """Bind and listen; returns the (host, port) actually bound (port 0 picks a free one)."""
        self._server = await asyncio.start_server(self._client, self.host, self.port)
        sock = self._server.sockets[0].getsockname()
        self.port = sock[1]
        return sock[0], sock[1]

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.interrupt()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
        self.query_pool.shutdown(wait=False, cancel_futures=True)
        self.close_pool.shutdown(wait=False, cancel_futures=True)
        self.login_pool.shutdown(wait=False, cancel_futures=True)


def tls_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or newer)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    return ctx


@contextlib.contextmanager
def running(server: PgServer) -> Iterator[tuple[str, int]]:
    """Run ``server`` on a background thread for the duration of a ``with`` block (tests, demos)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    address: list[tuple[str, int]] = []

    def main() -> None:
        asyncio.set_event_loop(loop)
        address.append(loop.run_until_complete(server.start()))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, name="dpsql-pgwire", daemon=True)
    thread.start()
    ready.wait()
    try:
        yield address[0]
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def serve(session_factory: SessionFactory, *, on_ready: Callable[[str, int], None] | None = None,
          **kwargs: Any) -> None:
    """Run the server until interrupted or terminated (the ``dpsql serve`` command).

    ``on_ready(host, port)`` is called once the socket is bound (port 0 picks a free port)."""

    async def main() -> None:
        server = PgServer(session_factory, **kwargs)
        host, port = await server.start()
        if on_ready is not None:
            on_ready(host, port)
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stopping.set)
        task = asyncio.create_task(server.serve_forever())
        await stopping.wait()
        await server.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
