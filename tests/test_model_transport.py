"""The model client's HTTP/1.1 transport, against raw servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from codexcore.engine import EngineConfig, ModelClientPool
from codexcore.model import Completed, ModelClient, RetryPolicy, RetryScheduled
from codexcore.model._client import lean_transport
from codexcore.model._transport import H11Transport
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

pytestmark = pytest.mark.anyio

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


class RawServer:
    """Reads each request head and body, then answers with ``reply``; counts connections."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.bodies: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await self._request(reader):
                await self.reply(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _request(self, reader: asyncio.StreamReader) -> bool:
        head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
        if not head:
            return False
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        self.bodies.append(await reader.readexactly(length))
        return True


@asynccontextmanager
async def serving(
    reply: Reply, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[str, RawServer]]:
    raw = RawServer(reply)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}", raw


def answer(data: bytes) -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()

    return reply


# A short read timeout, but room to connect: a loaded machine may take longer
# than 0.2 s to accept, which is not what these tests are about.
READ_ONLY_0_2 = httpx.Timeout(0.2, connect=10.0)


async def get(client: httpx.AsyncClient, url: str) -> bytes:
    async with client.stream("POST", url, content=b"{}") as response:
        return b"".join([chunk async for chunk in response.aiter_raw()])


def client(**kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=H11Transport(**kwargs))  # type: ignore[arg-type]


async def test_a_kept_alive_connection_serves_the_next_request() -> None:
    async with serving(answer(OK)) as (url, raw), client() as http:
        assert [await get(http, url) for _ in range(3)] == [b"ok"] * 3
    assert raw.connections == 1
    assert raw.bodies == [b"{}"] * 3


async def test_chunked_and_read_to_close_bodies_arrive_whole() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    to_close = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end"

    async def then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer(to_close)(reader, writer)
        writer.close()

    async with client() as http:
        async with serving(answer(chunked)) as (url, _):
            assert await get(http, url) == b"abcde"
        async with serving(then_close) as (url, raw):
            assert await get(http, url) == b"until the end"
            assert await get(http, url) == b"until the end"
    assert raw.connections == 2  # "connection: close" is honoured


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def once(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(OK)
        await writer.drain()
        writer.close()  # no "connection: close" header: the client only sees the EOF

    async with serving(once) as (url, raw), client() as http:
        assert await get(http, url) == b"ok"
        await asyncio.sleep(0.05)
        assert await get(http, url) == b"ok"
    assert raw.connections == 2


async def test_a_connection_idle_past_the_keepalive_expiry_is_replaced() -> None:
    async with serving(answer(OK)) as (url, raw), client(keepalive_expiry=0.05) as http:
        assert await get(http, url) == b"ok"
        assert await get(http, url) == b"ok"  # at once: the same connection
        await asyncio.sleep(0.1)
        assert await get(http, url) == b"ok"
    assert raw.connections == 2


async def test_idle_connections_beyond_the_limit_are_closed_oldest_first() -> None:
    async with (
        serving(answer(OK)) as (first, first_raw),
        serving(answer(OK)) as (second, second_raw),
        client(max_idle=1) as http,
    ):
        assert await get(http, first) == b"ok"
        assert await get(http, second) == b"ok"  # keeping this one closes the first's
        assert await get(http, second) == b"ok"
        assert await get(http, first) == b"ok"
    assert (first_raw.connections, second_raw.connections) == (2, 1)


async def test_a_body_cut_short_is_a_protocol_error() -> None:
    short = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this"

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer(short)(reader, writer)
        writer.close()

    async with serving(cut) as (url, _), client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await get(http, url)


async def test_a_silent_server_trips_the_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers

    impatient = httpx.AsyncClient(transport=H11Transport(), timeout=READ_ONLY_0_2)
    async with serving(silent) as (url, _), impatient as http:
        started = asyncio.get_running_loop().time()
        with pytest.raises(httpx.ReadTimeout):
            await get(http, url)
        assert asyncio.get_running_loop().time() - started < 2


async def test_a_stream_that_stalls_midway_trips_the_read_timeout() -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await writer.drain()
        await reader.read()

    impatient = httpx.AsyncClient(transport=H11Transport(), timeout=READ_ONLY_0_2)
    async with serving(stall) as (url, _), impatient as http:
        with pytest.raises(httpx.ReadTimeout):
            await get(http, url)


async def test_no_server_is_a_connect_error() -> None:
    async with serving(answer(OK)) as (url, _):
        pass  # closed: nothing listens there now
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await get(http, url)


async def test_requests_beyond_the_limit_wait_for_a_slot_or_the_pool_timeout() -> None:
    release = asyncio.Event()

    async def held(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()
        await answer(OK)(_, writer)

    async with serving(held) as (url, raw):
        transport = H11Transport(max_connections=1)
        async with httpx.AsyncClient(
            transport=transport, timeout=httpx.Timeout(5, pool=0.1)
        ) as http:
            first = asyncio.create_task(get(http, url))
            await asyncio.sleep(0.05)
            with pytest.raises(httpx.PoolTimeout):
                await get(http, url)
            release.set()
            assert await first == b"ok"
            assert await get(http, url) == b"ok"  # the slot came back
    assert raw.connections == 1


async def test_a_response_abandoned_midway_closes_its_connection() -> None:
    endless = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + b"5\r\nchunk\r\n" * 1000

    async def mixed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer(endless if len(raw.bodies) == 1 else OK)(reader, writer)

    async with serving(mixed) as (url, raw), client() as http:
        async with http.stream("POST", url, content=b"{}") as response:
            async for _ in response.aiter_raw():
                break  # leave early: the rest of the body is still on the wire
        assert await get(http, url) == b"ok"
    assert raw.connections == 2  # a half-read connection is never reused


async def test_a_response_still_streaming_when_the_transport_closes_closes_its_connection() -> None:
    closed = asyncio.Event()

    async def watch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer(OK)(reader, writer)
        await reader.read()  # returns at the client's EOF
        closed.set()

    async with serving(watch) as (url, _):
        transport = H11Transport()
        http = httpx.AsyncClient(transport=transport)
        async with http.stream("POST", url, content=b"{}") as response:
            await transport.aclose()
            assert await response.aread() == b"ok"  # read whole: reusable, but not kept
        await asyncio.wait_for(closed.wait(), 5)
        await http.aclose()


async def test_a_large_request_body_is_sent_whole() -> None:
    body = bytes(range(256)) * 8192  # 2 MiB
    async with (
        serving(answer(OK)) as (url, raw),
        client() as http,
        http.stream("POST", url, content=body) as response,
    ):
        await response.aread()
    assert raw.bodies == [body]


async def test_tls_with_a_trusted_certificate() -> None:
    import trustme

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    async with (
        serving(answer(OK), tls=server_context) as (url, raw),
        client(verify=client_context) as http,
    ):
        assert await get(http, url) == b"ok"
        assert await get(http, url) == b"ok"
    assert raw.connections == 1


async def test_the_model_client_retries_over_it_and_completes() -> None:
    model = ScriptedModel([text_response("ok")])
    calls = 0

    async def flaky(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            writer.close()  # the first attempt: dropped before any answer
            return
        response = model.respond({"input": []})
        stream = b"".join(step for step in response.steps if isinstance(step, bytes))
        head = f"HTTP/1.1 200 OK\r\ncontent-length: {len(stream)}\r\n\r\n".encode()
        await answer(head + stream)(reader, writer)

    async with serving(flaky) as (url, _):
        policy = RetryPolicy(max_attempts=3, base_delay=0.01)
        async with ModelClient(
            base_url=url, api_key="k", retry=policy, transport=H11Transport()
        ) as model_client:
            events = [event async for event in model_client.stream({"model": "m", "input": []})]
    assert sum(isinstance(event, RetryScheduled) for event in events) == 1
    assert isinstance(events[-1], Completed)


def test_a_model_request_loads_neither_httpcore_nor_anyio() -> None:
    # What the transport is for: a one-shot process pays for neither.
    script = """
import asyncio, sys
from codexcore.engine import EngineConfig, ModelClientPool
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

async def main():
    async with ScriptedResponsesServer(ScriptedModel([text_response("hi")])) as server:
        pool = ModelClientPool(EngineConfig(api_key="k", lean_transport=True))
        async with pool.get(server.base_url) as client:
            events = [e async for e in client.stream({"model": "m", "input": []})]
    assert type(events[-1]).__name__ == "Completed", events
    print(sorted(m for m in ("httpcore", "anyio") if m in sys.modules))

asyncio.run(main())
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}  # no proxy variables
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_a_proxy_variable_hands_the_requests_to_httpx_own_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = ScriptedModel([text_response("via the proxy")])
    async with ScriptedResponsesServer(model) as proxy:
        # A plain-http proxy gets the absolute URL; the scripted server answers any path
        # ending in /responses, so it stands in for the proxy and the model at once.
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        assert lean_transport() is None
        pool = ModelClientPool(EngineConfig(api_key="k", lean_transport=True))
        async with pool.get("http://model.invalid/v1") as client:
            events = [event async for event in client.stream({"model": "m", "input": []})]
    assert isinstance(events[-1], Completed)
    assert len(model.requests) == 1
