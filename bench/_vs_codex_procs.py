"""Whole processes for ``bench_vs_codex.py``: runs timed against the scripted server, their
CPU time, and their process tree's peak memory sampled from ``/proc``."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from _installed import VENV, user_environment
from _vs_codex_cli import CODEX_HOME, KEY_VARIABLE, MODEL
from _vs_codex_model import FINAL, PROMPT, BenchModel, TimedServer

CODEXCORE = VENV / "bin" / "codexcore"
"""codexcore as users install it: see ``_installed.py`` (main() installs it if stale)."""
PYTHON = VENV / "bin" / "python"
DEV_CODEXCORE = Path(sys.executable).parent / "codexcore"
"""The dev venv's editable install, for one comparison row."""
TIMEOUT = 120.0
"""Seconds any one process (or one Turn) may take before the benchmark kills it."""


# --- processes --------------------------------------------------------------------------


@dataclass
class Outcome:
    """One whole process: wall time, peak memory, the model's share, and whether it worked."""

    wall: float
    model: float
    answers: int
    ok: bool
    detail: str = ""
    cpu: float = 0.0  # CPU seconds, user + system, of the process and its children
    memory: TreeMemory | None = None  # from run_sampled
    phases: tuple[float, float, float] | None = None  # see Runner._outcome

    @property
    def beyond(self) -> float:
        return self.wall - self.model


def kill_later(proc: subprocess.Popen[bytes], seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, proc.kill)
    timer.daemon = True
    timer.start()
    return timer


def reap(proc: subprocess.Popen[bytes], flags: int = 0) -> tuple[int, float] | None:
    """Wait for the process: (exit code, CPU seconds), or None while it runs (``WNOHANG``).

    The CPU time (user + system) counts the process and every descendant it
    waited for. (Not ``wait4``'s ``ru_maxrss`` for memory: the kernel counts
    into it the RSS the child had before its ``exec``: this benchmark's own.)
    """
    pid, status, usage = os.wait4(proc.pid, flags)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a live process and its waited-for children so far."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    ticks = sum(int(fields[index]) for index in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        with (
            contextlib.suppress(OSError, ValueError),
            open(f"/proc/{pid}/task/{tid}/children") as children,
        ):
            found += [int(child) for child in children.read().split()]
    return found


def _tree(root: int) -> list[tuple[int, int | None]]:
    """Every process of ``root``'s tree, each with its parent (None for the root)."""
    found: list[tuple[int, int | None]] = [(root, None)]
    index = 0
    while index < len(found):
        parent = found[index][0]
        found += [(child, parent) for child in _children(parent)]
        index += 1
    return found


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read()
    except OSError:
        return b""


class TreeMemory:
    """The peak memory of a process tree, from samples of ``/proc``.

    ``peak``: the largest sum, over the samples, of the proportional set size
    (Pss) of every process of the tree alive at the time. Pss divides each
    page among the processes mapping it, so the shared C library, say, does
    not count twice, as in a sum of resident sets. A child caught between its
    fork and its ``exec`` (still a copy-on-write image of its parent: the same
    command line) is left out, since reading its Pss and its parent's at two
    moments could count the shared pages one and a half times. ``largest``:
    the largest peak resident set (VmHWM) of any one process, what ``time -v``
    shows. VmHWM only grows, so it misses only what a process added in its
    last interval; Pss is a sample: a peak between two samples, or a child
    living less than an interval, may be missed.
    """

    def __init__(self) -> None:
        self.peak = 0
        self.largest = 0
        self.seen: set[int] = set()

    def sample(self, root: int) -> None:
        total = 0
        for pid, parent in _tree(root):
            if parent is not None and _cmdline(pid) == _cmdline(parent):
                continue  # forked, not yet exec'd: a copy-on-write image of its parent
            hwm, pss = _hwm(pid), _pss(pid)
            if hwm:
                self.seen.add(pid)
                self.largest = max(self.largest, hwm)
                total += pss
        self.peak = max(self.peak, total)


def _hwm(pid: int) -> int:
    """A process's peak resident set (VmHWM) in bytes, 0 if it is gone."""
    return _field(f"/proc/{pid}/status", "VmHWM:")


def _pss(pid: int) -> int:
    """A process's proportional set size now, in bytes, 0 if it is gone."""
    return _field(f"/proc/{pid}/smaps_rollup", "Pss:")


def _field(path: str, name: str) -> int:
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(name):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError):
        pass
    return 0


class Runner:
    """Runs the clients' processes against one scripted server and measures them."""

    def __init__(self, codex: Path, server: TimedServer, model: BenchModel, scratch: Path) -> None:
        self.codex = codex
        self.server = server
        self.model = model
        self.workdir = scratch / "work"
        self.codexcore_home = scratch / "codexcore-home"
        self.pycache = scratch / "pycache"  # the editable dev install's bytecode
        self.home = scratch / "home"
        for folder in (self.workdir, self.codexcore_home, self.pycache, self.home):
            folder.mkdir(parents=True, exist_ok=True)
        # Both sides get an empty HOME: a login shell (Codex runs one to snapshot the
        # shell, and commands in one by default) then reads no dotfiles of this machine.
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OPENAI_", "CODEX_", "CODEXCORE_", "RUST_LOG"))
        }
        user_home = base.get("HOME", "")
        base["HOME"] = str(self.home)
        self.codexcore_env = {
            **user_environment(base),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-bench-dummy",
            "CODEXCORE_HOME": str(self.codexcore_home),
        }
        # The editable dev install: its bytecode in a private cache the warm-up fills.
        self.dev_env = {**self.codexcore_env, "PYTHONPYCACHEPREFIX": str(self.pycache)}
        self.codex_env = {**base, "CODEX_HOME": str(CODEX_HOME), KEY_VARIABLE: "sk-bench-dummy"}
        self.codex_user_env = {**self.codex_env, "HOME": user_home}

    # the commands

    def codexcore_exec(self, codexcore: Path = CODEXCORE) -> list[str]:
        return [
            str(codexcore), "exec", "--json", "--ephemeral", "--model", MODEL,
            "--approval-policy", "never", "--sandbox", "danger-full-access",
            "--cd", str(self.workdir), PROMPT,
        ]  # fmt: skip

    def codex_exec(self, *extra: str) -> list[str]:
        return [
            str(self.codex), "exec", "--json", "--skip-git-repo-check", "--ephemeral",
            *extra, "-C", str(self.workdir), PROMPT,
        ]  # fmt: skip

    # running

    def run(self, argv: Sequence[str], env: dict[str, str], *, check_task: bool = True) -> Outcome:
        """Run ``argv`` to its end; wall time from spawn to reaped."""
        return self._run(argv, env, None, check_task=check_task)

    def run_sampled(
        self, argv: Sequence[str], env: dict[str, str], *, check_task: bool = True
    ) -> Outcome:
        """Run ``argv`` with its process tree sampled every 2 ms for its peak memory.

        See :class:`TreeMemory`. Sampling costs CPU: these runs are not timed.
        """
        return self._run(argv, env, TreeMemory(), check_task=check_task)

    def _run(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        memory: TreeMemory | None,
        *,
        check_task: bool,
    ) -> Outcome:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            busy0, answered0, seen0 = *self.server.snapshot(), self.model.outputs_seen
            began = time.perf_counter()
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=self.workdir
            )
            timer = kill_later(proc, TIMEOUT)
            if memory is None:
                reaped = reap(proc)
            else:
                while (reaped := reap(proc, os.WNOHANG)) is None:
                    memory.sample(proc.pid)
                    time.sleep(0.002)
            ended = time.perf_counter()
            timer.cancel()
            assert reaped is not None  # a blocking wait returns the exit code
            outcome = self._outcome(
                reaped, began, ended, out, err, busy0, answered0, seen0, check_task=check_task
            )
            outcome.memory = memory
            return outcome

    def _outcome(
        self,
        reaped: tuple[int, float],
        began: float,
        ended: float,
        out: IO[bytes],
        err: IO[bytes],
        busy0: float,
        answered0: int,
        seen0: int,
        *,
        check_task: bool = True,
    ) -> Outcome:
        """How the run went. With two model requests, its phases too: spawn to the
        first request, the first answer's end to the second request (the client
        handles the answer and runs the command), the last answer's end to exit.
        """
        busy, answered = self.server.snapshot()
        answers = answered - answered0
        code, cpu = reaped
        ok, detail = code == 0, f"exit {code}"
        if check_task:
            out.seek(0)
            printed = out.read().decode(errors="replace")
            ran = self.model.outputs_seen - seen0
            ok = ok and answers == 2 and ran == 1 and FINAL in printed
            detail += f", {answers} model requests, command output seen {ran}x"
            if not ok:
                err.seek(0)
                detail += "\nstdout: " + printed[-1500:]
                detail += "\nstderr: " + err.read().decode(errors="replace")[-1500:]
        outcome = Outcome(ended - began, busy - busy0, answers, ok, detail, cpu=cpu)
        spans = self.server.spans_since(began)
        if len(spans) == 2:
            (first, first_end), (second, second_end) = spans
            outcome.phases = (first - began, second - first_end, ended - second_end)
        return outcome


def alternate(index: int) -> tuple[str, str]:
    """The order of the two sides in round ``index``: codexcore first every other round."""
    return ("codexcore", "codex") if index % 2 == 0 else ("codex", "codexcore")
