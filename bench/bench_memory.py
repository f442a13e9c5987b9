"""Memory: an idle Session, and the peak of the demo Task.

5. An idle Session is a ``Codex`` started and answered ``session_configured``
   (``configure_session`` submitted, its event read), before any Task. ``K`` of
   them are made in one loop sharing one ``ModelClientPool``, as a host of many
   sessions runs them; the growth of traced Python memory (``tracemalloc``)
   and of the resident set, divided by ``K``, is the cost of one. Recorded
   sessions (the default: each holds its rollout file open) and ephemeral
   ones are measured apart. The bare
   limit is the engine's queue pair alone: two janus queues of the same sizes,
   and the same with one task blocked in ``async_q.get()`` (an engine cannot
   idle on less: something must wait for submissions).

6. The peak resident set of ``python -m codexcore demo --yes`` (a real Task
   over real HTTP against the embedded scripted server, with one approved
   shell command), beside that of a bare ``python -c "import httpx, asyncio"``.
   Each child reports its own high-water mark (``VmHWM``) as it exits.

Sessions are recorded under a temporary home, removed at the end.

Run ``.venv/bin/python bench/bench_memory.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import janus
from _common import Table, fmt_bytes, fmt_ratio, header, median, parse_args, rss_bytes, verdict

from codexcore import Codex, EngineConfig, ModelClientPool, SessionConfig
from codexcore.protocol import ConfigureSession, SessionConfigured

# --- 5. idle sessions ---------------------------------------------------------------


class Population:
    """Things kept alive while measured, and how to release them."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.closers: list[Callable[[], Awaitable[None]]] = []

    async def aclose(self) -> None:
        for close in self.closers:
            await close()
        self.items.clear()
        self.closers.clear()


async def make_sessions(count: int, config: EngineConfig, pool: ModelClientPool) -> Population:
    population = Population()
    for _ in range(count):
        codex = Codex(config, clients=pool)
        await codex.start()
        await codex.submit(ConfigureSession())
        while not isinstance((await codex.next_event()).msg, SessionConfigured):
            pass
        population.items.append(codex)
        population.closers.append(codex.aclose)
    await asyncio.sleep(0)  # let every dispatcher settle in its get()
    for codex in population.items:  # a warning may follow session_configured
        while not codex.event_queue.async_q.empty():
            await codex.next_event()
    return population


async def make_queue_pairs(count: int, config: EngineConfig, *, waiting: bool) -> Population:
    population = Population()
    for _ in range(count):
        submissions: janus.Queue[object] = janus.Queue(config.submission_queue_size)
        events: janus.Queue[object] = janus.Queue(config.event_queue_size)
        population.items.append((submissions, events))
        if waiting:
            getter = asyncio.create_task(submissions.async_q.get())
            population.items.append(getter)
            population.closers.append(_cancel_and_wait(getter))
        population.closers.append(submissions.aclose)
        population.closers.append(events.aclose)
    await asyncio.sleep(0)
    return population


def _cancel_and_wait(task: asyncio.Task[object]) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        task.cancel()
        await asyncio.wait({task})

    return close


Maker = Callable[[], Awaitable[Population]]


async def traced_growth(make: Maker) -> tuple[int, Population, tracemalloc.Snapshot]:
    """Traced bytes the population adds, the population, and the snapshot before."""
    gc.collect()
    before = tracemalloc.take_snapshot()
    base = tracemalloc.get_traced_memory()[0]
    population = await make()
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - base, population, before


async def rss_growth(make: Maker) -> tuple[int, Population]:
    gc.collect()
    base = rss_bytes()
    population = await make()
    gc.collect()
    return rss_bytes() - base, population


async def idle_sessions(count: int, home: str) -> None:
    config = EngineConfig(session=SessionConfig(cwd="/tmp"), home=home)
    ephemeral = attrs.evolve(config, ephemeral=True)
    pool = ModelClientPool(config)
    pool.get(None)  # the shared client exists before the sessions, as in a host

    def makers_of(n: int) -> list[tuple[str, Maker]]:
        return [
            (
                "codexcore: idle Session (`Codex` + `session_configured`), recorded",
                lambda: make_sessions(n, config, pool),
            ),
            (
                "codexcore: idle Session, ephemeral engine (no rollout file)",
                lambda: make_sessions(n, ephemeral, pool),
            ),
            (
                "bare: janus queue pair (64 + 1,024)",
                lambda: make_queue_pairs(n, config, waiting=False),
            ),
            (
                "bare: janus queue pair + a task blocked in `async_q.get()`",
                lambda: make_queue_pairs(n, config, waiting=True),
            ),
        ]

    # Warm-up: first-use imports, caches, the loop's own allocations. Small, so
    # the memory it frees hardly lowers the RSS growth measured next.
    for _, make in makers_of(3):
        await (await make()).aclose()
    makers = makers_of(count)

    # RSS first, without tracemalloc (whose own records would inflate it). Every
    # population stays alive until all are measured, so none reuses another's pages.
    rss: dict[str, int] = {}
    alive: list[Population] = []
    for name, make in makers:
        grown, population = await rss_growth(make)
        rss[name] = grown
        alive.append(population)
    for population in alive:
        await population.aclose()
    alive.clear()

    tracemalloc.start(1)
    traced: dict[str, int] = {}
    session_diff: list[tracemalloc.StatisticDiff] = []
    for name, make in makers:
        grown, population, before = await traced_growth(make)
        traced[name] = grown
        if not session_diff:  # the sessions come first: see where their memory goes
            after = tracemalloc.take_snapshot()
            session_diff = after.compare_to(before, "filename")
        alive.append(population)
    tracemalloc.stop()
    for population in alive:
        await population.aclose()
    await pool.aclose()

    limit_name = makers[2][0]
    table = Table(
        f"5. Memory of an idle Session ({count} in one loop, one shared `ModelClientPool`)",
        ["what, per instance", "traced (tracemalloc)", "RSS growth", "÷ bare pair", "goal"],
    )
    for name, _ in makers:
        ratio = traced[name] / traced[limit_name]
        per = traced[name] / count
        goal = f"< 64 KiB: {verdict(per < 64 * 1024)}" if name.startswith("codexcore") else ""
        table.add(
            name,
            fmt_bytes(traced[name] / count),
            fmt_bytes(rss[name] / count),
            fmt_ratio(ratio),
            goal,
        )
    table.note(
        "RSS growth is page-grained and includes allocator slack; the traced figure counts "
        "the Python objects themselves."
    )
    table.print()

    top = Table(
        "5b. Where an idle Session's memory goes (tracemalloc, by file that allocated it, "
        "per Session)",
        ["allocated in", "bytes per Session", "blocks per Session"],
    )
    shown = 0
    for stat in session_diff:
        if stat.size_diff <= 0:
            continue
        where = _short(stat.traceback[0].filename)
        top.add(f"`{where}`", fmt_bytes(stat.size_diff / count), f"{stat.count_diff / count:.1f}")
        shown += 1
        if shown == 10:
            break
    top.print()


def _short(path: str) -> str:
    for marker in ("/site-packages/", "/lib/python3.", "/work/main/"):
        if marker in path:
            tail = path.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "/lib/python3." else tail
    return path


# --- 6. peak RSS of the demo Task ---------------------------------------------------


# A forked or vforked child inherits the parent's high-water mark in ru_maxrss,
# so the child reports its own: VmHWM, the peak of the address space exec made.
_REPORT_PEAK = (
    "import atexit, os\n"
    "def _report():\n"
    "    status = open('/proc/self/status').read()\n"
    "    kib = status.split('VmHWM:')[1].split()[0]\n"
    "    with open(os.environ['BENCH_PEAK_FILE'], 'w') as out:\n"
    "        out.write(kib)\n"
    "atexit.register(_report)\n"
)


def peak_rss(code: str, home: str) -> int:
    """Peak resident set of ``python -c code``, in bytes (VmHWM at exit)."""
    with tempfile.NamedTemporaryFile("r", prefix="codexcore-bench-peak-") as peak:
        env = dict(os.environ, BENCH_PEAK_FILE=peak.name, CODEXCORE_HOME=home)
        subprocess.run(
            [sys.executable, "-c", _REPORT_PEAK + code],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return int(peak.read()) * 1024


def demo_peak(runs: int, home: str) -> None:
    # What ``python -m codexcore demo --yes`` runs, with the peak reported at exit.
    demo = (
        "import runpy, sys\n"
        "sys.argv = ['codexcore', 'demo', '--yes']\n"
        "runpy.run_module('codexcore', run_name='__main__', alter_sys=True)\n"
    )
    # The demo's imports and its model client, but no Task: apportions the peak.
    no_task = (
        "import codexcore, codexcore.cli, codexcore.cli._demo, codexcore.testing\n"
        "codexcore.ModelClientPool().get(None)\n"
    )
    bare = "import httpx, asyncio"
    startup = "pass"
    codes = {"demo": demo, "no_task": no_task, "bare": bare, "pass": startup}
    peaks: dict[str, list[int]] = {key: [] for key in codes}
    for _ in range(runs):
        for key, code in codes.items():
            peaks[key].append(peak_rss(code, home))
    demo_rss, bare_rss = median(peaks["demo"]), median(peaks["bare"])
    table = Table(
        f"6. Peak RSS of the demo Task (median of {runs} runs)",
        ["process", "peak RSS", "÷ bare"],
    )
    table.add(
        "`python -m codexcore demo --yes`", fmt_bytes(demo_rss), fmt_ratio(demo_rss / bare_rss)
    )
    no_task_rss = median(peaks["no_task"])
    table.add(
        "(the demo's imports and model client, no Task)",
        fmt_bytes(no_task_rss),
        fmt_ratio(no_task_rss / bare_rss),
    )
    table.add('bare: `python -c "import httpx, asyncio"`', fmt_bytes(bare_rss), "1.00")
    table.add('(`python -c "pass"`)', fmt_bytes(median(peaks["pass"])), "")
    table.note(
        f"Over the bare process the demo adds {fmt_bytes(demo_rss - bare_rss)}: "
        f"{fmt_bytes(no_task_rss - bare_rss)} of imports and the model client, "
        f"{fmt_bytes(demo_rss - no_task_rss)} for running the Task."
    )
    table.print()


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    count, runs = (30, 1) if args.quick else (200, 7)
    header("bench_memory", args.quick, f"{count} idle sessions; demo run {runs} times")
    home = tempfile.mkdtemp(prefix="codexcore-bench-home-")
    try:
        asyncio.run(idle_sessions(count, home))
        demo_peak(runs, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
