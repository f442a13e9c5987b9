"""The engine benchmark's section 2: submit → ``task_started`` latency on the async and
the threads face, beside bare queue round trips (see ``bench_engine.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import janus
from _common import Table, fmt_us, percentile, verdict
from _engine_setup import USER_INPUT, LoopThread, aconfigure, configure, engine_config

from codexcore import Codex, EngineConfig
from codexcore.adapters.threads import CodexThread
from codexcore.protocol import TERMINAL_EVENT_TYPES, TaskStarted
from codexcore.testing import ScriptedModel, text_response


def latency_row(table: Table, name: str, samples: list[float], goal: str = "") -> None:
    samples = sorted(samples)
    table.add(
        name,
        fmt_us(percentile(samples, 50)),
        fmt_us(percentile(samples, 90)),
        fmt_us(percentile(samples, 99)),
        goal,
    )


async def codex_latency(config: EngineConfig, tasks: int, warmup: int) -> list[float]:
    """submit → task_started on the async face, one Task at a time."""
    model = ScriptedModel([text_response("ok", chunks=1) for _ in range(tasks + warmup)])
    samples: list[float] = []
    async with Codex(config, transport=model.mock_transport()) as codex:
        await aconfigure(codex)
        clock = time.perf_counter
        for i in range(tasks + warmup):
            t0 = clock()
            await codex.submit(USER_INPUT)
            while not isinstance((await codex.next_event()).msg, TaskStarted):
                pass
            t1 = clock()
            if i >= warmup:
                samples.append(t1 - t0)
            while (await codex.next_event()).msg.TYPE not in TERMINAL_EVENT_TYPES:
                pass
    return samples


Put = Callable[[object], Awaitable[None]]
Get = Callable[[], Awaitable[object]]
Echo = Callable[[], Coroutine[Any, Any, None]]


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task})


async def echo_latency(put: Put, get: Get, echo: Echo, rounds: int, warmup: int) -> list[float]:
    """put → echo task → get, timed like ``codex_latency``."""
    item = object()
    echo_task = asyncio.create_task(echo())
    samples: list[float] = []
    clock = time.perf_counter
    for i in range(rounds + warmup):
        t0 = clock()
        await put(item)
        await get()
        t1 = clock()
        if i >= warmup:
            samples.append(t1 - t0)
    await stop(echo_task)
    return samples


async def asyncio_queue_latency(rounds: int, warmup: int) -> list[float]:
    inq: asyncio.Queue[object] = asyncio.Queue(64)
    outq: asyncio.Queue[object] = asyncio.Queue(1024)

    async def echo() -> None:
        while True:
            outq.put_nowait(await inq.get())

    return await echo_latency(inq.put, outq.get, echo, rounds, warmup)


async def janus_latency(rounds: int, warmup: int, *, nowait: bool) -> list[float]:
    inq: janus.Queue[object] = janus.Queue(64)
    outq: janus.Queue[object] = janus.Queue(1024)
    ain, aout = inq.async_q, outq.async_q

    async def echo_put() -> None:
        while True:
            await aout.put(await ain.get())

    async def echo_nowait() -> None:
        while True:
            aout.put_nowait(await ain.get())

    try:
        return await echo_latency(
            ain.put, aout.get, echo_nowait if nowait else echo_put, rounds, warmup
        )
    finally:
        await inq.aclose()
        await outq.aclose()


def thread_face_latency(config: EngineConfig, tasks: int, warmup: int) -> list[float]:
    """``CodexThread.submit`` → ``next_event()`` is task_started, from the main thread."""
    model = ScriptedModel([text_response("ok", chunks=1) for _ in range(tasks + warmup)])
    samples: list[float] = []
    with CodexThread(config, transport=model.mock_transport()) as ct:
        configure(ct)
        clock = time.perf_counter
        for i in range(tasks + warmup):
            t0 = clock()
            ct.submit(USER_INPUT)
            while not isinstance(ct.next_event().msg, TaskStarted):
                pass
            t1 = clock()
            if i >= warmup:
                samples.append(t1 - t0)
            while ct.next_event().msg.TYPE not in TERMINAL_EVENT_TYPES:
                pass
    return samples


def thread_janus_latency(rounds: int, warmup: int) -> list[float]:
    """sync put → echo task on a loop thread (``await`` put) → sync get."""
    lt = LoopThread()
    try:

        async def make() -> tuple[janus.Queue[object], janus.Queue[object]]:
            return janus.Queue(64), janus.Queue(1024)

        inq, outq = lt.run(make())

        async def echo() -> None:
            ain, aout = inq.async_q, outq.async_q
            while True:
                await aout.put(await ain.get())

        async def start() -> asyncio.Task[None]:
            return asyncio.create_task(echo())

        echo_task: asyncio.Task[None] = lt.run(start())
        put, get = inq.sync_q.put, outq.sync_q.get
        item = object()
        samples: list[float] = []
        clock = time.perf_counter
        for i in range(rounds + warmup):
            t0 = clock()
            put(item)
            get()
            t1 = clock()
            if i >= warmup:
                samples.append(t1 - t0)
        lt.run(stop(echo_task))
        lt.run(inq.aclose())
        lt.run(outq.aclose())
        return samples
    finally:
        lt.close()


def bench_latency(home: str, tasks: int) -> None:
    warmup = max(20, tasks // 10)
    recorded, ephemeral = engine_config(home), engine_config(home, ephemeral=True)
    codex = asyncio.run(codex_latency(recorded, tasks, warmup))
    codex_eph = asyncio.run(codex_latency(ephemeral, tasks, warmup))
    aq = asyncio.run(asyncio_queue_latency(tasks, warmup))
    jq = asyncio.run(janus_latency(tasks, warmup, nowait=False))
    jq_nowait = asyncio.run(janus_latency(tasks, warmup, nowait=True))
    threads = thread_face_latency(recorded, tasks, warmup)
    threads_bare = thread_janus_latency(tasks, warmup)

    p50 = percentile(sorted(codex), 50)
    table = Table(
        f"2. submit → task_started latency, in-process ({tasks:,} Tasks after "
        f"{warmup} warm-up ones)",
        ["path", "p50", "p90", "p99", "goal"],
    )
    latency_row(
        table,
        "codexcore async face: `await submit(user_input)` … `await next_event()`, recorded",
        codex,
        f"p50 < 100 µs: {verdict(p50 < 100e-6)}",
    )
    latency_row(table, "codexcore async face, ephemeral engine", codex_eph)
    latency_row(table, "bare: asyncio.Queue put → echo task → asyncio.Queue get", aq)
    latency_row(table, "bare: janus async put → echo task (`await put`) → async get", jq)
    latency_row(
        table, "bare: janus async put → echo task (`put_nowait`, as `_emit`) → async get", jq_nowait
    )
    latency_row(
        table, "codexcore threads face: `CodexThread.submit` … `next_event()`, recorded", threads
    )
    latency_row(table, "bare: janus sync put → echo task on a loop thread → sync get", threads_bare)
    table.note(
        f"codexcore async-face p50 ÷ bare janus (`await put`) p50: "
        f"{p50 / percentile(sorted(jq), 50):.1f}; ÷ asyncio.Queue p50: "
        f"{p50 / percentile(sorted(aq), 50):.1f}."
    )
    table.print()
