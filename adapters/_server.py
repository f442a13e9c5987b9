"""Socket transports over asyncio streams: the listener shared by TCP and Unix sockets.

A :class:`Listener` accepts connections and hands each, wrapped as a
:class:`StreamConduit`, to the dialect its first line chooses (``_dialect``).
It knows nothing of sessions: those belong to the :class:`~._host.SessionHost`
it serves, which several listeners may share.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterable

from codexcore._logging import get_logger

from ._dialect import Dialects, serve_socket
from ._native import READ_CHUNK
from .host._host import SessionHost
from .transports._credential import Credential

log = get_logger(__name__)

WRITE_HIGH_WATER = 64 * 1024
"""A connection's transport buffer: the writer waits above this (its queue is separate)."""

PeerCheck = Callable[[socket.socket], "str | None"]
"""Given a connected socket, a reason to refuse the peer, or None to go on."""

KEEPALIVE = (60, 10, 3)
"""TCP keepalive: probe after 60 s of silence, every 10 s, give up after 3. A client
that vanished without closing (a laptop that slept, a dropped network) is noticed
within about 90 s, so its session can expire; the writer's stuck timer covers the
case where something was being sent."""


def keepalive(sock: socket.socket) -> str | None:
    """Turn TCP keepalive on for an accepted connection (a check that refuses no one)."""
    idle, interval, count = KEEPALIVE
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", idle),
        ("TCP_KEEPINTVL", interval),
        ("TCP_KEEPCNT", count),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
    return None


class StreamConduit:
    """A :class:`~._native.Conduit` over an asyncio stream pair (TCP, TLS or Unix)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    async def read(self) -> bytes:
        try:
            return await self._reader.read(READ_CHUNK)
        except (ConnectionError, OSError):
            return b""

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    def pending(self) -> int:
        return self._writer.transport.get_write_buffer_size()

    def write_eof(self) -> None:
        if self._writer.can_write_eof():  # not over TLS
            with contextlib.suppress(OSError):
                self._writer.write_eof()

    async def drain(self) -> None:
        await self._writer.drain()

    async def close(self, flush_timeout: float | None) -> None:
        # close() sends what is buffered before the socket closes; wait_closed()
        # returns once it has. A peer that stops reading is cut off after timeout.
        self._writer.close()
        try:
            async with asyncio.timeout(flush_timeout):
                await self._writer.wait_closed()
        except TimeoutError:
            self._writer.transport.abort()
        except (ConnectionError, OSError):
            pass

    def abort(self) -> None:
        self._writer.transport.abort()


def _credential(sock: socket.socket | None) -> Credential:
    """What the transport proves of a peer: a Unix peer's uid; a TCP peer nothing until
    its handshake's token."""
    if sock is not None and sock.family == socket.AF_UNIX:
        from .transports._unix_trust import peer_uid

        return Credential("unix", uid=peer_uid(sock))
    return Credential("tcp")


class Listener:
    """Accepts connections for a :class:`SessionHost`; see :class:`~.tcp.TcpServer`."""

    def __init__(
        self,
        host: SessionHost,
        *,
        peer_check: PeerCheck | None = None,
        dialects: Dialects | None = None,
        require_initialize: bool = False,
    ) -> None:
        self.host = host
        self.dialects = dialects or Dialects()
        self._require_initialize = require_initialize
        self._peer_check = peer_check
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._greeting: set[asyncio.Task[None]] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._greeting.add(task)
        try:
            problem = None
            sock = writer.get_extra_info("socket")
            if self._peer_check is not None:
                problem = self._peer_check(sock)
            await serve_socket(
                self.host,
                StreamConduit(reader, writer),
                self.dialects,
                require_initialize=self._require_initialize,
                peer_problem=problem,
                on_attached=lambda: self._greeting.discard(task),
                credential=_credential(sock) if problem is None else None,
            )
        except asyncio.CancelledError:
            # Stopped by aclose(). End normally: on 3.11 the stream's done callback
            # calls task.exception(), which raises for a cancelled task and logs it.
            writer.transport.abort()
        except Exception:
            log.exception("connection failed")
            writer.transport.abort()
        finally:
            self._handlers.discard(task)
            self._greeting.discard(task)

    def stop_accepting(self) -> None:
        """Close the listening socket; connections already accepted go on."""
        if self._server is not None:
            self._server.close()
        for task in list(self._greeting):  # nobody will attach them now
            task.cancel()

    async def wait_closed(self, grace: float | None = None) -> None:
        """Wait for every connection to end; cancel those still open after ``grace`` seconds."""
        if self._handlers:
            _, pending = await asyncio.wait(set(self._handlers), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._server is not None:
            await self._server.wait_closed()


async def shutdown(
    host: SessionHost, listeners: Iterable[Listener], *, grace: float = 10.0
) -> None:
    """Stop a server in good order.

    The listeners stop accepting; every session is shut down, so each
    attached client receives ``shutdown_complete`` and its connection is
    flushed and closed; connections still open after ``grace`` seconds are
    cut.
    """
    listeners = list(listeners)
    for listener in listeners:
        listener.stop_accepting()
    await host.aclose()
    for listener in listeners:
        await listener.wait_closed(grace)
