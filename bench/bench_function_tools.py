"""Function tools: the engine's cost per call, and a 20-Turn task beside openai-agents.

1. Overhead per call (``overhead``): the model's call of a function tool through
   the engine's tool router (arguments parsed and bound, the begin and end events
   made and emitted, the result made the model's text), beside the bare call of
   the same function in the same run: ``await fn()`` for an async tool, and for a
   sync one ``asyncio.to_thread(fn)`` (the bare thread hop, the limit of "never on
   the engine's loop") and the plain ``fn()``. p50 and p90 over many calls.

2. A 20-Turn task beside openai-agents (``agents``): the same task (19 Turns that
   each call one function tool, then the answer) against the same scripted model
   (a real HTTP server on 127.0.0.1 in a process of its own), run by codexcore
   (``Codex(tools=[...])``) and by openai-agents (``function_tool``, ``Runner``),
   each in a fresh process, alternating, 3 tasks a process (the first cold, the
   others warm; no import inside a clock). The bare limit is a client that streams
   the same 20 responses and does nothing else (httpx). Reported: wall time per
   Turn beyond the bare client's, and the process's peak RSS.

3. A client's tool over a real socket (``remote``): ``codexcore serve --tcp`` in a
   process of its own, the scripted model in another, and ``RemoteCodex`` with a
   local tool here. Per call: from the ``dynamic_tool_call_request`` reaching the
   UI to the call's ``mcp_tool_call_end`` reaching it (the library runs the
   function, submits ``dynamic_tool_response``, the server's engine takes it and
   ends the call), beside, in the same run, a bare round trip of one line to an
   echo server in another process over TCP, and a native-protocol round trip that
   runs no tool (a stray ``dynamic_tool_response`` and its ``error``).

``.venv/bin/python bench/bench_function_tools.py`` (``--quick`` for a smoke run);
openai-agents comes with the ``bench`` extra.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import Table, fmt_bytes, fmt_ms, fmt_ratio, fmt_us, header, median, parse_args, verdict

TURNS = 20
TASKS_PER_CHILD = 3
SECTIONS = ("overhead", "agents", "remote")
ANSWER = "Done: every symbol is defined."


def lookup_symbol(symbol: str) -> str:
    """Where a symbol is defined.

    Args:
        symbol: The symbol's name.
    """
    return f"{symbol} is defined in src/{symbol}.py:3"


async def lookup_symbol_async(symbol: str) -> str:
    """Where a symbol is defined.

    Args:
        symbol: The symbol's name.
    """
    return f"{symbol} is defined in src/{symbol}.py:3"


# --- 1. overhead per call -------------------------------------------------------------


async def _times(call: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    for _ in range(min(n, 200)):  # warm-up
        await call()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return sorted(times)


async def _overhead(n: int) -> list[tuple[str, list[float]]]:
    from codexcore import FunctionTool
    from codexcore.engine import EngineConfig, SessionConfig
    from codexcore.engine._approvals import Approvals
    from codexcore.engine._tools import ToolRouter
    from codexcore.engine._turn_diff import TurnDiffTracker
    from codexcore.tools._sandbox_status import SandboxStatus

    events: list[Any] = []

    async def emit(msg: Any) -> None:
        events.append(msg)
        if len(events) > 1000:
            events.clear()

    tools = {t.name: t for t in map(FunctionTool.of, (lookup_symbol, lookup_symbol_async))}
    with tempfile.TemporaryDirectory() as cwd:
        config = SessionConfig(cwd=cwd, approval_policy="never")
        router = ToolRouter(
            config, EngineConfig(), Approvals(), SandboxStatus("none"), emit, functions=tools
        )
        diff = TurnDiffTracker(cwd)
        arguments = '{"symbol":"main"}'

        def item(name: str) -> dict[str, Any]:
            return {"type": "function_call", "call_id": "c1", "name": name, "arguments": arguments}

        sync_item, async_item = item("lookup_symbol"), item("lookup_symbol_async")

        async def bare_sync() -> Any:
            return lookup_symbol("main")

        hop = lambda: asyncio.to_thread(lookup_symbol, "main")  # noqa: E731
        return [
            (
                "bare `await fn()` (async function)",
                await _times(lambda: lookup_symbol_async("main"), n),
            ),
            (
                "codexcore, async tool (on the loop)",
                await _times(lambda: router.call(async_item, diff), n),
            ),
            ("bare `fn()` (sync function, on the loop)", await _times(bare_sync, n)),
            ("bare `asyncio.to_thread(fn)` (the thread hop)", await _times(hop, n)),
            (
                "codexcore, sync tool (worker thread)",
                await _times(lambda: router.call(sync_item, diff), n),
            ),
        ]


def bench_overhead(quick: bool) -> None:
    n = 500 if quick else 5000
    rows = dict(asyncio.run(_overhead(n)))
    table = Table(
        f"One function tool call, {n} calls (p50 / p90)", ["how", "p50", "p90", "p50 beyond bare"]
    )
    bare_async = rows["bare `await fn()` (async function)"]
    bare_hop = rows["bare `asyncio.to_thread(fn)` (the thread hop)"]
    for name, times in rows.items():
        p50, p90 = times[len(times) // 2], times[int(len(times) * 0.9)]
        if name.startswith("codexcore, async"):
            beyond = fmt_us(p50 - bare_async[len(bare_async) // 2])
        elif name.startswith("codexcore, sync"):
            beyond = f"{fmt_us(p50 - bare_hop[len(bare_hop) // 2])} (beyond the hop)"
        else:
            beyond = ""
        table.add(name, fmt_us(p50), fmt_us(p90), beyond)
    async_over = rows["codexcore, async tool (on the loop)"][n // 2] - bare_async[n // 2]
    table.note(
        f"Goal: the engine's overhead under 50 µs p50 beyond the function: async "
        f"{fmt_us(async_over)}, {verdict(async_over < 50e-6)}. The router call includes "
        "parsing and binding the arguments, both events (with an in-memory emit) and "
        "the model's text."
    )
    table.print()


# --- 2. the 20-Turn task beside openai-agents ------------------------------------------


def serve(runs: int) -> None:
    """The scripted model, for ``runs`` tasks of TURNS responses each (run in a child)."""
    from codexcore.testing import (
        ScriptedModel,
        ScriptedResponsesServer,
        function_call_response,
        text_response,
    )

    script = []
    for run in range(runs):
        for turn in range(TURNS - 1):
            args = {"symbol": f"s{turn}"}
            script.append(function_call_response("lookup_symbol", args, call_id=f"c{run}_{turn}"))
        script.append(text_response(ANSWER))
    with ScriptedResponsesServer(ScriptedModel(script)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


Runner = Callable[[str, int], list[tuple[float, str]]]


def _timed(task: Callable[[], Awaitable[str]]) -> Callable[[], Awaitable[tuple[float, str]]]:
    async def run() -> tuple[float, str]:
        started = time.perf_counter()
        answer = await task()
        return time.perf_counter() - started, answer

    return run


def run_codexcore(base_url: str, tasks: int) -> list[tuple[float, str]]:
    """``tasks`` tasks, each in a new ``Codex`` (its engine started inside the clock)."""
    from codexcore import Codex, EngineConfig, SessionConfig, function_tool
    from codexcore.model import ModelClient  # noqa: F401  (deferred to the first Turn otherwise)
    from codexcore.protocol import SandboxPolicy, TaskComplete, TextInput, UserInput

    session = SessionConfig(
        model="gpt-4.1",
        base_url=base_url,
        approval_policy="never",
        sandbox_policy=SandboxPolicy("danger-full-access"),
        cwd=tempfile.gettempdir(),
    )
    config = EngineConfig(session=session, api_key="sk-bench", ephemeral=True)
    tools = [function_tool(lookup_symbol)]

    async def task() -> str:
        async with Codex(config, tools=tools) as codex:
            await codex.submit(UserInput((TextInput("find the symbols"),)))
            async for event in codex.events():
                if isinstance(event.msg, TaskComplete):
                    return event.msg.last_agent_message or ""
                if event.msg.TYPE in ("error", "turn_aborted"):
                    raise SystemExit(f"codexcore: {event.msg}")
        return ""

    async def main() -> list[tuple[float, str]]:
        return [await _timed(task)() for _ in range(tasks)]

    return asyncio.run(main())


def run_agents(base_url: str, tasks: int) -> list[tuple[float, str]]:
    """As openai-agents' docs set it up: one client and one ``Agent``, a ``Runner`` per task."""
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    async def main() -> list[tuple[float, str]]:
        # Made on the loop that uses it: the client's connection pool belongs to that loop.
        client = AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
        agent = Agent(
            name="bench",
            instructions="Find the symbols.",
            model=OpenAIResponsesModel("gpt-4.1", client),
            tools=[function_tool(lookup_symbol)],
        )

        async def task() -> str:
            result = Runner.run_streamed(agent, "find the symbols", max_turns=TURNS + 5)
            async for _ in result.stream_events():
                pass
            return str(result.final_output)

        try:
            return [await _timed(task)() for _ in range(tasks)]
        finally:
            await client.close()

    return asyncio.run(main())


def run_bare(base_url: str, tasks: int) -> list[tuple[float, str]]:
    """The floor: one httpx client that streams the task's responses and does nothing else."""
    import httpx

    body = {"model": "gpt-4.1", "input": "find the symbols", "stream": True}
    runs = []
    with httpx.Client(base_url=base_url) as client:
        for _ in range(tasks):
            started, last = time.perf_counter(), b""
            for _ in range(TURNS):
                with client.stream("POST", "/responses", json=body) as response:
                    for chunk in response.iter_bytes():
                        last = chunk
            answer = ANSWER if b"completed" in last else last.decode()
            runs.append((time.perf_counter() - started, answer))
    return runs


RUNNERS: dict[str, Runner] = {
    "codexcore": run_codexcore,
    "openai-agents": run_agents,
    "bare client": run_bare,
}


def child(kind: str, base_url: str) -> None:
    """TASKS_PER_CHILD tasks in one process: the first cold, the others warm.

    Each runner imports its library and builds its objects before its first clock
    starts, so no wall time includes an import (the peak RSS does).
    """
    runs = RUNNERS[kind](base_url, TASKS_PER_CHILD)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    walls, answers = [w for w, _ in runs], [a for _, a in runs]
    print(json.dumps({"walls": walls, "peak": peak, "answers": answers}), flush=True)


def _run_child(kind: str, base_url: str) -> dict[str, Any]:
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    # Cached bytecode, as on any installed machine: without it every import (and any
    # import a library defers to its first task) compiles its sources again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, base_url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{out.stdout}\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    for answer in result["answers"]:
        if ANSWER not in answer:
            raise SystemExit(f"{kind} did not finish the task: {answer!r}")
    return result


def bench_agents(quick: bool) -> None:
    rounds = 2 if quick else 7
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(rounds * len(RUNNERS) * TASKS_PER_CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdin is not None
    base_url = server.stdout.readline().strip()
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in RUNNERS}
    try:
        for _ in range(rounds):
            for kind in RUNNERS:
                results[kind].append(_run_child(kind, base_url))
    finally:
        server.stdin.close()
        server.wait(10)
    _agents_table(results, rounds)


def _agents_table(results: dict[str, list[dict[str, Any]]], rounds: int) -> None:
    # The first task of a process pays one-time costs (lazy schemas, first connection);
    # the later ones are the steady state a long-lived agent sees on every task.
    cold = {k: median([r["walls"][0] for r in rs]) for k, rs in results.items()}
    warm = {k: median([w for r in rs for w in r["walls"][1:]]) for k, rs in results.items()}
    peaks = {kind: median([r["peak"] for r in rs]) for kind, rs in results.items()}
    table = Table(
        f"A {TURNS}-Turn task with a function tool, same scripted model (medians of "
        f"{rounds} alternating processes, {TASKS_PER_CHILD} tasks each)",
        ["", "codexcore", "openai-agents", "bare client", "ratio", "goal"],
    )
    for name, walls in (("first task of the process", cold), ("later tasks (warm)", warm)):
        beyond = {k: (walls[k] - walls["bare client"]) / TURNS for k in RUNNERS}
        ratio = beyond["codexcore"] / beyond["openai-agents"]
        table.add(
            f"{name}: wall time",
            *(fmt_ms(walls[k]) for k in RUNNERS),
            fmt_ratio(walls["codexcore"] / walls["openai-agents"]),
            "",
        )
        table.add(
            f"{name}: per Turn beyond the model",
            fmt_ms(beyond["codexcore"]),
            fmt_ms(beyond["openai-agents"]),
            "-",
            fmt_ratio(ratio),
            f"≤ 0.15: {verdict(ratio <= 0.15)}",
        )
    mem = peaks["codexcore"] / peaks["openai-agents"]
    table.add(
        "peak RSS of the process",
        *(fmt_bytes(peaks[k]) for k in RUNNERS),
        fmt_ratio(mem),
        f"≤ 0.35: {verdict(mem <= 0.35)}",
    )
    table.note(
        "Each process imports its library and builds its client before any clock starts "
        "(imports count in the peak RSS, not in a wall time). openai-agents: one "
        "AsyncOpenAI client and one Agent per process, Runner.run_streamed per task, "
        "tracing off; codexcore: a new Codex (engine included) per task. Both run the "
        "same sync function on a worker thread per call and read all their events."
    )
    table.print()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "", sections=SECTIONS)
    header("Function tools", args.quick)
    if "overhead" in args.only:
        bench_overhead(args.quick)
    if "agents" in args.only:
        bench_agents(args.quick)
    if "remote" in args.only:
        from _function_tools_remote import bench_remote

        bench_remote(args.quick)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
