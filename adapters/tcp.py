"""The TCP face: ``codexcore serve --tcp HOST:PORT``, optionally with TLS.

A TCP server binds to 127.0.0.1 unless told otherwise and always requires
the host's token in the client's ``hello``::

    host = SessionHost(HostConfig(token=secrets.token_urlsafe(32)))
    async with host:
        server = TcpServer(host, "127.0.0.1", 8765, ssl=tls_context(cert, key))
        address = await server.start()
        ...
        await shutdown(host, [server])

The wire (handshake, replay, control, backpressure) is in ``docs/adapters.md``.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl

from .host._host import SessionHost
from .servers._dialect import Dialects
from .servers._listener import Listener, shutdown
from .transports._conduit import READ_CHUNK
from .transports._streams import DEFAULT_HOST, keepalive
from .transports._streams import parse_address as parse_address

__all__ = ["TcpServer", "parse_address", "shutdown", "tls_context"]


class TcpServer(Listener):
    """Serves a :class:`SessionHost` on a TCP port (``port=0`` picks a free one)."""

    def __init__(
        self,
        host: SessionHost,
        address: str = DEFAULT_HOST,
        port: int = 0,
        *,
        ssl: _ssl.SSLContext | None = None,
        dialects: Dialects | None = None,
    ) -> None:
        # A JSON-RPC client proves it has the token in its initialize, before anything else.
        super().__init__(host, peer_check=keepalive, dialects=dialects, require_initialize=True)
        self._bind = (address, port)
        self._ssl = ssl
        self.address: tuple[str, int] | None = None

    async def start(self) -> tuple[str, int]:
        """Listen; returns the address bound (host, port)."""
        if self.host.config.token is None:
            raise ValueError("a TCP server requires a token (HostConfig.token)")
        server = await asyncio.start_server(
            self._handle,
            *self._bind,
            ssl=self._ssl,
            ssl_handshake_timeout=self.host.config.handshake_timeout if self._ssl else None,
            limit=READ_CHUNK,
        )
        self._server = server
        name = server.sockets[0].getsockname()
        self.address = (str(name[0]), int(name[1]))
        return self.address


def tls_context(cert_file: str, key_file: str) -> _ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or newer) from a certificate chain and its key."""
    context = _ssl.create_default_context(_ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = _ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context
