"""The adapters benchmark's section 3: one session, many watching connections, beside the
same events written by the bare writer to as many sockets (see ``bench_adapters.py``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from _adapters_procs import AsyncConn, Proc, Procs, Watcher, chunks, hello, user_input
from _common import Table, fmt_ms, fmt_rate, fmt_ratio, median, paired_ratio

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


def bench_fan_out(procs: Procs, quick: bool) -> None:
    watchers = 250 if quick else 1_000
    n, rounds, pings = (200, 1, 10) if quick else (1_000, 3, 30)
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
