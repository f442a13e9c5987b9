"""MCP servers through the engine, beside the bare MCP SDK client.

1. One tool call through the engine's tool router (the model's function call
   parsed, the approval rule, ``mcp_tool_call_begin``/``end`` sent to an event
   reader, the call, the result made into the model's text) against the same
   call with the SDK's own ``ClientSession`` over its own ``stdio_client``, each
   to a real stdio server written with ``MCPServer`` (tests/mcp_server.py),
   calls interleaved. Goal: overhead under 2 ms at p50.
2. A session start with three such servers: from ``configure_session`` to
   ``mcp_startup_complete`` against the three started in parallel with the bare
   SDK client (spawn, initialize, tools/list), the time until the slowest is
   ready; rounds interleaved. Goal: within 50 ms of the slowest server's own
   start. Both run with the SDK already imported (a long-running server's
   case); the one-time import (~0.6 s, overlapped with the servers' own start)
   is timed apart.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Table, fmt_ms, fmt_us, header, median, parse_args, percentile, verdict

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "mcp_server.py")


def time_import() -> float:
    """Seconds a fresh interpreter takes to import what the engine's MCP client loads."""
    code = "import time; t = time.perf_counter(); import codexcore.engine._mcp_client; "
    code += "print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


async def bench_call(calls: int) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from codexcore.engine import EngineConfig, SessionConfig
    from codexcore.engine._approvals import Approvals
    from codexcore.engine._mcp import McpManager, McpServerConfig
    from codexcore.engine._session_lifecycle import UNCONFINED
    from codexcore.engine._tools import ToolRouter
    from codexcore.engine._turn_diff import TurnDiffTracker
    from codexcore.protocol import EventMsg

    events: asyncio.Queue[EventMsg] = asyncio.Queue()

    async def read_events() -> None:
        while True:
            await events.get()

    reader = asyncio.create_task(read_events())
    config = {"demo": McpServerConfig(command=sys.executable, args=(SERVER,))}
    with tempfile.TemporaryDirectory() as cwd:
        manager = McpManager(config, events.put, cwd)
        manager.start()
        await manager.wait_started()
        session = SessionConfig(cwd=cwd, approval_policy="never")
        router = ToolRouter(
            session, EngineConfig(), Approvals(), UNCONFINED, events.put, mcp=manager
        )
        diff = TurnDiffTracker(cwd)
        item = {"type": "function_call", "name": "demo__add", "arguments": '{"a": 1, "b": 2}'}
        bare_params = StdioServerParameters(command=sys.executable, args=[SERVER])
        engine_times: list[float] = []
        bare_times: list[float] = []
        async with stdio_client(bare_params) as (read, write), ClientSession(read, write) as bare:
            await bare.initialize()
            await bare.list_tools()
            for n in range(calls + 20):  # the first 20 warm both up
                started = time.perf_counter()
                output = await router.call({**item, "call_id": f"c{n}"}, diff)
                engine = time.perf_counter() - started
                started = time.perf_counter()
                result = await bare.call_tool("add", {"a": 1, "b": 2})
                plain = time.perf_counter() - started
                assert output["output"] == "3", output
                assert result.structured_content == {"result": 3}
                if n >= 20:
                    engine_times.append(engine)
                    bare_times.append(plain)
        await manager.aclose()
    reader.cancel()
    engine_times.sort()
    bare_times.sort()
    table = Table(
        f"One MCP tool call (`add`, stdio), {calls} calls each, interleaved",
        ["how", "p50", "p90", "overhead at p50"],
    )
    bare50, engine50 = percentile(bare_times, 50), percentile(engine_times, 50)
    table.add(
        "bare SDK `ClientSession.call_tool` (the limit)",
        fmt_us(bare50),
        fmt_us(percentile(bare_times, 90)),
        "",
    )
    table.add(
        "through the engine's tool router (events, approval rule, model text)",
        fmt_us(engine50),
        fmt_us(percentile(engine_times, 90)),
        f"{fmt_us(engine50 - bare50)} (goal < 2 ms: {verdict(engine50 - bare50 < 0.002)})",
    )
    table.print()


async def bare_start(count: int) -> float:
    """Seconds until ``count`` servers started in parallel with the bare SDK are all ready."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    stop = asyncio.Event()

    async def one(ready: asyncio.Event) -> None:
        # Each server's contexts are entered and left in its own task (anyio's rule).
        params = StdioServerParameters(command=sys.executable, args=[SERVER])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            ready.set()
            await stop.wait()

    readies = [asyncio.Event() for _ in range(count)]
    started = time.perf_counter()
    tasks = [asyncio.create_task(one(ready)) for ready in readies]
    await asyncio.gather(*(ready.wait() for ready in readies))
    took = time.perf_counter() - started
    stop.set()
    await asyncio.gather(*tasks)
    return took


async def engine_start(count: int) -> float:
    """Seconds from ``configure_session`` to ``mcp_startup_complete`` with ``count`` servers."""
    from codexcore import Codex
    from codexcore.engine import EngineConfig, SessionConfig
    from codexcore.engine._mcp import McpServerConfig
    from codexcore.protocol import ConfigureSession, McpStartupComplete, SandboxPolicy

    servers = {
        f"s{n}": McpServerConfig(command=sys.executable, args=(SERVER,)) for n in range(count)
    }
    with tempfile.TemporaryDirectory() as cwd:
        session = SessionConfig(cwd=cwd, sandbox_policy=SandboxPolicy("danger-full-access"))
        # api_key="": no model request is made, and none may need a key.
        config = EngineConfig(session=session, api_key="", ephemeral=True, mcp_servers=servers)
        async with Codex(config) as codex:
            started = time.perf_counter()
            await codex.submit(ConfigureSession())
            while True:
                event = await codex.next_event()
                if isinstance(event.msg, McpStartupComplete):
                    took = time.perf_counter() - started
                    assert len(event.msg.ready) == count, event.msg
                    return took


async def bench_start(rounds: int) -> None:
    import mcp  # noqa: F401 -- both sides run with the SDK loaded

    await bare_start(3)  # warm-up: the page cache, the server's own imports
    await engine_start(3)
    bare: list[float] = []
    ours: list[float] = []
    for _ in range(rounds):
        bare.append(await bare_start(3))
        ours.append(await engine_start(3))
    differences = sorted(o - b for o, b in zip(ours, bare, strict=True))
    table = Table(
        f"Session start with three stdio MCP servers, {rounds} rounds interleaved, median",
        ["how", "time", "beyond the slowest server"],
    )
    table.add("the three started in parallel by the bare SDK (the limit)", fmt_ms(median(bare)), "")
    beyond = median(differences)
    table.add(
        "`configure_session` -> `mcp_startup_complete`",
        fmt_ms(median(ours)),
        f"{fmt_ms(beyond)} (goal within 50 ms: {verdict(beyond < 0.050)})",
    )
    table.note(
        f"`beyond` is the median of the rounds' differences; the one-time import of the SDK "
        f"by a fresh process (overlapped with the servers' own start) is {fmt_ms(time_import())}."
    )
    table.print()


def main(argv: list[str] | None = None) -> Any:
    args = parse_args(__doc__ or "", argv)
    header("bench_mcp", args.quick)
    asyncio.run(bench_call(50 if args.quick else 500))
    asyncio.run(bench_start(2 if args.quick else 8))


if __name__ == "__main__":
    main()
