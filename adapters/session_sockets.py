"""A control socket per session: ``serve --session-sockets``, ``exec --control-socket``.

Each live session gets a Unix socket of its own, by default
``$CODEXCORE_HOME/sockets/<session>.sock``. It is a :class:`~.unix.UnixServer`
(mode 0600 in a 0700 directory, a stale file replaced, every peer checked: the
same user, not inside one of our sandboxes) that speaks the JSON-RPC dialect
only, every connection bound to that session (``RpcOptions.session_id``): seed
004's ``get_status``, ``stop``, ``subscribe`` ... act on it, and so does every
other method of the dialect. A seed 004 client never sends ``initialize``, so
the peer checks alone admit it, token or not.

The socket appears once the session exists and its status is followed (from
its first event), is renamed with the session when a ``resume_session`` or
``fork_session`` gives it the engine's id (in a directory; a ``PATH`` given for
``exec`` stays), and is removed when the session ends; its connections are
closed after the session's last ``state_change``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import attrs

from codexcore._logging import get_logger

from .host._host import SessionHost
from .jsonrpc._options import RpcOptions
from .jsonrpc.session_socket._status import SessionStatus, statuses
from .servers._dialect import Dialects
from .unix import UnixServer

log = get_logger(__name__)

__all__ = ["SessionSockets", "default_directory"]

CLOSE_GRACE = 2.0
"""Seconds a session's connections have to finish after it ended (idle ones are cut)."""


def default_directory(home: str | os.PathLike[str]) -> Path:
    """Where the sockets go by default: ``<home>/sockets`` (home: ``$CODEXCORE_HOME``)."""
    return Path(home) / "sockets"


class SessionSockets:
    """The control sockets of a :class:`SessionHost`'s sessions.

    ``directory`` holds one ``<session>.sock`` per session. :meth:`serve_all`
    gives every session the host creates from then on a socket;
    :meth:`add` gives one session its socket, at ``path`` if given. Call
    :meth:`aclose` after the host closed: it waits for the sockets to go.
    """

    def __init__(
        self, host: SessionHost, directory: Path, options: RpcOptions | None = None
    ) -> None:
        self.host = host
        self.directory = directory
        self.options = options or RpcOptions()
        self._serving: set[asyncio.Task[None]] = set()

    def serve_all(self) -> None:
        """Give every session created from now on its socket (a failure is logged)."""
        self.host.on_new_session(self._new_session)

    async def add(self, session_id: str, path: Path | None = None) -> Path:
        """Open ``session_id``'s socket (at ``path``, else in the directory); its path.

        Raises :class:`OSError` (:class:`~.unix.SocketInUse` included) when the
        socket cannot be made, and :class:`~codexcore.adapters.host.HostRefusal` for a session
        that is not live.
        """
        status = await statuses(self.host).get(session_id)
        server = UnixServer(
            self.host,
            path or self.directory / f"{session_id}.sock",
            dialects=Dialects("jsonrpc", attrs.evolve(self.options, session_id=session_id)),
            require_initialize=False,
        )
        await server.start()
        if path is None:
            status.on_renamed.append(lambda new_id: self._rename(server, new_id))
        task = asyncio.create_task(self._close_after(status, server))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)
        log.info("control socket", session=session_id, path=str(server.path))
        return server.path

    async def aclose(self) -> None:
        """Wait until every socket is removed (their sessions are ending or over)."""
        while self._serving:
            await asyncio.gather(*self._serving, return_exceptions=True)

    def _new_session(self, session_id: str) -> None:
        task = asyncio.create_task(self._add_logged(session_id))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _add_logged(self, session_id: str) -> None:
        try:
            await self.add(session_id)
        except Exception as exc:
            log.error("no control socket for the session", session=session_id, error=str(exc))

    async def _close_after(self, status: SessionStatus, server: UnixServer) -> None:
        await status.finished.wait()
        server.stop_accepting()  # removes the socket file (if it is still ours)
        log.info("control socket removed", session=status.task_name, path=str(server.path))
        await server.wait_closed(CLOSE_GRACE)

    def _rename(self, server: UnixServer, session_id: str) -> None:
        target = self.directory / f"{session_id}.sock"
        try:
            os.replace(server.path, target)
        except OSError as exc:
            log.warning("control socket not renamed", path=str(server.path), error=str(exc))
            return
        server.path = target
