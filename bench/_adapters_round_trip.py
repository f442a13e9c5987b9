"""The adapters benchmark's section 2: the ``user_input`` → ``task_started`` round trip to
``codexcore serve`` over TCP and Unix, beside bare echoes (see ``bench_adapters.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from _adapters_procs import TOKEN, LineConn, Proc, Procs, submission, user_input
from _common import Table, fmt_us, percentile, verdict

from codexcore.adapters.client import RemoteCodex
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ConfigureSession,
    SessionConfigured,
    TaskStarted,
    TextInput,
    UserInput,
)

# --- 2. round trip -----------------------------------------------------------------------------


def latency_cells(samples: Sequence[float]) -> list[str]:
    ordered = sorted(samples)
    return [fmt_us(percentile(ordered, q)) for q in (50, 90, 99)]


def raw_task_started(conn: LineConn, sub_id: str, text: str = "Say ok.") -> float:
    """``user_input`` → ``task_started`` on a raw connection; then the Task's end."""
    line = user_input(sub_id, text)
    t0 = time.perf_counter()
    conn.send(line)
    conn.until("task_started")
    elapsed = time.perf_counter() - t0
    conn.until("task_complete")
    return elapsed


def raw_echo(conn: LineConn, sub_id: str) -> float:
    line = user_input(sub_id, "Say ok.")
    t0 = time.perf_counter()
    conn.send(line)
    conn.line()
    return time.perf_counter() - t0


def configured(conn: LineConn) -> LineConn:
    conn.greet()
    conn.send(submission("cfg", "configure_session"))
    conn.until("session_configured")
    return conn


async def remote_task_started(codex: RemoteCodex, sub_id: str) -> float:
    op = UserInput((TextInput("Say ok."),))
    t0 = time.perf_counter()
    await codex.submit(op, id=sub_id)
    while not isinstance((await codex.next_event()).msg, TaskStarted):
        pass
    elapsed = time.perf_counter() - t0
    while (await codex.next_event()).msg.TYPE not in TERMINAL_EVENT_TYPES:
        pass
    return elapsed


BLOCK = 10
"""Round trips: each variant runs this many Tasks in a row, then the next variant."""

BUSY_US = (50, 150)
"""The busy echoes: the bare echo after this much computing (µs), the machine's price
of a server that is not instant (its client's wait is long enough to be put to sleep)."""


async def sync(function: Callable[..., float], *args: Any) -> float:
    return function(*args)


async def round_trips(
    serve: Proc, host: Proc, bare: Proc, tasks: int, warmup: int
) -> dict[str, list[float]]:
    """The variants take turns, ``BLOCK`` Tasks each, so that they share the machine's
    moments (and each sees the tail of its own previous Task, as in a steady stream)."""
    raw_tcp = configured(LineConn.tcp(serve.address()))
    raw_unix = configured(LineConn.unix(serve.path()))
    emit_tcp = configured(LineConn.tcp(host.address()))
    echo_tcp, echo_unix = LineConn.tcp(bare.address()), LineConn.unix(bare.path())
    for conn in (echo_tcp, echo_unix):
        conn.send(b"echo\n")
    busy = {us: LineConn.tcp(bare.address()) for us in BUSY_US}
    for us, conn in busy.items():
        conn.send(f"echo {us}\n".encode())
    samples: dict[str, list[float]] = {}
    async with RemoteCodex.connect_tcp(*serve.address(), token=TOKEN) as codex:
        await codex.submit(ConfigureSession())
        while not isinstance((await codex.next_event()).msg, SessionConfigured):
            pass
        variants: dict[str, Callable[[str], Awaitable[float]]] = {
            "tcp": lambda i: sync(raw_task_started, raw_tcp, i),
            "tcp_bare": lambda i: sync(raw_echo, echo_tcp, i),
            "emit": lambda i: sync(raw_task_started, emit_tcp, i, "bench-emit 0"),
            "unix": lambda i: sync(raw_task_started, raw_unix, i),
            "unix_bare": lambda i: sync(raw_echo, echo_unix, i),
            "remote": lambda i: remote_task_started(codex, i),
            **{
                f"busy{us}": lambda i, conn=conn: sync(raw_echo, conn, i)  # type: ignore[misc]
                for us, conn in busy.items()
            },
        }
        for block in range((warmup + tasks) // BLOCK):
            for key, variant in variants.items():
                for i in range(block * BLOCK, (block + 1) * BLOCK):
                    sample = await variant(f"t{i}")
                    if i >= warmup:
                        samples.setdefault(key, []).append(sample)
    for conn in (raw_tcp, raw_unix, emit_tcp, echo_tcp, echo_unix, *busy.values()):
        conn.close()
    return samples


def bench_round_trip(procs: Procs, serve: Proc, bare: Proc, quick: bool) -> None:
    tasks, warmup = (100, 20) if quick else (500, 50)
    host = procs.helper("round-trip host", "host")
    samples = asyncio.run(round_trips(serve, host, bare, tasks, warmup))
    host.stop()
    p50 = percentile(sorted(samples["tcp"]), 50)
    bare50 = percentile(sorted(samples["tcp_bare"]), 50)
    table = Table(
        f"2. `user_input` → `task_started` round trip to `codexcore serve` "
        f"({tasks:,} Tasks after {warmup} warm-up ones, one at a time)",
        ["client → server", "p50", "p90", "p99", "goal"],
    )
    table.add(
        "TCP: raw NDJSON client (blocking socket, `orjson`) → `codexcore serve --tcp`",
        *latency_cells(samples["tcp"]),
        f"p50 < 250 µs: {verdict(p50 < 250e-6)}",
    )
    table.add(
        "bare: TCP echo of the same line (same client)", *latency_cells(samples["tcp_bare"]), ""
    )
    table.add(
        "TCP, no Task: `bench-emit 0` (the ack and `task_started` by `_emit`; same adapters)",
        *latency_cells(samples["emit"]),
        "",
    )
    table.add(
        "Unix: the same client → `codexcore serve --unix`", *latency_cells(samples["unix"]), ""
    )
    table.add("bare: Unix echo of the same line", *latency_cells(samples["unix_bare"]), "")
    for us in BUSY_US:
        table.add(
            f"bare: TCP echo after {us} µs of busy work (same client)",
            *latency_cells(samples[f"busy{us}"]),
            "",
        )
    table.add(
        "TCP: `RemoteCodex` (the client library, asyncio) `submit` … `next_event()`",
        *latency_cells(samples["remote"]),
        "",
    )
    table.note(
        f"TCP p50 ÷ bare echo p50: {p50 / bare50:.1f} (codexcore's own share of the round "
        f"trip, p50: {fmt_us(p50 - bare50)}). The variants take turns, {BLOCK} Tasks each, so "
        "they share the machine's moments. The model is a `ScriptedResponsesServer` in "
        "another process answering at once (only `task_started`, which comes before the "
        "model request, is timed; each Task is read to `task_complete` before the next). "
        "The no-Task row is the same adapters in `_adapters_server.py host`, where "
        "`bench-emit 0` makes the engine emit `task_started` and `task_complete` without "
        "starting a Task: the round trip without the Task's start-up."
    )
    table.print()
