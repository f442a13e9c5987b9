"""ACP's ``session/prompt`` -> first ``agent_message_chunk``, beside the native dialect.

Three clients of one scripted model (``codexcore.testing``'s real local HTTP
server, in this process), measured in the same rounds, the order rotated:

- ACP: ``codexcore acp`` as a child process, driven by the
  ``agent-client-protocol`` package's own client (``spawn_agent_process``):
  the time from sending ``session/prompt`` to the first ``agent_message_chunk``
  notification reaching the client's handler;
- native: ``codexcore serve --stdio`` as a child process: from writing a
  ``user_input`` line to reading the first ``agent_message_delta`` event;
- the bare limit: this process POSTing the same request to the same server
  with httpx: from sending it to reading the first ``response.output_text.delta``
  SSE line (no engine, no dialect, no second process).

Each round waits for the whole answer (the prompt's response, ``task_complete``,
the end of the body) before the next one starts. Median and p90 over the
rounds; the ratio is ACP over native.

Then an editor's MCP server (``mcpServers`` of ``session/new``: a real stdio
server written with ``MCPServer``, tests/mcp_server.py): the scripted model
calls its ``add`` tool each round; measured is the call as the editor sees it,
from the ``tool_call`` (in progress) notification to the ``tool_call_update``
completed reaching the client, beside the bare limit: the SDK's own
``ClientSession.call_tool`` of the same tool on a server of its own in this
process; rounds interleaved. Run
``.venv/bin/python bench/bench_acp.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from _common import Table, fmt_ms, header, median, parse_args, percentile
from acp import spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import McpServerStdio

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

PY = sys.executable
SERVER = str(Path(__file__).resolve().parent.parent / "tests" / "mcp_server.py")
ANSWER = "Here is the answer you asked for, in a few chunks."


def env(base_url: str, home: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))}
    return {**clean, "OPENAI_BASE_URL": base_url, "CODEXCORE_HOME": home, "PYTHONUNBUFFERED": "1"}


class FirstChunk:
    """The ACP client side: notes when the first agent_message_chunk of a prompt arrives."""

    def __init__(self) -> None:
        self.first: asyncio.Future[float] | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        first = self.first
        if update.session_update == "agent_message_chunk" and first and not first.done():
            first.set_result(time.perf_counter())

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the benchmark's prompts run no tools")

    def on_connect(self, conn: Any) -> None:
        pass


async def acp_round(conn: ClientSideConnection, client: FirstChunk, session_id: str) -> float:
    client.first = asyncio.get_running_loop().create_future()
    start = time.perf_counter()
    response = await conn.prompt(session_id=session_id, prompt=[text_block("answer me")])
    assert response.stop_reason == "end_turn", response
    return await client.first - start


class Native:
    """``codexcore serve --stdio``: NDJSON submissions in, events out."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.count = 0

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(message) + b"\n")
        await self.process.stdin.drain()

    async def until(self, kind: str) -> float:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            if orjson.loads(line).get("msg", {}).get("type") == kind:
                return time.perf_counter()
        raise RuntimeError(f"the native server ended before {kind}")

    async def round(self) -> float:
        self.count += 1
        items = [{"type": "text", "text": "answer me"}]
        start = time.perf_counter()
        await self.send({"id": f"u{self.count}", "op": {"type": "user_input", "items": items}})
        first = await self.until("agent_message_delta") - start
        await self.until("task_complete")
        return first


async def bare_round(http: httpx.AsyncClient, url: str) -> float:
    body = {"model": "gpt-5-codex", "input": [], "stream": True}
    start = time.perf_counter()
    first = None
    async with http.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if first is None and line == "event: response.output_text.delta":
                first = time.perf_counter() - start
    assert first is not None
    return first


async def measure(rounds: int, warmup: int, home: Path, cwd: Path) -> dict[str, list[float]]:
    total = (rounds + warmup) * 3
    model = ScriptedModel([text_response(ANSWER, chunks=6)] * total)
    async with ScriptedResponsesServer(model) as server:
        variables = env(server.base_url, str(home))
        native_proc = await asyncio.create_subprocess_exec(
            PY, "-m", "codexcore", "serve", "--stdio", env=variables, cwd=cwd,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        native = Native(native_proc)
        await native.send({"id": "cfg", "op": {"type": "configure_session", "cwd": str(cwd)}})
        await native.until("session_configured")
        client = FirstChunk()
        async with (
            httpx.AsyncClient(timeout=30) as http,
            spawn_agent_process(
                client,  # type: ignore[arg-type]
                PY, "-m", "codexcore", "acp", env=variables, cwd=cwd,
                transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
            ) as (conn, _),
        ):  # fmt: skip
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
            variants: list[tuple[str, Callable[[], Awaitable[float]]]] = [
                ("acp", lambda: acp_round(conn, client, session.session_id)),
                ("native", native.round),
                ("bare", lambda: bare_round(http, server.base_url + "/responses")),
            ]
            times: dict[str, list[float]] = {name: [] for name, _ in variants}
            for i in range(rounds + warmup):
                shift = i % len(variants)
                for name, run in [*variants[shift:], *variants[:shift]]:
                    value = await run()
                    if i >= warmup:
                        times[name].append(value)
        assert native_proc.stdin is not None
        native_proc.stdin.close()
        await native_proc.wait()
    return times


class ToolCallWatch(FirstChunk):
    """The ACP client side: notes when a tool call is announced and when it completes."""

    def __init__(self) -> None:
        super().__init__()
        self.started: asyncio.Future[float] | None = None
        self.completed: asyncio.Future[float] | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        now = time.perf_counter()
        kind, status = update.session_update, getattr(update, "status", None)
        if kind == "tool_call" and self.started and not self.started.done():
            self.started.set_result(now)
        done = self.completed
        if kind == "tool_call_update" and status == "completed" and done and not done.done():
            done.set_result(now)


async def acp_mcp_round(conn: ClientSideConnection, client: ToolCallWatch, session: str) -> float:
    loop = asyncio.get_running_loop()
    client.started, client.completed = loop.create_future(), loop.create_future()
    response = await conn.prompt(session_id=session, prompt=[text_block("add them")])
    assert response.stop_reason == "end_turn", response
    return await client.completed - await client.started


async def measure_mcp(rounds: int, warmup: int, home: Path, cwd: Path) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    script = []
    for n in range(rounds + warmup):
        script += [
            function_call_response("demo__add", {"a": 1, "b": 2}, call_id=f"m{n}"),
            text_response("3"),
        ]
    times: dict[str, list[float]] = {"acp": [], "bare": []}
    client = ToolCallWatch()
    demo = McpServerStdio(name="demo", command=PY, args=[SERVER], env=[])
    bare_params = StdioServerParameters(command=PY, args=[SERVER])
    async with (
        ScriptedResponsesServer(ScriptedModel(script)) as server,
        spawn_agent_process(
            client,  # type: ignore[arg-type]
            PY, "-m", "codexcore", "acp", env=env(server.base_url, str(home)), cwd=cwd,
            transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
        ) as (conn, _),
        stdio_client(bare_params) as (read, write),
        ClientSession(read, write) as bare,
    ):  # fmt: skip
        await bare.initialize()
        await bare.list_tools()
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(cwd), mcp_servers=[demo])
        for n in range(rounds + warmup):
            acp = await acp_mcp_round(conn, client, session.session_id)
            started = time.perf_counter()
            result = await bare.call_tool("add", {"a": 1, "b": 2})
            plain = time.perf_counter() - started
            assert result.structured_content == {"result": 3}
            if n >= warmup:
                times["acp"].append(acp)
                times["bare"].append(plain)
    return times


def mcp_table(times: dict[str, list[float]], rounds: int) -> Table:
    table = Table(
        f"An editor's MCP tool call (`add`, stdio), {rounds} calls each, interleaved",
        ["path", "median", "p90", "over bare (median)"],
    )
    bare = median(times["bare"])
    for name, label in (
        ("acp", "ACP: `tool_call` -> `tool_call_update` completed, at the editor"),
        ("bare", "bare limit: SDK `ClientSession.call_tool` in one process"),
    ):
        values = sorted(times[name])
        over = median(values) - bare
        table.add(
            label, fmt_ms(median(values)), fmt_ms(percentile(values, 90)),
            "" if name == "bare" else f"{over * 1000:+.1f} ms",
        )  # fmt: skip
    return table


def main() -> int:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    rounds, warmup = (5, 1) if args.quick else (40, 3)
    with tempfile.TemporaryDirectory(prefix="bench-acp-") as tmp:
        home, cwd = Path(tmp, "home"), Path(tmp, "work")
        home.mkdir()
        cwd.mkdir()
        times = asyncio.run(measure(rounds, warmup, home, cwd))
        mcp_times = asyncio.run(measure_mcp(rounds, warmup, home, cwd))
    header("ACP: session/prompt -> first agent_message_chunk", args.quick, f"{rounds} rounds")
    table = Table(
        "Prompt to first answer chunk, same scripted model",
        ["path", "median", "p90", "median over bare"],
    )
    bare = median(times["bare"])
    for name, label in (
        ("acp", "ACP `session/prompt` -> first `agent_message_chunk`"),
        ("native", "native `user_input` -> first `agent_message_delta`"),
        ("bare", "bare limit: HTTP POST -> first SSE delta (no engine)"),
    ):
        values = sorted(times[name])
        table.add(
            label, fmt_ms(median(values)), fmt_ms(percentile(values, 90)),
            f"{median(values) / bare:.1f}x",
        )  # fmt: skip
    ratio = median(times["acp"]) / median(times["native"])
    table.note(f"ACP / native (medians): {ratio:.2f}; {rounds} rounds after {warmup} warm-up.")
    print(table.render())
    print(mcp_table(mcp_times, rounds).render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
