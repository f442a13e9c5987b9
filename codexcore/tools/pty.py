"""Run a command in a pseudo-terminal (PTY): the building block of interactive mode.

:func:`start_in_pty` opens a PTY pair (``os.openpty``), starts ``argv`` with the
slave as its stdin, stdout and stderr, in a session of its own whose
controlling terminal is that slave (``setsid --ctty``: the child is not a
process-group leader when it calls ``setsid``, so no fork happens and its pid is
the new session's and group's id). A program that asks ``isatty`` or opens
``/dev/tty`` finds a terminal; one that reads a password prompt gets what
:meth:`PtyCommand.write` sends. Output (the terminal mixes stdout and stderr)
is read from the master and handed to ``on_output`` chunk by chunk.

Inside bubblewrap the same works (``wrap``): ``setsid --ctty`` runs inside
the sandbox, the PTY slave passed in as fds 0-2; bwrap's ``--new-session``
made it a session leader, so ``setsid`` forks once and waits (``--wait``) for
the child that takes the terminal. bwrap itself runs in a session of its own,
whose group is the one killed; its PID namespace and ``--die-with-parent``
take everything inside with it.

Ending: :meth:`PtyCommand.kill` (and cancelling :meth:`PtyCommand.wait`) sends
the session's process group SIGTERM, then SIGKILL, waits until the group is
empty and closes the master: no process of the command outlives it. The
watchdog of :mod:`._reaper` registers the group too, so a SIGKILLed codexcore
leaves no command behind either.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import signal
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

from codexcore._logging import get_logger
from codexcore.tools._reaper import REAPER_ENV_VAR, reaper, tell_reaper
from codexcore.tools.exec import (
    EXIT_TIMEOUT,
    CommandInterrupted,
    ExecResult,
    _kill_group,
    _wait_until_group_gone,
)

__all__ = ["SETSID", "PtyCommand", "Wrap", "run_in_pty", "start_in_pty"]

Wrap = Callable[[list[str]], tuple[list[str], Collection[int]]]
"""A confinement around a command: the argv that runs it confined, and the descriptors the
launcher must inherit (the syscall filter's)."""

_log = get_logger(__name__)

SETSID = ("setsid", "--ctty", "--wait")
"""util-linux ``setsid``: a new session whose controlling terminal is stdin (the slave)."""

_READ_CHUNK = 8192
_TERM_GRACE_S = 0.2

OnPtyOutput = Callable[[bytes], Awaitable[None]]


class PtyCommand:
    """A command running in a PTY: write to its terminal, read its output, end it."""

    def __init__(
        self, process: asyncio.subprocess.Process, master: int, on_output: OnPtyOutput | None
    ) -> None:
        self.process = process
        self.pgid = process.pid  # setsid made it the leader of its session and group
        self._master = master
        self._on_output = on_output
        self._output: asyncio.Queue[bytes] = asyncio.Queue()
        self._eof = asyncio.Event()
        self.output = bytearray()
        loop = asyncio.get_running_loop()
        loop.add_reader(master, self._readable)
        self._pump = asyncio.create_task(self._deliver())

    def _readable(self) -> None:
        try:
            chunk = os.read(self._master, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:  # EIO: every slave descriptor is closed
            if exc.errno != errno.EIO:
                _log.debug("pty.read_failed", error=str(exc))
            chunk = b""
        if not chunk:
            asyncio.get_running_loop().remove_reader(self._master)
            self._eof.set()
            self._output.put_nowait(b"")
            return
        self._output.put_nowait(chunk)

    async def _deliver(self) -> None:
        while chunk := await self._output.get():
            self.output += chunk
            if self._on_output is not None:
                await self._on_output(chunk)

    def write(self, data: bytes) -> int:
        """Write ``data`` to the terminal (what a user would type); bytes written.

        Raises :class:`ProcessLookupError` once the command has ended.
        """
        if self.process.returncode is not None or self._master < 0:
            raise ProcessLookupError("the command in the terminal has ended")
        view, written = memoryview(data), 0
        while view:
            try:
                count = os.write(self._master, view)
            except BlockingIOError:
                break  # the terminal's input buffer is full: the rest is not taken
            view, written = view[count:], written + count
        return written

    async def wait(self) -> int:
        """Wait for the command to exit and its output to be read; its exit code.

        Cancelled: the command is killed (see :meth:`kill`) before the cancellation
        goes on.
        """
        try:
            code = await self.process.wait()
            # Whatever still holds the terminal (a background job) ends with the command.
            await self._end_group()
            await self._pump
        except asyncio.CancelledError:
            await asyncio.shield(self.kill())
            raise
        finally:
            self._close()
        return code

    async def kill(self) -> None:
        """End the command's whole process group: SIGTERM, then SIGKILL; then reap."""
        if self.process.returncode is None:
            if not _kill_group(self.pgid, signal.SIGTERM):
                self.process.terminate()  # not yet its own group's leader (before setsid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), _TERM_GRACE_S)
        await self._end_group()
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        self._pump.cancel()
        await asyncio.gather(self._pump, return_exceptions=True)
        self._close()

    async def _end_group(self) -> None:
        if _kill_group(self.pgid, signal.SIGKILL):
            await _wait_until_group_gone(self.pgid)
        tell_reaper(functools.partial(reaper().unregister, self.pgid))

    def _close(self) -> None:
        if self._master >= 0:
            if not self._eof.is_set():
                asyncio.get_running_loop().remove_reader(self._master)
                self._output.put_nowait(b"")
            os.close(self._master)
            self._master = -1


async def start_in_pty(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    on_output: OnPtyOutput | None = None,
    wrap: Wrap | None = None,
    columns: int = 80,
    rows: int = 24,
) -> PtyCommand:
    """Start ``argv`` in a new PTY of ``columns`` x ``rows`` (see the module's docstring).

    ``wrap`` puts a confinement around the command (its argv and the descriptors
    to pass, from ``sandbox.confine``): ``setsid --ctty`` runs inside it, so the
    command itself, not the sandbox's launcher, gets the terminal; the launcher
    then runs in a session of its own.
    Raises :class:`OSError` when it cannot be started, ``ValueError`` for an empty argv.
    """
    if not argv:
        raise ValueError("no command to run")
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        os.set_blocking(master, False)
        tell_reaper(reaper().ensure_started)
        marked = {**(os.environ if env is None else env), REAPER_ENV_VAR: reaper().token}
        marked.setdefault("TERM", "xterm-256color")
        spawned: list[str] = [*SETSID, *argv]
        pass_fds: Collection[int] = ()
        if wrap is not None:
            spawned, pass_fds = wrap(spawned)
        process = await asyncio.create_subprocess_exec(
            *spawned,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=marked,
            close_fds=True,
            pass_fds=tuple(pass_fds),
            # Unwrapped, setsid makes the child its session's leader (no fork: it is
            # not a group leader yet); a launcher around it needs a session of its own.
            start_new_session=wrap is not None,
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)  # the child holds it now: its last close is the master's EOF
    tell_reaper(functools.partial(reaper().register, process.pid))
    _log.debug("pty.started", argv=list(argv), pid=process.pid)
    return PtyCommand(process, master, on_output)


async def run_in_pty(
    argv: Sequence[str],
    *,
    cwd: str,
    timeout_ms: int | None,
    on_output: OnPtyOutput | None = None,
    on_start: Callable[[PtyCommand], None] | None = None,
    env: Mapping[str, str] | None = None,
    wrap: Wrap | None = None,
) -> ExecResult:
    """Run ``argv`` in a PTY to its end (``on_start`` gets it, to write to it); its result.

    The terminal's output is ``stdout`` (a terminal merges the two streams).
    Past ``timeout_ms`` it is killed (exit code 124, ``timed_out``). Cancelled,
    it is killed and :class:`~codexcore.tools.exec.CommandInterrupted` carries
    its output so far. Raises :class:`OSError` when it cannot start.
    """
    started = time.monotonic()
    command = await start_in_pty(argv, cwd=cwd, env=env, on_output=on_output, wrap=wrap)
    timed_out = False
    try:
        if on_start is not None:
            on_start(command)
        async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
            code = await command.wait()  # cancelled: it kills the command first
    except TimeoutError:
        code, timed_out = EXIT_TIMEOUT, True
    except asyncio.CancelledError:
        raise CommandInterrupted(_result(command, -1, started, False)) from None
    except BaseException:
        await command.kill()  # on_start failed: the command must not outlive the call
        raise
    return _result(command, code, started, timed_out)


def _result(command: PtyCommand, code: int, started: float, timed_out: bool) -> ExecResult:
    text = bytes(command.output).decode("utf-8", "replace")
    if timed_out:
        text += "\ncommand timed out"
    duration_ms = int((time.monotonic() - started) * 1000)
    return ExecResult(code, text, "", text, duration_ms, timed_out)
