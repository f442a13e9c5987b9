"""The engine's queue pair: event throughput to a consumer, and submit latency.

1. Events per second from the engine to a consumer thread. The consumer is
   the main thread blocked in ``CodexThread.next_event()`` (for the bare
   limit, in ``janus.Queue.sync_q.get()``); the producers are:

   * end to end: a Task whose scripted model streams one long message as
     ``N`` text deltas through the real ``ModelClient`` (httpx with
     ``ScriptedModel.mock_transport()``: no socket, but the httpx response
     machinery, the SSE decoder, the Responses event mapping and the Task's
     stream loop all run), each delta becoming one ``agent_message_delta``.
     Twice: with the session recorded in its rollout file (the default) and
     with an ``ephemeral`` engine (nothing recorded);
   * the emit path only: the same ``agent_message_delta`` messages, made in
     advance, pushed through ``Codex._emit`` on the engine's loop (numbering,
     the ``Event`` envelope, the rollout record, the janus queue);
   * the bare limit: a ``janus.Queue`` of the engine's event queue size, an
     asyncio producer awaiting ``async_q.put`` of the very ``Event`` objects
     the end-to-end run delivered.

   A model-client-only row (``ModelClient.stream`` over the same response on
   one thread, no engine, no queue) shows what the model path costs alone.

1b. The same to a consumer task on the engine's loop (the async face, what an
    asyncio UI or a protocol adapter reads), beside bare janus queues put
    into with ``await put`` and with ``put_nowait`` (as ``Codex._emit`` does).

2. Latency from ``await codex.submit(user_input)`` to reading ``task_started``
   on the async face, over many Tasks (the scripted model answers each at
   once; only submit to ``task_started`` is timed). The bare limit is the same
   round trip through two queues and one hop to another asyncio task: a put on
   an input queue, an echo task moving the item to an output queue, a get
   there. The threads face (``CodexThread.submit`` then ``next_event``) is
   timed beside the same echo driven from another thread.

Sessions are recorded under a temporary home, removed at the end.
Run ``.venv/bin/python bench/bench_engine.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import janus
from _common import (
    Table,
    fmt_rate,
    fmt_ratio,
    fmt_us,
    header,
    paired_ratio,
    parse_args,
    percentile,
    verdict,
)

from codexcore import Codex, EngineConfig, SessionConfig
from codexcore.adapters.threads import CodexThread
from codexcore.model import ModelClient
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    AgentMessageDelta,
    ConfigureSession,
    Event,
    SessionConfigured,
    TaskStarted,
    TextInput,
    UserInput,
)
from codexcore.testing import ScriptedModel, text_response

USER_INPUT = UserInput((TextInput("Write a long answer."),))


def engine_config(home: str, *, ephemeral: bool = False) -> EngineConfig:
    """The defaults, but recorded under ``home`` and with a cwd that exists everywhere."""
    return EngineConfig(
        session=SessionConfig(cwd="/tmp"),
        home=home,
        ephemeral=ephemeral,
        stream_idle_timeout=60.0,
    )


def long_text(tokens: int) -> str:
    """A message of ``tokens`` token-sized words (about 7 characters each)."""
    return "".join(f"tok{i % 1000:03d} " for i in range(tokens))


def configure(ct: CodexThread) -> None:
    """Create the Session; read ``session_configured`` and any warning right after it."""
    ct.submit(ConfigureSession())
    while not isinstance(ct.next_event().msg, SessionConfigured):
        pass
    try:
        while True:
            ct.next_event(timeout=0.2)
    except TimeoutError:
        pass


async def aconfigure(codex: Codex) -> None:
    await codex.submit(ConfigureSession())
    while not isinstance((await codex.next_event()).msg, SessionConfigured):
        pass
    await asyncio.sleep(0.05)
    while not codex.event_queue.async_q.empty():
        await codex.next_event()


# --- 1. events per second to a consumer thread -------------------------------------


class Measured:
    """Events delivered, wall seconds and process CPU seconds of one run."""

    def __init__(self, events: int, wall: float, cpu: float) -> None:
        self.events, self.wall, self.cpu = events, wall, cpu

    @property
    def rate(self) -> float:
        return self.events / self.wall

    @property
    def cpu_per_event(self) -> float:
        return self.cpu / self.events


def best(runs: list[Measured]) -> Measured:
    return max(runs, key=lambda m: m.rate)


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


def run_emit_path(ct: CodexThread, msgs: list[AgentMessageDelta]) -> Measured:
    """Pre-made messages through ``Codex._emit`` on the engine loop, read by this thread."""
    codex, loop = ct._codex, ct._runner.loop
    assert loop is not None

    async def produce() -> None:
        emit = codex._emit
        for msg in msgs:
            await emit("bench", msg)

    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    done = asyncio.run_coroutine_threadsafe(produce(), loop)
    for _ in range(len(msgs)):
        ct.next_event()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    done.result()
    return Measured(len(msgs), wall, cpu)


class LoopThread:
    """An asyncio loop on a thread of its own, for the bare producers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="bare-loop")
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def run_bare_janus(lt: LoopThread, events: list[Event], maxsize: int) -> Measured:
    """The same Event objects through a bare janus queue to this thread."""

    async def make() -> janus.Queue[Event]:
        return janus.Queue(maxsize)

    queue: janus.Queue[Event] = lt.run(make())

    async def produce() -> None:
        put = queue.async_q.put
        for event in events:
            await put(event)

    get = queue.sync_q.get
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    done = asyncio.run_coroutine_threadsafe(produce(), lt.loop)
    for _ in range(len(events)):
        get()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    done.result()
    lt.run(queue.aclose())
    return Measured(len(events), wall, cpu)


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


async def async_emit_path(codex: Codex, msgs: list[AgentMessageDelta]) -> Measured:
    async def produce() -> None:
        emit = codex._emit
        for msg in msgs:
            await emit("bench", msg)

    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    producer = asyncio.create_task(produce())
    for _ in range(len(msgs)):
        await codex.next_event()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await producer
    return Measured(len(msgs), wall, cpu)


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

    get = aq.get
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    producer = asyncio.create_task(produce())
    for _ in range(len(events)):
        await get()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await producer
    await queue.aclose()
    return Measured(len(events), wall, cpu)


async def async_bare_asyncio(events: list[Event], maxsize: int) -> Measured:
    queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)

    async def produce() -> None:
        for event in events:
            await queue.put(event)

    get = queue.get
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    producer = asyncio.create_task(produce())
    for _ in range(len(events)):
        await get()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await producer
    return Measured(len(events), wall, cpu)


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


# --- 2. submit → task_started latency ------------------------------------------------


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


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    tokens, repeat, tasks = (2_000, 2, 200) if args.quick else (20_000, 7, 1_000)
    header("bench_engine", args.quick, f"N = {tokens:,} deltas per Task, {tasks:,} Tasks timed")
    home = tempfile.mkdtemp(prefix="codexcore-bench-home-")
    try:
        bench_throughput(home, tokens, repeat)
        bench_async_throughput(home, tokens, repeat)
        bench_latency(home, tasks)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
