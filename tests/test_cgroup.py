"""Each reaped command in a cgroup v2 of its own (``codexcore/tools/_cgroup.py``).

Issue 26, item 12: ``setsid env -u CODEXCORE_REAPER …`` leaves the process group
and drops the reaper's mark; only a cgroup still holds it. Tests that need
cgroups skip, with the reason, where this user cannot make any; the fallback
(no cgroups, the reaper alone) is tested everywhere. The SIGKILL of a real
server is in ``tests/test_die_with_server.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from codexcore.tools import _cgroup
from codexcore.tools._cgroup import CGROUPS_ENV_VAR, CgroupTree
from codexcore.tools._reaper import REAPER_ENV_VAR, Reaper
from codexcore.tools._reaper import reaper as process_reaper
from codexcore.tools.exec import run_command

WAIT_S = 10.0
ESCAPE = f"setsid env -u {REAPER_ENV_VAR} sh -c 'echo $$; exec sleep 30' &"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _tree() -> CgroupTree:
    """The process-wide reaper's tree, or skip with the reason there is none."""
    reaper = process_reaper()
    reaper.ensure_started()
    if reaper.cgroups is None:
        pytest.skip(
            "no cgroup v2 directory this user may create cgroups in, with cgroup.kill "
            f"(Linux 5.14), or {CGROUPS_ENV_VAR}=off; this process's cgroup v2: "
            f"{_cgroup.own_cgroup()}"
        )
    return reaper.cgroups


@pytest.mark.anyio
async def test_a_command_that_left_its_group_and_mark_dies_with_the_call() -> None:
    tree = _tree()
    result = await run_command(["sh", "-c", ESCAPE], cwd="/")
    escaped = int(result.stdout)
    try:
        assert result.exit_code == 0
        # run_command waited for the cgroup to empty; init reaps the zombie later.
        assert not _alive(escaped), "the escaped process outlived its command"
        assert not [entry for entry in os.scandir(tree.path) if entry.is_dir()]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


@pytest.mark.anyio
async def test_a_program_that_is_not_found_is_named_with_or_without_cgroups() -> None:
    _tree()
    result = await run_command(["codexcore-no-such-program"], cwd="/")
    assert result.exit_code == 127
    assert result.stderr == "codexcore: command not found: codexcore-no-such-program\n"


def test_the_reaper_kills_and_removes_its_cgroup_tree_when_we_die() -> None:
    _tree()  # skips where cgroups are unusable
    reaper = Reaper()
    reaper.ensure_started()
    tree = reaper.cgroups
    assert tree is not None
    cgroup = tree.new_command()
    assert cgroup is not None
    # Own session and no mark: neither the group kill nor the sweep can find it.
    argv = _cgroup.enter_argv(cgroup, ["sleep", "60"], "/", None)
    escaped = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        _until_in(cgroup, escaped.pid)
        reaper.close()  # what our death does: EOF on the reaper's pipe
        assert escaped.wait(timeout=WAIT_S) == -signal.SIGKILL
        assert not os.path.exists(tree.path), "the reaper left its cgroup tree behind"
    finally:
        with contextlib.suppress(ProcessLookupError):
            escaped.kill()
        escaped.wait()


def _until_in(cgroup: str, pid: int) -> None:
    """Wait until ``pid`` has moved itself into ``cgroup`` (the shell does it at once)."""
    procs = Path(cgroup, "cgroup.procs")
    for _ in range(int(WAIT_S / 0.01)):
        if str(pid) in procs.read_text().split():
            return
        time.sleep(0.01)
    raise AssertionError(f"{pid} never entered {cgroup}")


def test_cgroups_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUPS_ENV_VAR, "off")
    assert CgroupTree.create() is None
    reaper = Reaper()
    try:
        reaper.ensure_started()
        assert reaper.cgroups is None  # the reaper alone, as before cgroups
    finally:
        reaper.close()


def test_a_cgroup_directory_without_cgroup_kill_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a kernel before 5.14 looks like: the child is made, but cannot be killed whole.
    monkeypatch.setattr(_cgroup, "own_cgroup", lambda: str(tmp_path))
    assert CgroupTree.create() is None
    assert list(tmp_path.iterdir()) == []  # and the child it tried is gone again


def test_a_cgroup_directory_we_may_not_write_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cgroup, "own_cgroup", lambda: "/proc/self")  # mkdir fails here
    assert CgroupTree.create() is None


@pytest.mark.anyio
@pytest.mark.parametrize("wanted", [True, False])
async def test_a_command_is_in_a_cgroup_of_its_own_only_when_asked(wanted: bool) -> None:
    tree = _tree()
    result = await run_command(["cat", "/proc/self/cgroup"], cwd="/", cgroup=wanted)
    line = next(line for line in result.stdout.splitlines() if line.startswith("0::"))
    # The tree's path relative to the cgroup2 mount is the tail of its directory.
    assert (os.path.basename(tree.path) in line) is wanted, line
