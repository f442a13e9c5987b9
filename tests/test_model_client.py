"""ModelClient against scripted Responses API servers (MockTransport, respx, a real socket)."""

from __future__ import annotations

import asyncio
import pickle
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

from codexcore.engine import EngineConfig, ModelClientPool
from codexcore.model import (
    Completed,
    FunctionCallArgumentsDelta,
    ModelClient,
    ModelError,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    ResponseCreated,
    RetryPolicy,
    RetryScheduled,
    StreamEvent,
    Usage,
)
from codexcore.model._retry import parse_retry_after, retry_after_from_message
from codexcore.testing import (
    Hang,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    failed_response,
    function_call_response,
    http_error,
    idle,
    incomplete_response,
    sse_event,
    text_response,
    truncated,
)

pytestmark = pytest.mark.anyio

REQUEST: Mapping[str, Any] = {
    "model": "gpt-test",
    "instructions": "Be brief.",
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
}
FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01, max_retry_after=0.05, jitter=0)
DEFAULT_URL = "https://api.openai.com/v1/responses"


def scripted_client(model: ScriptedModel, **options: Any) -> ModelClient:
    options.setdefault("retry", FAST)
    return ModelClient(transport=model.mock_transport(), **options)


async def collect(client: ModelClient, request: Mapping[str, Any] = REQUEST) -> list[StreamEvent]:
    async with aclosing(client.stream(request)) as events:
        return [event async for event in events]


async def collect_failure(
    client: ModelClient, request: Mapping[str, Any] = REQUEST
) -> tuple[list[StreamEvent], ModelError]:
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async with aclosing(client.stream(request)) as events:
            async for event in events:
                seen.append(event)

    with pytest.raises(ModelError) as caught:
        await consume()
    return seen, caught.value


def retries(events: list[StreamEvent]) -> list[RetryScheduled]:
    return [event for event in events if isinstance(event, RetryScheduled)]


def recording(
    model: ScriptedModel, seen: list[httpx.Request]
) -> Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]:
    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return await model.handler(request)

    return handler


# --- the happy path --------------------------------------------------------------------


async def test_text_stream_yields_typed_events() -> None:
    usage = Usage(
        input_tokens=10,
        cached_input_tokens=4,
        output_tokens=7,
        reasoning_output_tokens=2,
        total_tokens=17,
    )
    model = ScriptedModel([text_response("Hello there, world", response_id="resp_1", usage=usage)])
    async with scripted_client(model) as client:
        events = await collect(client)

    assert [type(event) for event in events] == [
        ResponseCreated,
        OutputItemAdded,
        OutputTextDelta,
        OutputTextDelta,
        OutputTextDelta,
        OutputItemDone,
        Completed,
    ]
    assert events[0] == ResponseCreated("resp_1")
    deltas = [event for event in events if isinstance(event, OutputTextDelta)]
    assert "".join(delta.delta for delta in deltas) == "Hello there, world"
    done = events[-2]
    assert isinstance(done, OutputItemDone)
    assert done.item["type"] == "message"
    assert {delta.item_id for delta in deltas} == {done.item["id"]}
    assert done.item["content"][0]["text"] == "Hello there, world"
    assert events[-1] == Completed("resp_1", usage, (done.item,))


async def test_reasoning_and_function_call_events() -> None:
    model = ScriptedModel(
        [
            text_response("ok", reasoning="Let me think", chunks=2),
            function_call_response("shell", {"command": ["ls"]}, call_id="call_1", text="Listing"),
        ]
    )
    async with scripted_client(model) as client:
        first = await collect(client)
        second = await collect(client)

    summary = [event.delta for event in first if isinstance(event, ReasoningSummaryDelta)]
    assert "".join(summary) == "Let me think"
    done_types = [event.item["type"] for event in first if isinstance(event, OutputItemDone)]
    assert done_types == ["reasoning", "message"]

    arguments = [event.delta for event in second if isinstance(event, FunctionCallArgumentsDelta)]
    assert "".join(arguments) == '{"command":["ls"]}'
    call = [event.item for event in second if isinstance(event, OutputItemDone)][-1]
    assert call["type"] == "function_call"
    assert (call["name"], call["call_id"], call["arguments"]) == (
        "shell",
        "call_1",
        '{"command":["ls"]}',
    )
    usage = second[-1]
    assert isinstance(usage, Completed)


async def test_completed_without_usage() -> None:
    model = ScriptedModel([text_response("hi", usage=None, response_id="resp_2")])
    async with scripted_client(model) as client:
        events = await collect(client)
    completed = events[-1]
    assert isinstance(completed, Completed)
    assert (completed.response_id, completed.usage) == ("resp_2", None)


async def test_unknown_event_types_are_ignored() -> None:
    steps = list(text_response("hi", response_id="resp_u").steps)
    steps.insert(1, sse_event({"type": "response.brand_new_thing", "sequence_number": 99}))
    steps.insert(2, b": a comment\n\nevent: ping\ndata: {}\n\n")
    model = ScriptedModel([ScriptedResponse(steps=steps)])
    async with scripted_client(model) as client:
        events = await collect(client)
    assert events[0] == ResponseCreated("resp_u")
    assert isinstance(events[-1], Completed)
    assert not retries(events)


async def test_payload_type_wins_over_event_name() -> None:
    body = (
        b'event: whatever\ndata: {"type":"response.created","response":{"id":"r"}}\n\n'
        b'data: {"type":"response.completed","response":{"id":"r"}}\n\n'
    )
    model = ScriptedModel([ScriptedResponse(steps=[body])])
    async with scripted_client(model) as client:
        assert await collect(client) == [ResponseCreated("r"), Completed("r")]


async def test_events_after_completed_are_ignored() -> None:
    steps = [*text_response("hi").steps, b"data: [DONE]\n\n"]
    model = ScriptedModel([ScriptedResponse(steps=steps)])
    async with scripted_client(model) as client:
        events = await collect(client)
    assert isinstance(events[-1], Completed)
    assert not retries(events)


async def test_slow_consumer_does_not_trip_the_idle_timeout() -> None:
    model = ScriptedModel([text_response("one two three", chunks=3)])
    async with scripted_client(model, stream_idle_timeout=0.2) as client:
        events = []
        async with aclosing(client.stream(REQUEST)) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, OutputTextDelta):
                    await asyncio.sleep(0.3)  # the behaviour under test: a busy consumer
    assert not retries(events)
    assert isinstance(events[-1], Completed)


# --- the request -----------------------------------------------------------------------


async def test_a_gzip_encoded_stream_is_decoded() -> None:
    import gzip

    reply = text_response("compressed")
    body = b"".join(step for step in reply.steps if isinstance(step, bytes))

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
        return httpx.Response(200, headers=headers, content=gzip.compress(body))

    async with ModelClient(transport=httpx.MockTransport(handler)) as client:
        events = await collect(client)
    assert "".join(e.delta for e in events if isinstance(e, OutputTextDelta)) == "compressed"
    assert isinstance(events[-1], Completed)


async def test_a_server_that_leaves_a_completed_stream_open_is_left_after_the_drain() -> None:
    reply = text_response("done")
    body = b"".join(step for step in reply.steps if isinstance(step, bytes))

    async def hold_open(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        writer.write(head + b"transfer-encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\n%s\r\n" % (len(body), body))  # and never the last chunk
        await writer.drain()
        await reader.read()  # until the client gives up on the rest
        writer.close()

    server = await asyncio.start_server(hold_open, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with (
        server,
        ModelClient(base_url=f"http://127.0.0.1:{port}/v1", stream_idle_timeout=30) as client,
    ):
        started = asyncio.get_running_loop().time()
        events = await asyncio.wait_for(collect(client), 20)
        waited = asyncio.get_running_loop().time() - started
    assert isinstance(events[-1], Completed)
    assert waited < 5  # the 1 s drain, not the 30 s idle timeout


async def test_request_body_and_headers_with_respx() -> None:
    model = ScriptedModel([text_response("hi")])
    with respx.mock(using="httpx", assert_all_called=True) as router:
        route = router.post(DEFAULT_URL).mock(side_effect=model.handler)
        async with ModelClient(api_key="sk-secret", headers={"X-Trace": "t1"}) as client:
            events = await collect(client)

    assert isinstance(events[-1], Completed)
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-trace"] == "t1"
    assert model.requests == [{**REQUEST, "stream": True}]


async def test_no_authorization_header_without_a_key() -> None:
    seen: list[httpx.Request] = []
    model = ScriptedModel([text_response("hi")])
    transport = httpx.MockTransport(recording(model, seen))
    async with ModelClient(transport=transport) as client:
        await collect(client)
    assert "authorization" not in seen[0].headers


async def test_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    seen: list[httpx.Request] = []
    model = ScriptedModel([text_response("hi")])
    async with ModelClient(transport=httpx.MockTransport(recording(model, seen))) as client:
        await collect(client)
    assert seen[0].headers["authorization"] == "Bearer sk-env"


async def test_the_key_never_shows_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    async with ModelClient(api_key="sk-very-secret") as client:
        assert "sk-very-secret" not in repr(client)
        assert "<set>" in repr(client)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    async with ModelClient() as client:
        assert "sk-env-secret" not in repr(client)


@pytest.mark.parametrize(
    ("argument", "environment", "expected"),
    [
        ("http://arg.test/v1/", "http://env.test/v1", "http://arg.test/v1/responses"),
        (None, "http://env.test/v1", "http://env.test/v1/responses"),
        (None, None, DEFAULT_URL),
    ],
)
async def test_base_url_precedence(
    monkeypatch: pytest.MonkeyPatch, argument: str | None, environment: str | None, expected: str
) -> None:
    if environment is not None:
        monkeypatch.setenv("OPENAI_BASE_URL", environment)
    seen: list[httpx.Request] = []
    model = ScriptedModel([text_response("hi")])
    transport = httpx.MockTransport(recording(model, seen))
    async with ModelClient(base_url=argument, transport=transport) as client:
        await collect(client)
    assert str(seen[0].url) == expected


async def test_stream_flag_is_kept_or_added_but_never_false() -> None:
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with scripted_client(model) as client:
        await collect(client, {**REQUEST, "stream": True, "store": False})
        await collect(client, {"model": "m", "previous_response_id": "resp_0"})
        with pytest.raises(ValueError, match="streaming"):
            await collect(client, {"model": "m", "stream": False})
    assert model.requests[0]["stream"] is True
    assert model.requests[1] == {"model": "m", "previous_response_id": "resp_0", "stream": True}


# --- retries ---------------------------------------------------------------------------


async def test_retry_on_500_then_success() -> None:
    model = ScriptedModel([http_error(500), text_response("recovered")])
    async with scripted_client(model) as client:
        events = await collect(client)

    first = events[0]
    assert isinstance(first, RetryScheduled)
    assert (first.attempt, first.max_attempts) == (1, 3)
    assert first.delay == pytest.approx(0.001)
    assert "HTTP 500" in first.reason
    assert isinstance(events[1], ResponseCreated)
    assert isinstance(events[-1], Completed)
    assert len(model.requests) == 2


@pytest.mark.parametrize(("retry_after", "expected"), [("1", 0.05), ("0.01", 0.01)])
async def test_429_retry_after_seconds_is_honoured_and_capped(
    retry_after: str, expected: float
) -> None:
    model = ScriptedModel(
        [http_error(429, headers={"Retry-After": retry_after}), text_response("ok")]
    )
    with respx.mock(using="httpx", assert_all_called=True) as router:
        router.post(DEFAULT_URL).mock(side_effect=model.handler)
        async with ModelClient(retry=FAST) as client:
            events = await collect(client)
    assert retries(events) == [RetryScheduled(1, 3, expected, retries(events)[0].reason)]
    assert "HTTP 429" in retries(events)[0].reason


@pytest.mark.parametrize(("offset", "expected"), [(-60, 0.0), (3600, 0.05)])
async def test_retry_after_http_date(offset: int, expected: float) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=offset), usegmt=True)
    model = ScriptedModel([http_error(503, headers={"Retry-After": when}), text_response("ok")])
    async with scripted_client(model) as client:
        events = await collect(client)
    assert [event.delay for event in retries(events)] == [expected]


async def test_retry_after_is_ignored_for_other_statuses() -> None:
    model = ScriptedModel([http_error(500, headers={"Retry-After": "1"}), text_response("ok")])
    async with scripted_client(model) as client:
        events = await collect(client)
    assert [event.delay for event in retries(events)] == [pytest.approx(0.001)]


async def test_early_close_is_retried() -> None:
    model = ScriptedModel([truncated(text_response("cut off")), text_response("whole")])
    async with scripted_client(model) as client:
        events = await collect(client)
    (retry,) = retries(events)
    assert retry.reason == "stream closed before response.completed"
    assert events.index(retry) > 0  # the partial response came first
    assert isinstance(events[-1], Completed)


async def test_idle_stream_is_retried() -> None:
    model = ScriptedModel([idle(text_response("stalls"), keep=3), text_response("flows")])
    async with scripted_client(model, stream_idle_timeout=0.2) as client:
        with anyio.fail_after(5):
            events = await collect(client)
    (retry,) = retries(events)
    assert "idle" in retry.reason
    assert isinstance(events[-1], Completed)


async def test_connection_errors_are_retried() -> None:
    model = ScriptedModel([text_response("ok")])
    calls = 0

    async def flaky(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ConnectError("connection refused", request=request)
        return await model.handler(request)

    async with ModelClient(transport=httpx.MockTransport(flaky), retry=FAST) as client:
        events = await collect(client)
    assert "could not connect" in retries(events)[0].reason
    assert isinstance(events[-1], Completed)


async def test_exhausted_retries_raise_with_the_last_reason() -> None:
    model = ScriptedModel([http_error(502), http_error(503), http_error(500)])
    async with scripted_client(model) as client:
        events, error = await collect_failure(client)
    assert [event.attempt for event in retries(events)] == [1, 2]
    assert error.code == "retries_exhausted"
    assert error.status == 500
    assert "after 3 attempts" in error.message
    assert "HTTP 500: scripted HTTP 500" in error.message


async def test_running_out_of_script_says_so() -> None:
    model = ScriptedModel([])
    async with scripted_client(model, retry=RetryPolicy(max_attempts=1)) as client:
        _, error = await collect_failure(client)
    assert "scripted model has no response left" in error.message


async def test_malformed_event_is_retried() -> None:
    broken = ScriptedResponse(steps=[b"event: response.created\ndata: {not json\n\n"])
    model = ScriptedModel([broken, text_response("ok")])
    async with scripted_client(model) as client:
        events = await collect(client)
    assert "not JSON" in retries(events)[0].reason
    assert isinstance(events[-1], Completed)


async def test_missing_required_field_is_retried() -> None:
    broken = ScriptedResponse(steps=[sse_event({"type": "response.output_text.delta"})])
    model = ScriptedModel([broken, text_response("ok")])
    async with scripted_client(model) as client:
        events = await collect(client)
    assert "'delta'" in retries(events)[0].reason


# --- failures --------------------------------------------------------------------------


async def test_401_fails_at_once_with_the_server_message() -> None:
    body = {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    model = ScriptedModel([http_error(401, body), text_response("never")])
    with respx.mock(using="httpx", assert_all_called=True) as router:
        router.post(DEFAULT_URL).mock(side_effect=model.handler)
        async with ModelClient(api_key="sk-wrong", retry=FAST) as client:
            events, error = await collect_failure(client)
    assert events == []
    assert (error.code, error.status, error.server_code) == (
        "unauthorized",
        401,
        "invalid_api_key",
    )
    assert "Incorrect API key provided" in error.message
    assert "sk-wrong" not in error.message
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, "bad_request"), (403, "forbidden"), (404, "not_found"), (422, "http_error")],
)
async def test_client_errors_are_not_retried(status: int, code: str) -> None:
    model = ScriptedModel([http_error(status, "plain text trouble\n")])
    async with scripted_client(model) as client:
        events, error = await collect_failure(client)
    assert events == []
    assert (error.code, error.status) == (code, status)
    where = "POST https://api.openai.com/v1/responses, the default base_url"
    assert error.message == f"HTTP {status}: plain text trouble ({where})"


async def test_long_error_bodies_are_truncated() -> None:
    model = ScriptedModel([http_error(400, "x" * 5000)])
    async with scripted_client(model) as client:
        _, error = await collect_failure(client)
    assert len(error.message) < 600


async def test_response_failed_for_good() -> None:
    model = ScriptedModel([failed_response("invalid_prompt", "The prompt was rejected")])
    async with scripted_client(model) as client:
        events, error = await collect_failure(client)
    assert isinstance(events[0], ResponseCreated)
    assert (error.code, error.server_code) == ("response_failed", "invalid_prompt")
    assert "The prompt was rejected" in error.message


async def test_transient_response_failed_is_retried() -> None:
    failed = failed_response("rate_limit_exceeded", "Slow down. Please try again in 20ms.")
    model = ScriptedModel([failed, text_response("ok")])
    async with scripted_client(model) as client:
        events = await collect(client)
    (retry,) = retries(events)
    assert retry.delay == pytest.approx(0.02)
    assert "rate_limit_exceeded" in retry.reason


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        ({"type": "error", "code": "server_error", "message": "oops", "param": None}, True),
        ({"type": "error", "error": {"code": "server_error", "message": "nested"}}, True),
        ({"type": "error", "code": "context_length_exceeded", "message": "too long"}, False),
    ],
)
async def test_error_event(error: dict[str, Any], transient: bool) -> None:
    stream = ScriptedResponse(steps=[*text_response("x").steps[:2], sse_event(error)])
    model = ScriptedModel([stream, text_response("ok")])
    async with scripted_client(model) as client:
        if transient:
            events = await collect(client)
            assert "server_error" in retries(events)[0].reason
            assert isinstance(events[-1], Completed)
        else:
            _, failure = await collect_failure(client)
            assert (failure.code, failure.server_code) == (
                "response_failed",
                "context_length_exceeded",
            )


async def test_response_incomplete() -> None:
    model = ScriptedModel([incomplete_response("max_output_tokens", text="partial")])
    async with scripted_client(model) as client:
        events, error = await collect_failure(client)
    assert any(isinstance(event, OutputTextDelta) for event in events)
    assert error.code == "incomplete"
    assert "max_output_tokens" in error.message


async def test_unsupported_url_fails_at_once() -> None:
    async with ModelClient(base_url="ftp://example.test", retry=FAST) as client:
        _, error = await collect_failure(client)
    assert error.code == "transport_error"


def test_model_error_survives_pickling() -> None:
    error = ModelError("boom", code="incomplete", status=None, server_code="max_output_tokens")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.code, copy.status, copy.server_code) == (
        "boom",
        "incomplete",
        None,
        "max_output_tokens",
    )


# --- cancellation ----------------------------------------------------------------------


async def test_cancelling_the_consumer_closes_the_response() -> None:
    model = ScriptedModel([idle(text_response("never finishes"), keep=5)])
    responses: list[httpx.Response] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        response = await model.handler(request)
        responses.append(response)
        return response

    started = asyncio.Event()

    async def consume(client: ModelClient) -> None:
        async for event in client.stream(REQUEST):
            if isinstance(event, OutputTextDelta):
                started.set()

    async with ModelClient(transport=httpx.MockTransport(handler)) as client:
        task = asyncio.create_task(consume(client))
        with anyio.fail_after(5):
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert responses[0].is_closed


@pytest.fixture
async def server() -> AsyncIterator[ScriptedResponsesServer]:
    model = ScriptedModel([idle(text_response("never finishes"), keep=5), text_response("next")])
    async with ScriptedResponsesServer(model) as running:
        yield running


async def test_cancelling_mid_stream_releases_the_connection(
    server: ScriptedResponsesServer,
) -> None:
    started = asyncio.Event()

    async def consume(client: ModelClient) -> None:
        async for event in client.stream(REQUEST):
            if isinstance(event, OutputTextDelta):
                started.set()

    async with ModelClient(base_url=server.base_url) as client:
        task = asyncio.create_task(consume(client))
        with anyio.fail_after(5):
            await started.wait()
        assert server.open_connections == 1
        task.cancel()
        with anyio.fail_after(5):
            with pytest.raises(asyncio.CancelledError):
                await task
            await server.wait_disconnected()
        # The client is still usable after the interrupt.
        events = await collect(client)
        assert isinstance(events[-1], Completed)


async def test_closing_a_half_consumed_stream_releases_the_connection(
    server: ScriptedResponsesServer,
) -> None:
    async with ModelClient(base_url=server.base_url) as client:
        stream = client.stream(REQUEST)
        with anyio.fail_after(5):
            assert isinstance(await anext(stream), ResponseCreated)
            assert isinstance(await anext(stream), OutputItemAdded)
        assert server.open_connections == 1
        await stream.aclose()
        with anyio.fail_after(5):
            await server.wait_disconnected()


async def test_hang_step_holds_until_the_client_leaves() -> None:
    model = ScriptedModel([ScriptedResponse(steps=[Hang()])])
    async with (
        ScriptedResponsesServer(model) as running,
        ModelClient(
            base_url=running.base_url, stream_idle_timeout=0.1, retry=RetryPolicy(max_attempts=1)
        ) as client,
    ):
        _, error = await collect_failure(client)
        assert "idle" in error.message
        with anyio.fail_after(5):
            await running.wait_disconnected()


# --- policy details --------------------------------------------------------------------


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_stays_in_bounds() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=100.0, jitter=0.25)
    delays = [policy.delay(1) for _ in range(200)]
    assert all(0.75 <= delay <= 1.25 for delay in delays)
    assert len(set(delays)) > 1


def test_retry_after_wins_and_is_capped() -> None:
    policy = RetryPolicy(max_retry_after=5.0)
    assert policy.delay(1, retry_after=2.5) == 2.5
    assert policy.delay(1, retry_after=500.0) == 5.0


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=2.0)


def test_parse_retry_after() -> None:
    now = datetime(2015, 10, 21, 7, 27, 58, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=now) == 2.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:20:00 GMT", now=now) == 0.0
    assert parse_retry_after("-1") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None


def test_retry_after_from_message() -> None:
    assert retry_after_from_message("Please try again in 1.5s.") == 1.5
    assert retry_after_from_message("Please try again in 250ms") == 0.25
    assert retry_after_from_message("Try again in 2 seconds") == 2.0
    assert retry_after_from_message("no hint") is None


# --- TLS: verified wherever it can happen ---------------------------------------------


async def _untrusted_tls_server() -> asyncio.Server:
    """A TLS server whose certificate no CA bundle trusts; it answers nothing."""
    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # reached only by a client that skipped verification
        writer.close()

    return await asyncio.start_server(hold, "127.0.0.1", 0, ssl=context)


async def _first_failure(client: ModelClient) -> ModelError:
    async with client:
        _, error = await collect_failure(client)
    return error


async def test_an_untrusted_https_server_is_refused() -> None:
    server = await _untrusted_tls_server()
    port = server.sockets[0].getsockname()[1]
    async with server:
        client = ModelClient(
            base_url=f"https://127.0.0.1:{port}/v1", retry=RetryPolicy(max_attempts=1)
        )
        error = await _first_failure(client)
    assert "CERTIFICATE_VERIFY_FAILED" in error.message


@pytest.mark.parametrize("scheme", ["https", "HTTPS"])
async def test_the_engine_pool_verifies_https_in_any_case(scheme: str) -> None:
    server = await _untrusted_tls_server()
    port = server.sockets[0].getsockname()[1]
    pool = ModelClientPool(EngineConfig(max_attempts=1))
    async with server:
        client = pool.get(f"{scheme}://127.0.0.1:{port}/v1")
        error = await _first_failure(client)
    assert "CERTIFICATE_VERIFY_FAILED" in error.message


async def test_the_engine_pool_trusts_the_ca_named_by_ssl_cert_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import trustme

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    async with ScriptedResponsesServer(ScriptedModel([text_response("trusted")])) as model:
        # The scripted server speaks plain HTTP; a TLS front on another port relays to it.
        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", model.port)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

        front = await asyncio.start_server(relay, "127.0.0.1", 0, ssl=server_context)
        port = front.sockets[0].getsockname()[1]
        pool = ModelClientPool(EngineConfig(max_attempts=1))
        async with front:
            events = await collect(pool.get(f"https://127.0.0.1:{port}/v1"))
            await pool.aclose()
    assert isinstance(events[-1], Completed)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def test_a_plain_http_url_through_an_https_proxy_still_verifies_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The engine's client pool gives a plain-HTTP client verify=False (no CA bundle
    # to load); a TLS proxy from the environment is still verified, with httpx's
    # own context for proxies.
    server = await _untrusted_tls_server()
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"https://127.0.0.1:{port}")
    async with server:
        client = ModelClient(
            base_url="http://model.invalid/v1", retry=RetryPolicy(max_attempts=1), verify=False
        )
        error = await _first_failure(client)
    assert "CERTIFICATE_VERIFY_FAILED" in error.message
