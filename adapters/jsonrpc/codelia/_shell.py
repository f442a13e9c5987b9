"""Seed 000's ``shell.exec``: the UI's ``!command``, on the engine's user shell.

``shell.exec {command, timeout_seconds=120 (max 300), cwd?}`` submits
``run_user_shell_command`` to the connection's session and answers once its
``exec_command_end`` arrives, in the seed's (and Codelia's) result shape. No
Task starts; the command runs in the user's shell under the session's sandbox
policy, with no approval (the user typed it), beside a running Task. The engine
keeps its record for the model's next request, as it does for any dialect.

Mapping, where the engine's facts differ from the seed's fields:

* ``timeout_seconds`` above 300 is held to 300 (as Codelia does); not a positive
  number: -32602. A command killed at its timeout reports ``exit_code: null`` and
  ``signal: "SIGKILL"`` (what the engine sends).
* ``cwd`` the engine refuses (outside the session's cwd, the sandbox root, or not
  a directory): -32602 with the engine's words, naming the cwd.
* An aborted command (``interrupt``, shutdown) or one refused for want of a
  sandbox: ``exit_code: null`` and the reason in ``stderr``. A command killed by a
  signal inside its shell shows the shell's exit code (128 + N): through the
  shell and bubblewrap, that is all the engine can know.
* ``stdout`` and ``stderr`` are excerpts of at most 64 KiB each (head and tail,
  Codelia's inline bound), ``truncated`` saying which were cut; a cut stream is
  kept whole (:mod:`._output_cache`) and named by ``stdout_cache_id`` /
  ``stderr_cache_id``, for ``tool.call``'s ``tool_output_cache`` to read back.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.host._host import NotAccepted
from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.protocol import (
    ErrorEvent,
    Event,
    ExecCommandEnd,
    RunUserShellCommand,
    Submission,
)

from ._output_cache import cache_of

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable
    from codexcore.adapters.jsonrpc._server import RpcContext

DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 300
INLINE_LIMIT = 64 * 1024
PREVIEW_CHARS = 400
CUT_MARKER = "\n...[truncated by size]...\n"


@attrs.frozen
class ShellExecParams:
    command: str
    timeout_seconds: float = DEFAULT_TIMEOUT_S
    cwd: str | None = None


class _Shells:
    """One connection's ``shell.exec`` calls waiting for their command's end."""

    def __init__(self, ctx: RpcContext) -> None:
        self._waiting: dict[str, asyncio.Future[ExecCommandEnd]] = {}
        ctx.on_event(self._event)

    def expect(self, sub_id: str) -> asyncio.Future[ExecCommandEnd]:
        future: asyncio.Future[ExecCommandEnd] = asyncio.get_running_loop().create_future()
        self._waiting[sub_id] = future
        return future

    def forget(self, sub_id: str) -> None:
        self._waiting.pop(sub_id, None)

    async def _event(self, event: Event) -> None:
        future = self._waiting.get(event.id)
        if future is None or future.done():
            return
        if isinstance(event.msg, ExecCommandEnd):
            future.set_result(event.msg)
        elif isinstance(event.msg, ErrorEvent):
            code = INVALID_PARAMS if event.msg.code == "bad_cwd" else SERVER_ERROR
            prefix = "Invalid params: params.cwd: " if code == INVALID_PARAMS else ""
            future.set_exception(RpcError(code, prefix + event.msg.message))


_SHELLS: weakref.WeakKeyDictionary[RpcContext, _Shells] = weakref.WeakKeyDictionary()


def _shells(ctx: RpcContext) -> _Shells:
    shells = _SHELLS.get(ctx)
    if shells is None:
        shells = _SHELLS[ctx] = _Shells(ctx)
    return shells


async def shell_exec(ctx: RpcContext, params: ShellExecParams) -> dict[str, Any]:
    """Run the UI's command in the session's user shell; the seed's result."""
    command = params.command.strip()
    if not command:
        raise RpcError(INVALID_PARAMS, "Invalid params: params.command: command is required")
    if params.timeout_seconds <= 0:
        raise RpcError(
            INVALID_PARAMS, "Invalid params: params.timeout_seconds: must be a positive number"
        )
    timeout_ms = int(min(params.timeout_seconds, MAX_TIMEOUT_S) * 1000)
    attachment = await ctx.session()
    shells, sub_id = _shells(ctx), f"shell-{uuid.uuid4().hex}"
    ended = shells.expect(sub_id)
    try:
        # record=False: the Codelia TUI sends the result to the model itself, in a
        # <shell_result> block before the next prompt (its bang-mode spec).
        op = RunUserShellCommand(
            params.command, timeout_ms=timeout_ms, cwd=params.cwd, record=False
        )
        try:
            await attachment.submit(Submission(sub_id, op))
        except NotAccepted as exc:
            from ._runs import not_accepted  # the run machinery, only on this path

            raise not_accepted(exc) from None
        end = await _wait(ctx, ended)
    finally:
        shells.forget(sub_id)
    return _result(command, end, cache_of(ctx).keep)


async def _wait(ctx: RpcContext, ended: asyncio.Future[ExecCommandEnd]) -> ExecCommandEnd:
    over: asyncio.Task[bool] = asyncio.create_task(ctx.over.wait())
    either: set[asyncio.Future[Any]] = {ended, over}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        over.cancel()
    if not ended.done():
        raise RpcError(SERVER_ERROR, "the session ended before the command did")
    return ended.result()


def _result(command: str, end: ExecCommandEnd, keep: Callable[[str], str]) -> dict[str, Any]:
    stdout, stdout_cut = _excerpt(end.stdout)
    stderr, stderr_cut = _excerpt(end.stderr)
    exit_code: int | None = end.exit_code
    signal = None
    if end.status == "timed_out":
        exit_code, signal = None, "SIGKILL"
    elif end.exit_code < 0:
        exit_code = None  # aborted, or refused: it never exited on its own
    result: dict[str, Any] = {
        "command_preview": _preview(command),
        "exit_code": exit_code,
        "signal": signal,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": {
            "stdout": stdout_cut,
            "stderr": stderr_cut,
            "combined": stdout_cut or stderr_cut,
        },
        "duration_ms": end.duration_ms,
    }
    if stdout_cut:
        result["stdout_cache_id"] = keep(end.stdout)
    if stderr_cut:
        result["stderr_cache_id"] = keep(end.stderr)
    return result


def _preview(command: str) -> str:
    if len(command) <= PREVIEW_CHARS:
        return command
    return command[:PREVIEW_CHARS] + "...[truncated]"


def _excerpt(text: str) -> tuple[str, bool]:
    """At most INLINE_LIMIT bytes of ``text``: its head and tail around a marker."""
    data = text.encode()
    if len(data) <= INLINE_LIMIT:
        return text, False
    budget = INLINE_LIMIT - len(CUT_MARKER.encode())
    head = data[: budget // 2].decode(errors="ignore")
    tail = data[len(data) - (budget - budget // 2) :].decode(errors="ignore")
    return head + CUT_MARKER + tail, True


def add_shell_methods(table: MethodTable) -> None:
    """Register ``shell.exec`` (which makes ``supports_shell_exec`` true)."""
    table.add(
        "shell.exec",
        shell_exec,
        ShellExecParams,
        summary="Run the user's own command in their shell, under the session's sandbox",
        result=SHELL_EXEC_RESULT,
        errors=(SERVER_ERROR,),
    )


_FLAG = {"type": "boolean"}
SHELL_EXEC_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command_preview": {"type": "string"},
        "exit_code": {"type": ["integer", "null"]},
        "signal": {"type": ["string", "null"]},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "truncated": {
            "type": "object",
            "properties": {"stdout": _FLAG, "stderr": _FLAG, "combined": _FLAG},
            "required": ["stdout", "stderr", "combined"],
        },
        "duration_ms": {"type": "integer"},
        "stdout_cache_id": {"type": "string"},
        "stderr_cache_id": {"type": "string"},
    },
    "required": [
        "command_preview",
        "exit_code",
        "signal",
        "stdout",
        "stderr",
        "truncated",
        "duration_ms",
    ],
}
"""What ``shell.exec`` answers (seed 000's fields), for the OpenRPC document."""
