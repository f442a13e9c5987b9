"""The model client's two transports: httpx's own (httpcore) and codexcore's lean one.

The library sends over httpx's own transport, so respx's default mode, proxies
and a caller's ``httpx.AsyncClient`` work as httpx users expect; the
``codexcore exec`` and ``serve`` processes choose the lean one
(``EngineConfig.lean_transport``). This measures whether that still pays:

1. Start-up: the wall time of a fresh ``python -c`` that imports the model
   client, makes one streamed request to a scripted server on 127.0.0.1 and
   exits, less that of ``python -c pass``; the median of several runs, the
   transports interleaved. Inside each child, the split: the import of the
   model client, then the first request (which with httpcore also loads
   anyio's asyncio backend).
2. Per event: the CPU time of a client process streaming one reply of N text
   deltas over a real socket (after a warm-up request), over the events it
   yields; the scripted server runs in this process, so the figure is the
   client's alone.
3. Per event without a socket: ``ModelClient.stream`` over
   ``httpx.MockTransport``, with the body streamed and with it already loaded
   (``httpx.Response(200, content=...)``, as mocks build replies).

Run ``.venv/bin/python bench/bench_transport.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable

import httpx
from _common import Table, fmt_ms, fmt_us, header, median, parse_args

from codexcore.model import ModelClient
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

KINDS = ("httpx", "lean")

CHILD = """
import asyncio, json, sys, time
t0 = time.perf_counter()
from codexcore.engine import EngineConfig, ModelClientPool
import codexcore.model._client
t1 = time.perf_counter()

async def main(url, lean, warm):
    t2 = time.perf_counter()
    pool = ModelClientPool(EngineConfig(api_key="k", lean_transport=lean))
    client = pool.get(url)
    request = {"model": "m", "input": "hi"}
    async for event in client.stream(request):
        pass
    t3 = time.perf_counter()
    events, cpu = 0, 0.0
    if warm:
        c0 = time.process_time()
        async for event in client.stream(request):
            events += 1
        cpu = time.process_time() - c0
    await pool.aclose()
    return {"import": t1 - t0, "first": t3 - t2, "events": events, "cpu": cpu}

print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2] == "lean", sys.argv[3] == "1"))))
"""


def child(url: str, kind: str, warm: bool) -> tuple[float, dict[str, float]]:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}  # no proxy variables
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, kind, "1" if warm else "0"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return time.perf_counter() - t0, json.loads(done.stdout)


def startup(url: str, runs: int) -> None:
    def bare() -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        return time.perf_counter() - t0

    for kind in KINDS:
        child(url, kind, warm=False)  # warm-up: bytecode and page caches
    walls: dict[str, list[float]] = {kind: [] for kind in KINDS}
    splits: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    passes = []
    for _ in range(runs):
        passes.append(bare())
        for kind in KINDS:
            wall, split = child(url, kind, warm=False)
            walls[kind].append(wall)
            splits[kind].append(split)
    base = median(passes)
    table = Table(
        f"T1. A fresh process's one model request (wall, median of {runs}, less `python -c pass`)",
        ["transport", "whole process", "import of the model client", "client made, first request"],
    )
    for kind in KINDS:
        table.add(
            "httpx's own (httpcore), the library's default"
            if kind == "httpx"
            else "lean (`H11Transport`), `exec` and `serve`",
            fmt_ms(median(walls[kind]) - base),
            fmt_ms(median([s["import"] for s in splits[kind]])),
            fmt_ms(median([s["first"] for s in splits[kind]])),
        )
    table.note(f"`python -c pass`: {fmt_ms(base)}. The server: plain HTTP on 127.0.0.1.")
    table.print()


def per_event(url: str, runs: int, deltas: int) -> None:
    table = Table(
        f"T2. Client CPU per event over a real socket ({deltas:,} deltas, best of {runs})",
        ["transport", "CPU µs/event", "events"],
    )
    for kind in KINDS:
        results = [child(url, kind, warm=True)[1] for _ in range(runs)]
        best = min(results, key=lambda r: r["cpu"] / r["events"])
        table.add(kind, fmt_us(best["cpu"] / best["events"]), f"{int(best['events']):,}")
    table.print()


async def mock_per_event(deltas: int, runs: int) -> None:
    reply = text_response("x " * deltas, chunks=deltas)
    steps = [s for s in reply.steps if isinstance(s, bytes)]
    headers = {"content-type": "text/event-stream"}

    async def chunks() -> AsyncIterator[bytes]:
        for step in steps:
            yield step

    bodies: dict[str, Callable[[], httpx.Response]] = {
        "streamed, one chunk an event": lambda: httpx.Response(
            200, headers=headers, content=chunks()
        ),
        "loaded": lambda: httpx.Response(200, headers=headers, content=b"".join(steps)),
    }
    table = Table(
        f"T3. `ModelClient.stream` over `httpx.MockTransport` ({deltas:,} deltas, best of {runs})",
        ["body", "CPU µs/event"],
    )
    for name, make in bodies.items():
        best = float("inf")
        for _ in range(runs):
            transport = httpx.MockTransport(lambda _, make=make: make())
            async with ModelClient(transport=transport) as client:
                c0, events = time.process_time(), 0
                async for _event in client.stream({"model": "m", "input": "hi"}):
                    events += 1
                best = min(best, (time.process_time() - c0) / events)
        table.add(name, fmt_us(best))
    table.print()


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    runs, deltas = (3, 2_000) if args.quick else (9, 20_000)
    header("bench_transport", args.quick, f"{runs} runs, {deltas:,} deltas a stream")
    model = ScriptedModel([text_response("hi")] * (4 * runs + 4))
    with ScriptedResponsesServer(model) as server:
        startup(server.base_url, runs)
    long = text_response("x " * deltas, chunks=deltas)
    model = ScriptedModel([long] * (4 * runs + 4))
    with ScriptedResponsesServer(model) as server:
        per_event(server.base_url, max(2, runs // 3), deltas)
    asyncio.run(mock_per_event(deltas, max(2, runs // 3)))


if __name__ == "__main__":
    main()
