"""Every command dies with the server, whatever kills it: ``kill -9`` of a real ``serve --stdio``.

Under bubblewrap the PID namespace takes everything with it; unconfined, the
reaper (``codexcore/tools/_reaper.py``) kills each command's process group, the
processes carrying its mark and, where cgroups v2 are usable, each command's
cgroup (``codexcore/tools/_cgroup.py``). Unconfined runs go both with cgroups
and without (``CODEXCORE_CGROUPS=off``, as where there are none).
"""

from __future__ import annotations

import asyncio
import glob
import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, shell_call, text_response
from codexcore.tools._cgroup import CGROUPS_ENV_VAR, CgroupTree, own_cgroup, remove
from codexcore.tools._reaper import REAPER_ENV_VAR
from codexcore.tools.sandbox import probe_sandbox

from .server_helpers import StdioServer, say, sub

pytestmark = pytest.mark.anyio

WAIT_S = 10.0


def _processes() -> dict[int, tuple[int, str, bytes]]:
    """pid -> (ppid, state, argv joined by NULs) for every process we can read."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue  # exited while we looked
        state, ppid = stat.rpartition(b")")[2].split()[:2]
        found[int(entry)] = (int(ppid), state.decode(), cmdline)
    return found


def _alive_with(marker: bytes) -> list[int]:
    """Live (not zombie) processes whose argv contains ``marker``."""
    return [
        pid
        for pid, (_, state, cmdline) in _processes().items()
        if marker in cmdline and state not in ("Z", "X")
    ]


def _reapers_of(parent: int) -> list[int]:
    return [
        pid
        for pid, (ppid, state, cmdline) in _processes().items()
        if ppid == parent and b"codexcore-reaper" in cmdline and state not in ("Z", "X")
    ]


async def _until(what: str, check: object) -> None:
    assert callable(check)
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)


def cgroups_usable() -> str | None:
    """None where this process could give commands cgroups, else why not."""
    tree = CgroupTree.create()
    if tree is None:
        return "no cgroup v2 directory this user may create cgroups in (see the debug log)"
    remove(tree.path)
    return None


def _trees_of(server: int) -> list[str]:
    """The cgroup trees (``_cgroup.CgroupTree``) of process ``server``, in our cgroup."""
    own = own_cgroup()
    return [] if own is None else glob.glob(os.path.join(own, f"codexcore-{server}-*"))


SCRIPTS = {
    "sleep": ("echo started; sleep {d}", 1),
    "grandchild": ("sleep {d} & sleep {d}", 3),
    # A daemon of its own session: found by the mark in its environment.
    "setsid": ("setsid sleep {d} & sleep {d}", 3),
    # Issue 26.12: own session and no mark; only its cgroup (or the sandbox) finds it.
    "setsid-unmarked": (f"setsid env -u {REAPER_ENV_VAR} sleep {{d}} & sleep {{d}}", 3),
}
CASES = [
    *(("danger-full-access", "cgroups", name) for name in SCRIPTS),
    # Where there are no cgroups the reaper alone still finds all but the unmarked one.
    *(("danger-full-access", "no-cgroups", name) for name in SCRIPTS if name != "setsid-unmarked"),
    # Confined commands get no cgroup: the PID namespace holds everything they start.
    *(("workspace-write", "bwrap", name) for name in SCRIPTS),
]


async def _start(
    tmp_path: Path, http_url: str, policy: str, env: dict[str, str] | None = None
) -> StdioServer:
    """A real ``serve --stdio`` whose session runs under ``policy``, its first Task asked."""
    server = await StdioServer.start(http_url, tmp_path, env=env)
    await server.send(
        sub(
            "cfg",
            "configure_session",
            cwd=str(tmp_path),
            approval_policy="never",
            sandbox_policy={"type": policy},
        ),
        say("t1", "go"),
    )
    return server


@pytest.mark.parametrize(("policy", "cgroups", "name"), CASES)
async def test_sigkill_of_the_server_leaves_no_command_behind(
    tmp_path: Path, policy: str, cgroups: str, name: str
) -> None:
    if policy != "danger-full-access" and probe_sandbox().kind != "bwrap":
        pytest.skip(f"no working bubblewrap here: {probe_sandbox().reason}")
    if policy == "danger-full-access" and cgroups == "cgroups" and (why := cgroups_usable()):
        pytest.skip(why)
    script, count = SCRIPTS[name]
    env = {CGROUPS_ENV_VAR: "off"} if cgroups == "no-cgroups" else {}
    # An unusual duration marks this test's processes in /proc (bash's argv
    # carries it too, hence 3 for the backgrounded case: bash and two sleeps).
    duration = f"30.{uuid.uuid4().int % 10**9}"
    marker = duration.encode()
    model = ScriptedModel([shell_call(["bash", "-c", script.format(d=duration)], call_id="c1")])
    async with ScriptedResponsesServer(model) as http:
        server = await _start(tmp_path, http.base_url, policy, env)
        try:
            await server.until("exec_command_begin")
            await _until(
                f"{count} processes with {duration}", lambda: len(_alive_with(marker)) >= count
            )
            reapers = _reapers_of(server.pid)
            if policy == "danger-full-access":  # which of the two ways is under test
                assert bool(_trees_of(server.pid)) == (cgroups == "cgroups")
            # The reaper starts with the first command, confined too: bwrap's own
            # die-with-parent is set only once bwrap runs, which a kill can beat.
            assert len(reapers) == 1, reapers
            os.kill(server.pid, signal.SIGKILL)
            assert await server.wait_exit() == -signal.SIGKILL
            try:
                await _until("the command to die", lambda: not _alive_with(marker))
            except AssertionError:
                raise AssertionError(f"left running: {_alive_with(marker)}") from None
            await _until(
                "the reaper to exit",
                lambda: (
                    not any(
                        pid in _processes() and _processes()[pid][1] not in ("Z", "X")
                        for pid in reapers
                    )
                ),
            )
            assert not _trees_of(server.pid), "the reaper left its cgroup tree behind"
        finally:
            for pid in _alive_with(marker):
                os.kill(pid, signal.SIGKILL)
            await server.kill()


# --- the shell that waits in the next command's cgroup (codexcore/tools/_standby.py) -----

STANDBY = b". /dev/stdin"  # in the argv of a shell waiting for its command


def _standbys_of(server: int) -> list[int]:
    """The live shells waiting for the next command of ``server``."""
    tree = f"/codexcore-{server}-".encode()
    return [pid for pid in _alive_with(STANDBY) if tree in _processes()[pid][2]]


async def test_sigkill_of_the_server_ends_the_shell_waiting_for_its_next_command(
    tmp_path: Path,
) -> None:
    if why := cgroups_usable():
        pytest.skip(why)
    # No command yet: the shell is readied while the model answers the first request.
    model = ScriptedModel([text_response("done")])
    async with ScriptedResponsesServer(model) as http:
        server = await _start(tmp_path, http.base_url, "danger-full-access")
        try:
            await server.until("task_complete")
            await _until("a standby shell", lambda: _standbys_of(server.pid))
            os.kill(server.pid, signal.SIGKILL)
            assert await server.wait_exit() == -signal.SIGKILL
            await _until("the standby shell to die", lambda: not _standbys_of(server.pid))
            await _until("its cgroup tree to go", lambda: not _trees_of(server.pid))
        finally:
            for pid in _standbys_of(server.pid):
                os.kill(pid, signal.SIGKILL)
            await server.kill()


async def test_sigkill_of_the_server_ends_a_command_run_in_the_standby_and_its_escapee(
    tmp_path: Path,
) -> None:
    if why := cgroups_usable():
        pytest.skip(why)
    script, count = SCRIPTS["setsid-unmarked"]
    duration = f"30.{uuid.uuid4().int % 10**9}"
    marker = duration.encode()
    model = ScriptedModel(
        [
            shell_call(["true"], call_id="c1"),
            shell_call(["bash", "-c", script.format(d=duration)], call_id="c2"),
        ]
    )
    async with ScriptedResponsesServer(model) as http:
        server = await _start(tmp_path, http.base_url, "danger-full-access")
        try:
            await server.until("exec_command_end")
            await _until(
                f"{count} processes with {duration}", lambda: len(_alive_with(marker)) >= count
            )
            # The second command took the waiting shell: none waits while it runs.
            assert not _standbys_of(server.pid)
            os.kill(server.pid, signal.SIGKILL)
            assert await server.wait_exit() == -signal.SIGKILL
            try:
                await _until("the command to die", lambda: not _alive_with(marker))
            except AssertionError:
                raise AssertionError(f"left running: {_alive_with(marker)}") from None
            await _until("its cgroup tree to go", lambda: not _trees_of(server.pid))
        finally:
            for pid in _alive_with(marker):
                os.kill(pid, signal.SIGKILL)
            await server.kill()
