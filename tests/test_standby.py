"""The shell that waits in the next command's cgroup (``codexcore/tools/_standby.py``).

Moving a process into a cgroup waits for a kernel grace period, 13 to 25 ms when
commands come apart; a standby shell pays it ahead. These tests hold it to what
matters: a command run through it is the command a direct spawn would have run
(argv byte for byte, cwd, environment, stdin, descriptors, its own process group
and cgroup), an escaped process still dies with the call, what does not fit takes
the direct path, and nothing is left behind. The SIGKILL of a real server with a
standby waiting, and with a command running in one, is in
``tests/test_die_with_server.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codexcore.tools import _cgroup
from codexcore.tools._reaper import REAPER_ENV_VAR
from codexcore.tools._standby import command_line
from codexcore.tools.exec import ShellStandby, run_command

from .test_cgroup import ESCAPE, _alive, _tree

pytestmark = pytest.mark.anyio

WAIT_S = 10.0
TRICKY = [
    *("it's", 'a "quoted"\nline', "$HOME $(id) `id` \\ *", "", "-x", "tab\there"),
    *("ünï", "\udcff-not-utf-8"),  # what a file name may be: bytes, as os.fsencode gives them
]
REPORT = (
    "import os, sys, json; print(json.dumps({'argv': sys.argv[1:], 'pid': os.getpid(), "
    "'pgid': os.getpgid(0), 'cwd': os.getcwd(), 'fds': sorted(os.listdir('/proc/self/fd')), "
    "'stdin': os.readlink('/proc/self/fd/0'), 'mark': os.environ.get('" + REAPER_ENV_VAR + "'), "
    "'cgroup': open('/proc/self/cgroup').read()}))"
)


@pytest.fixture
async def standby() -> AsyncIterator[ShellStandby]:
    _tree()  # skips, with the reason, where this user can make no cgroups
    shells = ShellStandby()
    try:
        yield shells
    finally:
        await shells.aclose()


async def _waiting(shells: ShellStandby) -> int:
    """The pid of the shell waiting in ``shells`` once it is there (and no other starts)."""
    for _ in range(int(WAIT_S / 0.01)):
        spare = shells._spare
        if spare is not None and shells._preparing is None:
            return spare.pgid
        await asyncio.sleep(0.01)
    raise AssertionError("no standby shell was started")


async def _report(shells: ShellStandby, cwd: str, *args: str) -> dict[str, object]:
    import json

    result = await run_command([sys.executable, "-c", REPORT, *args], cwd=cwd, standby=shells)
    assert result.exit_code == 0, result.aggregated_output
    report: dict[str, object] = json.loads(result.stdout)
    return report


async def test_the_next_command_becomes_the_waiting_shell_exactly_as_spawned(
    standby: ShellStandby, tmp_path: Path
) -> None:
    direct = await _report(standby, str(tmp_path), *TRICKY)  # the first has no standby
    waiting = await _waiting(standby)
    through = await _report(standby, str(tmp_path), *TRICKY)
    assert through["pid"] == waiting, "the command did not run in the waiting shell"
    assert through["cgroup"] != direct["cgroup"]  # a cgroup of its own, as every command
    for key in ("argv", "cwd", "fds", "stdin"):
        assert through[key] == direct[key], key
    assert through["argv"] == TRICKY
    assert through["stdin"] == "/dev/null"
    assert through["pgid"] == through["pid"]  # its own process group, as spawned
    assert through["mark"] == direct["mark"] is not None


async def test_a_process_that_left_group_and_mark_still_dies_with_the_call(
    standby: ShellStandby,
) -> None:
    await run_command(["true"], cwd="/", standby=standby)
    waiting = await _waiting(standby)
    result = await run_command(["sh", "-c", f"echo $$; {ESCAPE}"], cwd="/", standby=standby)
    shell, escaped = map(int, result.stdout.split())
    try:
        assert shell == waiting
        assert not _alive(escaped), "the escaped process outlived its command"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


async def test_what_does_not_fit_runs_directly(standby: ShellStandby, tmp_path: Path) -> None:
    here = str(tmp_path)
    await run_command(["true"], cwd=here, standby=standby)
    waiting = await _waiting(standby)
    missing = await run_command(["codexcore-no-such-program"], cwd=here, standby=standby)
    assert missing.exit_code == 127
    assert missing.stderr == "codexcore: command not found: codexcore-no-such-program\n"
    long = "x" * 100_000  # more than the pipe takes at once
    result = await run_command(["sh", "-c", "echo $$", long], cwd=here, standby=standby)
    assert int(result.stdout) != waiting
    assert await _waiting(standby) == waiting  # still waiting for one that fits
    # Another directory, another environment: each runs directly, and the next shell
    # waits where the last command ran.
    result = await run_command(["sh", "-c", "echo $$; pwd"], cwd="/", standby=standby)
    assert result.stdout.split() == [result.stdout.split()[0], "/"]
    assert int(result.stdout.split()[0]) != waiting
    env = {**os.environ, "EXTRA": "yes"}
    result = await run_command(["sh", "-c", "echo $$ $EXTRA"], cwd="/", env=env, standby=standby)
    assert result.stdout.split()[1] == "yes"
    waiting = await _waiting(standby)
    assert int(result.stdout.split()[0]) != waiting
    result = await run_command(["sh", "-c", "echo $$ $EXTRA"], cwd="/", env=env, standby=standby)
    assert result.stdout.split() == [str(waiting), "yes"]


async def test_a_directory_replaced_under_its_name_is_not_the_shells(
    standby: ShellStandby, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    await run_command(["true"], cwd=str(work), standby=standby)
    waiting = await _waiting(standby)
    work.rename(tmp_path / "old")
    work.mkdir()
    (work / "here").write_text("")
    result = await run_command(["sh", "-c", "echo $$; ls"], cwd=str(work), standby=standby)
    assert result.stdout.split() != [str(waiting), "here"]
    assert result.stdout.split()[1:] == ["here"]


async def test_a_shell_killed_while_waiting_costs_nothing_but_the_standby(
    standby: ShellStandby,
) -> None:
    await run_command(["true"], cwd="/", standby=standby)
    os.kill(await _waiting(standby), signal.SIGKILL)
    spare = standby._spare
    assert spare is not None
    await asyncio.wait_for(spare.protocol.exited, WAIT_S)
    result = await run_command(["echo", "still runs"], cwd="/", standby=standby)
    assert (result.exit_code, result.stdout) == (0, "still runs\n")
    result = await run_command(["echo", "and again"], cwd="/", standby=standby)
    assert (result.exit_code, result.stdout) == (0, "and again\n")
    assert standby._spare is None  # given up, not retried
    assert standby._preparing is None


async def test_closing_kills_the_waiting_shell_and_removes_its_cgroup(
    standby: ShellStandby,
) -> None:
    await run_command(["true"], cwd="/", standby=standby)
    waiting = await _waiting(standby)
    assert standby._spare is not None
    cgroup = standby._spare.cgroup
    await standby.aclose()
    assert not _alive(waiting)  # reaped before aclose returned
    # Removed then, or (its kill still settling in the kernel) as soon as it can be.
    for _ in range(int(WAIT_S / 0.01)):
        if _removed(cgroup):
            break
        await asyncio.sleep(0.01)
    assert _removed(cgroup)


def _removed(cgroup: str) -> bool:
    return not os.path.exists(cgroup) or _cgroup.remove(cgroup)


def test_a_command_line_cut_short_runs_nothing(tmp_path: Path) -> None:
    """A short write ends the shell before it sees EOF; even with EOF, a line cut
    anywhere before its last character is an unclosed brace group, not a command."""
    marker = tmp_path / "ran"
    line = command_line(["sh", "-c", f"echo ran > {marker}", "x y"])
    for cut in range(len(line) - 1):
        done = subprocess.run(
            [_cgroup.SHELL, "-c", ". /dev/stdin"],
            input=line[:cut],
            capture_output=True,
            timeout=WAIT_S,
            check=False,
        )
        assert not marker.exists(), f"{line[:cut]!r} ran (exit {done.returncode})"
    subprocess.run([_cgroup.SHELL, "-c", ". /dev/stdin"], input=line, timeout=WAIT_S, check=True)
    assert marker.read_text() == "ran\n"  # whole, it runs
