"""The model client as httpx users test it: respx's modes, loaded bodies, their own AsyncClient."""

from __future__ import annotations

import asyncio
import gzip
import ssl
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import respx

from codexcore import Codex
from codexcore.engine import EngineConfig, ModelClientPool
from codexcore.model import (
    Completed,
    ModelClient,
    OutputTextDelta,
    RetryPolicy,
    RetryScheduled,
    StreamEvent,
)
from codexcore.protocol import AgentMessage, ErrorEvent, TaskComplete, TextInput, UserInput
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    http_error,
    idle,
    text_response,
)

from .engine_helpers import Recorder, engine_config

pytestmark = pytest.mark.anyio

REQUEST: Mapping[str, Any] = {"model": "gpt-test", "input": "hi"}
FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01, max_retry_after=0.05, jitter=0)
SSE = {"content-type": "text/event-stream"}
ANSWER = "streamed or loaded"
BODY = b"".join(s for s in text_response(ANSWER, chunks=4).steps if isinstance(s, bytes))


async def collect(client: ModelClient) -> list[StreamEvent]:
    async with aclosing(client.stream(REQUEST)) as events:
        return [event async for event in events]


def answer_of(events: list[StreamEvent]) -> str:
    assert isinstance(events[-1], Completed), events
    return "".join(e.delta for e in events if isinstance(e, OutputTextDelta))


class Listener:
    """A real socket on 127.0.0.1 that records each request head and answers ``reply``.

    It stands for "the network": a test that must stay in the process checks
    that ``heads`` stays empty.
    """

    def __init__(self, reply: bytes = b"") -> None:
        self.reply = reply
        self.heads: list[bytes] = []
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.heads.append(head)
                length = next((int(v) for k, _, v in _fields(head) if k == b"content-length"), 0)
                await reader.readexactly(length)
                writer.write(self.reply)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def header(self, index: int, name: str) -> str | None:
        found = [v for k, _, v in _fields(self.heads[index]) if k == name.lower().encode()]
        return found[0].strip().decode() if found else None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _fields(head: bytes) -> Generator[tuple[bytes, bytes, bytes], None, None]:
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            yield name.strip().lower(), sep, value


@asynccontextmanager
async def listening(reply: bytes = b"") -> AsyncIterator[Listener]:
    listener = Listener(reply)
    server = await asyncio.start_server(listener.handle, "127.0.0.1", 0)
    listener.port = server.sockets[0].getsockname()[1]
    async with server:
        yield listener


SSE_REPLY = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    + f"content-length: {len(BODY)}\r\n\r\n".encode()
    + BODY
)


# --- item 15: any valid httpx.Response, streamed or loaded ------------------------------


async def _chunks() -> AsyncIterator[bytes]:
    for line in BODY.splitlines(keepends=True):
        yield line


# Each way an httpx user builds a reply; the loaded ones are read when made.
RESPONSES: dict[str, Callable[[], dict[str, Any]]] = {
    "loaded bytes": lambda: {"headers": SSE, "content": BODY},
    "loaded text": lambda: {"headers": SSE, "text": BODY.decode()},
    "loaded gzip": lambda: {
        "headers": {**SSE, "content-encoding": "gzip"},
        "content": gzip.compress(BODY),
    },
    "streamed iterator": lambda: {"headers": SSE, "content": _chunks()},
    "streamed ByteStream": lambda: {"headers": SSE, "stream": httpx.ByteStream(BODY)},
}


@pytest.mark.parametrize("kind", RESPONSES)
@pytest.mark.parametrize("using", ["httpcore", "httpx"])
async def test_respx_replies_of_every_kind_decode(using: str, kind: str) -> None:
    # "httpcore" is respx's default mode.
    async with listening() as net:
        with respx.mock(using=using, assert_all_called=True) as router:
            router.post(f"{net.base_url}/responses").respond(200, **RESPONSES[kind]())
            async with ModelClient(base_url=net.base_url, retry=FAST) as client:
                events = await collect(client)
    assert answer_of(events) == ANSWER
    assert not any(isinstance(e, RetryScheduled) for e in events)
    assert net.heads == []


@pytest.mark.parametrize("kind", RESPONSES)
async def test_mock_transport_replies_of_every_kind_decode(kind: str) -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, **RESPONSES[kind]()))
    async with ModelClient(transport=transport, retry=FAST) as client:
        events = await collect(client)
    assert answer_of(events) == ANSWER
    assert not any(isinstance(e, RetryScheduled) for e in events)


async def test_a_loaded_body_cut_short_is_still_retried() -> None:
    # A loaded body takes the same path as a streamed one: no completion, a retry.
    cut = BODY[: BODY.index(b"response.completed")]
    bodies = [cut, BODY]

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, content=bodies.pop(0))

    async with ModelClient(transport=httpx.MockTransport(handler), retry=FAST) as client:
        events = await collect(client)
    assert [e.reason for e in events if isinstance(e, RetryScheduled)] == [
        "stream closed before response.completed"
    ]
    assert answer_of(events) == ANSWER * 2  # the cut attempt's deltas, then the whole reply


# --- item 14: respx's default mode sees the library's requests -------------------------


def _say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


@respx.mock  # a user's test, as respx's docs write it: the default mode, the global router
async def test_respx_default_mode_answers_an_engine_task(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("mocked, not sent")])
    async with listening(SSE_REPLY) as net:
        route = respx.post(f"{net.base_url}/responses").mock(side_effect=model.handler)
        config = attrs.evolve(engine_config(tmp_path, base_url=net.base_url), api_key="sk-real")
        async with Codex(config) as codex:
            ui = Recorder(codex)
            await ui.submit(_say("hi"), id="t1")
            done = await ui.until(TaskComplete, id="t1")
    assert done.msg.last_agent_message == "mocked, not sent"
    assert ui.of(AgentMessage)[-1].message == "mocked, not sent"
    assert route.call_count == 1
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-real"
    assert net.heads == []  # the key never left the process


async def test_respx_default_mode_refuses_an_unrouted_request_before_the_network() -> None:
    # The negative control: with no route, respx refuses, and the socket sees nothing.
    async with listening(SSE_REPLY) as net:
        with respx.mock(assert_all_called=False) as router:
            router.get("https://example.invalid/")  # some other route
            async with ModelClient(base_url=net.base_url, api_key="sk-real") as client:
                with pytest.raises(respx.models.AllMockedAssertionError):
                    await collect(client)
        assert net.heads == []
        # Outside the mock, the same client does reach the socket: the control can fail.
        async with ModelClient(base_url=net.base_url, api_key="sk-real") as client:
            assert answer_of(await collect(client)) == ANSWER
        assert len(net.heads) == 1


async def test_respx_default_mode_refuses_for_a_task_and_nothing_leaves(tmp_path: Path) -> None:
    async with listening(SSE_REPLY) as net:
        config = EngineConfig(session=engine_config(tmp_path, base_url=net.base_url).session)
        with respx.mock(assert_all_called=False):
            async with Codex(config) as codex:
                ui = Recorder(codex)
                await ui.submit(_say("hi"), id="t1")
                failed = await ui.until(ErrorEvent, id="t1")
    assert "not mocked" in failed.msg.message.lower()
    assert net.heads == []


# --- item 16: the user's own httpx.AsyncClient -------------------------------------------


class ApiKeyAuth(httpx.Auth):
    """A gateway's own credentials: not an Authorization header."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["x-api-key"] = "gateway-key"
        yield request


async def test_an_engine_sends_over_the_users_client_as_it_is(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []
    statuses: list[int] = []

    async def on_request(request: httpx.Request) -> None:
        seen.append(request)

    async def on_response(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    async with listening(SSE_REPLY) as net:
        config = EngineConfig(
            session=engine_config(tmp_path, base_url=net.base_url).session, api_key="sk-ours"
        )
        user_client = httpx.AsyncClient(
            headers={"X-Custom": "mine"},
            event_hooks={"request": [on_request], "response": [on_response]},
            limits=httpx.Limits(max_connections=1),
        )
        async with user_client, Codex(config, http_client=user_client) as codex:
            ui = Recorder(codex)
            await ui.submit(_say("hi"), id="t1")
            await ui.until(TaskComplete, id="t1")
            await codex.aclose()
            assert not user_client.is_closed  # its owner closes it
            response = await user_client.get(f"{net.base_url}/other")  # and it still works
            assert response.status_code == 200
    assert str(seen[0].url) == f"{net.base_url}/responses"
    assert statuses[0] == 200
    assert net.header(0, "x-custom") == "mine"
    assert net.header(0, "authorization") == "Bearer sk-ours"
    assert net.header(0, "accept") == "text/event-stream"


@pytest.mark.parametrize(
    ("options", "authorization", "api_key_header"),
    [
        ({}, "Bearer sk-ours", None),
        ({"headers": {"Authorization": "Bearer gateway"}}, "Bearer gateway", None),
        ({"auth": ApiKeyAuth()}, None, "gateway-key"),
        ({"auth": httpx.BasicAuth("user", "pw")}, "Basic dXNlcjpwdw==", None),
    ],
    ids=["no credentials", "authorization header", "custom auth", "basic auth"],
)
async def test_the_users_credentials_win_and_the_key_is_not_sent_beside_them(
    options: dict[str, Any], authorization: str | None, api_key_header: str | None
) -> None:
    async with (
        listening(SSE_REPLY) as net,
        httpx.AsyncClient(**options) as user_client,
        ModelClient(base_url=net.base_url, api_key="sk-ours", http_client=user_client) as client,
    ):
        assert answer_of(await collect(client)) == ANSWER
    assert net.header(0, "authorization") == authorization
    assert net.header(0, "x-api-key") == api_key_header


async def test_the_users_transport_and_base_url() -> None:
    seen: list[httpx.Request] = []
    model = ScriptedModel([text_response(ANSWER)])

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return await model.handler(request)

    user_client = httpx.AsyncClient(
        transport=httpx.MockTransport(handler), base_url="http://elsewhere.invalid/api"
    )
    async with (
        user_client,
        ModelClient(base_url="https://gateway.test/v1", http_client=user_client) as client,
    ):
        assert answer_of(await collect(client)) == ANSWER
    assert str(seen[0].url) == "https://gateway.test/v1/responses"


@pytest.mark.parametrize(
    ("theirs", "read"), [(None, 7.0), (httpx.Timeout(42.0), 42.0)], ids=["httpx default", "set"]
)
async def test_the_users_timeout_applies_unless_it_is_httpx_default(
    theirs: httpx.Timeout | None, read: float
) -> None:
    seen: list[httpx.Request] = []
    model = ScriptedModel([text_response(ANSWER)])

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return await model.handler(request)

    options: dict[str, Any] = {} if theirs is None else {"timeout": theirs}
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(handler), **options) as user_client,
        ModelClient(stream_idle_timeout=7.0, http_client=user_client) as client,
    ):
        await collect(client)
    assert seen[0].extensions["timeout"]["read"] == read


async def test_a_proxy_on_the_users_client_carries_the_requests() -> None:
    model = ScriptedModel([text_response("via the user's proxy")])
    # A plain-http proxy gets the absolute URL; the scripted server answers any path
    # ending in /responses, so it stands in for the proxy and the model at once.
    async with (
        ScriptedResponsesServer(model) as proxy,
        httpx.AsyncClient(proxy=f"http://127.0.0.1:{proxy.port}") as user_client,
        ModelClient(base_url="http://model.invalid/v1", http_client=user_client) as client,
    ):
        assert answer_of(await collect(client)) == "via the user's proxy"
    assert len(model.requests) == 1


async def test_a_pool_shares_the_users_client_and_leaves_it_open() -> None:
    async with listening(SSE_REPLY) as net, httpx.AsyncClient() as user_client:
        pool = ModelClientPool(EngineConfig(), http_client=user_client)
        answers = [answer_of(await collect(pool.get(net.base_url))) for _ in range(2)]
        answers.append(
            answer_of(await collect(pool.get(net.base_url.replace("127.0.0.1", "localhost"))))
        )
        await pool.aclose()
        assert not user_client.is_closed
        assert answers == [ANSWER] * 3


async def test_http_client_excludes_transport_and_verify() -> None:
    unused = httpx.MockTransport(lambda _: httpx.Response(500))
    async with httpx.AsyncClient() as user_client:
        with pytest.raises(ValueError, match="http_client"):
            ModelClient(http_client=user_client, transport=unused)
        with pytest.raises(ValueError, match="http_client"):
            ModelClient(http_client=user_client, verify=False)
        with pytest.raises(ValueError, match="not both"):
            ModelClientPool(http_client=user_client, transport=unused)


# --- the engine's clients keep httpx's behaviours -------------------------------------


def _pool(**config: Any) -> ModelClientPool:
    return ModelClientPool(EngineConfig(**config))


async def test_every_client_sends_over_httpx_own_transport() -> None:
    async with ModelClientPool().get("http://127.0.0.1:9/v1") as client:
        assert type(client._http._transport) is httpx.AsyncHTTPTransport


async def test_a_proxy_variable_carries_the_default_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = ScriptedModel([text_response("via the proxy")])
    async with ScriptedResponsesServer(model) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        pool = _pool(api_key="k")
        events = await collect(pool.get("http://model.invalid/v1"))
        await pool.aclose()
    assert answer_of(events) == "via the proxy"
    assert len(model.requests) == 1


@pytest.mark.parametrize("made_by", ["ModelClient", "pool"])
async def test_ssl_cert_file_is_trusted_on_the_default_path(
    made_by: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import trustme

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    tls = await asyncio.start_server(_answer_once, "127.0.0.1", 0, ssl=server_context)
    url = f"https://127.0.0.1:{tls.sockets[0].getsockname()[1]}/v1"
    async with tls:
        client = ModelClient(base_url=url) if made_by == "ModelClient" else _pool().get(url)
        async with client:
            assert answer_of(await collect(client)) == ANSWER


async def _answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    listener = Listener(SSE_REPLY)
    await listener.handle(reader, writer)


async def test_idle_watchdog_retries_and_retry_after_over_a_real_socket() -> None:
    model = ScriptedModel(
        [
            idle(text_response("stalls"), keep=2),
            http_error(429, headers={"Retry-After": "0.02"}),
            text_response("recovered"),
        ]
    )
    async with ScriptedResponsesServer(model) as server:
        config = {"max_attempts": 3, "retry_base_delay": 0.001, "stream_idle_timeout": 0.2}
        pool = _pool(**config)
        events = await asyncio.wait_for(collect(pool.get(server.base_url)), 20)
        await pool.aclose()
    reasons = [e.reason for e in events if isinstance(e, RetryScheduled)]
    delays = [e.delay for e in events if isinstance(e, RetryScheduled)]
    assert reasons[0].startswith("stream idle"), reasons
    assert "HTTP 429" in reasons[1], reasons
    assert delays[1] == pytest.approx(0.02)
    assert answer_of(events).endswith("recovered")


async def test_a_gzip_stream_over_a_real_socket() -> None:
    packed = gzip.compress(BODY)
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
        + f"content-length: {len(packed)}\r\n\r\n".encode()
        + packed
    )
    async with listening(reply) as net:
        pool = _pool()
        events = await collect(pool.get(net.base_url))
        await pool.aclose()
    assert answer_of(events) == ANSWER
