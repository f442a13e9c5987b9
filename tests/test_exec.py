"""run_command against real processes.

Commands that must be observed while running print their pid (``$$``, which is
also their process group id) first; the tests wait for that line through
``on_output`` rather than sleeping, then check ``/proc`` for survivors.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from codexcore.tools._reaper import Reaper
from codexcore.tools._reaper import reaper as process_reaper
from codexcore.tools.exec import ExecResult, OutputStream, run_command
from codexcore.tools.output import omission_marker

pytestmark = pytest.mark.anyio

PY = sys.executable


@pytest.fixture(autouse=True)
async def _no_leftovers() -> AsyncIterator[None]:
    """Every test ends with no task of ours pending and no unclosed resources."""
    yield
    assert [task for task in asyncio.all_tasks() if _is_ours(task) and not task.done()] == []
    gc.collect()  # unclosed transports warn (an error here) when collected


def _is_ours(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` runs code from codexcore (the test runner has tasks of its own)."""
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and "codexcore" in code.co_filename


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # Fields after "(comm)": state, ppid, pgrp, ...; comm may contain spaces.
        state, _ppid, pgrp = stat.rpartition(")")[2].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            members.append(int(entry))
    return members


class _Recorder:
    """An on_output callback that records chunks and can wait for text to appear."""

    def __init__(self) -> None:
        self.chunks: list[tuple[OutputStream, bytes]] = []
        self._changed = asyncio.Event()

    async def __call__(self, stream: OutputStream, data: bytes) -> None:
        self.chunks.append((stream, data))
        self._changed.set()

    def text(self, stream: OutputStream) -> str:
        return b"".join(data for s, data in self.chunks if s == stream).decode()

    async def first_line(self, stream: OutputStream = "stdout") -> str:
        with anyio.fail_after(5):
            while "\n" not in self.text(stream):
                self._changed.clear()
                await self._changed.wait()
        return self.text(stream).split("\n", 1)[0]


async def _run(argv: Sequence[str], **kwargs: Any) -> ExecResult:
    return await run_command(argv, cwd=os.getcwd(), **kwargs)


# ---------------------------------------------------------------------------
# Output


async def test_streams_output_in_bounded_chunks_in_order() -> None:
    expected = "".join(f"{i:07d}\n" for i in range(12_800)).encode()  # 100 KiB
    recorder = _Recorder()
    script = "import sys\nfor i in range(12_800): sys.stdout.write(f'{i:07d}\\n')"
    result = await _run([PY, "-c", script], on_output=recorder)
    assert result.exit_code == 0
    assert b"".join(data for _, data in recorder.chunks) == expected
    assert all(len(data) <= 8192 for _, data in recorder.chunks)
    assert len(recorder.chunks) >= len(expected) // 8192
    assert result.stdout == expected.decode()


async def test_respects_a_smaller_max_chunk() -> None:
    recorder = _Recorder()
    result = await _run(["head", "-c", "10000", "/dev/zero"], on_output=recorder, max_chunk=1000)
    assert result.exit_code == 0
    assert all(len(data) <= 1000 for _, data in recorder.chunks)
    assert sum(len(data) for _, data in recorder.chunks) == 10_000


async def test_separates_streams_and_interleaves_the_aggregate(tmp_path: Path) -> None:
    # The child waits for a go-file after each write, and the test creates it only
    # once that write has arrived, so the arrival order is fixed.
    script = r"""
import os, sys, time
def wait_for(name):
    deadline = time.monotonic() + 10
    while not os.path.exists(name):
        if time.monotonic() > deadline:
            sys.exit(99)
        time.sleep(0.002)
def say(stream, text):
    stream.write(text)
    stream.flush()
say(sys.stdout, "out1\n"); wait_for("go1")
say(sys.stderr, "err1\n"); wait_for("go2")
say(sys.stdout, "out2\n")
"""

    recorder = _Recorder()

    async def release(stream: OutputStream, data: bytes) -> None:
        await recorder(stream, data)
        if recorder.text("stdout") == "out1\n":
            (tmp_path / "go1").touch()
        if recorder.text("stderr") == "err1\n":
            (tmp_path / "go2").touch()

    result = await run_command([PY, "-c", script], cwd=str(tmp_path), on_output=release)
    assert result.exit_code == 0
    assert result.stdout == "out1\nout2\n"
    assert result.stderr == "err1\n"
    assert result.aggregated_output == "out1\nerr1\nout2\n"


async def test_huge_output_stays_bounded() -> None:
    limit = 64 * 1024
    total = 50_000_000
    tracemalloc.start()
    try:
        result = await _run(["sh", "-c", f"yes | head -c {total}"], capture_limit=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0
    marker = omission_marker(total - limit)
    assert result.stdout == "y\n" * (limit // 4) + marker + "y\n" * (limit // 4)
    assert result.aggregated_output == result.stdout
    assert len(result.stdout) <= limit + len(marker)
    # Buffers, reader buffers and one pipe read in flight: far below the 50 MB written.
    assert peak < 2 * 1024 * 1024


async def test_output_is_decoded_with_replacement() -> None:
    result = await _run(["printf", "a\\377b"])
    assert result.stdout == "a\ufffdb"


async def test_on_output_failure_propagates_and_kills_the_command() -> None:
    pid_seen: list[int] = []

    async def explode(stream: OutputStream, data: bytes) -> None:
        pid_seen.append(int(data.split()[0]))
        raise RuntimeError("consumer failed")

    with pytest.raises(RuntimeError, match="consumer failed"):
        await _run(["sh", "-c", "echo $$; sleep 30"], on_output=explode, timeout_ms=10_000)
    assert _group_members(pid_seen[0]) == []


# ---------------------------------------------------------------------------
# Exit codes and spawn failures


@pytest.mark.parametrize(
    ("argv", "exit_code"),
    [
        pytest.param(["true"], 0, id="success"),
        pytest.param(["sh", "-c", "exit 3"], 3, id="failure"),
        pytest.param(["sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM, id="sigterm"),
        pytest.param(["sh", "-c", "kill -KILL $$"], 128 + signal.SIGKILL, id="sigkill"),
    ],
)
async def test_exit_codes(argv: list[str], exit_code: int) -> None:
    result = await _run(argv)
    assert (result.exit_code, result.timed_out) == (exit_code, False)


async def test_command_not_found_is_127() -> None:
    result = await _run(["codexcore-no-such-program"])
    assert result.exit_code == 127
    assert result.stderr == "codexcore: command not found: codexcore-no-such-program\n"
    assert result.aggregated_output == result.stderr
    assert result.stdout == ""


async def test_file_without_exec_permission_is_126(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = await _run([str(script)])
    assert result.exit_code == 126
    assert result.stderr.startswith(f"codexcore: cannot execute {script}: ")


async def test_directory_as_program_is_126(tmp_path: Path) -> None:
    assert (await _run([str(tmp_path)])).exit_code == 126


async def test_missing_cwd_is_127(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = await run_command(["true"], cwd=str(missing))
    assert result.exit_code == 127
    assert result.stderr == f"codexcore: working directory not found: {missing}\n"


async def test_empty_argv_is_an_error() -> None:
    with pytest.raises(ValueError, match="argv"):
        await _run([])


# ---------------------------------------------------------------------------
# Environment of the command


async def test_cwd_is_respected(tmp_path: Path) -> None:
    result = await run_command([PY, "-c", "import os; print(os.getcwd())"], cwd=str(tmp_path))
    assert result.stdout == f"{os.fspath(tmp_path)}\n"


async def test_env_replaces_the_environment() -> None:
    env = {"PATH": os.environ["PATH"], "CODEXCORE_TEST_VALUE": "42"}
    result = await _run(["sh", "-c", 'echo "$CODEXCORE_TEST_VALUE:$HOME"'], env=env)
    assert result.stdout == "42:\n"


async def test_stdin_is_dev_null() -> None:
    with anyio.fail_after(5):
        result = await _run(["cat"])
    assert (result.exit_code, result.stdout) == (0, "")


async def test_runs_in_its_own_process_group() -> None:
    result = await _run(
        [PY, "-c", "import os; print(os.getpid() == os.getpgid(0) == os.getsid(0))"]
    )
    assert result.stdout == "True\n"


async def test_duration_is_measured() -> None:
    result = await _run(["sleep", "0.2"])
    assert 150 <= result.duration_ms < 5000


# ---------------------------------------------------------------------------
# Timeout


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("echo $$; echo partial; sleep 30", id="plain"),
        pytest.param("sleep 30 & echo $$; echo partial; sleep 30", id="grandchild"),
        pytest.param("trap '' TERM; echo $$; echo partial; sleep 30", id="ignores-sigterm"),
    ],
)
async def test_timeout_kills_the_group(script: str) -> None:
    recorder = _Recorder()
    started = time.monotonic()
    result = await _run(["sh", "-c", script], timeout_ms=500, on_output=recorder)
    assert time.monotonic() - started < 3
    assert result.exit_code == 124
    assert result.timed_out
    assert "partial\n" in result.stdout
    assert result.stderr.endswith("codexcore: command timed out after 500 ms\n")
    assert result.aggregated_output.endswith("codexcore: command timed out after 500 ms\n")
    assert _group_members(int(await recorder.first_line())) == []


async def test_timeout_note_starts_on_its_own_line() -> None:
    result = await _run(["sh", "-c", "printf partial >&2; sleep 30"], timeout_ms=300)
    assert result.stderr == "partial\ncodexcore: command timed out after 300 ms\n"


async def test_fast_command_does_not_time_out() -> None:
    result = await _run(["echo", "hi"], timeout_ms=10_000)
    assert (result.exit_code, result.timed_out, result.stdout) == (0, False, "hi\n")


# ---------------------------------------------------------------------------
# Cancellation


_LONG_RUNNING = [
    pytest.param(["sh", "-c", "echo $$; sleep 30"], id="plain"),
    pytest.param(["bash", "-c", "trap '' TERM; echo $$; sleep 30"], id="ignores-sigterm"),
    pytest.param(["sh", "-c", "sleep 30 & echo $$; sleep 30"], id="grandchild"),
    pytest.param(
        ["sh", "-c", "(trap '' TERM; sleep 30) & echo $$; wait"], id="stubborn-grandchild"
    ),
]


@pytest.mark.parametrize("argv", _LONG_RUNNING)
async def test_task_cancel_kills_the_whole_group(argv: list[str]) -> None:
    recorder = _Recorder()
    task = asyncio.create_task(_run(argv, on_output=recorder))
    pgid = int(await recorder.first_line())
    assert _group_members(pgid)
    started = time.monotonic()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert task in done
    assert task.cancelled()
    assert time.monotonic() - started < 1
    assert _group_members(pgid) == []


@pytest.mark.parametrize("argv", _LONG_RUNNING)
async def test_cancel_scope_kills_the_whole_group(argv: list[str]) -> None:
    # anyio re-delivers cancellation on every await: cleanup must still finish.
    recorder = _Recorder()
    pgid: int | None = None
    started = time.monotonic()
    with anyio.CancelScope() as scope:

        async def cancel_when_started(stream: OutputStream, data: bytes) -> None:
            nonlocal started, pgid
            await recorder(stream, data)
            pgid = int(data.split()[0])
            started = time.monotonic()
            scope.cancel()

        await _run(argv, on_output=cancel_when_started)
    assert scope.cancelled_caught
    assert time.monotonic() - started < 1
    assert pgid is not None
    assert _group_members(pgid) == []


# ---------------------------------------------------------------------------
# Background jobs


async def test_background_job_holding_the_pipes_does_not_hang() -> None:
    recorder = _Recorder()
    started = time.monotonic()
    result = await _run(["sh", "-c", "sleep 30 & echo $$; echo done"], on_output=recorder)
    assert time.monotonic() - started < 2
    assert result.exit_code == 0
    assert result.stdout.endswith("done\n")
    assert _group_members(int(await recorder.first_line())) == []


async def test_background_job_is_not_left_behind() -> None:
    recorder = _Recorder()
    result = await _run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $$"], on_output=recorder)
    assert result.exit_code == 0
    assert _group_members(int(await recorder.first_line())) == []


async def test_background_output_within_the_grace_is_kept() -> None:
    result = await _run(["sh", "-c", "(sleep 0.05; echo late) & echo early"])
    assert result.stdout == "early\nlate\n"


async def test_slow_consumer_gets_all_output() -> None:
    # The consumer is slower than the grace period; no data may be lost.
    received: list[bytes] = []

    async def slow(stream: OutputStream, data: bytes) -> None:
        received.append(data)
        await asyncio.sleep(0.05)

    result = await _run(["head", "-c", "100000", "/dev/zero"], on_output=slow, max_chunk=10_000)
    assert result.exit_code == 0
    assert sum(map(len, received)) == 100_000


async def test_process_that_left_the_group_does_not_hang_the_call() -> None:
    # setsid puts the job beyond killpg's reach; it keeps the pipes open, so the
    # call can only stop reading them after the bounded drain (or, where cgroups
    # v2 are usable, kill its cgroup: tests/test_cgroup.py).
    recorder = _Recorder()
    started = time.monotonic()
    result = await _run(["sh", "-c", "setsid sh -c 'echo $$; exec sleep 30' &"], on_output=recorder)
    escaped = int(await recorder.first_line())
    try:
        assert time.monotonic() - started < 3
        assert result.exit_code == 0
        assert result.stdout == f"{escaped}\n"
    finally:
        with contextlib.suppress(ProcessLookupError):  # its cgroup took it already
            os.kill(escaped, signal.SIGKILL)


# --- the reaper: commands die with this process ------------------------------------------


def _sleeper_group() -> subprocess.Popen[bytes]:
    """A sleep in a process group of its own, with a child of its own in the same group."""
    return subprocess.Popen(
        ["sh", "-c", "sleep 60 & exec sleep 60"], start_new_session=True, stdin=subprocess.DEVNULL
    )


def _wait_group_empty(pgid: int, within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while (members := _group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return members


async def test_the_reaper_kills_registered_groups_when_its_pipe_closes() -> None:
    reaper = Reaper()
    kept, dropped = _sleeper_group(), _sleeper_group()
    try:
        reaper.register(kept.pid)
        reaper.register(dropped.pid)
        reaper.unregister(dropped.pid)
        reaper.close()  # what our death does: EOF on the reaper's pipe
        assert _wait_group_empty(kept.pid) == []
        assert kept.wait(timeout=10) == -signal.SIGKILL
        assert _group_members(dropped.pid), "an unregistered group was killed"
    finally:
        for process in (kept, dropped):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        reaper.close()


async def test_a_killed_reaper_is_replaced_and_told_every_group() -> None:
    reaper = Reaper()
    group = _sleeper_group()
    try:
        reaper.register(group.pid)
        first = reaper.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await asyncio.to_thread(os.waitpid, first, 0)
        reaper.register(1 << 30)  # no such group; finds the pipe broken
        assert reaper.pid not in (None, first)
        reaper.close()
        assert _wait_group_empty(group.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group.pid, signal.SIGKILL)
        group.wait()
        reaper.close()


async def test_a_forked_child_does_not_keep_the_parent_reaper_alive() -> None:
    reaper = process_reaper()
    group = _sleeper_group()
    try:
        reaper.register(group.pid)
        parent_reaper = reaper.pid
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the forked child
            os.close(read_end)
            os.write(write_end, b"%d" % (reaper.pid or 0))
            os._exit(0)
        os.close(write_end)
        seen_in_child = int(await asyncio.to_thread(os.read, read_end, 32))
        os.close(read_end)
        await asyncio.to_thread(os.waitpid, child, 0)
        assert parent_reaper is not None
        assert seen_in_child == 0  # the child forgot our reaper: it has none yet
        assert _group_members(group.pid), "the child's exit killed our command"
    finally:
        reaper.unregister(group.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group.pid, signal.SIGKILL)
        group.wait()
