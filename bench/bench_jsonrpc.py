"""Seed 001's ``stream/chunk`` beside the native dialect, over stdio: events per second.

Four server processes, each read by this process as a UI reads its child
(large reads, split on newlines, every line decoded with orjson):

- native: codexcore's stdio host (``bench/_adapters_server.py host --stdio``,
  the adapters as ``codexcore serve --stdio`` runs them), a ``user_input``
  ``bench-emit N``: N premade ``agent_message_delta`` pushed through the
  engine's ``_emit``, then the host's pump, encoding and writer; read until
  ``task_complete``.
- JSON-RPC: the same host program, its first line seed 001's ``initialize``,
  then ``chat {message: "bench-emit N"}``: the same N deltas, then the
  dialect's path (the connection's event listener, ``stream/chunk``
  notifications, its outbox and writer); read until the chat's response,
  every chunk's ``index`` and ``requestId`` checked.
- a bare pipe writer for each: the same lines (``encode_event`` of the same
  events; ``orjson`` of the same notifications and response), written in
  blocking writes of about 64 KiB, to the same reader.

events/s = lines read (events, or chunks plus the response) over wall time
from sending the trigger to reading the last line. The goal: JSON-RPC at
least 0.8 of native (issue 21), compared both directly and as each one's
fraction of its own bare writer, measured in the same rounds.

Run ``.venv/bin/python bench/bench_jsonrpc.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence

import orjson
from _adapters_procs import PY, LineConn, Proc, Procs, server_env, submission, user_input
from _common import (
    Table,
    fmt_rate,
    fmt_ratio,
    header,
    paired_ratio,
    paired_rounds,
    parse_args,
    verdict,
)

GOAL = 0.8
NATIVE_PROCS = (("native", "host"), ("native bare", "bare"))
CHUNK = 64 * 1024


# --- the bare stream/chunk writer (this file, run with --bare-chunks) ---------------------------


def chunk_lines(rid: int, n: int) -> Iterator[bytes]:
    """What the dialect writes for a chat of ``n`` deltas: n chunks, the done one, the answer."""
    for index in range(n):
        text = f"tok{index % 1000:03d} "
        params = {"requestId": rid, "chunk": text, "done": False, "index": index}
        yield orjson.dumps({"jsonrpc": "2.0", "method": "stream/chunk", "params": params})
    params = {"requestId": rid, "chunk": "", "done": True, "index": n}
    yield orjson.dumps({"jsonrpc": "2.0", "method": "stream/chunk", "params": params})
    result = {"message": "", "suggestions": []}  # the premade run has no agent_message
    yield orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def bare_chunks() -> int:
    """On each line ``chunks N ID`` of stdin, write those lines to stdout, ~64 KiB a write."""
    out = sys.stdout.fileno()
    for line in sys.stdin.buffer:
        _, n, rid = line.split()
        parts: list[bytes] = []
        size = 0
        for data in chunk_lines(int(rid), int(n)):
            parts.append(data)
            size += len(data) + 1
            if size >= CHUNK:
                write_all(out, b"\n".join(parts) + b"\n")
                parts.clear()
                size = 0
        if parts:
            write_all(out, b"\n".join(parts) + b"\n")
    return 0


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# --- the reader ---------------------------------------------------------------------------------


class Run:
    __slots__ = ("lines", "server_cpu", "wall")

    def __init__(self, lines: int, wall: float, server_cpu: float) -> None:
        self.lines, self.wall, self.server_cpu = lines, wall, server_cpu

    @property
    def rate(self) -> float:
        return self.lines / self.wall

    @property
    def server_us(self) -> float:
        return self.server_cpu / self.lines * 1e6


def read_chat(conn: LineConn, rid: int, n: int) -> int:
    """Read one chat's chunks and response; check them; the number of lines read."""
    loads = orjson.loads
    count = 0
    index = 0
    while True:
        line = conn.line()
        if line is None:
            raise EOFError(f"the stream ended after {count} lines")
        message = loads(line)
        count += 1
        params = message.get("params")
        if params is None:
            if message.get("id") != rid or "result" not in message:
                raise RuntimeError(f"chat {rid}: unexpected {message}")
            break
        if params["requestId"] != rid or params["index"] != index:
            raise RuntimeError(f"chat {rid}: chunk {params} where index {index} was due")
        index += 1
    if index != n + 1:
        raise RuntimeError(f"chat {rid}: {index} chunks for {n} deltas")
    return count


class Peer:
    """One server and what to send it: ``native`` or ``jsonrpc``, codexcore or ``bare``."""

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
        init = {"clientName": "bench", "clientVersion": "0", "capabilities": {"streaming": True}}
        self.conn.send_json({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        if not self.conn.message()["result"]["capabilities"]["streaming"]:
            raise RuntimeError("the server does not stream chat")

    def run(self, n: int) -> Run:
        self.runs += 1
        trigger, read = self._trigger(n)
        gc.collect()
        cpu0 = self.proc.cpu()
        t0 = time.perf_counter()
        self.conn.send(trigger)
        lines = read()
        wall = time.perf_counter() - t0
        return Run(lines, wall, self.proc.cpu() - cpu0)

    def _trigger(self, n: int) -> tuple[bytes, Callable[[], int]]:
        rid = self.runs
        if self.dialect == "jsonrpc":
            if self.bare:
                line = f"chunks {n} {rid}\n".encode()
            else:
                chat = {"message": f"bench-emit {n}"}
                line = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "chat", "params": chat})
                line += b"\n"
            return line, lambda: read_chat(self.conn, rid, n)
        sub_id = f"r{rid}"
        if self.bare:
            line = f"emit {n} {sub_id}\n".encode()
        else:
            line = user_input(sub_id, f"bench-emit {n}")

        def read() -> int:
            got = self.conn.events("task_complete")
            if got.last.get("id") != sub_id or got.deltas != n:
                raise RuntimeError(f"run {sub_id}: {got.deltas} deltas of {n}")
            return got.count

        return line, read


def best(runs: Sequence[Run]) -> Run:
    return max(runs, key=lambda r: r.rate)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n = 20_000 if args.quick else 100_000
    rounds = 2 if args.quick else 5
    header("bench_jsonrpc", args.quick, f"N = {n:,} deltas a run, {rounds} rounds")
    with tempfile.TemporaryDirectory() as home, Procs(home, home) as procs:
        native, native_bare = (procs.helper(name, mode, stdio=True) for name, mode in NATIVE_PROCS)
        peers = {
            "native": Peer(native, "native", bare=False),
            "native bare": Peer(native_bare, "native", bare=True),
            "jsonrpc": Peer(procs.helper("jsonrpc", "host", stdio=True), "jsonrpc", bare=False),
            "jsonrpc bare": Peer(
                procs.spawn(
                    "jsonrpc bare",
                    [PY, __file__, "--bare-chunks"],
                    server_env(home),
                    stdio=True,
                ),
                "jsonrpc",
                bare=True,
            ),
        }
        for peer in peers.values():
            peer.setup()
        runs = paired_rounds(
            [(name, lambda p=peer: p.run(n)) for name, peer in peers.items()], rounds
        )
        report(runs, n, rounds)
        for peer in peers.values():
            code = peer.proc.end_of_input()
            if code != 0:
                raise RuntimeError(f"{peer.proc.name} exited {code}: {peer.proc.stderr_text()}")


SEED_001_ROWS = (
    "codexcore stdio host: deltas → `stream/chunk` + response",
    "bare writer: the same chunks and response, 64 KiB writes",
)


def report(
    runs: dict[str, list[Run]],
    n: int,
    rounds: int,
    *,
    seed: str = "seed 001",
    name: str = "jsonrpc",
    rows: tuple[str, str] = SEED_001_ROWS,
    goal: float = GOAL,
) -> None:
    """The events/s table of a JSON-RPC dialect (runs ``name`` and ``name bare``)
    beside native's (``native`` and ``native bare``), each against its bare writer."""
    rates = {key: [r.rate for r in rs] for key, rs in runs.items()}
    direct = paired_ratio(rates[name], rates["native"])
    of_bare = {d: paired_ratio(rates[d], rates[f"{d} bare"]) for d in ("native", name)}
    table = Table(
        f"Events per second over stdio: a run of {n:,} deltas (best of {rounds})",
        ["dialect", "server → client", "events/s", "÷ its bare", "server CPU µs/line"],
    )
    lines = (
        ("native", "native", "codexcore stdio host: deltas → host → NDJSON events"),
        ("native", "native bare", "bare writer: the same events, `encode_event`, 64 KiB writes"),
        (seed, name, rows[0]),
        (seed, f"{name} bare", rows[1]),
    )
    for dialect, key, what in lines:
        ratio = fmt_ratio(of_bare[key]) if key in of_bare else ""
        run = best(runs[key])
        table.add(dialect, what, fmt_rate(run.rate), ratio, f"{run.server_us:.2f}")
    normalised = of_bare[name] / of_bare["native"]
    table.note(
        f"{seed} ÷ native: {fmt_ratio(direct)} directly, {fmt_ratio(normalised)} as "
        f"fractions of their bare writers; goal ≥ {goal}: {verdict(direct >= goal)}."
    )
    table.note(
        "Every run (events/s): "
        + "; ".join(f"{k} " + ", ".join(f"{r:,.0f}" for r in v) for k, v in rates.items())
        + ". Ratios: the median over the rounds of the ratio of runs made moments apart."
    )
    table.print()


if __name__ == "__main__":
    if sys.argv[1:] == ["--bare-chunks"]:
        sys.exit(bare_chunks())
    main()
