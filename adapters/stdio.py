"""The stdio face: ``codexcore serve --stdio``, one session for the UI that spawned us.

stdout carries protocol lines and nothing else. :func:`claim_stdio` moves the
protocol onto private duplicates of fds 0 and 1 (not inherited by child
processes), then points fd 1 and ``sys.stdout`` at stderr and fd 0 at
``/dev/null``. A stray ``print``, a library that writes to stdout, or a child
process that inherits fd 1 then writes to stderr, and a child that reads
stdin reads nothing, instead of stealing the UI's submissions.

Events are never dropped or merged on stdio: a UI that stops reading holds
the engine (backpressure). At end of input the session is shut down in
order: every event up to ``shutdown_complete`` is written and flushed, and
the process exits 0 with no child left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from codexcore._logging import get_logger

from .host._host import HostConfig, SessionHost
from .servers._dialect import Dialects, serve_stdio_conduit
from .transports._conduit import READ_CHUNK
from .transports._credential import Credential, peer_uid_of_fd
from .transports._stdio_claim import claim_stdio

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

    from .session_sockets import SessionSockets

__all__ = ["FdConduit", "claim_stdio", "serve_stdio"]

log = get_logger(__name__)

WRITE_HIGH_WATER = 64 * 1024


def _streamable(fd: int, events: int) -> bool:
    """Can the event loop watch this descriptor? Pipes, sockets and terminals, yes;
    regular files and some devices (``/dev/null``) no: the only sure test is to try."""
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, events)
        except (OSError, ValueError):
            return False
    return True


class _WriteProtocol(asyncio.BaseProtocol):
    """Flow control for a write pipe: ``drain`` waits while the transport is over its mark."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self.lost: BaseException | None = None
        self.closed: asyncio.Future[None] = loop.create_future()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("stdout closed")
        self._wake()
        if not self.closed.done():
            self.closed.set_result(None)

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def drain(self) -> None:
        while True:
            if self.lost is not None:
                raise ConnectionResetError(f"the output is gone: {self.lost}") from self.lost
            if not self._paused:
                return
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter


class FdConduit:
    """A :class:`~codexcore.adapters.transports.Conduit` over two file descriptors.

    Pipes, sockets and terminals are watched by the event loop; regular files
    (``< input.ndjson``, ``> out.ndjson``) are read in a thread and written
    directly. The descriptors' blocking mode is restored on close, so a
    terminal is left as it was found.
    """

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self._in_fd, self._out_fd = in_fd, out_fd
        self._restore = [(os.dup(fd), os.get_blocking(fd)) for fd in (in_fd, out_fd)]
        self._reader: asyncio.StreamReader | None = None
        self._read_transport: asyncio.ReadTransport | None = None
        self._write_transport: asyncio.WriteTransport | None = None
        self._protocol: _WriteProtocol | None = None
        self._closed = False
        self.answered = asyncio.Event()
        """Set at the first write: the client has its first answer."""

    @classmethod
    async def open(cls, in_fd: int, out_fd: int) -> FdConduit:
        conduit = cls(in_fd, out_fd)
        loop = asyncio.get_running_loop()
        if _streamable(in_fd, selectors.EVENT_READ):
            reader = asyncio.StreamReader(limit=READ_CHUNK)
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", buffering=0)
            )
            conduit._reader, conduit._read_transport = reader, transport
        if _streamable(out_fd, selectors.EVENT_WRITE):
            write_transport, protocol = await loop.connect_write_pipe(
                _WriteProtocol, os.fdopen(out_fd, "wb", buffering=0)
            )
            write_transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
            conduit._write_transport, conduit._protocol = write_transport, protocol
        return conduit

    async def read(self) -> bytes:
        if self._reader is not None:
            try:
                return await self._reader.read(READ_CHUNK)
            except (ConnectionError, OSError):
                return b""
        return await asyncio.get_running_loop().run_in_executor(
            None, os.read, self._in_fd, READ_CHUNK
        )

    def write(self, data: bytes) -> None:
        self.answered.set()
        if self._write_transport is not None:
            self._write_transport.write(data)
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self._out_fd, view) :]

    def write_eof(self) -> None:
        pass  # stdout closes with the process

    def pending(self) -> int:
        transport = self._write_transport
        return 0 if transport is None else transport.get_write_buffer_size()

    async def drain(self) -> None:
        if self._protocol is not None:
            await self._protocol.drain()

    async def close(self, flush_timeout: float | None) -> None:
        if self._write_transport is not None and self._protocol is not None:
            self._write_transport.close()  # sends what is buffered, then closes
            try:
                async with asyncio.timeout(flush_timeout):
                    await self._protocol.closed
            except TimeoutError:
                self._write_transport.abort()
        self._release()

    def abort(self) -> None:
        if self._closed:
            return
        if self._write_transport is not None:
            self._write_transport.abort()
        self._release()

    def _release(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._read_transport is not None:
            self._read_transport.close()
        else:
            os.close(self._in_fd)
        if self._write_transport is None:
            os.close(self._out_fd)
        for fd, blocking in self._restore:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, blocking)
            os.close(fd)


async def serve_stdio(
    in_fd: int,
    out_fd: int,
    config: HostConfig | None = None,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    dialects: Dialects | None = None,
    after_first_answer: Callable[[], object] | None = None,
    session_sockets: Path | None = None,
) -> int:
    """Serve one session over ``in_fd``/``out_fd`` until it ends; returns the exit code.

    0 when the session ended in order (end of input, or a ``shutdown``
    submission), 1 when the output was lost, 2 when the optional ``hello``
    was refused. SIGTERM and SIGINT shut the session down in order too.
    The first line chooses the dialect, unless ``dialects`` forces one.
    ``after_first_answer()`` is called once the first answer is written (and
    flushed, if it can be): start-up work deferred past the client's first
    wait, such as loading what the first Turn needs. With ``session_sockets`` (a
    directory) the session also gets its control socket there, as under
    ``serve --unix --session-sockets``: a monitor follows the session the UI drives.
    """
    config = config or HostConfig()
    config = attrs.evolve(
        config,
        token=None,
        max_sessions=1,
        # The UI's connection, and with session sockets those of its monitors.
        max_connections=1 if session_sockets is None else config.max_connections,
        # Only a session status (JSON-RPC's get_status, a session socket) replays: from
        # the session's first event, which a follower started with it must not miss.
        replay_events=0 if dialects is not None and dialects.protocol == "native" else 256,
    )
    host = SessionHost(config, transport=transport)
    await host.start()
    sockets = _session_sockets(host, session_sockets, dialects)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    for signum in signals:
        loop.add_signal_handler(signum, host.begin_close)
    credential = Credential("stdio", uid=peer_uid_of_fd(in_fd))
    conduit = await FdConduit.open(in_fd, out_fd)
    dialects = dialects or Dialects()
    log.info("serving stdio", protocol=dialects.protocol)  # signals now end it in order
    deferred = None
    if after_first_answer is not None:
        deferred = asyncio.create_task(_after_answer(conduit, after_first_answer))
    try:
        return await serve_stdio_conduit(host, conduit, dialects, credential)
    finally:
        if deferred is not None:
            deferred.cancel()
        for signum in signals:
            loop.remove_signal_handler(signum)
        await host.aclose()
        if sockets is not None:
            await sockets.aclose()
        conduit.abort()


def _session_sockets(
    host: SessionHost, directory: Path | None, dialects: Dialects | None
) -> SessionSockets | None:
    if directory is None:
        return None
    from .session_sockets import SessionSockets

    sockets = SessionSockets(host, directory, (dialects or Dialects()).jsonrpc)
    sockets.serve_all()
    return sockets


async def _after_answer(conduit: FdConduit, work: Callable[[], object]) -> None:
    await conduit.answered.wait()
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(1.0):  # the answer leaves first; a stuck reader delays no more
            await conduit.drain()
    work()
