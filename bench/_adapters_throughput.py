"""The adapters benchmark's section 1: events per second to a client process over stdio,
TCP and Unix, beside the bare writer (see ``bench_adapters.py``)."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence

import orjson
from _adapters_procs import LineConn, Proc, Procs, submission, user_input
from _common import Table, fmt_rate, fmt_ratio, paired_ratio, paired_rounds, verdict

STDIO_GOAL = 250_000
"""The stdio adapter path's goal, events per second."""


class Scale:
    """How much the section does: full, or a smoke run (``--quick``)."""

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
        runs = paired_rounds(
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
