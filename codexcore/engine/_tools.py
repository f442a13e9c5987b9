"""Running the model's function calls: the ``shell`` tool and its approvals."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import orjson

from ..protocol import (
    EventMsg,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    ExecStatus,
    OutputStream,
    ReviewDecision,
)
from ..tools.exec import ExecResult, run_command
from ..tools.output import format_for_model
from ..tools.safety import is_known_safe_command
from ._approvals import Approvals, TaskAborted, exec_needs_approval
from ._config import EngineConfig, SessionConfig
from ._history import Item
from ._requests import function_output

Emit = Callable[[EventMsg], Awaitable[None]]


class ToolCallError(ValueError):
    """The model's call cannot be run as given; the message goes back to the model."""


@attrs.frozen
class ShellCall:
    call_id: str
    argv: tuple[str, ...]
    cwd: str
    timeout_ms: int
    escalated: bool
    justification: str | None


class ToolRouter:
    """Turns one ``function_call`` output item into its ``function_call_output``.

    Lives for one Task: it holds the Task's ``emit`` and the Session's
    approvals, so every event it sends carries the Task's id.
    """

    def __init__(
        self,
        config: SessionConfig,
        engine: EngineConfig,
        approvals: Approvals,
        emit: Emit,
    ) -> None:
        self._config = config
        self._engine = engine
        self._approvals = approvals
        self._emit = emit

    async def call(self, item: Item) -> Item:
        call_id = str(item.get("call_id", ""))
        name = item.get("name")
        try:
            if name == "shell":
                output = await self._shell(self._parse_shell(call_id, item.get("arguments")))
            else:
                raise ToolCallError(f"unknown tool {name!r}; the tools are: shell")
        except ToolCallError as exc:
            output = f"error: {exc}"
        return function_output(call_id, output)

    def _parse_shell(self, call_id: str, arguments: Any) -> ShellCall:
        args = _json_object(arguments)
        command = args.get("command")
        if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
            raise ToolCallError("shell: 'command' must be a non-empty array of strings")
        workdir = args.get("workdir")
        if workdir is not None and not isinstance(workdir, str):
            raise ToolCallError("shell: 'workdir' must be a string")
        timeout = args.get("timeout_ms", self._engine.exec_timeout_ms)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ToolCallError("shell: 'timeout_ms' must be a positive number")
        justification = args.get("justification")
        return ShellCall(
            call_id=call_id,
            argv=tuple(command),
            cwd=os.path.normpath(os.path.join(self._config.cwd, workdir or "")),
            timeout_ms=int(timeout),
            escalated=args.get("with_escalated_permissions") is True,
            justification=justification if isinstance(justification, str) else None,
        )

    async def _shell(self, call: ShellCall) -> str:
        decision = await self._exec_decision(call)
        if decision == "denied":
            return "error: the user denied this command; do not run it again this way"
        if decision == "abort":
            raise TaskAborted(call.call_id)
        result = await self._run(call)
        return format_for_model(result, limit_bytes=self._engine.exec_output_limit)

    async def _exec_decision(self, call: ShellCall) -> ReviewDecision:
        if self._approvals.is_command_approved(call.argv, call.cwd):
            return "approved"
        needed = exec_needs_approval(
            self._config.approval_policy,
            known_safe=is_known_safe_command(call.argv),
            escalation_requested=call.escalated,
            sandboxed=False,
        )
        if not needed:
            return "approved"
        await self._emit(ExecApprovalRequest(call.call_id, call.argv, call.cwd, call.justification))
        decision = await self._approvals.wait(call.call_id)
        if decision == "approved_for_session":
            self._approvals.approve_command_for_session(call.argv, call.cwd)
        return decision

    async def _run(self, call: ShellCall) -> ExecResult:
        await self._emit(ExecCommandBegin(call.call_id, call.argv, call.cwd))

        async def on_output(stream: OutputStream, chunk: bytes) -> None:
            await self._emit(ExecCommandOutputDelta(call.call_id, stream, chunk))

        result = await run_command(
            call.argv, cwd=call.cwd, timeout_ms=call.timeout_ms, on_output=on_output
        )
        await self._emit(
            ExecCommandEnd(
                call.call_id,
                result.stdout,
                result.stderr,
                result.aggregated_output,
                result.exit_code,
                result.duration_ms,
                _status(result),
            )
        )
        return result


def _status(result: ExecResult) -> ExecStatus:
    if result.timed_out:
        return "timed_out"
    return "completed" if result.exit_code == 0 else "failed"


def _json_object(arguments: Any) -> dict[str, Any]:
    try:
        value = orjson.loads(arguments) if isinstance(arguments, str | bytes) else arguments
    except orjson.JSONDecodeError as exc:
        raise ToolCallError(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ToolCallError("arguments must be a JSON object")
    return value
