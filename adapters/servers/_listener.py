"""Socket transports over asyncio streams: the listener shared by TCP and Unix sockets.

A :class:`Listener` accepts connections and hands each, wrapped as a
:class:`StreamConduit`, to the dialect its first line chooses (``servers._dialect``).
It knows nothing of sessions: those belong to the :class:`~codexcore.adapters.host.SessionHost`
it serves, which several listeners may share.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Protocol

from codexcore._logging import get_logger
from codexcore.adapters.host._host import SessionHost
from codexcore.adapters.transports._credential import Credential
from codexcore.adapters.transports._streams import PeerCheck, StreamConduit

from ._dialect import Dialects, serve_socket

log = get_logger(__name__)


def _credential(sock: socket.socket | None) -> Credential:
    """What the transport proves of a peer: a Unix peer's uid; a TCP peer nothing until
    its handshake's token."""
    if sock is not None and sock.family == socket.AF_UNIX:
        from codexcore.adapters.transports._unix_trust import peer_uid

        return Credential("unix", uid=peer_uid(sock))
    return Credential("tcp")


class Listener:
    """Accepts connections for a :class:`~codexcore.adapters.host.SessionHost`; see
    :class:`~codexcore.adapters.tcp.TcpServer`."""

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


class Stoppable(Protocol):
    """What :func:`shutdown` stops: a :class:`Listener`, or the WebSocket face's server."""

    def stop_accepting(self) -> None: ...

    async def wait_closed(self, grace: float | None = None) -> None: ...


async def shutdown(
    host: SessionHost, listeners: Iterable[Stoppable], *, grace: float = 10.0
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
