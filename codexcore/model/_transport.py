"""HTTP/1.1 for the model client: asyncio streams framed by h11, behind httpx's transport seam.

httpx's default transport is httpcore, which takes anyio locks: a one-shot
``codexcore exec`` paid about 16 ms importing httpcore, anyio and h11 when its
client was made and 19 ms more loading anyio's asyncio backend on its first
request, more than the rest of the HTTP stack together. The model client needs
one thing of a transport, to POST a body and stream the reply, and it always
runs on one event loop; this transport does that with the loop's own streams
and h11 (the parser httpcore itself uses), and keeps httpx's contract: its
``Request`` and ``Response``, its exceptions (which the model client maps to
retries), its timeouts, and a pool of kept-alive connections per origin.

It is not the library's default: respx's default mode patches httpcore, so
it would not see these requests, and a test that looked mocked would reach
the network. The processes whose start-up and CPU per Task are measured,
``codexcore exec`` and ``serve``, choose it (``EngineConfig.lean_transport``,
through :func:`~codexcore.model._client.lean_transport`).

What it leaves to httpx: proxies (:func:`~codexcore.model._client.lean_transport`
gives way to httpx's own transport when a proxy variable is set) and HTTP/2
(httpx does not speak it by default either). respx's ``using="httpx"`` mode
and ``httpx.MockTransport`` replace it like any transport.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import h11
import httpx

from ._idle import IdleTimer

__all__ = ["H11Transport"]

_READ_SIZE = 65_536
_DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]
"""(scheme, host, port): the connections a request may reuse."""


class H11Transport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` for HTTP/1.1 over asyncio streams.

    ``verify`` is httpx's: ``True`` for the CA bundle (loaded at the first TLS
    connection, not before), ``False`` to skip verification, or an
    ``ssl.SSLContext`` to share. Like httpx's defaults, at most
    ``max_connections`` requests are in flight at once (the rest wait for the
    pool timeout) and at most ``max_idle`` connections stay open between
    requests, each for ``keepalive_expiry`` seconds.
    """

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        max_connections: int = 100,
        max_idle: int = 20,
        keepalive_expiry: float = 5.0,
    ) -> None:
        self._verify = verify
        self._ssl = verify if isinstance(verify, ssl.SSLContext) else None
        self._slots = asyncio.Semaphore(max_connections)
        self._max_idle = max_idle
        self._expiry = keepalive_expiry
        self._idle: dict[Origin, list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        origin = _origin(request)
        await self._acquire(request, timeouts.get("pool"))
        try:
            conn = self._reuse(origin) or await self._connect(request, origin, timeouts)
            try:
                await conn.send(request, timeouts.get("write"))
                head = await conn.receive_head(request, timeouts.get("read"))
            except BaseException:
                conn.close()
                raise
        except BaseException:
            self._slots.release()
            raise
        return httpx.Response(
            status_code=head.status_code,
            headers=head.headers.raw_items(),
            stream=_Body(self, conn, request, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )

    async def aclose(self) -> None:
        self._closed = True  # a body still streaming closes its connection when done
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for conn in connections:
                conn.close()

    def release(self, conn: _Connection, *, reusable: bool) -> None:
        """Take back a request's connection and its slot (a body calls this once, on close)."""
        self._slots.release()
        if self._closed or not (reusable and conn.next_cycle()):
            conn.close()
            return
        self._idle.setdefault(conn.origin, []).append(conn)
        if sum(map(len, self._idle.values())) > self._max_idle:
            self._evict_oldest()

    async def _acquire(self, request: httpx.Request, limit: float | None) -> None:
        if not self._slots.locked():
            await self._slots.acquire()  # free: returns without waiting
            return
        try:
            async with asyncio.timeout(limit):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no connection slot free", request=request) from None

    def _reuse(self, origin: Origin) -> _Connection | None:
        connections = self._idle.get(origin)
        now = asyncio.get_running_loop().time()
        while connections:
            conn = connections.pop()  # the most recently used: the likeliest still open
            if conn.is_usable(now - self._expiry):
                return conn
            conn.close()
        return None

    def _evict_oldest(self) -> None:
        oldest = min(
            (conns for conns in self._idle.values() if conns), key=lambda conns: conns[0].idle_since
        )
        oldest.pop(0).close()

    async def _connect(
        self, request: httpx.Request, origin: Origin, timeouts: dict[str, float | None]
    ) -> _Connection:
        scheme, host, port = origin
        context = self._ssl_context() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=context, server_hostname=host if context else None
                )
        except TimeoutError:
            message = f"connecting to {host}:{port} timed out"
            raise httpx.ConnectTimeout(message, request=request) from None
        except OSError as exc:  # ssl.SSLError included: a failed handshake is a failed connect
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        return _Connection(origin, reader, writer)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context(verify=self._verify)
        return self._ssl


def _origin(request: httpx.Request) -> Origin:
    scheme = request.url.scheme
    if scheme not in _DEFAULT_PORTS:
        raise httpx.UnsupportedProtocol(
            f"the model client speaks http and https, not {scheme!r}", request=request
        )
    return scheme, request.url.host, request.url.port or _DEFAULT_PORTS[scheme]


class _Connection:
    """One socket and its h11 state machine."""

    __slots__ = ("_h11", "_read_timer", "_reader", "_writer", "idle_since", "origin")

    def __init__(
        self, origin: Origin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.origin = origin
        self._reader, self._writer = reader, writer
        self._h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        # Its limit is set per read; expiring aborts the socket, so the pending read ends.
        self._read_timer = IdleTimer(0.0, writer.transport.abort)

    def is_usable(self, fresh_after: float) -> bool:
        """Still open, not told to close, and idle since ``fresh_after`` (loop time) or later."""
        return (
            self.idle_since >= fresh_after
            and not self._reader.at_eof()
            and not self._writer.is_closing()
        )

    def next_cycle(self) -> bool:
        """Ready the connection for another request, if both sides finished cleanly."""
        if self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
            return False
        self._h11.start_next_cycle()
        self._read_timer.close()
        self.idle_since = asyncio.get_running_loop().time()
        return True

    def close(self) -> None:
        self._read_timer.close()
        self._writer.close()

    async def send(self, request: httpx.Request, limit: float | None) -> None:
        """The request line, headers and body in one write (the model client's bodies
        are one bytes object; a streamed body would be gathered whole first)."""
        h11_conn = self._h11
        try:
            head = h11_conn.send(
                h11.Request(
                    method=request.method, target=request.url.raw_path, headers=request.headers.raw
                )
            )
            parts = [head]
            assert isinstance(request.stream, httpx.AsyncByteStream)  # an AsyncClient's request
            async for chunk in request.stream:
                parts.append(h11_conn.send(h11.Data(data=chunk)))
            parts.append(h11_conn.send(h11.EndOfMessage()))
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        self._writer.write(b"".join(p for p in parts if p))
        try:
            async with asyncio.timeout(limit):
                await self._writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("sending the request timed out", request=request) from None
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__, request=request) from exc

    async def receive_head(self, request: httpx.Request, limit: float | None) -> h11.Response:
        """The final response head (1xx ones are skipped)."""
        while True:
            event = await self.next_event(request, limit)
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise httpx.RemoteProtocolError(
                    "the server closed the connection without a response", request=request
                )

    async def next_event(self, request: httpx.Request, limit: float | None) -> Any:
        """h11's next event, reading from the socket as it needs (each wait up to ``limit`` s)."""
        h11_conn = self._h11
        try:
            while (event := h11_conn.next_event()) is h11.NEED_DATA:
                h11_conn.receive_data(await self._read(request, limit))
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        return event

    async def _read(self, request: httpx.Request, limit: float | None) -> bytes:
        timer = self._read_timer
        if limit is not None:
            timer.limit = limit
            timer.begin()
        try:
            data = await self._reader.read(_READ_SIZE)
        except OSError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        finally:
            timer.end()
        if timer.fired:
            raise httpx.ReadTimeout(
                "the server sent nothing within the read timeout", request=request
            )
        return data


class _Body(httpx.AsyncByteStream):
    """A response body streamed off its connection, which goes back to the pool when done."""

    def __init__(
        self,
        transport: H11Transport,
        conn: _Connection,
        request: httpx.Request,
        limit: float | None,
    ) -> None:
        self._transport, self._conn = transport, conn
        self._request, self._limit = request, limit
        self._complete = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn, request, limit = self._conn, self._request, self._limit
        while True:
            event = await conn.next_event(request, limit)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._complete = True
                return
            else:  # ConnectionClosed before the end h11 could see (a body read to EOF ends above)
                raise httpx.RemoteProtocolError(
                    "the server closed the connection mid-response", request=request
                )

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._transport.release(self._conn, reusable=self._complete)
