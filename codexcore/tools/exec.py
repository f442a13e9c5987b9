"""Run the model's shell commands: streamed, bounded, time-limited and killable.

:func:`run_command` runs one argv (no shell of its own; the model's ``bash -lc``
arrives as an ordinary argv) in its own process group, streams its output to a
callback, captures a bounded copy, and guarantees that when it returns or raises,
nothing it started is still running:

* the main process has exited and has been reaped;
* every other member of its process group has been sent SIGKILL (background jobs
  included: a tool call does not leave daemons behind);
* its pipes are closed and no helper task is left pending.

Where cgroups v2 are usable (``_cgroup``), the command also runs in a cgroup of its
own, which is killed whole as well: a process that left the group on purpose
(``setsid``, ``setpgid``) dies with it. Elsewhere such a process is not killed, and
if it keeps the pipes open the call stops reading them after a bounded drain (see
``_POST_KILL_DRAIN_S``).

The same holds if this process is killed outright (SIGKILL, the OOM killer)
while a command runs: its process group is registered with a small watchdog
process (``_reaper``) that kills the group when this process dies. A command
under bubblewrap dies with its parent too, but only once bwrap has set its
parent-death signal, so the engine registers confined commands as well.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Literal

from attrs import frozen

from codexcore._logging import get_logger
from codexcore.protocol._value import Value
from codexcore.tools import _cgroup
from codexcore.tools._exec_protocol import ExecProtocol
from codexcore.tools._reaper import REAPER_ENV_VAR, reaper, tell_reaper
from codexcore.tools._standby import ShellStandby
from codexcore.tools.output import HeadTailBuffer

__all__ = [
    "EXIT_NOT_EXECUTABLE",
    "EXIT_NOT_FOUND",
    "EXIT_TIMEOUT",
    "INTERRUPTED_NOTE",
    "CommandInterrupted",
    "ExecResult",
    "OnOutput",
    "OutputStream",
    "ShellStandby",
    "run_command",
]

OutputStream = Literal["stdout", "stderr"]
OnOutput = Callable[[OutputStream, bytes], Awaitable[None]]
"""Receives each piece of output; awaited, so a slow consumer slows the reader down."""

# Shell conventions, so the model reads these codes the way it would in a terminal.
EXIT_TIMEOUT = 124
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127

# After SIGTERM on cancel: how long the main process gets to exit before SIGKILL.
_TERM_GRACE_S = 0.1
# After the main process exits: how long the pipes may stay open (a background job
# still writing) before the rest of the group is killed.
_PIPE_GRACE_S = 0.2
# After the group is killed, pipes reach EOF as soon as their buffered data is read;
# this only bounds the wait when a process outside the group holds them open.
_POST_KILL_DRAIN_S = 1.0
# SIGKILL is asynchronous: how long to wait for the killed group to actually die,
# and how often to look (see _wait_until_group_gone).
_GROUP_EXIT_WAIT_S = 0.5
_GROUP_POLL_S = 0.005

_log = get_logger(__name__)


@frozen(repr=False, eq=False)
class ExecResult(Value):
    """The outcome of one :func:`run_command` call.

    ``stdout``, ``stderr`` and ``aggregated_output`` (both streams interleaved in the
    order their chunks arrived) are UTF-8 decoded with ``errors="replace"`` and each
    bounded by the call's ``capture_limit`` bytes, with an omission marker where the
    middle was cut (see :class:`~codexcore.tools.output.HeadTailBuffer`).
    ``exit_code`` follows shell conventions: 124 on timeout, 126/127 when the
    program could not be started, 128 + N when killed by signal N.
    """

    exit_code: int
    stdout: str
    stderr: str
    aggregated_output: str
    duration_ms: int
    timed_out: bool


INTERRUPTED_NOTE = "command interrupted by the user: its processes were killed"
"""The line (after ``codexcore: ``) that ends an interrupted command's output."""


class CommandInterrupted(asyncio.CancelledError):
    """The cancellation of a command that had started: ``result`` is what it did until
    then, its output so far ending with the :data:`INTERRUPTED_NOTE` line and its
    exit code as killed (128 + the signal). It is a ``CancelledError``: whoever does
    not look at the result sees the cancellation as ever."""

    def __init__(self, result: ExecResult) -> None:
        super().__init__(INTERRUPTED_NOTE)
        self.result = result


async def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    timeout_ms: int | None = None,
    on_output: OnOutput | None = None,
    env: Mapping[str, str] | None = None,
    max_chunk: int = 8192,
    capture_limit: int = 1 << 20,
    pass_fds: Collection[int] = (),
    reap: bool = True,
    cgroup: bool = True,
    report_interruption: bool = False,
    standby: ShellStandby | None = None,
) -> ExecResult:
    """Run ``argv`` in ``cwd`` and return its :class:`ExecResult`.

    The program is looked up on ``env``'s PATH (``env=None`` inherits this
    process's environment), started in a new session and process group, with stdin
    from ``/dev/null`` and stdout/stderr on separate pipes read concurrently. Every
    chunk read is passed to ``on_output`` (in order per stream, at most ``max_chunk``
    bytes each) and awaited before the next read from that stream.

    * Not found / not executable / bad ``cwd``: no exception; exit code 127 or 126
      and a ``codexcore: ...`` line in stderr.
    * ``timeout_ms`` (None: no limit; 0: at once) elapsed before the main process
      exited: the group is killed with SIGKILL; exit code 124, ``timed_out=True``,
      the output captured so far plus a note in stderr.
    * Main process exited but its pipes are still open (a background job): after
      ``_PIPE_GRACE_S`` the rest of the group is killed and the call finishes.
    * Cancelled: the group gets SIGTERM, then SIGKILL after ``_TERM_GRACE_S``; the
      child is reaped and the pipes closed before ``CancelledError`` propagates
      (with ``report_interruption``, as :class:`CommandInterrupted`, carrying what
      the command did until then; opt-in, as ``asyncio.timeout`` only turns a
      plain ``CancelledError`` into its ``TimeoutError``).
    * ``on_output`` raised: handled like cancellation, then its exception propagates.
    * This process dies, even by SIGKILL, while the command runs: with ``reap``
      (the default) the command's process group, and every process whose
      environment carries the watchdog's ``CODEXCORE_REAPER`` mark (set for the
      command, inherited by its children), is killed by this process's
      watchdog (started with the first such command). ``reap=False`` leaves
      that to the command itself; note that bwrap's ``--die-with-parent``
      takes effect only once bwrap runs, not from the spawn.
    * With ``reap`` and ``cgroup`` (the defaults), where cgroups v2 are usable, the
      command runs in a cgroup of its own, killed whole when the call ends and by
      the watchdog when this process dies: even a process that left the group and
      dropped the mark dies then. Moving a process into a cgroup costs a grace
      period of the kernel's (13 to 25 ms measured, ~1 ms back to back); a
      ``standby`` (:class:`ShellStandby`, one per caller such as a Session) pays it
      ahead, in a shell waiting in the next command's cgroup. Pass
      ``cgroup=False`` where a PID namespace (bubblewrap) already holds
      everything the command starts.

    ``pass_fds`` are descriptors the child inherits under the same numbers
    (``sandbox.confine``'s syscall filter); every other one is closed.

    Raises ``ValueError`` for an empty ``argv``, a non-positive ``max_chunk``, a
    negative ``timeout_ms`` or ``capture_limit``, or (from ``subprocess``) an
    argument containing a NUL byte.
    """
    _check_arguments(argv, timeout_ms, max_chunk, capture_limit)
    started = time.monotonic()
    if reap:
        # Before the spawn, so registering the group after it is one pipe write;
        # the mark covers the instant between the two, and whatever leaves the group.
        tell_reaper(reaper().ensure_started)
        env = {**(os.environ if env is None else env), REAPER_ENV_VAR: reaper().token}
    tree = reaper().cgroups if reap and cgroup else None
    try:
        transport, protocol, own_cgroup = await _launch(
            argv, cwd, env, pass_fds, reap=reap, tree=tree, standby=standby
        )
    except OSError as exc:
        return _spawn_failure(argv, cwd, exc, started)
    run = _Run(transport, protocol, _Capture(capture_limit), max_chunk, on_output, own_cgroup)
    _log.debug("exec.started", argv=list(argv), cwd=cwd, pid=run.pgid)
    try:
        timed_out = await run.supervise(None if timeout_ms is None else timeout_ms / 1000)
    except asyncio.CancelledError:
        await _run_to_completion(run.abort())
        _log.debug("exec.aborted", pid=run.pgid)
        if not report_interruption:
            raise
        run.capture.note(INTERRUPTED_NOTE)
        raise CommandInterrupted(run.result(started, None)) from None
    except BaseException:
        await _run_to_completion(run.abort())
        _log.debug("exec.aborted", pid=run.pgid)
        raise
    finally:
        if reap:  # the group is gone: its number is free
            tell_reaper(functools.partial(reaper().unregister, run.pgid))
        _release(own_cgroup)
    if standby is not None and tree is not None and env is not None:
        standby.prepare(cwd, env)  # for the next command, while the model reads this one
    return run.result(started, timeout_ms if timed_out else None)


async def _launch(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    pass_fds: Collection[int],
    *,
    reap: bool,
    tree: _cgroup.CgroupTree | None,
    standby: ShellStandby | None,
) -> tuple[asyncio.SubprocessTransport, ExecProtocol, str | None]:
    """The command's process, started (in a cgroup of its own where ``tree`` is given:
    the standby's shell when it fits); raises ``OSError`` when it cannot start."""
    if tree is not None and standby is not None and env is not None and not pass_fds:
        spare = await standby.take(argv, cwd, env)
        if spare is not None:  # registered with the reaper since it started
            return spare.transport, spare.protocol, spare.cgroup
    own_cgroup = tree.new_command() if tree is not None else None
    spawned = argv if own_cgroup is None else _cgroup.enter_argv(own_cgroup, argv, cwd, env)
    try:
        transport, protocol = await asyncio.get_running_loop().subprocess_exec(
            ExecProtocol,
            *spawned,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,  # own process group (pgid == pid), no controlling tty
            pass_fds=tuple(pass_fds),
        )
    except OSError:
        _release(own_cgroup)
        raise
    if reap:
        # At once, in the spawning thread: one pipe write, the reaper runs already.
        tell_reaper(functools.partial(reaper().register, transport.get_pid()))
    return transport, protocol, own_cgroup


def _release(cgroup: str | None) -> None:
    tree = reaper().cgroups
    if cgroup is not None and tree is not None:
        tree.release(cgroup)


def _check_arguments(
    argv: Sequence[str], timeout_ms: int | None, max_chunk: int, capture_limit: int
) -> None:
    if not argv:
        raise ValueError("argv must not be empty")
    if max_chunk <= 0:
        raise ValueError(f"max_chunk must be positive, got {max_chunk}")
    if timeout_ms is not None and timeout_ms < 0:
        raise ValueError(f"timeout_ms must be >= 0, got {timeout_ms}")
    if capture_limit < 0:
        raise ValueError(f"capture_limit must be >= 0, got {capture_limit}")


class _Capture:
    """The three bounded copies of the output an ExecResult reports."""

    def __init__(self, limit: int) -> None:
        self.stdout = HeadTailBuffer(limit)
        self.stderr = HeadTailBuffer(limit)
        self.aggregated = HeadTailBuffer(limit)

    def add(self, stream: OutputStream, data: bytes) -> None:
        (self.stdout if stream == "stdout" else self.stderr).append(data)
        self.aggregated.append(data)

    def note(self, message: str) -> None:
        """Append a ``codexcore:`` line to stderr (and so to the aggregate)."""
        line = f"codexcore: {message}\n".encode()
        # The aggregate is what the model reads: the note starts a line of its own there.
        if self.aggregated.total_bytes and not self.aggregated.ends_with(b"\n"):
            line = b"\n" + line
        self.add("stderr", line)


class _Run:
    """One started process: its pumps, its lifecycle and its cleanup."""

    def __init__(
        self,
        transport: asyncio.SubprocessTransport,
        protocol: ExecProtocol,
        capture: _Capture,
        max_chunk: int,
        on_output: OnOutput | None,
        cgroup: str | None = None,
    ) -> None:
        self.transport = transport
        self.cgroup = cgroup
        self.protocol = protocol
        self.capture = capture
        # start_new_session made the child a group leader: its pid is the pgid.
        self.pgid = transport.get_pid()
        self.pumps = [
            asyncio.create_task(self._pump("stdout", protocol.stdout, max_chunk, on_output)),
            asyncio.create_task(self._pump("stderr", protocol.stderr, max_chunk, on_output)),
        ]

    async def _pump(
        self,
        stream: OutputStream,
        reader: asyncio.StreamReader,
        max_chunk: int,
        on_output: OnOutput | None,
    ) -> None:
        # read(n) returns at most n bytes, so each chunk already fits max_chunk.
        while chunk := await reader.read(max_chunk):
            self.capture.add(stream, chunk)
            if on_output is not None:
                await on_output(stream, chunk)

    async def supervise(self, timeout_s: float | None) -> bool:
        """Wait for exit (or the timeout), drain, kill leftovers; True if timed out."""
        timed_out = not await self._wait_for_exit(timeout_s)
        if timed_out:
            _log.debug("exec.timeout", pid=self.pgid)
            _kill_group(self.pgid, signal.SIGKILL)
            await self.protocol.exited
        await self._drain()
        self.transport.close()
        return timed_out

    async def _wait_for_exit(self, timeout_s: float | None) -> bool:
        """True once the main process has exited; False at the timeout.

        Also watches the pumps, so that an ``on_output`` failure surfaces at once
        instead of after the command ends.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        watched: set[asyncio.Future[None]] = {self.protocol.exited, *self.pumps}
        while not self.protocol.exited.done():
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            done, _ = await asyncio.wait(
                watched, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            _raise_first_failure(done)
            watched -= done - {self.protocol.exited}
        return True

    async def _drain(self) -> None:
        """Read the pipes to EOF, killing whatever in the group still holds them."""
        _, pending = await asyncio.wait(self.pumps, timeout=_PIPE_GRACE_S)
        # Unconditional: a background job that closed its pipes would otherwise
        # outlive the call. ESRCH (group already empty) is the normal case.
        await self._kill_everything()
        if pending:
            _, pending = await asyncio.wait(pending, timeout=_POST_KILL_DRAIN_S)
        for pump in pending:
            _log.debug("exec.pipe_held_open", pid=self.pgid)
            pump.cancel()
        await asyncio.wait(self.pumps)
        _raise_first_failure(self.pumps)

    async def abort(self) -> None:
        """Kill the whole group (TERM, then KILL), reap, stop the pumps, close pipes."""
        if not self.protocol.exited.done():
            _kill_group(self.pgid, signal.SIGTERM)
            await asyncio.wait({self.protocol.exited}, timeout=_TERM_GRACE_S)
        # Always: grandchildren may ignore or outlive the TERM the main one obeyed.
        await self._kill_everything()
        await self.protocol.exited
        # Every writer is dead: what the command printed before it died is still in
        # the pipes. Read it (an interrupted command reports its output so far), but
        # not for long: a process that escaped the group may hold a pipe open.
        await asyncio.wait(self.pumps, timeout=_PIPE_GRACE_S)
        for pump in self.pumps:
            pump.cancel()
        await asyncio.wait(self.pumps)
        for pump in self.pumps:
            # Mark failures as seen; the one being propagated is already on its way.
            if not pump.cancelled():
                pump.exception()
        self.transport.close()

    async def _kill_everything(self) -> None:
        """SIGKILL the group and the cgroup (if any), and wait until both are empty."""
        if _kill_group(self.pgid, signal.SIGKILL):
            await _wait_until_group_gone(self.pgid)
        if self.cgroup is not None and _cgroup.kill(self.cgroup):
            await _wait_until_cgroup_empty(self.cgroup)

    def result(self, started: float, timed_out_after_ms: int | None) -> ExecResult:
        """The ExecResult; ``timed_out_after_ms`` is the timeout if it fired."""
        if timed_out_after_ms is not None:
            self.capture.note(f"command timed out after {timed_out_after_ms} ms")
            exit_code = EXIT_TIMEOUT
        else:
            exit_code = _exit_code(self.transport.get_returncode())
        _log.debug("exec.finished", pid=self.pgid, exit_code=exit_code)
        return ExecResult(
            exit_code=exit_code,
            stdout=self.capture.stdout.decode(),
            stderr=self.capture.stderr.decode(),
            aggregated_output=self.capture.aggregated.decode(),
            duration_ms=_elapsed_ms(started),
            timed_out=timed_out_after_ms is not None,
        )


def _raise_first_failure(tasks: Iterable[asyncio.Future[None]]) -> None:
    """Re-raise the exception of the first finished, failed task among ``tasks``."""
    for task in tasks:
        if task.done() and not task.cancelled() and (exc := task.exception()) is not None:
            raise exc


async def _run_to_completion(cleanup: Coroutine[Any, Any, None]) -> None:
    """Run ``cleanup`` to its end even if the caller is cancelled again meanwhile.

    The caller is already handling a cancellation (or an error) that it re-raises
    afterwards; cancel scopes such as anyio's re-deliver the cancellation on every
    await, which would otherwise abandon the cleanup halfway.
    """
    task = asyncio.create_task(cleanup)
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            continue
    task.result()


def _kill_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to process group ``pgid``; False if the group was already empty."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Only members we may not signal are left (e.g. a setuid program).
        _log.debug("exec.killpg_denied", pgid=pgid, signal=sig.name)
        return False
    return True


async def _wait_until_group_gone(pgid: int) -> None:
    """Wait, at most ``_GROUP_EXIT_WAIT_S``, until group ``pgid`` has no live member.

    killpg returns before SIGKILL has taken effect. The members are not our
    children (except the main process, already reaped), so there is no exit
    event to wait on: this polls /proc. Zombies count as gone: reaping them is
    their new parent's business, and init may be slow at it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _GROUP_EXIT_WAIT_S
    while _group_has_live_member(pgid):
        if loop.time() >= deadline:
            _log.debug("exec.group_survived_kill", pgid=pgid)
            return
        await asyncio.sleep(_GROUP_POLL_S)


async def _wait_until_cgroup_empty(cgroup: str) -> None:
    """Wait, at most ``_GROUP_EXIT_WAIT_S``, until no process is left in ``cgroup``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _GROUP_EXIT_WAIT_S
    while _cgroup.populated(cgroup):
        if loop.time() >= deadline:
            _log.debug("exec.cgroup_survived_kill", cgroup=cgroup)
            return
        await asyncio.sleep(_GROUP_POLL_S)


def _group_has_live_member(pgid: int) -> bool:
    """Whether /proc shows a process in group ``pgid`` that is not a zombie."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False  # no procfs: SIGKILL was sent, nothing more to check
    return any(_live_in_group(entry, pgid) for entry in entries if entry.isdigit())


def _live_in_group(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return False  # exited while we looked
    # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
    state, _ppid, pgrp = stat.rpartition(b")")[2].split()[:3]
    return int(pgrp) == pgid and state not in (b"Z", b"X")


def _exit_code(returncode: int | None) -> int:
    """A shell-style exit code: negative (killed by signal N) becomes 128 + N."""
    if returncode is None:  # not reachable after exit; be defensive, not crashy
        return -1
    return 128 - returncode if returncode < 0 else returncode


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _spawn_failure(argv: Sequence[str], cwd: str, exc: OSError, started: float) -> ExecResult:
    """The ExecResult for a program that could not be started at all."""
    # The child changes directory before exec, so a bad cwd is what failed if it
    # is not an enterable directory; otherwise the program itself is at fault.
    if not (os.path.isdir(cwd) and os.access(cwd, os.X_OK)):
        exit_code, message = _cwd_failure(cwd, exc)
    elif exc.errno == errno.ENOENT:
        exit_code, message = EXIT_NOT_FOUND, f"command not found: {argv[0]}"
    else:
        exit_code, message = EXIT_NOT_EXECUTABLE, f"cannot execute {argv[0]}: {exc.strerror}"
    _log.debug("exec.spawn_failed", argv=list(argv), cwd=cwd, error=str(exc))
    text = f"codexcore: {message}\n"
    return ExecResult(
        exit_code=exit_code,
        stdout="",
        stderr=text,
        aggregated_output=text,
        duration_ms=_elapsed_ms(started),
        timed_out=False,
    )


def _cwd_failure(cwd: str, exc: OSError) -> tuple[int, str]:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return EXIT_NOT_FOUND, f"working directory not found: {cwd}"
    return EXIT_NOT_EXECUTABLE, f"cannot enter working directory {cwd}: {exc.strerror}"
