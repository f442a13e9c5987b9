"""The start-up of the stdio servers (``bench_vs_codex.py --startup-only``, and its last
table): spawn to ready for a Turn, codexcore's servers beside ``codex app-server`` and two
floors. Where ``codexcore exec``'s own start-up goes is ``startup_vs_codex.py``'s job."""

from __future__ import annotations

import collections
import statistics
import tempfile
import time
from collections.abc import Callable

from _common import Table, fmt_ms, fmt_spread, median, verdict
from _vs_codex_procs import CODEXCORE, PYTHON, Runner, cpu_seconds
from _vs_codex_sessions import SessionDriver, StdioPeer

BARE_FLOOR = "import sys; sys.stdout.write(sys.stdin.readline()); sys.stdout.flush()"
"""The interpreter reading one line and writing it back: nothing imported."""

ASYNCIO_FLOOR = """\
import asyncio, sys

async def answer():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    line = await reader.readline()
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()

asyncio.run(answer())
"""
"""An asyncio event loop reading one line from a pipe and writing it back."""


def codexcore_jsonrpc_start(runner: Runner) -> tuple[float, float]:
    """``serve --stdio`` spawned to a JSON-RPC ``initialize`` answered (the Codelia
    runtime protocol), then closed: the start-up a JSON-RPC UI sees."""
    argv = [str(CODEXCORE), "serve", "--stdio", "--cwd", str(runner.workdir)]
    with tempfile.TemporaryFile() as err:
        peer = StdioPeer(argv, runner.codexcore_env, runner.workdir, err)
        params = {"protocol_version": "0", "client": {"name": "bench", "version": "0"}}
        peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        reply = peer.read_until(lambda m: m.get("id") == 1)[-1]
        ready = time.perf_counter() - peer.began
        cpu = cpu_seconds(peer.proc.pid)
        if "result" not in reply:
            raise RuntimeError(f"codexcore initialize: {reply}")
        if peer.close() != 0:
            raise RuntimeError("codexcore serve --stdio (JSON-RPC) did not exit 0")
    return ready, cpu


def floor_start(runner: Runner, script: str) -> tuple[float, float]:
    """The benchmark venv's interpreter running ``script``, spawned to its answer to one
    line read back: the limit an interpreted server's start cannot go below."""
    with tempfile.TemporaryFile() as err:
        argv = [str(PYTHON), "-c", script]
        peer = StdioPeer(argv, runner.codexcore_env, runner.workdir, err)
        peer.send({"id": 1})
        peer.read_until(lambda m: m.get("id") == 1)
        ready = time.perf_counter() - peer.began
        cpu = cpu_seconds(peer.proc.pid)
        if peer.close() != 0:
            raise RuntimeError(f"the floor script failed: {script}")
    return ready, cpu


def codexcore_acp_start(runner: Runner) -> tuple[float, float]:
    """``codexcore acp`` spawned to ``initialize`` and ``session/new`` answered (an
    editor's first prompt can go), then closed."""
    with tempfile.TemporaryFile() as err:
        peer = StdioPeer([str(CODEXCORE), "acp"], runner.codexcore_env, runner.workdir, err)
        initialize = {"protocolVersion": 1, "clientCapabilities": {}}
        peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
        first = peer.read_until(lambda m: m.get("id") == 1 and "method" not in m)[-1]
        new = {"cwd": str(runner.workdir), "mcpServers": []}
        peer.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new})
        reply = peer.read_until(lambda m: m.get("id") == 2 and "method" not in m)[-1]
        ready = time.perf_counter() - peer.began
        cpu = cpu_seconds(peer.proc.pid)
        for answer in (first, reply):
            if "result" not in answer:
                raise RuntimeError(f"codexcore acp: {answer}")
        if peer.close() != 0:
            raise RuntimeError("codexcore acp did not exit 0")
    return ready, cpu


def startup(runner: Runner, runs: int) -> tuple[Table, list[str]]:
    """Spawn to ready only, many times, alternating (``--startup-only``, or after the sessions)."""
    driver = SessionDriver(runner)

    def native() -> tuple[float, float]:
        session = driver.codexcore(0)
        return session.startup, session.startup_cpu

    def codex() -> tuple[float, float]:
        session = driver.codex(0)
        return session.startup, session.startup_cpu

    kinds: dict[str, Callable[[], tuple[float, float]]] = {
        "`codexcore serve --stdio`, native (`configure_session` acknowledged)": native,
        "`codexcore serve --stdio`, JSON-RPC (`initialize` answered)": (
            lambda: codexcore_jsonrpc_start(runner)
        ),
        "`codexcore acp` (`initialize` and `session/new` answered)": (
            lambda: codexcore_acp_start(runner)
        ),
        "floor: the interpreter answers a line (`python -c`, same venv)": (
            lambda: floor_start(runner, BARE_FLOOR)
        ),
        "floor: an asyncio server answers a line (interpreter + asyncio)": (
            lambda: floor_start(runner, ASYNCIO_FLOOR)
        ),
        "`codex app-server` (`initialize` and `thread/start` answered)": codex,
    }
    for start in kinds.values():  # warm-up
        start()
    walls: dict[str, list[float]] = collections.defaultdict(list)
    cpus: dict[str, list[float]] = collections.defaultdict(list)
    for index in range(runs):
        order = list(kinds.items())
        for name, start in order if index % 2 == 0 else reversed(order):
            wall, cpu = start()
            walls[name].append(wall)
            cpus[name].append(cpu)
    names = list(kinds)
    codex_wall, codex_best = median(walls[names[-1]]), min(walls[names[-1]])
    codex_cpu = statistics.fmean(cpus[names[-1]])
    table = Table(
        "Start-up of a stdio server: spawn to ready for a Turn",
        ["", "median", "best", "min - max", "median / Codex's", "best / Codex's best",
         "CPU to ready (mean)", "CPU / Codex's"],
    )  # fmt: skip
    for name in names:
        wall, cpu = walls[name], statistics.fmean(cpus[name])
        table.add(
            name, fmt_ms(median(wall)), fmt_ms(min(wall)), fmt_spread(wall),
            f"{median(wall) / codex_wall:.2f}", f"{min(wall) / codex_best:.2f}",
            fmt_ms(cpu), f"{cpu / codex_cpu:.2f}",
        )  # fmt: skip
    ratios = [median(walls[name]) / codex_wall for name in names[:3]]
    table.note(
        f"{runs} starts of each after a warm-up of each, alternating (order reversed every "
        "other round); each server is closed (end of input) after it is ready. CPU to ready: "
        "the server's user + system time, every thread, read from /proc at ready (10 ms "
        "ticks, hence the mean). Goal: codexcore's median at most 1.0x Codex's: native "
        f"**{verdict(ratios[0] <= 1.0)}** ({ratios[0]:.2f}), JSON-RPC "
        f"**{verdict(ratios[1] <= 1.0)}** ({ratios[1]:.2f}), ACP "
        f"**{verdict(ratios[2] <= 1.0)}** ({ratios[2]:.2f}). The two floors are the same "
        "interpreter answering one line with no codexcore code: plainly, and from an asyncio "
        "event loop, which every codexcore server runs (asyncio imports ssl, socket, "
        "subprocess, inspect and logging with it)."
    )
    return table, []
