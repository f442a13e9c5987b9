"""AGENTS.md discovery and the initial context, beside a bare ``os.stat`` walk.

A project 20 directories deep (a ``.git`` at its root, an AGENTS.md at the
root, in every fifth directory and in the cwd, and a global one in the home):

1. discovery (:func:`agents_paths`: find the git root, then each AGENTS.md from
   the root down to the cwd) against the bare limit: the same walk written as
   plain ``os.stat`` calls, one for ``.git`` and one for AGENTS.md per level;
2. discovery and reading (:func:`read_project_docs`, with the cap) against the
   bare walk plus reading the files found;
3. the whole initial context (AGENTS.md, the environment context) as the
   engine assembles it before a session's first request.

The goal (issue 16): discovery in a 20-deep tree under 5 ms.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import Table, fmt_ratio, fmt_us, header, median, parse_args, verdict

from codexcore.engine import SessionConfig
from codexcore.engine._instructions import (
    ContextInputs,
    agents_paths,
    initial_context,
    read_project_docs,
)

DEPTH = 20
GOAL_S = 0.005


def make_tree(base: Path) -> tuple[Path, Path]:
    """The 20-deep project and a home; returns (cwd, home)."""
    home = base / "home"
    home.mkdir()
    (home / "AGENTS.md").write_text("Global: answer briefly.\n")
    root = base / "project"
    (root / ".git").mkdir(parents=True)
    directory = root
    (root / "AGENTS.md").write_text("Root: run the tests with pytest.\n" * 20)
    for level in range(1, DEPTH + 1):
        directory = directory / f"d{level:02}"
        directory.mkdir()
        if level % 5 == 0 or level == DEPTH:
            (directory / "AGENTS.md").write_text(f"Level {level}: keep it pure.\n" * 10)
    return directory, home


def bare_walk(cwd: str, home: str) -> list[str]:
    """The limit: the same stats as discovery, as plain code and nothing else."""
    found = []
    if _is_file(os.path.join(home, "AGENTS.md")):
        found.append(os.path.join(home, "AGENTS.md"))
    chain = []
    here = cwd
    while True:
        chain.append(here)
        try:
            os.stat(os.path.join(here, ".git"))
            break
        except FileNotFoundError:
            parent = os.path.dirname(here)
            if parent == here:
                chain = [cwd]
                break
            here = parent
    for directory in reversed(chain):
        if _is_file(path := os.path.join(directory, "AGENTS.md")):
            found.append(path)
    return found


def _is_file(path: str) -> bool:
    try:
        return os.stat(path).st_size >= 0
    except FileNotFoundError:
        return False


def bare_read(cwd: str, home: str) -> str:
    parts = []
    for path in bare_walk(cwd, home):
        with open(path, "rb") as file:
            parts.append(file.read().decode())
    return "\n\n".join(parts)


def timed(step: Callable[[], object], runs: int) -> float:
    times = []
    step()  # warm: the dentry cache, as a session on a real project has it
    for _ in range(runs):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return median(times)


def main() -> None:
    args = parse_args(__doc__ or "")
    header("bench_instructions", args.quick, f"a {DEPTH}-deep tree, median of each")
    runs = 200 if args.quick else 3000
    with tempfile.TemporaryDirectory() as base:
        cwd, home = make_tree(Path(base))
        cwd_s, home_s = str(cwd), str(home)
        found = agents_paths(cwd_s, home_s)
        assert [p for p, _ in found] == bare_walk(cwd_s, home_s), found
        assert len(found) == 1 + 1 + DEPTH // 5
        docs = read_project_docs(cwd_s, home_s, 32 * 1024)
        assert docs.text == bare_read(cwd_s, home_s)

        walk = timed(lambda: bare_walk(cwd_s, home_s), runs)
        discovery = timed(lambda: agents_paths(cwd_s, home_s), runs)
        read_limit = timed(lambda: bare_read(cwd_s, home_s), runs)
        reading = timed(lambda: read_project_docs(cwd_s, home_s, 32 * 1024), runs)
        now = datetime.datetime.now().astimezone()
        inputs = ContextInputs(
            SessionConfig(cwd=cwd_s), home_s, 32 * 1024, "bash", f"{now:%Y-%m-%d}", "UTC"
        )
        context = timed(lambda: initial_context(inputs), runs)

    table = Table(
        f"AGENTS.md in a {DEPTH}-deep tree ({len(found)} files), median",
        ["what", "time", "vs its bare limit"],
    )
    table.add("bare `os.stat` walk (the limit)", fmt_us(walk), "1.00")
    table.add("discovery (`agents_paths`)", fmt_us(discovery), fmt_ratio(discovery / walk))
    table.add("bare walk + read the files (the limit)", fmt_us(read_limit), "1.00")
    table.add(
        "discovery + read + cap (`read_project_docs`)",
        fmt_us(reading),
        fmt_ratio(reading / read_limit),
    )
    table.add("the whole initial context (AGENTS.md + environment)", fmt_us(context), "")
    table.note(
        f"Goal: discovery under 5 ms: {verdict(discovery < GOAL_S)} "
        f"({fmt_us(discovery)}; with reading {fmt_us(reading)})."
    )
    table.print()


if __name__ == "__main__":
    main()
