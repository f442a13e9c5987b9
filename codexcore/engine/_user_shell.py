"""The user's own shell: ``run_user_shell_command``, as Codex's ``!cmd``.

The user runs a command beside (or without) a Task: in their shell (``$SHELL
-lc``, Codex's login-shell invocation), under the Session's sandbox policy, with
no approval (the user asked for it), streamed with ``source: "user_shell"``.
The command and its output become one user message in Codex's
``<user_shell_command>`` form, so the model sees them with its next request.

The op's action (:func:`user_shell`) starts the command in an asyncio task of
the Session's own and returns, so the dispatcher goes on; ``interrupt`` and
the Session's end kill it (``Session.stop_shells``).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..protocol import EventMsg, ExecCommandBegin, ExecCommandEnd, RunUserShellCommand, Submission
from ..tools.exec import ExecResult, ShellStandby
from ..tools.output import truncate_middle
from ..tools.sandbox import SandboxSpec, SandboxStatus
from ._config import SessionConfig
from ._history import Item
from ._session_lifecycle import UNCONFINED
from ._submissions import SubmissionRejected
from ._tools import run_exec

if TYPE_CHECKING:
    from ._codex import Codex
    from ._session import Session

Emit = Callable[[EventMsg], Awaitable[None]]

USER_SHELL_TIMEOUT_MS = 60 * 60 * 1000
"""Codex's own bound on a user shell command when none is given: one hour."""

ABORTED = "command aborted by user"
_FALLBACK_SHELL = "/bin/bash"


class BadCwd(ValueError):
    """A user shell command's cwd is not a directory inside the Session's cwd."""


def resolve_cwd(requested: str | None, root: str) -> str:
    """Where the command runs: ``requested`` (relative to ``root``), held inside
    ``root`` with symlinks resolved; raises :class:`BadCwd` naming it otherwise."""
    if requested is None:
        return root
    if "\0" in requested:
        raise BadCwd("cwd contains a NUL byte, which no path can hold")
    path = os.path.normpath(os.path.join(root, requested))
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([real, real_root]) != real_root:
        raise BadCwd(f"cwd {requested!r} is outside the sandbox root {root!r}")
    if not os.path.isdir(real):
        raise BadCwd(f"cwd {requested!r} is not a directory")
    return path


def command_cwd(codex: Codex, op: RunUserShellCommand) -> str:
    """Where ``op`` runs (:func:`resolve_cwd` in the Session's cwd); a bad cwd refuses it."""
    try:
        return resolve_cwd(op.cwd, codex._session_config().cwd)
    except BadCwd as exc:
        raise SubmissionRejected(str(exc), "bad_cwd") from None


async def user_shell(codex: Codex, sub: Submission, cwd: str) -> None:
    """Start the user's command (in ``cwd``, from :func:`command_cwd`) beside whatever
    runs; the dispatcher goes on."""
    session = codex._require_session()
    shell = asyncio.create_task(
        _run_and_record(codex, session, sub, cwd), name=f"codexcore-user-shell-{sub.id}"
    )
    session.shells.add(shell)
    shell.add_done_callback(session.shells.discard)


async def _run_and_record(codex: Codex, session: Session, sub: Submission, cwd: str) -> None:
    """Run the command, then record it for the model unless the UI hands it over itself."""
    op = sub.op
    assert isinstance(op, RunUserShellCommand)
    result = await run_user_shell(
        op.command,
        op.timeout_ms,
        cwd=cwd,
        config=session.config,
        sandbox=session.sandbox or UNCONFINED,
        emit=codex._emitter(sub.id),
        terminal=session if op.pty else None,
        standby=session.standby,
    )
    if not op.record:
        return  # the UI hands the result to the model itself
    record = user_shell_record(op.command, result, limit_bytes=codex.config.exec_output_limit)
    running = session.running
    if running is not None and not running.runner.done():
        session.add_context(record)  # the History is the running Task's to write
    else:
        session.history.record([record], None)


def user_shell_argv(command: str) -> tuple[str, ...]:
    """The argv that runs ``command`` as the user's shell would: ``$SHELL -lc``,
    or bash when ``$SHELL`` is unset or not an executable absolute path."""
    shell = os.environ.get("SHELL", "")
    if not (os.path.isabs(shell) and os.access(shell, os.X_OK)):
        shell = _FALLBACK_SHELL
    return (shell, "-lc", command)


async def run_user_shell(
    command: str,
    timeout_ms: int | None,
    *,
    cwd: str,
    config: SessionConfig,
    sandbox: SandboxStatus,
    emit: Emit,
    terminal: Session | None = None,
    standby: ShellStandby | None = None,
) -> ExecResult:
    """Run the user's command and return its outcome; never raises for the command.

    With ``terminal`` (the Session), it runs in a PTY that ``write_pty`` writes to.

    Cancelled (``interrupt``, shutdown), the process group is killed and reaped
    first, then ``exec_command_end`` says exit code -1 and ``command aborted by
    user``, as Codex does. A policy that confines commands where no sandbox is
    available refuses the command (exit code -1): it never runs unconfined.
    """
    call_id = f"user_shell_{uuid.uuid4().hex[:12]}"
    argv = user_shell_argv(command)
    policy = config.sandbox_policy
    spec = SandboxSpec(policy.type, policy.writable_roots, policy.network_access)
    if spec.mode != "danger-full-access" and sandbox.kind != "bwrap":
        refusal = (
            "codexcore: not run: the sandbox policy confines commands but no sandbox "
            f"is available here ({sandbox.reason})"
        )
        return await _end_without_run(emit, call_id, argv, cwd, refusal, 0)
    timeout = USER_SHELL_TIMEOUT_MS if timeout_ms is None else timeout_ms
    return await _run_reporting_abort(
        call_id, argv, cwd, timeout, spec, sandbox, emit, terminal, standby
    )


async def _run_reporting_abort(
    call_id: str,
    argv: tuple[str, ...],
    cwd: str,
    timeout_ms: int,
    spec: SandboxSpec,
    sandbox: SandboxStatus,
    emit: Emit,
    terminal: Session | None = None,
    standby: ShellStandby | None = None,
) -> ExecResult:
    """``run_exec`` (in a PTY with ``terminal``), and once cancelled its one
    ``exec_command_end`` all the same."""
    started = asyncio.get_running_loop().time()
    ends: list[ExecCommandEnd] = []

    async def emit_noting_end(msg: EventMsg) -> None:
        if isinstance(msg, ExecCommandEnd):
            ends.append(msg)  # before the emit: a cancel may land once it is queued
        await emit(msg)

    try:
        if terminal is not None:
            from ._terminals import run_exec_in_pty  # the PTY code loads with its first use

            return await run_exec_in_pty(
                terminal.terminals,
                call_id,
                argv,
                cwd,
                timeout_ms,
                spec,
                sandbox,
                emit_noting_end,
                "user_shell",
            )
        return await run_exec(
            call_id,
            argv,
            cwd,
            timeout_ms,
            spec,
            sandbox,
            emit_noting_end,
            source="user_shell",
            standby=standby,
        )
    except asyncio.CancelledError:
        if ends:  # it ended on its own just as the cancel came: that is its outcome
            end = ends[0]
            return ExecResult(
                end.exit_code,
                end.stdout,
                end.stderr,
                end.aggregated_output,
                end.duration_ms,
                end.status == "timed_out",
            )
        # run_exec has killed and reaped the group; the UI still needs the end.
        elapsed = int((asyncio.get_running_loop().time() - started) * 1000)
        return await _end_without_run(emit, call_id, argv, cwd, ABORTED, elapsed, begun=True)


async def _end_without_run(
    emit: Emit,
    call_id: str,
    argv: tuple[str, ...],
    cwd: str,
    message: str,
    duration_ms: int,
    *,
    begun: bool = False,
) -> ExecResult:
    if not begun:
        await emit(ExecCommandBegin(call_id, argv, cwd, "user_shell"))
    await emit(
        ExecCommandEnd(call_id, "", message, message, -1, duration_ms, "failed", "user_shell")
    )
    return ExecResult(-1, "", message, message, duration_ms, False)


def user_shell_record(command: str, result: ExecResult, *, limit_bytes: int) -> Item:
    """Codex's record of a user shell command: a user message the model reads."""
    text = "\n".join(
        [
            "<user_shell_command>",
            "<command>",
            command,
            "</command>",
            "<result>",
            f"Exit code: {result.exit_code}",
            f"Duration: {result.duration_ms / 1000:.4f} seconds",
            "Output:",
            _output_text(result, limit_bytes),
            "</result>",
            "</user_shell_command>",
        ]
    )
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _output_text(result: ExecResult, limit_bytes: int) -> str:
    """The output as Codex shows it to the model: text, middle cut past the limit."""
    output = truncate_middle(result.aggregated_output, limit_bytes)
    if result.timed_out:
        return f"command timed out after {result.duration_ms} milliseconds\n{output}"
    return output
