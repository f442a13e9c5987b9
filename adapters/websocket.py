"""The WebSocket face: ``codexcore serve --ws HOST:PORT``, for browser UIs.

Each client's first message chooses its dialect, native or JSON-RPC, as on the other
transports (``servers._dialect``); each message is one line of it. The door is the
WebSocket upgrade: loopback by default, a bearer token required beyond it (or whenever
one is configured), and browser origins checked (``transports._websocket``)::

    host = SessionHost(HostConfig())
    async with host:
        server = WebSocketServer(host, "127.0.0.1", 8766)
        url = await server.start()
        ...
        await shutdown(host, [server])

A client past the upgrade has proved what the token proves, so the native ``hello``
and the JSON-RPC ``initialize`` need not repeat it.
"""

from __future__ import annotations

from .host._host import SessionHost
from .servers._dialect import Dialects, serve_socket
from .servers._listener import shutdown
from .transports._streams import DEFAULT_HOST
from .transports._websocket import (
    WebSocketConduit,
    WebSocketDoor,
    WebSocketListener,
    open_websocket,
)

__all__ = ["WebSocketServer", "shutdown"]


class WebSocketServer:
    """Serves a :class:`SessionHost` on a WebSocket port (``port=0`` picks a free one).

    ``origins``: browser origins allowed besides localhost pages (and none at all).
    The host's token (``HostConfig.token``), if any, is the bearer token clients
    must present; without one only a loopback address is served.
    """

    def __init__(
        self,
        host: SessionHost,
        address: str = DEFAULT_HOST,
        port: int = 0,
        *,
        origins: tuple[str, ...] = (),
        dialects: Dialects | None = None,
    ) -> None:
        self.host = host
        self.dialects = dialects or Dialects()
        self._bind = (address, port)
        self._origins = origins
        self._listener: WebSocketListener | None = None

    @property
    def url(self) -> str:
        assert self._listener is not None, "not started"
        return self._listener.url

    async def start(self) -> str:
        """Listen; returns the ``ws://`` URL bound. ValueError: beyond loopback, no token."""
        config = self.host.config
        door = WebSocketDoor(config.token, self._origins, config.max_line_bytes)
        self._listener = await open_websocket(
            self._serve, *self._bind, door, open_timeout=config.handshake_timeout
        )
        return self._listener.url

    async def _serve(self, conduit: WebSocketConduit) -> None:
        await serve_socket(
            self.host,
            conduit,
            self.dialects,
            require_initialize=False,  # the upgrade checked the token
            credential=conduit.credential,
        )

    def stop_accepting(self) -> None:
        if self._listener is not None:
            self._listener.stop_accepting()

    async def wait_closed(self, grace: float | None = None) -> None:
        if self._listener is not None:
            await self._listener.wait_closed(grace)
