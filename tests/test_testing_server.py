"""ScriptedResponsesServer: a real HTTP/1.1 server on 127.0.0.1, spoken to by httpx."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import respx

from codexcore import Codex, EngineConfig, SessionConfig
from codexcore.model import (
    Completed,
    ModelClient,
    ModelError,
    OutputTextDelta,
    ResponseCreated,
    RetryPolicy,
    SSEDecoder,
)
from codexcore.testing import (
    Hang,
    Pause,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    http_error,
    httpx_response,
    idle,
    sse_body,
    sse_event,
    text_response,
    truncated,
)

pytestmark = pytest.mark.anyio

REQUEST = {"model": "gpt-test", "input": [{"role": "user", "content": "hi"}]}
FAST = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.01, jitter=0)


def server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ScriptedResponsesServer"]


async def final_text(client: ModelClient, request: dict[str, Any] = REQUEST) -> str:
    async with aclosing(client.stream(request)) as events:
        deltas = [event.delta async for event in events if isinstance(event, OutputTextDelta)]
    return "".join(deltas)


@pytest.fixture
def no_leftover_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    assert set(threading.enumerate()) <= before


# --- serving in the caller's event loop ------------------------------------------------


async def test_several_responses_over_one_client() -> None:
    model = ScriptedModel([text_response("one"), text_response("two"), text_response("three")])
    async with ScriptedResponsesServer(model) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        async with ModelClient(base_url=server.base_url) as client:
            texts = [await final_text(client) for _ in range(3)]
            assert server.open_connections == 1  # kept alive and reused
    assert texts == ["one", "two", "three"]
    assert model.requests == [{**REQUEST, "stream": True}] * 3
    assert model.remaining == 0


async def test_keep_alive_and_connection_close() -> None:
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with ScriptedResponsesServer(model) as server, httpx.AsyncClient() as http:
        url = f"{server.base_url}/responses"
        first = await http.post(url, json=REQUEST)
        assert first.headers["connection"] == "keep-alive"
        assert first.headers["transfer-encoding"] == "chunked"
        second = await http.post(url, json=REQUEST, headers={"Connection": "close"})
        assert second.headers["connection"] == "close"
        with anyio.fail_after(5):
            await server.wait_disconnected()
    events = SSEDecoder().feed(second.content)
    assert events[-1].event == "response.completed"


async def test_chunks_arrive_as_they_are_produced() -> None:
    first = sse_event({"type": "response.created", "response": {"id": "resp_1"}})
    rest = text_response("later", response_id="resp_1").steps[1:]
    model = ScriptedModel([ScriptedResponse(steps=[first, Pause(30.0), *rest])])
    async with (
        ScriptedResponsesServer(model) as server,
        ModelClient(base_url=server.base_url) as client,
        aclosing(client.stream(REQUEST)) as events,
    ):
        with anyio.fail_after(5):  # far less than the pause
            assert await anext(events) == ResponseCreated("resp_1")


async def test_pause_steps_are_honoured() -> None:
    steps = text_response("paused").steps
    model = ScriptedModel([ScriptedResponse(steps=[*steps[:5], Pause(0.2), *steps[5:]])])
    async with ScriptedResponsesServer(model) as server, httpx.AsyncClient() as http:
        started = anyio.current_time()
        response = await http.post(f"{server.base_url}/responses", json=REQUEST)
        assert anyio.current_time() - started >= 0.2
    assert SSEDecoder().feed(response.content)[-1].event == "response.completed"


async def test_hang_is_released_when_the_server_stops() -> None:
    model = ScriptedModel([idle(text_response("stuck"))])
    server = ScriptedResponsesServer(model)
    await server.start()
    streaming = asyncio.Event()
    outcome: list[BaseException] = []

    async def consume(client: ModelClient) -> None:
        try:
            async for event in client.stream(REQUEST):
                if isinstance(event, OutputTextDelta):
                    streaming.set()
        except ModelError as exc:
            outcome.append(exc)

    async with ModelClient(base_url=server.base_url, retry=FAST) as client:
        task = asyncio.create_task(consume(client))
        with anyio.fail_after(5):
            await streaming.wait()
            await server.aclose()
            await task
    (error,) = outcome
    assert isinstance(error, ModelError)
    assert error.code == "retries_exhausted"


async def test_truncated_and_error_replies_over_the_wire() -> None:
    model = ScriptedModel(
        [
            truncated(text_response("cut")),
            http_error(429, headers={"Retry-After": "0"}),
            text_response("whole"),
        ]
    )
    policy = RetryPolicy(max_attempts=3, base_delay=0.001, jitter=0)
    async with (
        ScriptedResponsesServer(model) as server,
        ModelClient(base_url=server.base_url, retry=policy) as client,
        aclosing(client.stream(REQUEST)) as stream,
    ):
        events = [event async for event in stream]
    assert isinstance(events[-1], Completed)
    assert len(model.requests) == 3


async def test_callable_responders_see_the_request() -> None:
    def echo(body: dict[str, Any]) -> ScriptedResponse:
        return text_response(f"you said {body['input'][0]['content']}")

    model = ScriptedModel([echo])
    async with (
        ScriptedResponsesServer(model) as server,
        ModelClient(base_url=server.base_url) as client,
    ):
        assert await final_text(client) == "you said hi"


async def test_failing_responder_becomes_a_500() -> None:
    def broken(body: dict[str, Any]) -> ScriptedResponse:
        raise KeyError("missing")

    model = ScriptedModel([broken])
    async with ScriptedResponsesServer(model) as server, httpx.AsyncClient() as http:
        response = await http.post(f"{server.base_url}/responses", json=REQUEST)
    assert response.status_code == 500
    assert "KeyError" in response.json()["error"]["message"]


async def test_other_paths_bad_bodies_and_an_empty_script() -> None:
    model = ScriptedModel([])
    async with ScriptedResponsesServer(model) as server, httpx.AsyncClient() as http:
        root = f"http://127.0.0.1:{server.port}"
        assert (await http.get(f"{root}/v1/responses")).status_code == 404
        assert (await http.post(f"{root}/v1/models", json={})).status_code == 404
        bad = await http.post(f"{root}/v1/responses", content=b"{nope")
        assert bad.status_code == 400
        empty = await http.post(f"{root}/v1/responses?x=1", json=REQUEST)
        assert empty.status_code == 500
        assert "no response left" in empty.json()["error"]["message"]
    assert model.requests == [REQUEST]


async def test_chunked_request_bodies_are_read() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield orjson.dumps(REQUEST)[:10]
        yield orjson.dumps(REQUEST)[10:]

    model = ScriptedModel([text_response("ok")])
    async with ScriptedResponsesServer(model) as server, httpx.AsyncClient() as http:
        response = await http.post(f"{server.base_url}/responses", content=body())
    assert response.status_code == 200
    assert model.requests == [REQUEST]


async def test_not_running_is_an_error() -> None:
    server = ScriptedResponsesServer(ScriptedModel([]))
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    await server.aclose()  # harmless


# --- serving from a background thread --------------------------------------------------


@pytest.mark.usefixtures("no_leftover_threads")
def test_start_in_thread_and_stop_leave_nothing_behind() -> None:
    model = ScriptedModel([text_response("from a thread")])
    server = ScriptedResponsesServer(model).start_in_thread()
    port = server.port
    assert len(server_threads()) == 1
    with httpx.Client() as http:
        response = http.post(f"{server.base_url}/responses", json=REQUEST)
    server.stop()
    assert server_threads() == []
    events = SSEDecoder().feed(response.content)
    assert events[-1].event == "response.completed"
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass


@pytest.mark.usefixtures("no_leftover_threads")
def test_stop_releases_a_hanging_stream() -> None:
    model = ScriptedModel([ScriptedResponse(steps=[b"event: ping\ndata: {}\n\n", Hang()])])
    with (
        ScriptedResponsesServer(model) as server,
        httpx.Client(timeout=10) as http,
        http.stream("POST", f"{server.base_url}/responses", json=REQUEST) as response,
    ):
        chunks = response.iter_raw()
        assert next(chunks) == b"event: ping\ndata: {}\n\n"
        server.stop()
        with pytest.raises(httpx.RemoteProtocolError):
            next(chunks)
    assert server_threads() == []


@pytest.mark.usefixtures("no_leftover_threads")
async def test_thread_server_with_an_async_client() -> None:
    model = ScriptedModel([text_response("one"), text_response("two")])
    with ScriptedResponsesServer(model) as server:
        async with ModelClient(base_url=server.base_url) as client:
            assert [await final_text(client), await final_text(client)] == ["one", "two"]


@pytest.mark.usefixtures("no_leftover_threads")
def test_start_in_thread_reports_a_busy_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ScriptedResponsesServer(ScriptedModel([]), port=taken.getsockname()[1])
        with pytest.raises(OSError):  # noqa: PT011 - the errno varies by platform
            server.start_in_thread()
    assert server_threads() == []


# --- a reply as bytes or an httpx.Response: for respx's return_value= and MockTransport -------


async def test_a_reply_as_a_response_for_respx_return_value(tmp_path: Path) -> None:
    reply = httpx_response(text_response("Hello from return_value.", reasoning="thinking"))
    config = EngineConfig(session=SessionConfig(cwd=str(tmp_path)), ephemeral=True)
    with respx.mock:
        route = respx.post("https://api.openai.com/v1/responses").mock(return_value=reply)
        async with Codex(config, api_key="sk-test") as codex:
            first = await codex.run("hi")
            second = await codex.run("again")  # the same response serves every request
    assert first.final_message == second.final_message == "Hello from return_value."
    assert route.call_count == 2
    assert reply.headers["content-type"] == "text/event-stream"


async def test_a_reply_as_a_response_in_a_mock_transport(tmp_path: Path) -> None:
    replies = iter([text_response("first"), http_error(429, "slow down")])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx_response(next(replies))

    config = EngineConfig(
        session=SessionConfig(cwd=str(tmp_path)), ephemeral=True, retry_base_delay=0.01
    )
    async with Codex(config, transport=httpx.MockTransport(handler), max_retries=0) as codex:
        ok = await codex.run("one")
        limited = await codex.run("two")
    assert ok.final_message == "first"
    assert limited.terminal.msg.TYPE == "error"
    assert "slow down" in str(limited.terminal.msg)


def test_sse_body_is_the_stream_the_decoder_reads() -> None:
    body = sse_body(text_response("Hi there", chunks=2))
    events = SSEDecoder().feed(body)
    assert [e.event for e in events][-1] == "response.completed"
    assert (
        "".join(
            orjson.loads(e.data)["delta"] for e in events if e.event == "response.output_text.delta"
        )
        == "Hi there"
    )
    paused = ScriptedResponse(steps=(b"a", Pause(5), b"b"))
    assert sse_body(paused) == b"ab"  # timing is not part of a body
    with pytest.raises(ValueError, match="never ends"):
        sse_body(idle(text_response("x")))
