"""The adapters: events to a client over stdio, TCP and Unix; round trips; fan-out; memory.

Every server is a process of its own and every client is this process, as a
UI would be. The servers run codexcore's adapters as ``codexcore serve`` does
(``bench/_adapters_server.py host``), or are the real ``codexcore serve`` (for
the round trips, the memory and the load), or are the bare limits
(``bench/_adapters_server.py bare``). Sessions are recorded under a temporary
home, removed at the end; every server started is stopped.

1. Events per second to a client over stdio, TCP and Unix. The adapter path
   alone: premade ``agent_message_delta`` messages pushed through
   ``Codex._emit`` in the server (``bench-emit N``; see
   ``_adapters_server.py``), then the host's pump, encoding, replay buffer,
   send queue and writer, the channel, and this process reading: large
   reads, split on newlines, every line decoded with ``orjson`` and its
   ``seq`` checked. The bare limit writes the same events (``encode_event``,
   NDJSON, blocking writes of about 64 KiB) over the same kind of channel
   to the same reader. Also end to end: a Task whose scripted model
   (in-process, ``ScriptedModel.mock_transport()``) streams N deltas.
2. ``user_input`` → ``task_started`` round trip over TCP (and Unix) against
   the real ``codexcore serve``, its model a ``ScriptedResponsesServer``
   answering at once; beside a bare echo of the same line, in the same run.
   Also through the client library (``RemoteCodex``), and without a Task
   (``bench-emit 0`` on the adapters' host: the round trip minus the Task's
   start-up).
3. Fan-out: one session, 1,000 watching connections; beside the same events
   written by the bare writer to 1,000 sockets.
4. Memory: idle sessions (10,000 on one server) and idle connections.
5. Load: 1, 10, 100 and 1,000 sessions each running a Task at once, over
   real HTTP to a scripted Responses server: latency percentiles, memory.
6. Nothing lost at shutdown or at a disconnect: N events in, N events out.

Run ``.venv/bin/python bench/bench_adapters.py`` (``--quick`` for a smoke run;
``--only round-trip`` and the like for one section).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
from _adapters_procs import (
    TOKEN,
    AsyncConn,
    LineConn,
    Proc,
    Procs,
    Watcher,
    chunks,
    hello,
    raise_fd_limit,
    submission,
    user_input,
)
from _common import (
    Table,
    fmt_bytes,
    fmt_ms,
    fmt_rate,
    fmt_ratio,
    fmt_us,
    header,
    median,
    paired_ratio,
    parse_args,
    percentile,
    verdict,
)

from codexcore.adapters.client import RemoteCodex
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ConfigureSession,
    SessionConfigured,
    TaskStarted,
    TextInput,
    UserInput,
)

STDIO_GOAL = 250_000


class Scale:
    """How much each section does: full, or a smoke run (``--quick``)."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.events = 20_000 if quick else 100_000
        self.e2e_tokens = 5_000 if quick else 20_000
        self.rounds = 1 if quick else 4


# --- 1. events per second ---------------------------------------------------------------------


class Run:
    """One run: events read, wall seconds, the server's and the reader's CPU seconds."""

    __slots__ = ("events", "gaps", "reader_cpu", "server_cpu", "wall")

    def __init__(self, events: int, wall: float, server_cpu: float, reader_cpu: float, gaps: int):
        self.events, self.wall, self.gaps = events, wall, gaps
        self.server_cpu, self.reader_cpu = server_cpu, reader_cpu

    @property
    def rate(self) -> float:
        return self.events / self.wall

    @property
    def server_us(self) -> float:
        return self.server_cpu / self.events * 1e6

    @property
    def reader_us(self) -> float:
        return self.reader_cpu / self.events * 1e6


def best(runs: Sequence[Run]) -> Run:
    return max(runs, key=lambda r: r.rate)


class Peer:
    """A client's view of one server: a connection, the process behind it, what to send."""

    def __init__(self, conn: LineConn, proc: Proc, *, bare: bool, stdio: bool) -> None:
        self.conn, self.proc, self.bare, self.stdio = conn, proc, bare, stdio
        self.runs = 0

    def setup(self) -> None:
        if self.bare:
            return
        if not self.stdio:
            self.conn.greet()
        self.conn.send(submission("cfg", "configure_session"))
        self.conn.until("session_configured")

    def run(self, n: int, *, task: bool = False) -> Run:
        """``n`` premade deltas (``task``: a real Task of ``n`` deltas), read to the end."""
        self.runs += 1
        sub_id = f"r{self.runs}"
        if self.bare:
            line = f"emit {n} {sub_id}{'' if self.stdio else ' self'}\n".encode()
        else:
            line = user_input(sub_id, "Write a long answer." if task else f"bench-emit {n}")
        gc.collect()
        cpu0, reader0 = self.proc.cpu(), time.process_time()
        t0 = time.perf_counter()
        self.conn.send(line)
        got = self.conn.events("task_complete")
        wall = time.perf_counter() - t0
        reader_cpu, server_cpu = time.process_time() - reader0, self.proc.cpu() - cpu0
        if got.last.get("id") != sub_id or got.deltas != n:
            raise RuntimeError(f"run {sub_id}: {got.deltas} deltas of {n}, last {got.last}")
        return Run(got.count, wall, server_cpu, reader_cpu, got.gaps)


def rotate(variants: Sequence[tuple[str, Callable[[], Run]]], rounds: int) -> dict[str, list[Run]]:
    """Each variant once to warm up, then ``rounds`` times, the order rotated each round."""
    for _, run in variants:
        run()
    runs: dict[str, list[Run]] = {name: [] for name, _ in variants}
    for i in range(rounds):
        shift = i % len(variants)
        for name, run in [*variants[shift:], *variants[:shift]]:
            runs[name].append(run())
    return runs


def reader_alone(n: int) -> float:
    """The reader's own ceiling: the bare events, from memory, split and decoded (events/s)."""
    from _adapters_server import bare_events, bare_write

    data: list[bytes] = []
    bare_write(bare_events("r", n, 0), data.append)
    loads = orjson.loads
    gc.collect()
    t0 = time.process_time()
    rest = b""
    for chunk in data:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            message = loads(line)
            if message.get("seq") is None:
                raise RuntimeError("not an event")
    return (n + 3) / (time.process_time() - t0)


def bench_throughput(procs: Procs, scale: Scale) -> None:
    n, tokens, rounds = scale.events, scale.e2e_tokens, scale.rounds
    mock = ["--mock-model", str(tokens), str(2 * rounds + 4)]
    stdio_host = procs.helper("stdio host", "host", *mock, stdio=True)
    stdio_bare = procs.helper("stdio bare", "bare", stdio=True)
    sockets_host = procs.helper("socket host", "host", *mock)
    sockets_bare = procs.helper("socket bare", "bare")
    channels: dict[str, tuple[Peer, Peer]] = {
        "stdio": (
            Peer(LineConn.pipes(stdio_host), stdio_host, bare=False, stdio=True),
            Peer(LineConn.pipes(stdio_bare), stdio_bare, bare=True, stdio=True),
        ),
        "TCP": (
            Peer(LineConn.tcp(sockets_host.address()), sockets_host, bare=False, stdio=False),
            Peer(LineConn.tcp(sockets_bare.address()), sockets_bare, bare=True, stdio=False),
        ),
        "Unix": (
            Peer(LineConn.unix(sockets_host.path()), sockets_host, bare=False, stdio=False),
            Peer(LineConn.unix(sockets_bare.path()), sockets_bare, bare=True, stdio=False),
        ),
    }
    table = Table(
        f"1. Events per second to a client process (N = {n:,} premade deltas a run; "
        f"end to end: a Task of {tokens:,} deltas; best of {rounds})",
        [
            "channel",
            "server → client",
            "events/s",
            "÷ bare",
            "goal",
            "server CPU µs/event",
            "÷ bare by server CPU",
            "client CPU µs/event",
        ],
    )
    everything: dict[str, dict[str, list[Run]]] = {}
    for host, bare in channels.values():  # at once: a socket has 10 s to say hello
        host.setup()
        bare.setup()
    for channel, (host, bare) in channels.items():
        runs = rotate(
            [
                ("adapter", lambda h=host: h.run(n)),  # type: ignore[misc]
                ("bare", lambda b=bare: b.run(n)),  # type: ignore[misc]
                ("e2e", lambda h=host: h.run(tokens, task=True)),  # type: ignore[misc]
            ],
            rounds,
        )
        everything[channel] = runs
        limit = [r.rate for r in runs["bare"]]
        for key, name in (
            ("adapter", "codexcore adapter path: premade deltas → `_emit` → host → channel"),
            ("bare", "bare limit: the same events, `encode_event`, NDJSON, blocking writes"),
            ("e2e", "codexcore end to end: scripted model → Task → host → channel"),
        ):
            run = best(runs[key])
            ratio = paired_ratio([r.rate for r in runs[key]], limit)
            goal = ""
            if key == "adapter":
                goal = f"≥ 0.50: {verdict(ratio >= 0.5)}"
                if channel == "stdio":
                    goal += f"; ≥ {STDIO_GOAL:,}/s: {verdict(run.rate >= STDIO_GOAL)}"
            table.add(
                channel,
                name,
                fmt_rate(run.rate),
                fmt_ratio(ratio),
                goal,
                f"{run.server_us:.2f}",
                fmt_ratio(best(runs["bare"]).server_us / run.server_us),
                f"{run.reader_us:.2f}",
            )
    ceiling = reader_alone(n)
    table.add(
        "(none)",
        "the reader alone: the bare events from memory",
        fmt_rate(ceiling),
        *[""] * 5,
    )
    gaps = sum(r.gaps for runs in everything.values() for rs in runs.values() for r in rs)
    table.note(
        "Every run (events/s): "
        + "; ".join(
            f"{channel} {key} " + ", ".join(f"{r.rate:,.0f}" for r in rs)
            for channel, runs in everything.items()
            for key, rs in runs.items()
        )
        + "."
    )
    table.note(
        "events/s: the fastest run (events counted as read and decoded by this process, "
        "from sending the trigger to the last event). ÷ bare: the median over the rounds "
        "of the rate over the bare writer's on the same channel in the same round. "
        "CPU µs/event: of the server process (all threads, from `/proc`) and of this "
        f"reader, in the fastest run. seq gaps seen (merged deltas): {gaps}."
    )
    table.print()
    for proc in (stdio_host, stdio_bare, sockets_host, sockets_bare):
        code = proc.end_of_input() if proc in (stdio_host, stdio_bare) else proc.stop()
        if code != 0:
            raise RuntimeError(f"{proc.name} exited {code}:\n{proc.stderr_text()[-2000:]}")


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


def bench_round_trip(procs: Procs, serve: Proc, bare: Proc, scale: Scale) -> None:
    tasks, warmup = (100, 20) if scale.quick else (500, 50)
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


# --- 3. fan-out --------------------------------------------------------------------------------


class FanOut:
    """One controller and many watchers of one server (codexcore's session, or the bare one)."""

    def __init__(self, proc: Proc, *, bare: bool) -> None:
        self.proc, self.bare = proc, bare
        self.watchers: list[Watcher] = []
        self.controller: AsyncConn | None = None
        self.runs = 0
        self.seq = 0  # the next event's seq

    async def connect(self, count: int) -> None:
        assert self.proc.tcp is not None
        loop = asyncio.get_running_loop()
        controller = self.controller = await AsyncConn.tcp(self.proc.tcp)
        session: dict[str, Any] = {}
        if not self.bare:
            session = await controller.greet()
            self.seq = await controller.configure() + 1
        for group in chunks(range(count), 100):
            made = await asyncio.gather(
                *(
                    loop.create_connection(lambda: Watcher(greeting=True), *self.proc.tcp)
                    for _ in group
                )
            )
            for transport, watcher in made:
                if self.bare:
                    transport.write(b"watch\n")
                else:
                    line = hello(
                        session_id=session["session_id"], last_seq=self.seq - 1, control=False
                    )
                    transport.write(orjson.dumps(line) + b"\n")
                self.watchers.append(watcher)
            await asyncio.gather(*(w.welcomed for w in self.watchers[-len(group) :]))

    async def burst(self, n: int) -> tuple[float, float, float]:
        """Trigger n deltas (n + 3 events); (first event at the last watcher, last event
        at the last watcher, server CPU seconds)."""
        assert self.controller is not None
        self.runs += 1
        sub_id = f"f{self.runs}"
        waits = [w.expect(n + 3) for w in self.watchers]
        line = (
            f"emit {n} {sub_id} watchers\n".encode()
            if self.bare
            else user_input(sub_id, f"bench-emit {n}")
        )
        cpu0 = self.proc.cpu()
        t0 = time.perf_counter()
        await self.controller.send(line)
        async with asyncio.timeout(300):
            await asyncio.gather(*(done for _, done in waits))
        cpu = self.proc.cpu() - cpu0
        first = max(w.first_at for w in self.watchers) - t0
        last = max(w.done_at for w in self.watchers) - t0
        for w in self.watchers:
            message = w.last_message()
            if message.get("seq") != self.seq + n + 2 or message["msg"]["type"] != "task_complete":
                raise RuntimeError(
                    f"a watcher's last event: {message} (wanted seq {self.seq + n + 2})"
                )
        self.seq += n + 3
        if not self.bare:  # the controller reads its own copy
            await self.controller.until("task_complete")
        return first, last, cpu

    async def close(self) -> None:
        for w in self.watchers:
            if w.transport is not None:
                w.transport.close()
        if self.controller is not None:
            await self.controller.close()


async def fan_out(
    host: Proc, bare: Proc, watchers: int, n: int, rounds: int, pings: int
) -> dict[str, Any]:
    sides = {"codexcore": FanOut(host, bare=False), "bare": FanOut(bare, bare=True)}
    connect: dict[str, float] = {}
    for name, side in sides.items():
        t0 = time.perf_counter()
        await side.connect(watchers)
        connect[name] = time.perf_counter() - t0
    bursts: dict[str, list[tuple[float, float, float]]] = {k: [] for k in sides}
    reach: dict[str, list[float]] = {k: [] for k in sides}
    for side in sides.values():
        await side.burst(n)  # warm-up
    for i in range(rounds):
        for name, side in sides.items() if i % 2 == 0 else reversed(sides.items()):
            bursts[name].append(await side.burst(n))
    for _ in range(pings):
        for name, side in sides.items():
            first, _, _ = await side.burst(0)
            reach[name].append(first)
            await asyncio.sleep(0.01)
    for side in sides.values():
        await side.close()
    return {"connect": connect, "bursts": bursts, "reach": reach}


def bench_fan_out(procs: Procs, scale: Scale) -> None:
    watchers = 250 if scale.quick else 1_000
    n, rounds, pings = (200, 1, 10) if scale.quick else (1_000, 3, 30)
    host = procs.helper(
        "fan-out host",
        "host",
        "--per-session",
        str(watchers + 8),
        "--max-connections",
        str(watchers + 64),
    )
    bare = procs.helper("fan-out bare", "bare")
    result = asyncio.run(fan_out(host, bare, watchers, n, rounds, pings))
    deliveries = watchers * (n + 3)
    table = Table(
        f"3. Fan-out: one session, {watchers:,} watching connections over TCP "
        f"({n:,} deltas a burst, {n + 3:,} events, best of {rounds}; "
        f"reach: median of {pings} single events)",
        [
            "server",
            "events delivered/s (all watchers)",
            "÷ bare",
            "burst: last watcher done",
            "one event: last watcher reached, p50",
            "server CPU µs/delivery",
        ],
    )
    bursts, reach = result["bursts"], result["reach"]
    rates = {k: [deliveries / last for _, last, _ in v] for k, v in bursts.items()}
    for name, label in (
        ("codexcore", "codexcore: `SessionHost`, 1 controller + watchers (`control: false`)"),
        ("bare", "bare: the same events written to each socket in turn"),
    ):
        fastest = min(bursts[name], key=lambda b: b[1])
        table.add(
            label,
            fmt_rate(deliveries / fastest[1]),
            fmt_ratio(paired_ratio(rates[name], rates["bare"])),
            fmt_ms(fastest[1]),
            fmt_ms(median(reach[name])),
            f"{fastest[2] / deliveries * 1e6:.2f}",
        )
    connect = result["connect"]
    table.note(
        f"Attaching the {watchers:,} watchers (connect, `hello`, `welcome`; 100 at a time) "
        f"took {connect['codexcore']:.2f} s (bare: {connect['bare']:.2f} s). Every watcher "
        "received every event: its last line is checked (`seq`, `task_complete`). The "
        "watchers count lines with `bytes.count` (no decoding: 1,000 decoding readers in "
        "one process would measure the readers). `codexcore serve` allows 32 connections "
        "per session unless told otherwise (`--max-connections-per-session`): this server "
        f"is the same host with {watchers + 8:,}."
    )
    table.print()
    for proc in (host, bare):
        proc.stop()


# --- 4. memory ----------------------------------------------------------------------------------


async def new_session(
    address: tuple[str, int], *, keep: bool = False
) -> tuple[str, int, AsyncConn]:
    """A configured session (``session_configured`` read); the connection closed unless kept."""
    conn = await AsyncConn.tcp(address)
    welcome = await conn.greet()
    seq = await conn.configure()
    if not keep:
        await conn.close()
    return str(welcome["session_id"]), seq, conn


async def in_parallel(count: int, width: int, make: Callable[[int], Any]) -> list[Any]:
    """``make(i)`` for i in range(count), at most ``width`` at a time, in order."""
    gate = asyncio.Semaphore(width)

    async def one(i: int) -> Any:
        async with gate:
            return await make(i)

    return list(await asyncio.gather(*(one(i) for i in range(count))))


def settle(proc: Proc, fds: int | None = None, within: float = 30.0) -> None:
    """Wait until the server is quiet: (optionally) its descriptor count is ``fds``, and
    its CPU time stops growing; then collect nothing (the server's own GC runs as it runs)."""
    deadline = time.monotonic() + within
    while fds is not None and proc.fds() != fds and time.monotonic() < deadline:
        time.sleep(0.05)
    last = proc.cpu()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = proc.cpu()
        if now - last < 0.004:
            return
        last = now


async def task_latencies(conn: AsyncConn, count: int, prefix: str) -> list[float]:
    samples = []
    for i in range(count):
        t0 = time.perf_counter()
        await conn.send(user_input(f"{prefix}{i}", "Say ok."))
        await conn.until("task_started")
        samples.append(time.perf_counter() - t0)
        await conn.until("task_complete")
    return samples


async def memory(serve: Proc, sessions: int, connections: int, tasks: int) -> dict[str, Any]:
    address = serve.address()
    result: dict[str, Any] = {}
    _, _, probe = await new_session(address, keep=True)  # for the round trips, kept open
    await task_latencies(probe, 50, "w")
    result["rt_before"] = await task_latencies(probe, tasks, "a")
    settle(serve)
    fds0, rss0 = serve.fds(), serve.rss()
    t0 = time.perf_counter()
    made = await in_parallel(sessions, 32, lambda i: new_session(address))
    result["create_s"] = time.perf_counter() - t0
    settle(serve)
    fds1, rss1 = serve.fds(), serve.rss()
    result["rt_after"] = await task_latencies(probe, tasks, "b")
    conns: list[AsyncConn] = []

    async def attach(i: int) -> None:
        session_id, seq, _ = made[i]
        conn = await AsyncConn.tcp(address)
        await conn.greet(session_id=session_id, last_seq=seq)
        conns.append(conn)

    await in_parallel(connections, 32, attach)
    settle(serve)
    fds2, rss2 = serve.fds(), serve.rss()
    for conn in conns:
        await conn.close()
    await probe.close()
    result.update(
        rss0=rss0, rss1=rss1, rss2=rss2, fds0=fds0, fds1=fds1, fds2=fds2, hwm=serve.status("VmHWM")
    )
    return result


async def bare_connections(proc: Proc, count: int) -> tuple[int, int]:
    """RSS of a bare asyncio server before and after ``count`` idle connections."""
    assert proc.tcp is not None
    settle(proc)
    before = proc.rss()
    conns = await in_parallel(count, 32, lambda i: AsyncConn.tcp(proc.address()))
    settle(proc)
    after = proc.rss()
    for conn in conns:
        await conn.close()
    return before, after


def bench_memory(procs: Procs, base_url: str, scale: Scale) -> None:
    sessions = 1_000 if scale.quick else 10_000
    connections = 200 if scale.quick else 1_000
    tasks = 50 if scale.quick else 200
    serve = procs.codexcore_serve(base_url, "--max-sessions", str(sessions + 100))
    got = asyncio.run(memory(serve, sessions, connections, tasks))
    serve.stop()
    engines = procs.helper("engines", "engines", "--count", str(connections))
    assert engines.popen.stdout is not None
    alone = orjson.loads(engines.popen.stdout.readline())
    engines.stop()
    bare = procs.helper("bare asyncio", "bare-asyncio")
    bare_before, bare_after = asyncio.run(bare_connections(bare, connections))
    bare.stop()
    per_session = (got["rss1"] - got["rss0"]) / sessions
    per_engine = (alone["after"] - alone["before"]) / alone["count"]
    per_connection = (got["rss2"] - got["rss1"]) / connections
    per_bare = (bare_after - bare_before) / connections
    table = Table(
        f"4. Memory: {sessions:,} idle sessions on one `codexcore serve`, then "
        f"{connections:,} idle connections attached to them (RSS growth)",
        ["what", "per instance", "÷ bare", "in all", "descriptors each"],
    )
    table.add(
        "codexcore: an idle session (created, `configure_session` answered, detached; recorded)",
        fmt_bytes(per_session),
        fmt_ratio(per_session / per_engine),
        fmt_bytes(got["rss1"] - got["rss0"]),
        f"{(got['fds1'] - got['fds0']) / sessions:.2f}",
    )
    table.add(
        "bare: the engine alone (`Codex` configured, the host's engine config and pool; "
        f"{alone['count']:,} in one process)",
        fmt_bytes(per_engine),
        "1.00",
        "",
        "",
    )
    table.add(
        "codexcore: an idle connection attached to an idle session (`hello` with `last_seq`)",
        fmt_bytes(per_connection),
        fmt_ratio(per_connection / per_bare),
        fmt_bytes(got["rss2"] - got["rss1"]),
        f"{(got['fds2'] - got['fds1']) / connections:.2f}",
    )
    table.add(
        "bare: an idle connection to an asyncio server (a task blocked in `reader.read()`)",
        fmt_bytes(per_bare),
        "1.00",
        "",
        "",
    )
    before, after = sorted(got["rt_before"]), sorted(got["rt_after"])
    table.note(
        f"The server's RSS: {fmt_bytes(got['rss0'])} with no session, "
        f"{fmt_bytes(got['rss1'])} with {sessions:,} idle sessions, {fmt_bytes(got['rss2'])} "
        f"with the connections; peak {fmt_bytes(got['hwm'])}. Creating the sessions "
        f"(32 clients at a time, each: connect, `hello`, `configure_session`, close) took "
        f"{got['create_s']:.1f} s, {sessions / got['create_s']:,.0f} sessions/s. "
        f"`user_input` → `task_started` over TCP on one more session of the same server, "
        f"{len(before)} Tasks: p50 {fmt_us(percentile(before, 50))}, p99 "
        f"{fmt_us(percentile(before, 99))} with no idle session; p50 "
        f"{fmt_us(percentile(after, 50))}, p99 {fmt_us(percentile(after, 99))} beside "
        f"{sessions:,} idle ones. A recorded session holds its rollout file open: one "
        "descriptor per session (the server raises its limit to the hard limit, here "
        f"{raise_fd_limit():,})."
    )
    table.print()


# --- 5. load ----------------------------------------------------------------------------------


async def load_level(
    serve: Proc, sessions: int, rounds: int
) -> tuple[list[float], list[float], int, int, float]:
    """``sessions`` sessions each run a Task, all at once, ``rounds`` times.

    Returns the latencies to ``task_started`` and to ``task_complete``, the RSS
    with the sessions idle, the peak RSS, and the server CPU seconds per Task.
    """
    assert serve.tcp is not None
    address = serve.tcp
    made = await in_parallel(sessions, 50, lambda i: new_session(address, keep=True))
    conns = [conn for _, _, conn in made]
    settle(serve)
    idle = serve.rss()
    started: list[float] = []
    complete: list[float] = []

    async def one(conn: AsyncConn, sub_id: str) -> None:
        t0 = time.perf_counter()
        await conn.send(user_input(sub_id, "Say ok."))
        await conn.until("task_started")
        started.append(time.perf_counter() - t0)
        await conn.until("task_complete")
        complete.append(time.perf_counter() - t0)

    await asyncio.gather(*(one(conn, "w") for conn in conns))  # warm-up
    cpu0 = serve.cpu()
    for r in range(rounds):
        await asyncio.gather(*(one(conn, f"r{r}") for conn in conns))
    cpu = (serve.cpu() - cpu0) / (sessions * rounds)
    del started[:sessions], complete[:sessions]
    for conn in conns:
        await conn.close()
    return started, complete, idle, serve.status("VmHWM"), cpu


async def bare_model_requests(base_url: str, count: int, rounds: int) -> list[float]:
    """The same model requests made at once straight to the scripted server: ``count``
    kept-alive connections, a minimal HTTP/1.1 POST on each, the chunked reply read to
    its end. No engine, no adapter, no HTTP library: the floor of a Task's latency."""
    host, _, port = base_url.removeprefix("http://").partition("/")[0].partition(":")
    body = orjson.dumps({"model": "gpt-5", "input": [], "stream": True})
    request = (
        f"POST /v1/responses HTTP/1.1\r\nhost: {host}:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    conns = await in_parallel(
        count, 50, lambda i: asyncio.open_connection(host, int(port), limit=1 << 20)
    )
    samples: list[float] = []

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
        t0 = time.perf_counter()
        writer.write(request)
        await reader.readuntil(b"\r\n0\r\n\r\n")
        return time.perf_counter() - t0

    await asyncio.gather(*(one(r, w) for r, w in conns))  # warm-up
    for _ in range(rounds):
        samples += await asyncio.gather(*(one(r, w) for r, w in conns))
    for _, writer in conns:
        writer.close()
    return samples


def bench_load(procs: Procs, base_url: str, scale: Scale) -> None:
    levels = (1, 10, 100) if scale.quick else (1, 10, 100, 1_000)
    most = 20 if scale.quick else 100
    table = Table(
        f"5. Sessions running a Task at once (each a `user_input` against the scripted "
        f"model over real HTTP; {most} Tasks a session when alone, 3 from 100 sessions, after "
        "a warm-up round; a fresh "
        "`codexcore serve` per row)",
        [
            "sessions",
            "→ task_started p50 / p99",
            "→ task_complete p50 / p90 / p99",
            "bare: the model request alone p50 / p99",
            "server RSS idle / peak",
            "RSS per session",
            "server CPU per Task",
        ],
    )
    for sessions in levels:
        rounds = max(3, most // sessions)
        serve = procs.codexcore_serve(base_url)
        settle(serve)
        rss0 = serve.rss()
        started, complete, idle, peak, cpu = asyncio.run(load_level(serve, sessions, rounds))
        serve.stop()
        bare = sorted(asyncio.run(bare_model_requests(base_url, sessions, rounds)))
        started.sort()
        complete.sort()
        table.add(
            f"{sessions:,}",
            f"{fmt_ms(percentile(started, 50))} / {fmt_ms(percentile(started, 99))}",
            " / ".join(fmt_ms(percentile(complete, q)) for q in (50, 90, 99)),
            f"{fmt_ms(percentile(bare, 50))} / {fmt_ms(percentile(bare, 99))}",
            f"{fmt_bytes(idle)} / {fmt_bytes(peak)}",
            fmt_bytes((peak - rss0) / sessions),
            fmt_us(cpu),
        )
    table.note(
        "Each session is its own TCP connection; a round sends every session's "
        "`user_input` at once and waits for every `task_complete`. The model's reply is "
        "a message of 10 deltas (about 17 events a Task). RSS per session: the peak less "
        "the server's RSS before any session, over the sessions. The bare column is the "
        "same number of requests made at once straight to the scripted server (a minimal "
        "HTTP/1.1 client on kept-alive connections: no engine, no adapter, no HTTP "
        "library): the floor of a Task's latency here."
    )
    table.print()


# --- 6. nothing lost ---------------------------------------------------------------------------


class Check:
    def __init__(self, name: str) -> None:
        self.name = name
        self.numbered = 0
        self.received = 0
        self.deltas = 0
        self.wanted_deltas = 0
        self.exact = False
        self.detail = ""


def judge(check: Check, events: list[dict[str, Any]], *, shutdown: bool = True) -> Check:
    """Exact when the seqs run 0, 1, … without a gap or a repeat and end as they must."""
    seqs = [int(e["seq"]) for e in events]
    check.received = len(events)
    check.numbered = seqs[-1] + 1 if seqs else 0
    check.deltas = sum(1 for e in events if e["msg"]["type"] == "agent_message_delta")
    last = events[-1]["msg"]["type"] if events else "nothing"
    problems = []
    if seqs != list(range(len(seqs))):
        missing = sorted(set(range(check.numbered)) - set(seqs))
        if missing:
            problems.append(f"seq {', '.join(map(str, missing[:5]))} never arrived")
        counts = collections.Counter(seqs)
        for seq in sorted(s for s, c in counts.items() if c > 1)[:3]:
            types = [e["msg"]["type"] for e in events if e["seq"] == seq]
            problems.append(f"seq {seq} twice ({' and '.join(types)})")
    if shutdown and last != "shutdown_complete":
        problems.append(f"last event {last}")
    if check.wanted_deltas and check.deltas != check.wanted_deltas:
        problems.append(f"{check.deltas} deltas of {check.wanted_deltas}")
    check.exact = not problems
    check.detail = "; ".join(problems)
    return check


def events_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if "seq" in m]


def kind_of(message: dict[str, Any]) -> str:
    return str(message["msg"]["type"] if "seq" in message else message["type"])


def stop_check(
    procs: Procs, channel: str, n: int, *, stop: str, delay: float, reading: bool
) -> Check:
    """``bench-emit n``; ``delay`` seconds later the server is stopped (``stop``:
    ``eof``, stdin closed, or ``sigterm``); the client reads at once (``reading``) or
    only 0.3 s after the stop, with a 4 KiB receive buffer on sockets; then to the end."""
    when = "right after" if delay == 0 else f"{delay * 1000:.0f} ms after"
    how = "end of input" if stop == "eof" else "SIGTERM"
    client = "client reading" if reading else "client not reading until 0.3 s after the stop"
    check = Check(f"{channel}, {how} {when} `bench-emit {n:,}`, {client}")
    stdio = channel == "stdio"
    proc = procs.helper(f"{channel} check", "host", stdio=stdio)
    rcvbuf = None if reading else 4096
    if stdio:
        conn = LineConn.pipes(proc)
    elif channel == "Unix":
        assert proc.unix is not None
        conn = LineConn.unix(proc.unix, rcvbuf=rcvbuf)
    else:
        assert proc.tcp is not None
        conn = LineConn.tcp(proc.tcp, rcvbuf=rcvbuf)
    if not stdio:
        conn.greet()
    seen: list[dict[str, Any]] = []
    conn.send(submission("cfg", "configure_session"))
    while not seen or kind_of(seen[-1]) != "session_configured":
        seen.append(conn.message())

    def stop_it() -> None:
        if stop == "eof":
            assert proc.popen.stdin is not None
            proc.popen.stdin.close()
        else:
            proc.popen.send_signal(signal.SIGTERM)

    conn.send(user_input("big", f"bench-emit {n}"))
    timer = threading.Timer(delay, stop_it)
    timer.start()
    if not reading:
        timer.join()
        time.sleep(0.3)
    rest, reset = conn.to_end()
    timer.join()
    code = proc.popen.wait(60)
    proc.stop()
    if stop == "eof" or delay >= 0.5:
        check.wanted_deltas = n  # the emission was over before the stop
    judge(check, events_of(seen + rest))
    if code != 0 or reset:
        check.exact = False
        check.detail += f"; exit code {code}, reset {reset}"
    return check


def reattach(procs: Procs, n: int) -> Check:
    """Drop the connection (a reset) mid-stream; reattach with ``last_seq``; read to the end."""
    check = Check(
        f"TCP, connection reset after a third of `bench-emit {n:,}`, reattached with `last_seq`"
    )
    check.wanted_deltas = n
    proc = procs.helper("reattach check", "host")
    assert proc.tcp is not None
    first = LineConn.tcp(proc.tcp)
    session_id = first.greet()["session_id"]
    seen: list[dict[str, Any]] = []
    first.send(submission("cfg", "configure_session"))
    first.send(user_input("big", f"bench-emit {n}"))
    while len(seen) < n // 3:
        seen.append(first.message())
    first.abort()
    last_seq = max(int(m["seq"]) for m in seen if "seq" in m)
    second = LineConn.tcp(proc.tcp)
    second.greet(session_id=session_id, last_seq=last_seq)
    got = second.events("task_complete")
    del got
    # events() does not keep the messages; read again through a fresh attach for the rest
    third = LineConn.tcp(proc.tcp)
    welcome = third.greet(session_id=session_id, last_seq=last_seq)
    rest: list[dict[str, Any]] = []
    while not rest or kind_of(rest[-1]) != "task_complete":
        rest.append(third.message())
    second.close()
    third.close()
    proc.stop()
    judge(check, events_of(seen + rest), shutdown=False)
    if welcome.get("replay_from") != last_seq + 1 or not welcome.get("replay_complete"):
        check.exact = False
        check.detail += f" welcome {welcome}"
    return check


async def remote_reconnect(procs: Procs, n: int) -> Check:
    """The client library: ``reconnect()`` mid-stream; the UI must see every event once."""
    check = Check(
        f"TCP, `RemoteCodex.reconnect()` after a third of `bench-emit {n:,}` (the client "
        "library: replay, resend, deduplication)"
    )
    check.wanted_deltas = n
    proc = procs.helper("client check", "host")
    assert proc.tcp is not None
    events: list[dict[str, Any]] = []
    async with RemoteCodex.connect_tcp(*proc.tcp, token=TOKEN) as codex:
        await codex.submit(ConfigureSession())
        await codex.submit(UserInput((TextInput(f"bench-emit {n}"),)))
        while True:
            event = await codex.next_event()
            events.append({"seq": event.seq, "msg": {"type": event.msg.TYPE}})
            if len(events) == n // 3:
                await codex.reconnect()
            if event.msg.TYPE == "task_complete":
                break
    proc.stop()
    return judge(check, events, shutdown=False)


def bench_exactness(procs: Procs, scale: Scale) -> bool:
    big = 20_000 if scale.quick else 100_000
    small = 2_000
    checks = [
        stop_check(procs, "stdio", big, stop="eof", delay=0, reading=False),
        stop_check(procs, "stdio", big, stop="sigterm", delay=0.1, reading=True),
        stop_check(procs, "stdio", big, stop="sigterm", delay=0.1, reading=False),
        stop_check(procs, "TCP", big, stop="sigterm", delay=0.1, reading=True),
        stop_check(procs, "TCP", small, stop="sigterm", delay=0.5, reading=False),
        stop_check(procs, "Unix", small, stop="sigterm", delay=0.5, reading=False),
        reattach(procs, 3 * small),
        asyncio.run(remote_reconnect(procs, 3 * small)),
    ]
    table = Table(
        "6. Nothing lost: every event the engine numbered reaches the client, exactly once",
        ["case", "numbered (in)", "received (out)", "deltas", "exact?"],
    )
    for check in checks:
        table.add(
            check.name,
            f"{check.numbered:,}",
            f"{check.received:,}",
            f"{check.deltas:,}" + (f" of {check.wanted_deltas:,}" if check.wanted_deltas else ""),
            "yes" if check.exact else f"**NO**: {check.detail}",
        )
    table.note(
        "in: the events the engine numbered (the last `seq` + 1); out: the events the client "
        "read, checked to run 0, 1, 2 … with no gap and no repeat, ending with "
        "`shutdown_complete` where the session ended. A stop cancels an emission under way: "
        "deltas never numbered are not owed (the SIGTERM rows)."
    )
    table.print()
    return all(c.exact for c in checks)


SECTIONS = ("throughput", "round-trip", "fan-out", "memory", "load", "exactness")
"""The sections in order, as ``--only`` names them."""


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "", sections=SECTIONS)
    only = args.only
    scale = Scale(args.quick)
    header("bench_adapters", args.quick, f"N = {scale.events:,} events a run")
    raise_fd_limit()
    started = time.perf_counter()
    home = tempfile.mkdtemp(prefix="codexcore-bench-home-")
    rundir = tempfile.mkdtemp(prefix="cxb-")
    try:
        with Procs(home, rundir) as procs:
            if "throughput" in only:
                bench_throughput(procs, scale)
            _, base_url = procs.model(chunks=10, responses=100_000)
            if "round-trip" in only:
                serve = procs.codexcore_serve(base_url)
                bare = procs.helper("bare", "bare")
                bench_round_trip(procs, serve, bare, scale)
                serve.stop()
                bare.stop()
            if "fan-out" in only:
                bench_fan_out(procs, scale)
            if "memory" in only:
                bench_memory(procs, base_url, scale)
            if "load" in only:
                bench_load(procs, base_url, scale)
            if "exactness" in only:
                bench_exactness(procs, scale)
            print(f"<!-- bench_adapters: {time.perf_counter() - started:.0f} s -->", flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(rundir, ignore_errors=True)


if __name__ == "__main__":
    main()
