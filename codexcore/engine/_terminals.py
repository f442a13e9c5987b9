"""Commands in a terminal of their own (a PTY) and ``write_pty``.

A user shell command with ``pty: true``, and the model's commands under
``EngineConfig.pty_commands``, run through :func:`run_exec_in_pty`: its
``exec_command_begin`` says ``pty: true``, the terminal's output streams as
``stdout`` deltas, and while it runs it is the Session's (``Session.terminals``,
by call id), so ``write_pty`` writes to it (:func:`write_pty`). Interrupt and the
Session's end cancel it as any user shell command: its whole process group is
killed (:mod:`codexcore.tools.pty`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from ..protocol import (
    EventMsg,
    ExecCommandBegin,
    ExecCommandOutputDelta,
    ExecCommandSource,
    Submission,
    WritePty,
)
from ..tools.environment import command_environment
from ..tools.exec import ExecResult
from ..tools.pty import PtyCommand, run_in_pty
from ..tools.sandbox import SandboxSpec, SandboxStatus, confine
from ._submissions import SubmissionRejected
from ._tools import emit_exec_end

if TYPE_CHECKING:
    from ._codex import Codex

Emit = Callable[[EventMsg], Awaitable[None]]


async def run_exec_in_pty(
    terminals: dict[str, PtyCommand],
    call_id: str,
    argv: tuple[str, ...],
    cwd: str,
    timeout_ms: int,
    spec: SandboxSpec,
    sandbox: SandboxStatus,
    emit: Emit,
    source: ExecCommandSource,
) -> ExecResult:
    """``run_exec`` in a PTY: the same events (``pty: true``), the same cancellation
    (the group killed, :class:`~codexcore.tools.exec.CommandInterrupted` raised).
    While it runs it is in ``terminals`` (the Session's), under ``call_id``."""
    await emit(ExecCommandBegin(call_id, argv, cwd, source, pty=True))

    async def on_output(chunk: bytes) -> None:
        await emit(ExecCommandOutputDelta(call_id, "stdout", chunk, source))

    def started(command: PtyCommand) -> None:
        terminals[call_id] = command

    with contextlib.ExitStack() as stack:

        def confined(inner: list[str]) -> tuple[list[str], Collection[int]]:
            bwrap = sandbox.executable or "bwrap"
            command = stack.enter_context(confine(inner, spec, cwd, bwrap=bwrap))
            return list(command.argv), command.pass_fds

        unconfined = spec.mode == "danger-full-access"
        try:
            result = await run_in_pty(
                argv,
                cwd=cwd,
                timeout_ms=timeout_ms,
                on_output=on_output,
                on_start=started,
                env=command_environment(),
                wrap=None if unconfined else confined,
            )
        except OSError as exc:
            message = f"codexcore: cannot start {argv[0]!r} in a terminal: {exc}"
            result = ExecResult(127, "", message, message, 0, False)
        finally:
            terminals.pop(call_id, None)
    return await emit_exec_end(emit, call_id, result, source)


async def write_pty(codex: Codex, sub: Submission, _: object) -> None:
    """``write_pty``: the data to the named terminal command, or to the latest one."""
    op = sub.op
    assert isinstance(op, WritePty)
    session = codex._session
    terminals = session.terminals if session is not None else {}
    if op.call_id is not None:
        command = terminals.get(op.call_id)
    else:
        command = next(reversed(terminals.values()), None)
    if command is None:
        named = f" with call_id {op.call_id!r}" if op.call_id is not None else ""
        raise SubmissionRejected(f"no command{named} runs in a terminal", "no_terminal")
    try:
        command.write(op.data.encode())
    except OSError as exc:  # ProcessLookupError included: it has just ended
        raise SubmissionRejected(f"the terminal took no input: {exc}", "no_terminal") from None
