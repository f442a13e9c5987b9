"""The real HTTP server of :mod:`codexcore.testing`: ``ScriptedResponsesServer``."""

from __future__ import annotations

import asyncio
import contextlib
import http
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Self

import attrs

from ._testing_model import (
    FRAMING_HEADERS,
    ScriptedModel,
    decode_body,
    error_response,
    is_responses_path,
)
from ._testing_script import Hang, Pause, ScriptedResponse

# --- a real HTTP server ----------------------------------------------------------------


@attrs.frozen
class _Request:
    method: str
    path: str
    keep_alive: bool
    body: bytes
    authorization: str | None = None


class _BadRequest(Exception):
    pass


class ScriptedResponsesServer:
    """A real HTTP/1.1 server on a local socket that serves a ``ScriptedModel``.

    Bodies go out with chunked transfer encoding, one chunk per step, flushed
    at once. Connections are kept alive unless the client says otherwise.
    ``POST /v1/responses`` (any path ending in ``/responses``) reaches the
    model; other requests get 404.

    Run it in the current event loop with ``async with server:`` (or
    ``await server.start()`` / ``await server.aclose()``), or in a background
    thread with its own loop with ``with server:`` (or ``start_in_thread()`` /
    ``stop()``). Stopping closes every connection, ends ``Hang`` steps and
    leaves no thread or socket behind. ``authorizations`` holds each model request's
    ``Authorization`` header (None where it had none), in order.
    """

    def __init__(self, model: ScriptedModel, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model
        self.authorizations: list[str | None] = []
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._no_connections: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread_stop: asyncio.Event | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        if self._server is None:
            raise RuntimeError("the server is not running")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give a client: ``http://HOST:PORT/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def open_connections(self) -> int:
        """How many client connections are open right now."""
        return len(self._connections)

    async def wait_disconnected(self) -> None:
        """Wait until no client connection is open, e.g. after interrupting a stream.

        Only from the server's own event loop (the ``async with`` way of running it).
        """
        if self._no_connections is None:
            raise RuntimeError("the server is not running")
        await self._no_connections.wait()

    async def start(self) -> None:
        """Start listening, in the running event loop."""
        if self._server is not None:
            raise RuntimeError("the server is already running")
        self._no_connections = asyncio.Event()
        self._no_connections.set()
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def aclose(self) -> None:
        """Stop: close the listening socket and every connection."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def start_in_thread(self) -> Self:
        """Run the server in a new thread with its own event loop; returns once listening."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run_thread, args=(ready, failure), name="ScriptedResponsesServer"
        )
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop a server started with ``start_in_thread`` and wait for its thread."""
        thread, loop, stop = self._thread, self._thread_loop, self._thread_stop
        if thread is None or loop is None or stop is None:
            return
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("the scripted server thread did not stop in time")
        self._thread = self._thread_loop = self._thread_stop = None

    def __enter__(self) -> Self:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run_thread(self, ready: threading.Event, failure: list[BaseException]) -> None:
        async def main() -> None:
            self._thread_loop = asyncio.get_running_loop()
            self._thread_stop = asyncio.Event()
            try:
                await self.start()
            except BaseException as exc:
                failure.append(exc)
                return
            finally:
                ready.set()
            try:
                await self._thread_stop.wait()
            finally:
                await self.aclose()

        asyncio.run(main())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        assert self._no_connections is not None
        self._connections.add(task)
        self._no_connections.clear()
        try:
            # A connection accepted just before aclose() started must not outlive it.
            while self._server is not None and await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        except asyncio.CancelledError:
            # aclose() is stopping us. End normally: on 3.11 the task's done
            # callback in asyncio.streams calls task.exception(), which raises
            # for a cancelled task and gets logged as an error.
            pass
        finally:
            writer.close()
            # aclose() may cancel us here too, after the request ended: same reason.
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()
            self._connections.discard(task)
            if not self._connections:
                self._no_connections.set()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; True if the connection stays open for another."""
        try:
            request = await _read_request(reader)
        except _BadRequest as exc:
            await _send(writer, reader, error_response(400, str(exc)), keep_alive=False)
            return False
        if request is None:
            return False
        reply = await self._reply(request)
        return await _send(writer, reader, reply, keep_alive=request.keep_alive)

    async def _reply(self, request: _Request) -> ScriptedResponse:
        if request.method != "POST" or not is_responses_path(request.path):
            return error_response(404, f"no route for {request.method} {request.path}")
        self.authorizations.append(request.authorization)
        body = decode_body(request.body)
        if body is None:
            return error_response(400, "request body is not a JSON object")
        try:
            return self.model.respond(body)
        except Exception as exc:  # a scripted callable failed: tell the client why
            return error_response(500, f"scripted responder raised {exc!r}")


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    """The next request on the connection, or None if the client closed it."""
    line = await reader.readline()
    if not line.strip():
        return None
    try:
        method, target, version = line.decode("latin-1").split()
    except ValueError:
        raise _BadRequest(f"bad request line {line!r}") from None
    headers = await _read_headers(reader)
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    body = await _read_body(reader, headers)
    path = target.partition("?")[0]
    return _Request(method, path, keep_alive, body, headers.get("authorization"))


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return await _read_chunked(reader)
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequest("bad Content-Length") from None
    return await reader.readexactly(length)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        try:
            size = int((await reader.readline()).split(b";")[0], 16)
        except ValueError:
            raise _BadRequest("bad chunk size") from None
        if size == 0:
            await _read_headers(reader)  # trailers
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def _send(
    writer: asyncio.StreamWriter,
    reader: asyncio.StreamReader,
    reply: ScriptedResponse,
    *,
    keep_alive: bool,
) -> bool:
    """Write ``reply`` step by step; True if the connection may serve another request."""
    writer.write(_head(reply, keep_alive))
    await writer.drain()
    for step in reply.steps:
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, Hang):
            while await reader.read(65536):  # until the client disconnects
                pass
            return False
        elif step:
            writer.write(b"%x\r\n%b\r\n" % (len(step), step))
            await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return keep_alive


def _head(reply: ScriptedResponse, keep_alive: bool) -> bytes:
    try:
        phrase = http.HTTPStatus(reply.status).phrase
    except ValueError:
        phrase = "Unknown"
    lines = [f"HTTP/1.1 {reply.status} {phrase}"]
    lines += [f"{k}: {v}" for k, v in reply.headers if k.lower() not in FRAMING_HEADERS]
    lines += [
        "transfer-encoding: chunked",
        f"connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
