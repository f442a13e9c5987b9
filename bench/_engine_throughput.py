"""The engine benchmark's sections 1 and 1b: events per second from the engine to a
consumer thread, and to a consumer task on the engine's loop (see ``bench_engine.py``)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import janus
from _common import Table, fmt_rate, fmt_ratio, paired_ratio, verdict
from _engine_setup import (
    USER_INPUT,
    LoopThread,
    Measured,
    aconfigure,
    best,
    configure,
    engine_config,
    long_text,
)

from codexcore import Codex
from codexcore.adapters.threads import CodexThread
from codexcore.model import ModelClient
from codexcore.protocol import TERMINAL_EVENT_TYPES, AgentMessageDelta, Event
from codexcore.testing import ScriptedModel, text_response

# --- 1. events per second to a consumer thread -------------------------------------


def run_task_e2e(ct: CodexThread, keep: list[Event] | None = None) -> Measured:
    """One Task through CodexThread; every event of it is read by this thread."""
    gc.collect()
    events: list[Event] = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    ct.submit(USER_INPUT)
    while True:
        event = ct.next_event()
        events.append(event)
        if event.msg.TYPE in TERMINAL_EVENT_TYPES:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if event.msg.TYPE != "task_complete":
        raise RuntimeError(f"the Task ended with {event.msg!r}")
    if keep is not None:
        keep[:] = events
    return Measured(len(events), wall, cpu)


Produce = Callable[[], Coroutine[Any, Any, None]]


def drain_from_thread(
    produce: Produce, loop: asyncio.AbstractEventLoop, get: Callable[[], object], count: int
) -> Measured:
    """``count`` gets on this thread while ``produce`` runs on ``loop``: the consumer's view."""
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    done = asyncio.run_coroutine_threadsafe(produce(), loop)
    for _ in range(count):
        get()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    done.result()
    return Measured(count, wall, cpu)


def emitter(codex: Codex, msgs: list[AgentMessageDelta]) -> Produce:
    """Pushes pre-made messages through ``Codex._emit``, as the engine's Tasks do."""

    async def produce() -> None:
        emit = codex._emit
        for msg in msgs:
            await emit("bench", msg)

    return produce


def run_emit_path(ct: CodexThread, msgs: list[AgentMessageDelta]) -> Measured:
    """Pre-made messages through ``Codex._emit`` on the engine loop, read by this thread."""
    loop = ct._runner.loop
    assert loop is not None
    return drain_from_thread(emitter(ct._codex, msgs), loop, ct.next_event, len(msgs))


def run_bare_janus(lt: LoopThread, events: list[Event], maxsize: int) -> Measured:
    """The same Event objects through a bare janus queue to this thread."""

    async def make() -> janus.Queue[Event]:
        return janus.Queue(maxsize)

    queue: janus.Queue[Event] = lt.run(make())

    async def produce() -> None:
        put = queue.async_q.put
        for event in events:
            await put(event)

    measured = drain_from_thread(produce, lt.loop, queue.sync_q.get, len(events))
    lt.run(queue.aclose())
    return measured


def run_model_client_alone(tokens: int, text: str) -> Measured:
    """``ModelClient.stream`` over the same scripted response; no engine, no queue."""

    async def main() -> tuple[int, float, float]:
        model = ScriptedModel([text_response(text, chunks=tokens)])
        async with ModelClient(transport=model.mock_transport()) as client:
            gc.collect()
            count = 0
            cpu0, t0 = time.process_time(), time.perf_counter()
            async for _ in client.stream({"model": "m", "input": []}):
                count += 1
            return count, time.perf_counter() - t0, time.process_time() - cpu0

    return Measured(*asyncio.run(main()))


def bench_throughput(home: str, tokens: int, repeat: int) -> None:
    text = long_text(tokens)
    runs: dict[str, list[Measured]] = {
        k: [] for k in ("e2e", "e2e_eph", "emit", "emit_eph", "bare", "alone")
    }
    recorded, ephemeral = engine_config(home), engine_config(home, ephemeral=True)
    size = recorded.event_queue_size

    def model() -> ScriptedModel:
        return ScriptedModel([text_response(text, chunks=tokens) for _ in range(repeat + 1)])

    delivered: list[Event] = []
    lt = LoopThread()
    try:
        with (
            CodexThread(recorded, transport=model().mock_transport()) as ct,
            CodexThread(ephemeral, transport=model().mock_transport()) as ct_eph,
        ):
            configure(ct)
            configure(ct_eph)
            # Warm-up: first request, imports, caches.
            run_task_e2e(ct, delivered)
            run_task_e2e(ct_eph)
            msgs = [e.msg for e in delivered if isinstance(e.msg, AgentMessageDelta)]
            run_emit_path(ct, msgs)
            run_emit_path(ct_eph, msgs)
            run_bare_janus(lt, delivered, size)
            # Interleaved, so a burst of noise hits every variant alike.
            for _ in range(repeat):
                runs["e2e"].append(run_task_e2e(ct, delivered))
                runs["e2e_eph"].append(run_task_e2e(ct_eph))
                runs["emit"].append(run_emit_path(ct, msgs))
                runs["emit_eph"].append(run_emit_path(ct_eph, msgs))
                runs["bare"].append(run_bare_janus(lt, delivered, size))
                runs["alone"].append(run_model_client_alone(tokens, text))
    finally:
        lt.close()

    limit = best(runs["bare"])
    table = Table(
        f"1. Events per second, engine to a consumer thread (N = {tokens:,} deltas "
        f"per Task, best of {repeat})",
        [
            "producer → consumer thread",
            "events/s",
            "÷ bare janus",
            "goal",
            "CPU µs/event",
            "÷ bare by CPU",
        ],
    )
    rows = [
        ("codexcore end to end, session recorded (the default)", "e2e", True),
        ("codexcore end to end, `ephemeral` engine (no rollout file)", "e2e_eph", True),
        ("codexcore emit path only (premade messages → `Codex._emit`), recorded", "emit", False),
        ("codexcore emit path only, ephemeral", "emit_eph", False),
        ("bare limit: same `Event`s, `await janus async_q.put` → `sync_q.get()`", "bare", False),
    ]
    for name, key, goal in rows:
        m = best(runs[key])
        ratio = paired_ratio([r.rate for r in runs[key]], [r.rate for r in runs["bare"]])
        table.add(
            name,
            fmt_rate(m.rate),
            fmt_ratio(ratio),
            f"≥ 0.50: {verdict(ratio >= 0.5)}" if goal else "",
            f"{m.cpu_per_event * 1e6:.1f}",
            fmt_ratio(limit.cpu_per_event / m.cpu_per_event),
        )
    alone = best(runs["alone"])
    table.add(
        "(model client alone: `ModelClient.stream`, one thread, no engine, no queue)",
        fmt_rate(alone.rate),
        "",
        "",
        f"{alone.cpu_per_event * 1e6:.1f}",
        "",
    )
    table.note(
        "Every run (events/s): "
        + "; ".join(
            f"{key} " + ", ".join(f"{m.rate:,.0f}" for m in runs[key])
            for key in ("e2e", "e2e_eph", "emit", "emit_eph", "bare")
        )
        + "."
    )
    table.note(
        "events/s: the fastest run. ÷ bare janus: the median over the rounds of the rate over "
        "the bare run of the same round (the variants run in turn, round after round). "
        "CPU µs/event: the process CPU time (both threads) of the fastest run over its events, "
        "less exposed to other processes than the rate; ÷ bare by CPU compares those."
    )
    table.print()


# --- 1b. the same, to a consumer task on the engine's loop (the async face) -------------


async def async_task_e2e(codex: Codex) -> Measured:
    gc.collect()
    count = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    await codex.submit(USER_INPUT)
    while True:
        event = await codex.next_event()
        count += 1
        if event.msg.TYPE in TERMINAL_EVENT_TYPES:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if event.msg.TYPE != "task_complete":
        raise RuntimeError(f"the Task ended with {event.msg!r}")
    return Measured(count, wall, cpu)


async def drain_in_task(
    produce: Produce, get: Callable[[], Awaitable[object]], count: int
) -> Measured:
    """``count`` gets on this task while ``produce`` runs as another on the same loop."""
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    producer = asyncio.create_task(produce())
    for _ in range(count):
        await get()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await producer
    return Measured(count, wall, cpu)


async def async_emit_path(codex: Codex, msgs: list[AgentMessageDelta]) -> Measured:
    return await drain_in_task(emitter(codex, msgs), codex.next_event, len(msgs))


async def async_bare_janus(events: list[Event], maxsize: int, *, nowait: bool) -> Measured:
    """The same Events through a bare janus queue to a consumer task on the same loop.

    ``nowait`` puts the way ``Codex._emit`` does: ``put_nowait`` while there
    is room, ``await put`` when the queue is full.
    """
    queue: janus.Queue[Event] = janus.Queue(maxsize)
    aq = queue.async_q

    async def produce() -> None:
        if nowait:
            for event in events:
                if aq.full():
                    await aq.put(event)
                else:
                    aq.put_nowait(event)
        else:
            for event in events:
                await aq.put(event)

    measured = await drain_in_task(produce, aq.get, len(events))
    await queue.aclose()
    return measured


async def async_bare_asyncio(events: list[Event], maxsize: int) -> Measured:
    queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)

    async def produce() -> None:
        for event in events:
            await queue.put(event)

    return await drain_in_task(produce, queue.get, len(events))


async def async_throughput(home: str, tokens: int, repeat: int) -> dict[str, list[Measured]]:
    config = engine_config(home, ephemeral=True)
    model = ScriptedModel(
        [text_response(long_text(tokens), chunks=tokens) for _ in range(repeat + 1)]
    )
    runs: dict[str, list[Measured]] = {
        k: [] for k in ("e2e", "emit", "bare", "bare_nowait", "asyncio")
    }
    async with Codex(config, transport=model.mock_transport()) as codex:
        await aconfigure(codex)
        delivered: list[Event] = []
        await codex.submit(USER_INPUT)  # warm-up Task, kept for its events
        while True:
            delivered.append(await codex.next_event())
            if delivered[-1].msg.TYPE in TERMINAL_EVENT_TYPES:
                break
        msgs = [e.msg for e in delivered if isinstance(e.msg, AgentMessageDelta)]
        size = config.event_queue_size
        await async_emit_path(codex, msgs)
        await async_bare_janus(delivered, size, nowait=False)
        for _ in range(repeat):
            runs["e2e"].append(await async_task_e2e(codex))
            runs["emit"].append(await async_emit_path(codex, msgs))
            runs["bare"].append(await async_bare_janus(delivered, size, nowait=False))
            runs["bare_nowait"].append(await async_bare_janus(delivered, size, nowait=True))
            runs["asyncio"].append(await async_bare_asyncio(delivered, size))
    return runs


def bench_async_throughput(home: str, tokens: int, repeat: int) -> None:
    runs = asyncio.run(async_throughput(home, tokens, repeat))
    table = Table(
        f"1b. Events per second to a consumer task on the engine's loop (the async face; "
        f"ephemeral engine, N = {tokens:,}, best of {repeat})",
        ["producer → consumer task", "events/s", "CPU µs/event", "÷ bare janus"],
    )
    rows = [
        ("codexcore end to end: scripted model → Task → `await codex.next_event()`", "e2e"),
        ("codexcore emit path only: premade messages → `Codex._emit`", "emit"),
        ("bare limit: same `Event`s, `await janus async_q.put` → `async_q.get()`", "bare"),
        ("bare janus, `put_nowait` while there is room, as `Codex._emit` does", "bare_nowait"),
        ("(asyncio.Queue, `await put` → `get()`: not thread-safe)", "asyncio"),
    ]
    for name, key in rows:
        m = best(runs[key])
        ratio = paired_ratio([r.rate for r in runs[key]], [r.rate for r in runs["bare"]])
        table.add(name, fmt_rate(m.rate), f"{m.cpu_per_event * 1e6:.1f}", fmt_ratio(ratio))
    table.note(
        "events/s: the fastest run; ÷ bare janus: the median of the round-by-round ratios. "
        "janus 2.0 `put_nowait` wakes a waiting async getter through "
        "`loop.call_soon_threadsafe` and a new Task (a self-pipe write per event), where "
        "`await put` with room to spare wakes it directly and does not yield."
    )
    table.print()
