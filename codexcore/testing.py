"""A scripted OpenAI Responses API, for testing code that talks to a model.

Build replies with the helpers (``text_response``, ``function_call_response``,
``shell_call``, ``failed_response``, ``incomplete_response``, ``http_error``,
and the modifiers ``truncated`` and ``idle``), hand them to a ``ScriptedModel``
in the order the requests will come, and serve the model in one of three ways::

    model = ScriptedModel([shell_call(["ls"]), text_response("Done.")])

    # 1. in-process, no sockets
    client = ModelClient(transport=model.mock_transport())

    # 2. with respx, in its mode that patches the client (not httpcore)
    with respx.mock(using="httpx") as router:
        router.post(url__regex=r"/responses$").mock(side_effect=model.handler)

    # 3. a real HTTP server, in this event loop or in a background thread
    async with ScriptedResponsesServer(model) as server:
        client = ModelClient(base_url=server.base_url)

Streams are realistic: every event is ``event: <type>\\ndata: <json>\\n\\n`` with a
``sequence_number``, item ids and ``output_index`` as the real API sends them,
one event per chunk, and ``Pause``/``Hang`` steps really pause the stream.
``model.requests`` keeps every request body, decoded, for assertions.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import http
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeAlias

import attrs
import httpx
import orjson

from codexcore.model import Usage

if TYPE_CHECKING:
    from codexcore.engine import ModelCatalog

__all__ = [
    "DEMO_MODEL",
    "Hang",
    "Pause",
    "Responder",
    "ScriptedModel",
    "ScriptedResponse",
    "ScriptedResponsesServer",
    "Step",
    "demo_catalog",
    "failed_response",
    "function_call_response",
    "http_error",
    "idle",
    "incomplete_response",
    "shell_call",
    "sse_event",
    "text_response",
    "truncated",
]


DEMO_MODEL = "demo-model"
"""The name ``codexcore demo`` and the examples give their scripted model."""


def demo_catalog() -> ModelCatalog:
    """The model catalogue with :data:`DEMO_MODEL` described, so a demo run against a
    scripted model is not warned (as an operator would be) that its model is unknown."""
    from codexcore.engine import ModelCatalog

    return ModelCatalog({DEMO_MODEL: {"context_window": 128_000, "max_output_tokens": 16_384}})


# --- scripts ---------------------------------------------------------------------------


@attrs.frozen
class Pause:
    """Step: send nothing for ``seconds``, then go on."""

    seconds: float


@attrs.frozen
class Hang:
    """Step: send nothing more, until the client goes away or the server stops."""


Step: TypeAlias = bytes | Pause | Hang
"""One step of a scripted body: a chunk to send as it is, or a ``Pause``/``Hang``."""


def _to_steps(steps: Iterable[Step]) -> tuple[Step, ...]:
    return tuple(steps)


def _to_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    return tuple(headers.items() if isinstance(headers, Mapping) else headers)


_SSE_HEADERS = {"content-type": "text/event-stream"}
_JSON_HEADERS = {"content-type": "application/json"}


@attrs.frozen
class ScriptedResponse:
    """One scripted HTTP reply: a status, headers, and the body as steps.

    Each ``bytes`` step is sent as one chunk, as soon as the one before it is
    out. A body may end without ``response.completed`` (see ``truncated``).
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = attrs.field(default=_SSE_HEADERS, converter=_to_headers)
    steps: tuple[Step, ...] = attrs.field(default=(), converter=_to_steps)


def sse_event(payload: Mapping[str, Any]) -> bytes:
    """``payload`` framed as one SSE event, named after its ``type``."""
    data = orjson.dumps(payload if isinstance(payload, dict) else dict(payload))
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + data + b"\n\n"


_DEFAULT_USAGE = Usage(
    input_tokens=120,
    cached_input_tokens=0,
    output_tokens=30,
    reasoning_output_tokens=0,
    total_tokens=150,
)


def text_response(
    text: str,
    *,
    response_id: str | None = None,
    chunks: int = 3,
    reasoning: str | None = None,
    usage: Usage | None = _DEFAULT_USAGE,
) -> ScriptedResponse:
    """An assistant message streamed as ``chunks`` text deltas.

    With ``reasoning``, a reasoning item whose summary streams first. ``usage``
    goes into ``response.completed`` (None sends ``"usage": null``).
    """
    stream = _Stream(response_id)
    stream.created()
    if reasoning is not None:
        stream.reasoning(reasoning, chunks)
    stream.message(text, chunks)
    stream.completed(usage)
    return stream.build()


def function_call_response(
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    call_id: str | None = None,
    text: str | None = None,
    response_id: str | None = None,
    usage: Usage | None = _DEFAULT_USAGE,
) -> ScriptedResponse:
    """A call of function tool ``name``; ``arguments`` is JSON text or a mapping to encode.

    With ``text``, an assistant message comes before the call.
    """
    encoded = arguments if isinstance(arguments, str) else orjson.dumps(dict(arguments)).decode()
    stream = _Stream(response_id)
    stream.created()
    if text is not None:
        stream.message(text, 1)
    stream.function_call(name, encoded, call_id or _new_id("call"))
    stream.completed(usage)
    return stream.build()


def shell_call(
    argv: Iterable[str],
    *,
    call_id: str | None = None,
    workdir: str | None = None,
    timeout_ms: int | None = None,
    text: str | None = None,
    response_id: str | None = None,
    **extra: Any,
) -> ScriptedResponse:
    """A call of the ``shell`` tool with ``{"command": argv, "workdir", "timeout_ms", **extra}``.

    ``workdir`` and ``timeout_ms`` are left out when None; ``extra`` holds any
    further arguments (``with_escalated_permissions=True``, say). ``text`` and
    ``response_id`` are as for ``function_call_response``.
    """
    arguments: dict[str, Any] = {"command": list(argv)}
    if workdir is not None:
        arguments["workdir"] = workdir
    if timeout_ms is not None:
        arguments["timeout_ms"] = timeout_ms
    arguments.update(extra)
    return function_call_response(
        "shell", arguments, call_id=call_id, text=text, response_id=response_id
    )


def failed_response(code: str, message: str, *, response_id: str | None = None) -> ScriptedResponse:
    """A stream that starts, then reports ``response.failed`` with ``error {code, message}``."""
    stream = _Stream(response_id)
    stream.created()
    stream.finish("failed", error={"code": code, "message": message})
    return stream.build()


def incomplete_response(
    reason: str = "max_output_tokens", *, text: str | None = None, response_id: str | None = None
) -> ScriptedResponse:
    """A stream that ends in ``response.incomplete`` for ``reason``, after optional ``text``."""
    stream = _Stream(response_id)
    stream.created()
    if text is not None:
        stream.message(text, 1)
    stream.finish("incomplete", incomplete_details={"reason": reason})
    return stream.build()


def http_error(
    status: int,
    body: Mapping[str, Any] | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ScriptedResponse:
    """A plain HTTP error reply, e.g. ``http_error(429, headers={"Retry-After": "1"})``.

    A mapping body is sent as JSON, a string as text; by default the body is
    ``{"error": {"message": "scripted HTTP <status>", ...}}``.
    """
    if body is None:
        body = {"error": {"message": f"scripted HTTP {status}", "type": "scripted", "code": None}}
    if isinstance(body, str):
        content, kind = body.encode(), {"content-type": "text/plain; charset=utf-8"}
    else:
        content, kind = orjson.dumps(dict(body)), _JSON_HEADERS
    return ScriptedResponse(status, {**kind, **(headers or {})}, (content,))


def truncated(response: ScriptedResponse, *, keep: int | None = None) -> ScriptedResponse:
    """``response`` with its body cut short, as when the connection drops mid-stream.

    By default the body stops right after its first delta event (so a client
    has started showing output), or, without deltas, just before the event
    that ends the response. With ``keep``, only the first ``keep`` steps are sent.
    """
    steps = response.steps
    return attrs.evolve(response, steps=steps[: _cut_point(steps) if keep is None else keep])


def idle(response: ScriptedResponse, *, keep: int | None = None) -> ScriptedResponse:
    """``truncated(response, keep=keep)``, then a ``Hang`` instead of the end of the body."""
    cut = truncated(response, keep=keep)
    return attrs.evolve(cut, steps=(*cut.steps, Hang()))


_FINAL_EVENTS = (b"response.completed", b"response.failed", b"response.incomplete")


def _cut_point(steps: tuple[Step, ...]) -> int:
    names = [_event_name(step) for step in steps]
    for index, name in enumerate(names):
        if name.endswith(b".delta"):
            return index + 1
    for index, name in enumerate(names):
        if name in _FINAL_EVENTS:
            return index
    return len(steps)


def _event_name(step: Step) -> bytes:
    """The event type a step built by ``sse_event`` carries; b"" for anything else."""
    if not isinstance(step, bytes) or not step.startswith(b"event: "):
        return b""
    return step[7:].partition(b"\n")[0]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _split(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` pieces of near-equal length (fewer if it is shorter)."""
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_output_tokens},
        "total_tokens": usage.total_tokens,
    }


class _Stream:
    """Writes the events of one response, numbering them as the real API does."""

    def __init__(self, response_id: str | None) -> None:
        self._id = response_id or _new_id("resp")
        self._created_at = int(time.time())
        self._steps: list[Step] = []
        self._output: list[dict[str, Any]] = []
        self._sequence = 0

    def build(self) -> ScriptedResponse:
        return ScriptedResponse(steps=self._steps)

    def emit(self, kind: str, **fields: Any) -> None:
        self._steps.append(sse_event({"type": kind, "sequence_number": self._sequence, **fields}))
        self._sequence += 1

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": "scripted",
            "output": list(self._output),
            "usage": None,
            **fields,
        }

    def created(self) -> None:
        self.emit("response.created", response=self.response("in_progress"))
        self.emit("response.in_progress", response=self.response("in_progress"))

    def completed(self, usage: Usage | None) -> None:
        self.finish("completed", usage=None if usage is None else _usage_json(usage))

    def finish(self, status: str, **fields: Any) -> None:
        self.emit(f"response.{status}", response=self.response(status, **fields))

    def message(self, text: str, chunks: int) -> None:
        index, item_id = len(self._output), _new_id("msg")
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        item = {"id": item_id, "type": "message", "role": "assistant"}
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        part = {"type": "output_text", "text": "", "annotations": []}
        self.emit("response.content_part.added", **where, part=part)
        for delta in _split(text, chunks):
            self.emit("response.output_text.delta", **where, delta=delta, logprobs=[])
        self.emit("response.output_text.done", **where, text=text, logprobs=[])
        self.emit("response.content_part.done", **where, part={**part, "text": text})
        self._item_done(index, {**item, "status": "completed", "content": [{**part, "text": text}]})

    def reasoning(self, summary: str, chunks: int) -> None:
        index, item_id = len(self._output), _new_id("rs")
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        item = {"id": item_id, "type": "reasoning"}
        self.emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        part = {"type": "summary_text", "text": ""}
        self.emit("response.reasoning_summary_part.added", **where, part=part)
        for delta in _split(summary, chunks):
            self.emit("response.reasoning_summary_text.delta", **where, delta=delta)
        self.emit("response.reasoning_summary_text.done", **where, text=summary)
        self.emit("response.reasoning_summary_part.done", **where, part={**part, "text": summary})
        self._item_done(index, {**item, "summary": [{**part, "text": summary}]})

    def function_call(self, name: str, arguments: str, call_id: str) -> None:
        index, item_id = len(self._output), _new_id("fc")
        where = {"item_id": item_id, "output_index": index}
        item = {"id": item_id, "type": "function_call", "name": name, "call_id": call_id}
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        for delta in _split(arguments, 2):
            self.emit("response.function_call_arguments.delta", **where, delta=delta)
        self.emit("response.function_call_arguments.done", **where, arguments=arguments)
        self._item_done(index, {**item, "status": "completed", "arguments": arguments})

    def _item_done(self, index: int, item: dict[str, Any]) -> None:
        self.emit("response.output_item.done", output_index=index, item=item)
        self._output.append(item)


# --- the scripted model ----------------------------------------------------------------


Responder: TypeAlias = ScriptedResponse | Callable[[dict[str, Any]], ScriptedResponse]
"""A scripted reply, or a function from the decoded request body to one."""


class ScriptedModel:
    """Answers each ``POST .../responses`` with the next scripted reply, in order.

    A callable in the script receives the decoded request body (to echo a tool
    output, say). ``requests`` records every request body. Once the script is
    used up, requests get HTTP 500 with the error "scripted model has no
    response left". Safe to share with a server running in another thread.
    """

    def __init__(self, responses: Iterable[Responder] = ()) -> None:
        self._script = collections.deque(responses)
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []

    @property
    def remaining(self) -> int:
        """How many scripted replies are still unused."""
        return len(self._script)

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        """Record ``body`` and return the reply to it."""
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            responder = self._script.popleft() if self._script else None
        if responder is None:
            return _error_response(500, f"scripted model has no response left (request #{number})")
        return responder if isinstance(responder, ScriptedResponse) else responder(body)

    async def handler(self, request: httpx.Request) -> httpx.Response:
        """Serve ``request``; a handler for ``httpx.MockTransport`` and a respx side effect."""
        reply = await self._reply(request)
        headers = [(k, v) for k, v in reply.headers if k.lower() not in _FRAMING_HEADERS]
        return httpx.Response(reply.status, headers=headers, content=_play(reply.steps))

    def mock_transport(self) -> httpx.MockTransport:
        """A transport serving this model in-process: ``ModelClient(transport=...)``."""
        return httpx.MockTransport(self.handler)

    async def _reply(self, request: httpx.Request) -> ScriptedResponse:
        if request.method != "POST" or not _is_responses_path(request.url.path):
            return _error_response(404, f"no route for {request.method} {request.url.path}")
        body = _decode_body(await request.aread())
        if body is None:
            return _error_response(400, "request body is not a JSON object")
        return self.respond(body)


_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


def _is_responses_path(path: str) -> bool:
    return path.endswith("/responses")


def _decode_body(raw: bytes) -> dict[str, Any] | None:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def _error_response(status: int, message: str) -> ScriptedResponse:
    error = {"message": message, "type": "scripted_model_error", "code": None}
    return ScriptedResponse(status, _JSON_HEADERS, (orjson.dumps({"error": error}),))


async def _play(steps: Iterable[Step]) -> AsyncIterator[bytes]:
    """The body for httpx: chunks as they come; a ``Hang`` lasts until the reader cancels."""
    for step in steps:
        if isinstance(step, bytes):
            yield step
        elif isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
        else:
            await asyncio.get_running_loop().create_future()


# --- a real HTTP server ----------------------------------------------------------------


@attrs.frozen
class _Request:
    method: str
    path: str
    keep_alive: bool
    body: bytes


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
    leaves no thread or socket behind.
    """

    def __init__(self, model: ScriptedModel, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model
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
            await _send(writer, reader, _error_response(400, str(exc)), keep_alive=False)
            return False
        if request is None:
            return False
        reply = await self._reply(request)
        return await _send(writer, reader, reply, keep_alive=request.keep_alive)

    async def _reply(self, request: _Request) -> ScriptedResponse:
        if request.method != "POST" or not _is_responses_path(request.path):
            return _error_response(404, f"no route for {request.method} {request.path}")
        body = _decode_body(request.body)
        if body is None:
            return _error_response(400, "request body is not a JSON object")
        try:
            return self.model.respond(body)
        except Exception as exc:  # a scripted callable failed: tell the client why
            return _error_response(500, f"scripted responder raised {exc!r}")


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
    return _Request(method, target.partition("?")[0], keep_alive, body)


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
    lines += [f"{k}: {v}" for k, v in reply.headers if k.lower() not in _FRAMING_HEADERS]
    lines += [
        "transfer-encoding: chunked",
        f"connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
