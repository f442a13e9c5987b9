"""A shell that has already entered a fresh cgroup, waiting for the one command it becomes.

Entering a cgroup (a write to ``cgroup.procs``) takes the kernel's
``cgroup_threadgroup_rwsem`` for writing, and once that has been idle for a grace
period, the write waits for an RCU grace period: measured here at 13 to 25 ms per
command when commands come 20 to 100 ms apart, as an agent's do, against ~1 ms back
to back. ``_cgroup.enter_argv`` pays it on the command's path. A standby pays it
ahead: after a command, the next shell is started in a cgroup of its own, moves
itself in (``_cgroup``'s own line), then reads the command line from its stdin, a
pipe, with ``.``; the command is ``exec``'d with ``/dev/null`` as its stdin, as
``run_command`` gives every command.

Only an exact match is taken: the same working directory (the same directory, not
only the same path), the same environment, nothing passed but the pipes, an
``argv[0]`` that the shell's ``exec`` runs unchanged, a command line that fits the
pipe at once. Anything else takes the direct path, as does every command after a
standby that died before it was used (the shell here cannot read its stdin, say):
standbys are then no longer started.

One standby at a time: a Session owns one (``Session.standby``), readies it when a
Task that runs commands unconfined asks the model (so that the first command finds
it too) and after every such command, and closes it with its shell commands. It is
a process group registered with the reaper and a cgroup in the reaper's tree, and
holds the only reader of its pipe, so a dying server takes it along like any
command.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Final

from codexcore._logging import get_logger
from codexcore.tools import _cgroup
from codexcore.tools._exec_protocol import ExecProtocol
from codexcore.tools._reaper import REAPER_ENV_VAR, reaper, tell_reaper

__all__ = ["ShellStandby", "Spare", "command_line"]

_log = get_logger(__name__)

# $0 is the cgroup's cgroup.procs. The move first, then the command line from stdin
# (a pipe; the shell opens it again as a file of its own, closed on exec).
_WAIT: Final = '{ echo $$ >"$0"; } 2>/dev/null; . /dev/stdin'
# What the pipe holds at once without blocking the writer (Linux: 64 KiB).
_LINE_LIMIT: Final = 60 * 1024
# How long an ended shell may take to be reaped (SIGKILLed: a few ms).
_EXIT_WAIT_S: Final = 1.0


class Spare:
    """One waiting shell: its process (already an asyncio subprocess), its cgroup, and
    what it was started for."""

    def __init__(
        self,
        transport: asyncio.SubprocessTransport,
        protocol: ExecProtocol,
        cgroup: str,
        env: Mapping[str, str],
        control: int,
    ) -> None:
        self.transport = transport
        self.protocol = protocol
        self.cgroup = cgroup
        self.env = dict(env)
        self.control = control  # the write end of its stdin
        self.pgid = transport.get_pid()

    def alive(self) -> bool:
        return self.transport.get_returncode() is None and not self.protocol.exited.done()

    def in_directory(self, cwd: str) -> bool:
        """Whether the shell's working directory is ``cwd`` (the directory, not the name)."""
        try:
            here, there = os.stat(f"/proc/{self.pgid}/cwd"), os.stat(cwd)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

    def start(self, line: bytes) -> bool:
        """Hand the shell its command line (:func:`command_line`); False if the pipe did
        not take all of it at once (then the shell must be ended, never reused)."""
        try:
            written = os.write(self.control, line)
        except OSError:
            return False
        if written != len(line):
            # Short (a pipe shrunk by the user's pipe quota): no EOF before end() has
            # killed it, and what arrived is an unclosed brace group: nothing runs.
            return False
        os.close(self.control)
        self.control = -1
        return True

    async def end(self) -> None:
        """Kill the shell, wait (briefly) until it is reaped, then forget its group and
        remove its cgroup."""
        self.transport.close()  # SIGKILLs the shell if it still runs
        if self.control >= 0:  # after the kill: EOF first would let the shell go on
            os.close(self.control)
            self.control = -1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.protocol.exited), _EXIT_WAIT_S)
        finally:  # cancelled too: a cgroup still busy is removed later (release's retry)
            tell_reaper(functools.partial(reaper().unregister, self.pgid))
            tree = reaper().cgroups
            if tree is not None:
                tree.release(self.cgroup)


class ShellStandby:
    """The standby of one owner (a Session): :meth:`take` it for a command, then
    :meth:`prepare` the next; :meth:`aclose` at the end (and after it, as new)."""

    def __init__(self) -> None:
        self._spare: Spare | None = None
        self._preparing: asyncio.Task[None] | None = None
        self._wanted: tuple[str, dict[str, str]] | None = None  # asked for meanwhile
        self._given_up = False

    async def take(self, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> Spare | None:
        """The waiting shell, now running ``argv``; None where it does not fit exactly
        (the caller then starts the command directly)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if not spare.alive():
            self._give_up("a standby shell ended before it was used")
            await spare.end()
            return None
        line = command_line(argv)
        if len(line) > _LINE_LIMIT or not _fits(argv, cwd, env, spare):
            self._spare = spare  # still good for the next command that fits
            return None
        if not spare.start(line):
            await spare.end()
            return None
        return spare

    def prepare(self, cwd: str, env: Mapping[str, str]) -> None:
        """Have a shell wait for the next command in ``cwd`` with ``env`` (started in the
        background; one waiting for other ones is ended). Asked again while one starts,
        the last ask is served once it is there."""
        if self._given_up or not os.path.isdir(cwd):
            return
        env = {**env, REAPER_ENV_VAR: reaper().token}  # as run_command marks every command
        if self._preparing is not None:
            self._wanted = (cwd, env)
            return
        old = self._spare
        if old is not None and old.env == env and old.in_directory(cwd):
            return
        self._spare = None
        self._preparing = asyncio.create_task(self._replace(old, cwd, dict(env)))
        self._preparing.add_done_callback(self._prepared)

    async def aclose(self) -> None:
        """End the waiting shell, once the one starting (a few ms) is there. Not
        cancelled halfway: a shell killed but never reaped would outlive the loop."""
        self._wanted = None
        while (preparing := self._preparing) is not None:
            await asyncio.wait({preparing})
        spare, self._spare = self._spare, None
        if spare is not None:
            await spare.end()

    async def _replace(self, old: Spare | None, cwd: str, env: dict[str, str]) -> None:
        if old is not None:
            await old.end()
        await self._start(cwd, env)

    async def _start(self, cwd: str, env: dict[str, str]) -> None:
        tell_reaper(reaper().ensure_started)  # a no-op after the first command
        tree = reaper().cgroups
        cgroup = tree.new_command() if tree is not None else None
        if tree is None or cgroup is None:
            return
        read_end, write_end = os.pipe()
        try:
            transport, protocol = await asyncio.get_running_loop().subprocess_exec(
                ExecProtocol,
                *[_cgroup.SHELL, "-c", _WAIT, os.path.join(cgroup, "cgroup.procs")],
                stdin=read_end,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            os.close(write_end)
            tree.release(cgroup)
            raise
        finally:
            os.close(read_end)
        os.set_blocking(write_end, False)  # a write never holds the loop
        spare = Spare(transport, protocol, cgroup, env, write_end)
        tell_reaper(functools.partial(reaper().register, spare.pgid))
        self._spare = spare

    def _prepared(self, task: asyncio.Task[None]) -> None:
        self._preparing = None
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._give_up(f"cannot start a standby shell: {exc}")
        wanted, self._wanted = self._wanted, None
        if wanted is not None:
            self.prepare(*wanted)

    def _give_up(self, reason: str) -> None:
        self._given_up = True
        _log.debug("exec.standby_off", reason=reason)


def _fits(argv: Sequence[str], cwd: str, env: Mapping[str, str], spare: Spare) -> bool:
    """Whether the shell's ``exec`` runs ``argv`` exactly as a direct spawn would."""
    if not argv or argv[0].startswith("-") or any("\0" in arg for arg in argv):
        return False  # an option to exec in some shells; a spawn refuses NUL itself
    if not _cgroup.runnable(argv[0], cwd, env):
        return False  # the direct path names what cannot run, as ever
    return env == spare.env and spare.in_directory(cwd)


def command_line(argv: Sequence[str]) -> bytes:
    """What the waiting shell reads: ``argv`` exec'd with stdin from /dev/null, in a
    brace group, so that a line cut short anywhere is a syntax error, never a command."""
    return b"{ exec " + b" ".join(map(_quoted, argv)) + b" </dev/null; }\n"


def _quoted(arg: str) -> bytes:
    """``arg`` as one shell word: single quotes keep every byte but their own."""
    return b"'" + os.fsencode(arg).replace(b"'", b"'\\''") + b"'"
