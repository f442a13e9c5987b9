"""The cost of confinement and of patching, beside the bare limit.

1. A command under bubblewrap (read-only and workspace-write, syscall filter
   included) against the same command spawned bare, both through codexcore's
   ``run_command``, and beside a bare ``subprocess.run``: what the sandbox
   adds per command. An unconfined command is timed with and without its
   registration with the reaper (what makes it die with a SIGKILLed server),
   and the reaper's one-time start is timed on its own.
2. An unconfined command 50 ms after the previous one, as an agent's commands come: in a
   cgroup of its own (the move waits for a kernel grace period once the previous move
   is that far back), with and without the Session's standby shell that has moved
   ahead, beside the same command with no cgroup and a bare ``subprocess.run``.
3. ``apply_patch`` on a large file (parse, verify every hunk, write a temp
   file, rename) against a bare read-modify-write of the same file with the
   same result: what verification and atomicity cost.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time
from pathlib import Path

from _common import Table, fmt_ms, fmt_ratio, header, median, parse_args

from codexcore.tools._reaper import Reaper, reaper
from codexcore.tools.apply_patch import apply_patch
from codexcore.tools.exec import ShellStandby, run_command
from codexcore.tools.sandbox import SandboxSpec, confine, probe_sandbox


def time_commands(
    argv: list[str], cwd: str, runs: int, *, spec: SandboxSpec | None = None, bwrap: str = ""
) -> float:
    """Median wall time of ``run_command(argv)``, confined by ``spec`` if given
    (the filter's descriptor opened and closed each time, as the engine does)."""

    async def once() -> float:
        started = time.perf_counter()
        if spec is None:
            result = await run_command(argv, cwd=cwd)
        else:
            with confine(argv, spec, cwd, bwrap=bwrap) as command:
                result = await run_command(
                    command.argv, cwd=cwd, pass_fds=command.pass_fds, reap=False
                )
        assert result.exit_code == 0, result.aggregated_output
        return time.perf_counter() - started

    async def many() -> list[float]:
        return [await once() for _ in range(runs)]

    return median(asyncio.run(many()))


def time_bare(argv: list[str], cwd: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return median(times)


def bench_sandbox(runs: int) -> None:
    status = probe_sandbox()
    table = Table("A command (`true`), median wall time", ["how", "time", "vs bare spawn"])
    with tempfile.TemporaryDirectory() as cwd:
        bare = time_bare(["true"], cwd, runs)
        table.add("bare `subprocess.run` (the limit)", fmt_ms(bare), "1.00x")
        unreaped = time_commands(
            ["true"], cwd, runs, spec=SandboxSpec("danger-full-access"), bwrap=""
        )
        table.add(
            "codexcore `run_command`, no sandbox, no reaper",
            fmt_ms(unreaped),
            fmt_ratio(unreaped / bare),
        )
        unconfined = time_commands(["true"], cwd, runs)
        table.add(
            "codexcore `run_command`, no sandbox (reaper registered)",
            fmt_ms(unconfined),
            fmt_ratio(unconfined / bare),
        )
        if status.kind != "bwrap":
            table.note(f"no sandbox here: {status.reason}")
        for mode in ("read-only", "workspace-write"):
            if status.kind != "bwrap":
                break
            bwrap = status.executable or "bwrap"
            confined = time_commands(["true"], cwd, runs, spec=SandboxSpec(mode), bwrap=bwrap)
            table.add(
                f"codexcore `run_command`, bwrap {mode}",
                fmt_ms(confined),
                fmt_ratio(confined / bare),
            )
    table.note(f"the reaper's one-time start (spawn only): {fmt_ms(time_reaper_start(runs))}")
    table.print()


GAP_S = 0.05


def time_spaced(cwd: str, runs: int, *, cgroup: bool, standby: bool) -> float:
    """Median wall time of ``run_command(["true"])``, each GAP_S after the last."""

    async def many() -> list[float]:
        shells = ShellStandby() if standby else None
        times = []
        try:
            for _ in range(runs + 1):  # the first has no standby yet: not counted
                await asyncio.sleep(GAP_S)
                started = time.perf_counter()
                result = await run_command(["true"], cwd=cwd, cgroup=cgroup, standby=shells)
                times.append(time.perf_counter() - started)
                assert result.exit_code == 0, result.aggregated_output
        finally:
            if shells is not None:
                await shells.aclose()
        return times[1:]

    return median(asyncio.run(many()))


def time_bare_spaced(cwd: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        time.sleep(GAP_S)
        started = time.perf_counter()
        subprocess.run(["true"], cwd=cwd, check=True, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return median(times)


def bench_cgroup(runs: int) -> None:
    table = Table(
        f"An unconfined command (`true`) {GAP_S * 1000:.0f} ms after the last, median wall time",
        ["how", "time", "vs bare spawn"],
    )
    reaper().ensure_started()
    with tempfile.TemporaryDirectory() as cwd:
        bare = time_bare_spaced(cwd, runs)
        table.add("bare `subprocess.run` (the limit)", fmt_ms(bare), "1.00x")
        rows = [
            ("`run_command`, no cgroup (reaper registered)", False, False),
            ("`run_command`, own cgroup, moved on the way", True, False),
            ("`run_command`, own cgroup, the standby shell", True, True),
        ]
        if reaper().cgroups is None:
            table.note("no usable cgroup v2 here: every row runs without one")
        for name, cgroup, standby in rows:
            ours = time_spaced(cwd, runs, cgroup=cgroup, standby=standby)
            table.add(name, fmt_ms(ours), fmt_ratio(ours / bare))
    table.print()


def time_reaper_start(runs: int) -> float:
    """Median time to start a fresh reaper (it exits when its pipe closes)."""
    times = []
    for _ in range(max(3, runs // 6)):
        reaper = Reaper()
        started = time.perf_counter()
        reaper.register(1 << 30)  # no such group: starts the reaper, kills nothing
        times.append(time.perf_counter() - started)
        reaper.close()
    return median(times)


def make_patch(lines: int, hunks: int) -> tuple[str, str, str]:
    """A file of ``lines`` lines, a patch changing ``hunks`` of them, and the result."""
    before = [f"line {i}: some text of a plausible length for source code" for i in range(lines)]
    after = list(before)
    body = []
    step = lines // hunks
    for h in range(hunks):
        i = h * step + step // 2
        after[i] = before[i].replace("some", "patched")
        body += ["@@", f" {before[i - 1]}", f"-{before[i]}", f"+{after[i]}", f" {before[i + 1]}"]
    patch = "\n".join(["*** Begin Patch", "*** Update File: big.txt", *body, "*** End Patch"])
    return "\n".join(before) + "\n", patch, "\n".join(after) + "\n"


def bench_patch(runs: int) -> None:
    table = Table(
        "Update a 20,000-line file with 200 hunks, median wall time",
        ["how", "time", "vs bare rewrite"],
    )
    before, patch, after = make_patch(20_000, 200)
    with tempfile.TemporaryDirectory() as directory:
        target = Path(directory, "big.txt")

        def bare() -> None:
            text = target.read_text()
            target.write_text(text.replace("line 50: some", "line 50: patched"))

        def patched() -> None:
            apply_patch(patch, directory)

        times: dict[str, list[float]] = {"bare": [], "patch": []}
        for _ in range(runs):
            for name, step in (("bare", bare), ("patch", patched)):
                target.write_text(before)
                started = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - started)
        assert target.read_text() == after
    limit, ours = median(times["bare"]), median(times["patch"])
    table.add("read, replace, write (the limit)", fmt_ms(limit), "1.00x")
    table.add(
        "`apply_patch`: parse, verify, temp file, rename", fmt_ms(ours), fmt_ratio(ours / limit)
    )
    table.print()


def main() -> None:
    args = parse_args(__doc__ or "")
    header("bench_tools", args.quick)
    runs = 10 if args.quick else 60
    bench_sandbox(runs)
    bench_cgroup(runs // 2)
    bench_patch(5 if args.quick else 30)


if __name__ == "__main__":
    main()
