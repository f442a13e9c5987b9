"""Servers that misbehave the way real ones do, over real sockets on 127.0.0.1.

The server is written by hand on asyncio streams so it can do what a
well-behaved test server never does: close a kept-alive connection without
saying so, answer 501 with a large HTML page, or accept a request and never
answer it. The CLI tests run ``codexcore exec`` as a user does.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from pathlib import Path

import pytest

from codexcore.model import Completed, ModelClient, ModelError, RetryPolicy, RetryScheduled
from codexcore.testing import ScriptedModel, function_call_response, text_response

pytestmark = pytest.mark.anyio

Writer = asyncio.StreamWriter
Reply = Callable[["RawServer", bytes, Writer], Awaitable[bool]]
"""Answers one request (its body); False closes the connection afterwards, silently."""


class RawServer:
    """HTTP/1.1 by hand: reads each request, lets ``reply`` answer it, counts connections."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.requests = 0
        self.received = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self.connections += 1
        try:
            while (body := await _read_request(reader)) is not None:
                self.requests += 1
                self.received.set()
                if not await self.reply(self, body, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed the connection between requests
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return await reader.readexactly(length)


@asynccontextmanager
async def serving(reply: Reply) -> AsyncIterator[tuple[str, RawServer]]:
    raw = RawServer(reply)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", raw


def http_reply(status: str, body: bytes, content_type: str, **headers: str) -> bytes:
    extra = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
    head = f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{extra}"
    return f"{head}content-length: {len(body)}\r\n\r\n".encode() + body


def scripted(model: ScriptedModel, *, keep_alive: bool) -> Reply:
    """The scripted model's answers, each closing the connection afterwards unless
    ``keep_alive`` (without ``Connection: close``: the client learns it from the EOF)."""

    async def reply(_: RawServer, body: bytes, writer: Writer) -> bool:
        import orjson

        answer = model.respond(orjson.loads(body))
        stream = b"".join(step for step in answer.steps if isinstance(step, bytes))
        writer.write(http_reply(f"{answer.status} OK", stream, "text/event-stream"))
        await writer.drain()
        return keep_alive

    return reply


def statuses(*replies: bytes, then: ScriptedModel | None = None) -> Reply:
    """``replies`` in order on a kept-alive connection, then the scripted model's answers."""
    pending = list(replies)

    async def reply(server: RawServer, body: bytes, writer: Writer) -> bool:
        if pending:
            writer.write(pending.pop(0))
            await writer.drain()
            return True
        assert then is not None, "more requests than the test scripted"
        return await scripted(then, keep_alive=True)(server, body, writer)

    return reply


async def never_answer(_: RawServer, __: bytes, writer: Writer) -> bool:
    await asyncio.Event().wait()  # until the client hangs up (the handler is cancelled)
    return False


REQUEST = {"model": "gpt-test", "input": "hi"}


async def failure(client: ModelClient) -> ModelError:
    """The error the client's stream ends in."""
    with pytest.raises(ModelError) as caught:
        async with aclosing(client.stream(REQUEST)) as events:
            [event async for event in events]
    return caught.value


FIVE = RetryPolicy(max_attempts=5, base_delay=0.01, jitter=0)


async def run_exec(
    tmp_path: Path, base_url: str, config: str, *prompt: str
) -> tuple[int, str, str]:
    """``codexcore exec`` against ``base_url`` (from $OPENAI_BASE_URL) with ``config``."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(config)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CODEXCORE_HOME": str(home)}
    env |= {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "k"}  # no proxy variables
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codexcore",
        "exec",
        "--ephemeral",
        "--approval-policy",
        "never",
        *prompt,
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 45)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


# --- item 7: a connection the server closed is not reused ---------------------------------


async def test_back_to_back_turns_over_connections_the_server_closes_need_no_retry(
    tmp_path: Path,
) -> None:
    # A call of a tool that does not exist is answered at once, so the second Turn's
    # request follows the first response immediately, as back-to-back Turns do.
    model = ScriptedModel([function_call_response("no_such_tool", {}), text_response("second")])
    async with serving(scripted(model, keep_alive=False)) as (url, raw):
        code, out, err = await run_exec(tmp_path, url, "[provider]\nmax_attempts = 1\n", "go")
    assert code == 0, err[-2000:]
    assert "second" in out
    assert "retrying" not in out + err
    assert (raw.requests, raw.connections) == (2, 2)


async def test_a_client_never_resends_on_a_connection_closed_after_the_answer() -> None:
    answers = ScriptedModel([text_response(f"answer {n}") for n in range(5)])
    async with (
        serving(scripted(answers, keep_alive=False)) as (url, raw),
        ModelClient(base_url=url, retry=RetryPolicy(max_attempts=1)) as client,
    ):
        for _ in range(5):
            async with aclosing(client.stream(REQUEST)) as events:
                seen = [event async for event in events]
            assert isinstance(seen[-1], Completed)
    assert (raw.requests, raw.connections) == (5, 5)


# --- item 8: what is retried, and what an error shows ---------------------------------------

HTML = b"<html><head><title>501 Not Implemented</title></head><body>" + b"<p>x</p>\n" * 5000


async def test_a_501_html_page_is_asked_once_and_shown_in_one_short_line() -> None:
    page = http_reply("501 Not Implemented", HTML + b"</body></html>", "text/html")
    async with (
        serving(statuses(page)) as (url, raw),
        ModelClient(base_url=url, retry=FIVE) as client,
    ):
        with pytest.raises(ModelError) as caught:
            async with aclosing(client.stream(REQUEST)) as events:
                [event async for event in events]
    assert raw.requests == 1
    message = caught.value.message
    assert "\n" not in message
    assert len(message) < 240, message
    assert message.startswith("HTTP 501: 501 Not Implemented (POST "), message
    assert "<p>" not in message


@pytest.mark.parametrize("status", ["429 Too Many Requests", "503 Service Unavailable"])
async def test_a_rate_limit_or_an_unavailable_server_is_retried(status: str) -> None:
    busy = http_reply(status, b'{"error": {"message": "busy"}}', "application/json")
    model = ScriptedModel([text_response("after the wait")])
    async with (
        serving(statuses(busy, then=model)) as (url, raw),
        ModelClient(base_url=url, retry=FIVE) as client,
        aclosing(client.stream(REQUEST)) as events,
    ):
        seen = [event async for event in events]
    retries = [event for event in seen if isinstance(event, RetryScheduled)]
    assert len(retries) == 1
    assert status.split()[0] in retries[0].reason
    assert isinstance(seen[-1], Completed)
    assert raw.requests == 2


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("400 Bad Request", "bad_request"),
        ("401 Unauthorized", "unauthorized"),
        ("403 Forbidden", "forbidden"),
        ("404 Not Found", "not_found"),
    ],
)
async def test_a_refusal_names_the_url_and_where_it_came_from(
    status: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = http_reply(status, b"<html>" + b"refused " * 500 + b"</html>", "text/html")
    async with serving(statuses(refusal)) as (url, raw):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        async with ModelClient(retry=FIVE) as client:
            with pytest.raises(ModelError) as caught:
                async with aclosing(client.stream(REQUEST)) as events:
                    [event async for event in events]
    assert raw.requests == 1
    assert caught.value.code == code
    message = caught.value.message
    assert f"POST {url}/responses" in message
    assert "$OPENAI_BASE_URL" in message
    assert "\n" not in message
    assert len(message) < 400, message


async def test_exec_names_the_url_and_its_origin_for_a_404(tmp_path: Path) -> None:
    missing = http_reply("404 Not Found", b"<html><h1>Not Found</h1></html>", "text/html")
    async with serving(statuses(missing)) as (url, raw):
        code, _, err = await run_exec(tmp_path, url, "", "hi")
    assert code == 1
    assert raw.requests == 1
    assert f"POST {url}/responses (provider.base_url from $OPENAI_BASE_URL)" in err, err


# --- item 9: a server that never sends the response headers ---------------------------------


async def test_a_server_that_never_answers_times_out_on_the_headers_and_exec_shows_it(
    tmp_path: Path,
) -> None:
    config = "[provider]\nmax_attempts = 2\nretry_base_delay = 0.01\nresponse_header_timeout = 1\n"
    async with serving(never_answer) as (url, raw):
        started = asyncio.get_running_loop().time()
        code, out, err = await run_exec(tmp_path, url, config, "hi")
        elapsed = asyncio.get_running_loop().time() - started
    assert code == 1
    assert raw.requests == 2
    shown = out + err
    assert "retrying (1/2): no response headers within 1 s" in shown, shown
    assert f"POST {url}/responses" in shown
    assert elapsed < 30  # two waits of 1 s, not the idle timeout's 300 s


async def test_the_header_timeout_leaves_a_slow_stream_alone() -> None:
    slow_first_event = ScriptedModel([text_response("late but streaming")])

    async def headers_then_pause(server: RawServer, body: bytes, writer: Writer) -> bool:
        import orjson

        answer = slow_first_event.respond(orjson.loads(body))
        stream = b"".join(step for step in answer.steps if isinstance(step, bytes))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        writer.write(f"content-length: {len(stream)}\r\n\r\n".encode())
        await writer.drain()
        await asyncio.sleep(0.6)  # the server's own pace: longer than the header timeout
        writer.write(stream)
        await writer.drain()
        return True

    async with (
        serving(headers_then_pause) as (url, _),
        ModelClient(
            base_url=url, retry=RetryPolicy(max_attempts=1), response_header_timeout=0.3
        ) as client,
        aclosing(client.stream(REQUEST)) as events,
    ):
        seen = [event async for event in events]
    assert isinstance(seen[-1], Completed)


async def test_the_header_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="response_header_timeout"):
        ModelClient(response_header_timeout=0)


async def test_a_refusal_never_shows_the_password_or_query_of_its_url() -> None:
    refused = http_reply("401 Unauthorized", b"no", "text/plain")
    async with serving(statuses(refused)) as (url, _):
        secret_url = url.replace("http://", "http://user:hunter2-pw@") + "?key=q-secret"
        async with ModelClient(base_url=secret_url, retry=FIVE) as client:
            with pytest.raises(ModelError) as caught:
                async with aclosing(client.stream(REQUEST)) as events:
                    [event async for event in events]
    message = caught.value.message
    assert "POST http://127.0.0.1:" in message
    assert "hunter2-pw" not in message
    assert "q-secret" not in message


async def test_a_key_echoed_across_the_cut_of_a_long_line_is_redacted_whole() -> None:
    key = "proxykey-" + "0123456789abcdef" * 3  # no sk- shape: only the sent key knows it
    page = b"x" * 100 + b" you sent " + key.encode()  # the line is cut inside the key
    refusal = http_reply("401 Unauthorized", page, "text/plain")
    async with (
        serving(statuses(refusal)) as (url, _),
        ModelClient(base_url=url, api_key=key, retry=FIVE) as client,
    ):
        message = (await failure(client)).message
    assert "proxykey" not in message
    assert "01234567" not in message
