"""WebSocket as a :class:`~._conduit.Conduit`, and the listener that serves one per client.

Over WebSocket a dialect's lines are messages: each text message the client sends is
read as one line (a raw newline inside it, JSON whitespace, reads as a space), and each
whole line the dialect writes goes out as one text message. The ``websockets``
library frames, pings and bounds the messages (``max_size``); its transport's write
limits are the conduit's backpressure, so ``drain`` waits exactly as over TCP.

The door (:func:`open_websocket`): loopback by default; a listener on any other
address refuses to start without a token, and a token, once configured, must come as
``Authorization: Bearer TOKEN`` on the upgrade request; a browser's ``Origin`` must be
absent, a localhost page, or one of the origins allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from codexcore._logging import get_logger

from ._credential import Credential
from ._streams import DEFAULT_HOST

log = get_logger(__name__)

Handler = Callable[["WebSocketConduit"], Awaitable[None]]
"""What serves one connection: it reads and writes the conduit, then closes it."""

DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024
WRITE_HIGH_WATER = 64 * 1024
"""The transport buffer above which ``drain`` waits (as :class:`~._streams.StreamConduit`)."""
CLOSE_TIMEOUT = 10.0
"""How long a close waits for the client's answer when the caller sets no limit."""

LOCAL_ORIGINS = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?")
"""A page served from this machine (any port): allowed by default."""

UNSUPPORTED_DATA = 1003
"""The close code for a binary message: every dialect here is text."""


class WebSocketConduit:
    """A :class:`~._conduit.Conduit` over one ``websockets`` server connection.

    Writes are synchronous, as the protocol requires: each complete line is handed to
    the library's sans-I/O layer and its bytes to the transport at once (no task per
    message); a partial line waits for its newline.
    """

    def __init__(self, connection: ServerConnection, credential: Credential) -> None:
        self._connection = connection
        self._partial = b""
        self.credential = credential
        """What the upgrade proved: transport ``websocket``, the bearer token it carried."""
        connection.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    @property
    def origin(self) -> str | None:
        request = self._connection.request
        return None if request is None else request.headers.get("Origin")

    async def read(self) -> bytes:
        try:
            message = await self._connection.recv()
        except ConnectionClosed:
            return b""
        if not isinstance(message, str):  # a binary message
            await self._connection.close(UNSUPPORTED_DATA, "only text messages are read")
            return b""
        # One message is one line: JSON's own whitespace newlines must not split it.
        return message.replace("\n", " ").encode() + b"\n"

    def write(self, data: bytes) -> None:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if not lines or self._connection.protocol.state is not State.OPEN:
            return  # a closed connection drops writes; drain() then says it is gone
        protocol = self._connection.protocol
        for line in lines:
            protocol.send_text(line)
        writes = protocol.writes
        if len(writes) > 1 and all(writes):  # no end-of-stream marker (b"") among them
            # The frames of one write go to the socket in one send, not one send each.
            writes[:] = [b"".join(writes)]
        with contextlib.suppress(OSError, RuntimeError):
            self._connection.send_data()

    def write_eof(self) -> None:
        """No more messages: the close frame goes out now; reading goes on until the
        client answers it."""
        self._send_close(1000, "")

    def _send_close(self, code: int, reason: str) -> None:
        if self._connection.protocol.state is State.OPEN:
            self._connection.protocol.send_close(code, reason)
            with contextlib.suppress(OSError, RuntimeError):
                self._connection.send_data()

    def pending(self) -> int:
        transport = self._connection.transport
        return len(self._partial) + (
            0 if transport.is_closing() else transport.get_write_buffer_size()
        )

    async def drain(self) -> None:
        if self._connection.protocol.state is not State.OPEN:
            raise ConnectionResetError("the WebSocket client is gone")
        await self._connection.drain()

    async def close(self, flush_timeout: float | None) -> None:
        # The close frame follows everything written; the client answers it and the
        # server closes TCP. A client that stops reading is cut after the timeout.
        self._send_close(1000, "")
        timeout = CLOSE_TIMEOUT if flush_timeout is None else flush_timeout
        try:
            async with asyncio.timeout(timeout):
                await self._connection.wait_closed()
        except TimeoutError:
            self.abort()

    def abort(self) -> None:
        self._connection.transport.abort()


@attrs.frozen
class WebSocketDoor:
    """Who may open a WebSocket: the ``token`` a client must present as a bearer token
    (None: no token, loopback only), the browser ``origins`` allowed besides
    localhost pages and none at all, and the largest message read."""

    token: str | None = attrs.field(default=None, repr=False)
    origins: tuple[str, ...] = ()
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_ws_url(text: str) -> tuple[str, int]:
    """``ws://HOST:PORT`` (as ``codex app-server --listen`` takes it) or ``HOST:PORT``."""
    from ._streams import parse_address

    address = text.removeprefix("ws://").rstrip("/")
    if "://" in address:
        raise ValueError(f"not ws://HOST:PORT: {text!r} (TLS belongs to a proxy in front)")
    return parse_address(address)


def _refusal(status: int, reason: str, message: str) -> Response:
    headers = Headers([("Content-Type", "text/plain; charset=utf-8")])
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="codexcore"'
    body = f"{message}\n".encode()
    headers["Content-Length"] = str(len(body))
    return Response(status, reason, headers, body)


def _bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _origin_allowed(origin: str | None, allowed: Sequence[str]) -> bool:
    return origin is None or origin in allowed or LOCAL_ORIGINS.fullmatch(origin) is not None


def _check(door: WebSocketDoor, request: Request) -> Response | None:
    """Refuse the upgrade with 403 for a foreign origin, 401 for a missing or wrong token."""
    origin = request.headers.get("Origin")
    if not _origin_allowed(origin, door.origins):
        log.warning("websocket refused", reason="origin", origin=origin)
        return _refusal(403, "Forbidden", f"origin {origin!r} is not allowed")
    if door.token is not None:
        given = (_bearer(request) or "").encode()
        if not hmac.compare_digest(given, door.token.encode()):
            log.warning("websocket refused", reason="token")
            return _refusal(401, "Unauthorized", "the bearer token is missing or wrong")
    return None


class WebSocketListener:
    """A running WebSocket listener: ``address`` is where it listens; close it to stop."""

    def __init__(self, server: Server, handlers: set[asyncio.Task[None]]) -> None:
        self._server = server
        self._handlers = handlers
        name = server.sockets[0].getsockname() if server.sockets else ("", 0)
        self.address: tuple[str, int] = (str(name[0]), int(name[1]))

    @property
    def url(self) -> str:
        host, port = self.address
        return f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}"

    def stop_accepting(self) -> None:
        self._server.close(close_connections=False)

    async def wait_closed(self, grace: float | None = None) -> None:
        """Wait for every connection's handler; cancel those still running after ``grace``."""
        if self._handlers:
            _, pending = await asyncio.wait(set(self._handlers), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        await self._server.wait_closed()

    async def aclose(self, grace: float | None = 5.0) -> None:
        self.stop_accepting()
        await self.wait_closed(grace)

    async def __aenter__(self) -> WebSocketListener:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def open_websocket(
    handler: Handler,
    host: str = DEFAULT_HOST,
    port: int = 0,
    door: WebSocketDoor | None = None,
    **options: Any,
) -> WebSocketListener:
    """Listen on ``host:port`` (0: a free port) and run ``handler`` for each client.

    Raises ValueError, before binding, for a non-loopback ``host`` without a token.
    ``options`` go to ``websockets``' ``serve`` (for example ``ping_interval``).
    """
    door = door or WebSocketDoor()
    if door.token is None and not is_loopback(host):
        raise ValueError(
            f"a WebSocket listener on {host} (beyond this machine) requires a token "
            "(--token-file or $CODEXCORE_TOKEN)"
        )
    handlers: set[asyncio.Task[None]] = set()

    async def on_connection(connection: ServerConnection) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        token = None if connection.request is None else _bearer(connection.request)
        conduit = WebSocketConduit(connection, Credential("websocket", token=token))
        try:
            await handler(conduit)
        except asyncio.CancelledError:
            conduit.abort()
        except Exception:
            log.exception("websocket connection failed")
            conduit.abort()
        finally:
            handlers.discard(task)

    server = await serve(
        on_connection,
        host,
        port,
        process_request=lambda _connection, request: _check(door, request),
        max_size=door.max_message_bytes,
        write_limit=WRITE_HIGH_WATER,
        compression=None,  # a compression bomb is no worry; neither is the CPU it costs
        server_header=None,
        **options,
    )
    return WebSocketListener(server, handlers)


async def serve_websocket(
    handler: Handler,
    address: str,
    door: WebSocketDoor | None = None,
    *,
    until: Awaitable[object] | None = None,
    on_listening: Callable[[WebSocketListener], None] | None = None,
) -> None:
    """Serve ``handler`` on ``address`` (``ws://HOST:PORT`` or ``HOST:PORT``) until ``until``
    completes (or forever), then stop accepting and wait for the connections to end."""
    host, port = parse_ws_url(address)
    listener = await open_websocket(handler, host, port, door)
    if on_listening is not None:
        on_listening(listener)
    try:
        if until is None:
            await asyncio.Future()
        else:
            await until
    finally:
        await listener.aclose()
