"""The app-server protocol, codexcore's ``app-server`` beside the real ``codex app-server``.

The same client (``_app_server_client.py``: JSON-RPC in this process, over stdio and over
WebSocket), the same scripted model (``_vs_codex_model.py``'s, on a thread of this
process, adding up its own answering time), the same machine, runs alternating between
the servers and rotating their order round by round. For every server of
``_app_server_servers.SERVERS``:

- per Turn beyond the model: a 20-turn thread over stdio (every fifth Turn runs ``echo
  hello``: two model requests; the others one answer), from the first ``turn/start`` to
  the last ``turn/completed``, less the model's share, divided by 20;
- tree peak memory: the server's process and its children, sampled every 2 ms through
  the same thread and a streaming Turn (untimed runs of their own);
- events/s: the notifications a Turn brings, per second from ``turn/start`` to
  ``turn/completed``, the model streaming its answer in 2000 deltas;
- the same 20-turn thread over WebSocket (``--listen ws://127.0.0.1:0``), its Turns/s
  over the stdio thread's, round by round;
- the bare floor in the same run: the round trip of a small line through ``cat`` on a
  pipe pair and through a ``websockets`` echo server (``bench_websocket.py``'s).

Goals (issue 30): per Turn beyond the model ≤ 0.1x Codex's, tree peak memory ≤ 0.25x,
events/s ≥ 1.0x, the WebSocket thread ≥ 0.9x of stdio's. A server that cannot run here
(``codexcore app-server`` before it exists) is said so, and the others are measured.

Run ``.venv/bin/python bench/bench_app_server.py`` (``--quick`` for a few-second run,
``--rounds N``; ``--no-install`` to not install the pinned Codex CLI when missing).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _app_server_client import DELTA, Client, ServerGone, Spawned, over_stdio, over_websocket
from _app_server_servers import (
    DELTAS,
    SERVERS,
    STREAM_MARK,
    Server,
    model_server,
    prompt,
    sampled,
    scratch,
    thread_params,
)
from _common import Table, fmt_mib, fmt_ms, fmt_ratio, fmt_us, header, verdict
from _vs_codex_cli import CLI_DIR, CODEX_VERSION, install_codex
from _vs_codex_model import TimedServer
from bench_websocket import pipe_echo_rtt, ws_echo_rtt

TURNS = 20
WS_ARGS = ["--listen", "ws://127.0.0.1:0"]
GOALS = {"beyond": 0.1, "memory": 0.25, "events": 1.0, "ws": 0.9}


@dataclass
class Thread:
    wall: float  # the Turns, first turn/start sent to last turn/completed read
    model: float  # the scripted model's share of it
    turns: int
    approvals: int

    @property
    def beyond_per_turn(self) -> float:
        return (self.wall - self.model) / self.turns


@dataclass
class Events:
    notifications: int
    deltas: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.notifications / self.seconds


class Bench:
    """The runs of one benchmark: one scripted model, a scratch folder per server."""

    def __init__(self, http: TimedServer, root: Path, turns: int) -> None:
        self.http = http
        self.root = root
        self.turns = turns
        self.workdir = root / "work"
        self.workdir.mkdir()

    def _env(self, server: Server) -> dict[str, str]:
        return server.env(self.http.base_url, self.root / server.name)

    async def _open(self, spawned: Spawned) -> tuple[Client, str]:
        client = spawned.client
        await client.initialize()
        return client, await client.start_thread(thread_params(self.workdir))

    async def _thread(self, client: Client, thread: str) -> Thread:
        busy0, _ = self.http.snapshot()
        approvals = 0
        first = last = 0.0
        for turn in range(1, self.turns + 1):
            seen = await client.turn(thread, prompt(turn))
            first = first or seen.began
            last = seen.ended
            approvals += seen.approvals
        busy1, _ = self.http.snapshot()
        return Thread(last - first, busy1 - busy0, self.turns, approvals)

    async def stdio_thread(self, server: Server) -> Thread:
        async with over_stdio(server.argv(), self._env(server), self.workdir) as spawned:
            return await self._thread(*await self._open(spawned))

    async def ws_thread(self, server: Server) -> Thread:
        argv = [*server.argv(), *WS_ARGS]
        async with over_websocket(argv, self._env(server), self.workdir) as spawned:
            return await self._thread(*await self._open(spawned))

    async def events(self, server: Server) -> Events:
        async with over_stdio(server.argv(), self._env(server), self.workdir) as spawned:
            client, thread = await self._open(spawned)
            seen = await client.turn(thread, f"Please {STREAM_MARK}.")
            return Events(seen.notifications, seen.methods.get(DELTA, 0), seen.ended - seen.began)

    async def memory(self, server: Server) -> int:
        """The tree's peak (summed Pss) through the stdio thread and a streaming Turn."""
        async with over_stdio(server.argv(), self._env(server), self.workdir) as spawned:
            with sampled(spawned.process.pid) as memory:
                client, thread = await self._open(spawned)
                await self._thread(client, thread)
                await client.turn(thread, f"Please {STREAM_MARK}.")
            return memory.peak


# --- the run --------------------------------------------------------------------------------


async def measure(servers: list[Server], rounds: int, turns: int, echoes: int) -> dict[str, Any]:
    results: dict[str, list[Any]] = {}
    with model_server() as (http, model), scratch() as root:
        bench = Bench(http, root, turns)
        runs: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("pipe echo", lambda: pipe_echo_rtt(echoes)),
            ("ws echo", lambda: ws_echo_rtt(echoes)),
        ]
        for server in servers:
            runs += [
                (f"{server.name} stdio", lambda s=server: bench.stdio_thread(s)),
                (f"{server.name} ws", lambda s=server: bench.ws_thread(s)),
                (f"{server.name} events", lambda s=server: bench.events(s)),
                (f"{server.name} memory", lambda s=server: bench.memory(s)),
            ]
        for _, run in runs:  # warm-up: page cache, imports, the model's first answers
            await run()
        results = {name: [] for name, _ in runs}
        for i in range(rounds):
            shift = (i * 3) % len(runs)  # a step prime to the list's length rotates the order
            for name, run in [*runs[shift:], *runs[:shift]]:
                results[name].append(await run())
        if model.unexpected:
            raise RuntimeError(f"the model saw requests it did not expect: {model.unexpected}")
        expected = (rounds + 1) * len(servers) * 3 * (turns // 5)
        if model.outputs_seen != expected:
            raise RuntimeError(f"{model.outputs_seen} of {expected} commands ran")
    return results


# --- the report -------------------------------------------------------------------------


def _paired(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def _rows(results: dict[str, list[Any]], name: str) -> dict[str, float]:
    stdio: list[Thread] = results[f"{name} stdio"]
    ws: list[Thread] = results[f"{name} ws"]
    events: list[Events] = results[f"{name} events"]
    return {
        "beyond": statistics.median(t.beyond_per_turn for t in stdio),
        "turn": statistics.median(t.wall / t.turns for t in stdio),
        "memory": statistics.median(results[f"{name} memory"]),
        "events": statistics.median(e.rate for e in events),
        "deltas": statistics.median(e.deltas for e in events),
        "ws": _paired([1 / t.wall for t in ws], [1 / t.wall for t in stdio]),
        "ws turn": statistics.median(t.wall / t.turns for t in ws),
    }


def report(
    results: dict[str, list[Any]], measured: list[str], missing: dict[str, str], turns: int
) -> None:
    names = [server.name for server in SERVERS]
    rows = {name: _rows(results, name) for name in measured}
    table = Table(
        f"The app-server protocol: a {turns}-turn thread, a streaming Turn (medians)",
        ["measure", *names, "codexcore / codex", "goal"],
    )

    def cell(name: str, key: str, show: Callable[[float], str]) -> str:
        return show(rows[name][key]) if name in rows else "not available"

    def ratio(key: str, goal: str, met: Callable[[float], bool]) -> tuple[str, str]:
        if "codexcore" not in rows or "codex" not in rows:
            return "-", goal
        value = rows["codexcore"][key] / rows["codex"][key]
        return fmt_ratio(value), f"{goal}: {verdict(met(value))}"

    table.add("per Turn (stdio)", *[cell(n, "turn", fmt_ms) for n in names], "-", "-")
    table.add(
        "per Turn beyond the model (stdio)",
        *[cell(n, "beyond", fmt_ms) for n in names],
        *ratio("beyond", f"≤ {GOALS['beyond']}x", lambda r: r <= GOALS["beyond"]),
    )
    table.add(
        "tree peak memory (Pss, sampled)",
        *[cell(n, "memory", fmt_mib) for n in names],
        *ratio("memory", f"≤ {GOALS['memory']}x", lambda r: r <= GOALS["memory"]),
    )
    table.add(
        "events/s (streaming Turn)",
        *[cell(n, "events", lambda v: f"{v:,.0f}/s") for n in names],
        *ratio("events", f"≥ {GOALS['events']}x", lambda r: r >= GOALS["events"]),
    )
    table.add(
        "  of which agentMessage deltas",
        *[cell(n, "deltas", lambda v: f"{v:.0f}") for n in names],
        "-",
        "-",
    )
    table.add("per Turn (WebSocket)", *[cell(n, "ws turn", fmt_ms) for n in names], "-", "-")
    ws_goal = f"≥ {GOALS['ws']}x"
    table.add(
        "WebSocket Turns/s over stdio's (paired)",
        *[cell(n, "ws", fmt_ratio) for n in names],
        "-",
        f"codexcore {ws_goal}: "
        + (verdict(rows["codexcore"]["ws"] >= GOALS["ws"]) if "codexcore" in rows else "-"),
    )
    pipe = statistics.median(results["pipe echo"])
    ws = statistics.median(results["ws echo"])
    table.note(f"bare floor, same run: pipe echo {fmt_us(pipe)}, WebSocket echo {fmt_us(ws)}")
    table.note(
        f"{len(results['pipe echo'])} rounds after a warm-up; the streaming Turn's model sends "
        f"{DELTAS} text deltas; Codex CLI {CODEX_VERSION}"
    )
    for name, why in missing.items():
        table.note(f"{name}: {why}")
    print(table.render())


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few-second smoke run")
    parser.add_argument("--rounds", type=int, help="alternating rounds (default 5, quick 1)")
    parser.add_argument(
        "--no-install", action="store_true", help="do not install the pinned Codex CLI"
    )
    args = parser.parse_args()
    header("bench_app_server", args.quick)
    if not args.no_install:
        install_codex(CLI_DIR, CODEX_VERSION)
    missing = {s.name: why for s in SERVERS if (why := s.missing()) is not None}
    for name, why in missing.items():
        print(f"{name}: {why}; measuring the others", file=sys.stderr, flush=True)
    servers = [s for s in SERVERS if s.name not in missing]
    if not servers:
        raise SystemExit("no server to measure")
    rounds = args.rounds or (1 if args.quick else 5)
    turns = 5 if args.quick else TURNS
    try:
        results = asyncio.run(measure(servers, rounds, turns, 200 if args.quick else 2000))
    except ServerGone as error:
        raise SystemExit(f"a server failed: {error}") from None
    report(results, [s.name for s in servers], missing, turns)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
