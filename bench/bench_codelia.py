"""Seed 000's ``agent.event`` beside the native dialect, over stdio: events/s and latency.

Four server processes, read by this process as a UI reads its child (large
reads, split on newlines, every line decoded with orjson):

- native: codexcore's stdio host (``bench/_adapters_server.py host --stdio``),
  a ``user_input`` ``bench-emit N`` (N premade ``agent_message_delta`` through
  the engine's ``_emit``, as in ``bench_jsonrpc.py``); read until ``task_complete``.
- seed 000: the same host program, first line seed 000's ``initialize`` with
  ``ui_capabilities.codexcore_events: true`` (a client that asked for every
  EventMsg), then ``run.start {input: {type: text, text: "bench-emit N"}}``:
  the answer, ``run.status running``, ``agent.event`` ``step_start``, one
  ``codexcore.agent_message_delta`` ``agent.event`` per delta (its
  ``meta.codexcore`` the native seq), ... up to ``run.status completed``; every
  ``seq`` and the delta count checked.
- a bare pipe writer for each (``bare`` of ``_adapters_server.py``; this file
  with ``--bare-events``: the same ``agent.event`` lines, built from the same
  ``Event`` objects with ``encode_event`` and orjson, in blocking writes of
  about 64 KiB). This file's bare writer also echoes a line ``echo ...``
  back: the bare round trip of the latency rows.

Latency: ``bench-emit 0`` many times, alternating: native from writing the
``user_input`` to reading ``task_started``; seed 000 from writing ``run.start``
to reading its first ``agent.event`` (``step_start``); the bare echo round
trip of one line, in the same rounds. Goals (issue 21): events/s at least
0.8 of native; run.start → first agent.event p50 within 1.2x native's.

Run ``.venv/bin/python bench/bench_codelia.py`` (``--quick`` for a smoke run; ``--only
rates`` or ``--only latency`` for one part.
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import orjson
from _adapters_procs import PY, LineConn, Proc, Procs, server_env, submission, user_input
from _adapters_server import bench_messages
from _common import Table, fmt_ratio, header, paired_rounds, parse_args, verdict
from bench_jsonrpc import CHUNK, Run, report, write_all

from codexcore.protocol import Event, encode_event

SECTIONS = ("rates", "latency")
RATE_GOAL = 0.8
LATENCY_GOAL = 1.2
INIT = {
    "protocol_version": "0",
    "client": {"name": "bench", "version": "0"},
    "ui_capabilities": {"codexcore_events": True},
}
STEP_START = {"type": "step_start", "title": "Turn 1", "step_number": 1}


# --- the bare agent.event writer (this file, run with --bare-events) -----------------------------


def agent_event_lines(run_id: str, n: int) -> Iterator[bytes]:
    """What the dialect writes for a run of ``n`` deltas, from the same ``Event`` objects."""
    yield orjson.dumps({"jsonrpc": "2.0", "id": run_id, "result": {"run_id": run_id}})
    status = {"run_id": run_id, "status": "running"}
    yield orjson.dumps({"jsonrpc": "2.0", "method": "run.status", "params": status})
    for seq, msg in enumerate(bench_messages(run_id, n)):
        wire = orjson.loads(encode_event(Event(run_id, seq, msg)))
        if seq == 0:  # a mapped event: meta carries the native event whole
            event = {**STEP_START, "step_id": f"{run_id}:turn-1"}
            meta = {"codexcore": wire}
        else:  # the event is the native msg: meta carries its seq alone
            event = {**wire["msg"], "type": f"codexcore.{wire['msg']['type']}"}
            meta = {"codexcore": {"seq": seq}}
        params = {"run_id": run_id, "seq": seq, "event": event, "meta": meta}
        yield orjson.dumps({"jsonrpc": "2.0", "method": "agent.event", "params": params})
    status = {"run_id": run_id, "status": "completed"}
    yield orjson.dumps({"jsonrpc": "2.0", "method": "run.status", "params": status})


def bare_events() -> int:
    """``events N ID``: write those lines, ~64 KiB a write; ``echo ...``: write it back."""
    out = sys.stdout.fileno()
    for line in sys.stdin.buffer:
        if line.startswith(b"echo"):
            write_all(out, line)
            continue
        _, n, rid = line.split()
        parts: list[bytes] = []
        size = 0
        for data in agent_event_lines(rid.decode(), int(n)):
            parts.append(data)
            size += len(data) + 1
            if size >= CHUNK:
                write_all(out, b"\n".join(parts) + b"\n")
                parts.clear()
                size = 0
        if parts:
            write_all(out, b"\n".join(parts) + b"\n")
    return 0


# --- the reader ---------------------------------------------------------------------------------


def read_run(conn: LineConn, n: int, on_first: Callable[[], None] | None = None) -> int:
    """Read one run.start's answer, events and terminal status; check them; lines read.

    Lines are popped straight off the connection's buffer, as the native reader
    (``LineConn.events``) does, so both readers spend the same per line beside
    decoding it."""
    loads = orjson.loads
    count = seq = deltas = 0
    while True:
        pending = conn.batch()
        while pending:
            message = loads(pending.popleft())
            count += 1
            method = message.get("method")
            if method == "agent.event":
                params = message["params"]
                if params["seq"] != seq:
                    raise RuntimeError(f"agent.event seq {params['seq']} where {seq} was due")
                if seq == 0 and on_first is not None:
                    on_first()
                seq += 1
                deltas += params["event"]["type"] == "codexcore.agent_message_delta"
            elif method == "run.status" and message["params"]["status"] != "running":
                if message["params"]["status"] != "completed" or deltas != n:
                    raise RuntimeError(
                        f"run ended {message['params']} after {deltas} of {n} deltas"
                    )
                return count
            elif method is None and "result" not in message:
                raise RuntimeError(f"unexpected {message}")


class Peer:
    """One server: ``native`` or ``codelia``, codexcore or ``bare``."""

    def __init__(self, proc: Proc, dialect: str, *, bare: bool) -> None:
        self.proc, self.dialect, self.bare = proc, dialect, bare
        self.conn = LineConn.pipes(proc)
        self.runs = 0

    def setup(self) -> None:
        if self.bare:
            return
        if self.dialect == "native":
            self.conn.send(submission("cfg", "configure_session"))
            self.conn.until("session_configured")
            return
        self.conn.send_json({"jsonrpc": "2.0", "id": "0", "method": "initialize", "params": INIT})
        self.conn.message()

    def run(self, n: int) -> Run:
        self.runs += 1
        gc.collect()
        cpu0 = self.proc.cpu()
        t0 = time.perf_counter()
        lines = self.exchange(n)
        wall = time.perf_counter() - t0
        return Run(lines, wall, self.proc.cpu() - cpu0)

    def exchange(self, n: int, on_first: Callable[[], None] | None = None) -> int:
        rid = f"r{self.runs}"
        if self.dialect == "codelia":
            if self.bare:
                self.conn.send(f"events {n} {rid}\n".encode())
            else:
                start = {"input": {"type": "text", "text": f"bench-emit {n}"}}
                self.conn.send_json(
                    {"jsonrpc": "2.0", "id": rid, "method": "run.start", "params": start}
                )
            return read_run(self.conn, n, on_first)
        self.conn.send(
            f"emit {n} {rid}\n".encode() if self.bare else user_input(rid, f"bench-emit {n}")
        )
        if on_first is not None:
            self.conn.until("task_started")
            on_first()
        got = self.conn.events("task_complete")
        if got.deltas != n:
            raise RuntimeError(f"run {rid}: {got.deltas} deltas of {n}")
        return got.count

    def latency(self) -> float:
        """One ``bench-emit 0`` (or one echo): seconds to its first event."""
        self.runs += 1
        seen: list[float] = []
        t0 = time.perf_counter()
        if self.bare:
            self.conn.send(b"echo %d\n" % self.runs)
            if self.conn.line() is None:
                raise EOFError("the bare writer closed")
            return time.perf_counter() - t0
        self.exchange(0, lambda: seen.append(time.perf_counter()))
        return seen[0] - t0


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1]


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], sections=SECTIONS)
    n = 20_000 if args.quick else 50_000
    rounds = 2 if args.quick else 5
    reps = 100 if args.quick else 500
    header(
        "bench_codelia", args.quick, f"N = {n:,} deltas a run, {rounds} rounds, {reps} round trips"
    )
    with tempfile.TemporaryDirectory() as home, Procs(home, home) as procs:
        bare_argv = [PY, __file__, "--bare-events"]
        peers = {
            "native": Peer(procs.helper("native", "host", stdio=True), "native", bare=False),
            "native bare": Peer(
                procs.helper("native bare", "bare", stdio=True), "native", bare=True
            ),
            "codelia": Peer(procs.helper("codelia", "host", stdio=True), "codelia", bare=False),
            "codelia bare": Peer(
                procs.spawn("codelia bare", bare_argv, server_env(home), stdio=True),
                "codelia",
                bare=True,
            ),
        }
        for peer in peers.values():
            peer.setup()
        if "rates" in args.only:
            runs = paired_rounds(
                [(name, lambda p=peer: p.run(n)) for name, peer in peers.items()], rounds
            )
            report_rates(runs, n, rounds)
        if "latency" in args.only:
            report_latency(latencies(peers, reps))
        for peer in peers.values():
            code = peer.proc.end_of_input()
            if code != 0:
                raise RuntimeError(f"{peer.proc.name} exited {code}: {peer.proc.stderr_text()}")


def latencies(peers: dict[str, Peer], reps: int) -> dict[str, list[float]]:
    which = {
        "native": peers["native"],
        "codelia": peers["codelia"],
        "bare echo": peers["codelia bare"],
    }
    for peer in which.values():
        for _ in range(10):
            peer.latency()
    got: dict[str, list[float]] = {name: [] for name in which}
    for _ in range(reps):
        for name, peer in which.items():
            got[name].append(peer.latency())
    return got


def report_rates(runs: dict[str, list[Run]], n: int, rounds: int) -> None:
    rows = (
        "codexcore stdio host: deltas → `agent.event` (codexcore_events)",
        "bare writer: the same `agent.event` lines, 64 KiB writes",
    )
    report(runs, n, rounds, seed="seed 000", name="codelia", rows=rows, goal=RATE_GOAL)


def report_latency(got: dict[str, list[float]]) -> None:
    table = Table(
        f"Latency over stdio ({len(got['native'])} alternating round trips each)",
        ["what", "p50", "p90", "min"],
    )
    what = {
        "native": "native: `user_input` → `task_started`",
        "codelia": "seed 000: `run.start` → first `agent.event`",
        "bare echo": "bare echo: one line there and back",
    }
    for name, values in got.items():
        us = [v * 1e6 for v in values]
        table.add(
            what[name],
            f"{statistics.median(us):,.0f} µs",
            f"{quantile(us, 0.9):,.0f} µs",
            f"{min(us):,.0f} µs",
        )
    ratio = statistics.median(got["codelia"]) / statistics.median(got["native"])
    table.note(
        f"seed 000 p50 ÷ native p50: {fmt_ratio(ratio)}; "
        f"goal ≤ {LATENCY_GOAL}: {verdict(ratio <= LATENCY_GOAL)}."
    )
    table.print()


if __name__ == "__main__":
    if sys.argv[1:] == ["--bare-events"]:
        sys.exit(bare_events())
    main()
