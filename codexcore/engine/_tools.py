"""Running the model's function calls: ``shell`` and ``apply_patch``, with approvals.

Every decision to ask the user goes through one of two places:
:func:`~._approvals.plan_exec` for commands and :meth:`~._patch_calls.PatchCalls.needs_approval`
for patches. Everything else here is carrying it out and reporting events.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from .._logging import get_logger
from ..protocol import (
    EventMsg,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    ExecCommandSource,
    ExecStatus,
    OutputStream,
    ViewImageToolCall,
)
from ..protocol._value import Value
from ..tools import apply_patch as patches
from ..tools.environment import command_environment
from ..tools.exec import CommandInterrupted, ExecResult, ShellStandby, run_command
from ..tools.output import format_for_model
from ..tools.safety import is_known_safe_command
from ..tools.sandbox import SandboxSpec, SandboxStatus, confine, is_likely_sandbox_denial
from . import _ask_user as ask
from ._approvals import (
    Answer,
    Approvals,
    ApprovalWithdrawn,
    CallInterrupted,
    ExecPlan,
    TaskAborted,
    denial,
    plan_exec,
)
from ._config import CommandRunner, EngineConfig, SessionConfig
from ._history import Item
from ._images import ImageError, attached, image_message, load_image
from ._mcp import McpManager
from ._mcp_calls import call_mcp_tool
from ._patch_calls import PatchCalls
from ._plan import PLAN_UPDATED, PlanError, parse_plan
from ._requests import TOOLS, call_output, function_output
from ._turn_diff import TurnDiffTracker

if TYPE_CHECKING:
    from ..protocol import DynamicToolSpec
    from ..tools.functions import FunctionTool
    from ..tools.pty import PtyCommand

log = get_logger(__name__)

Emit = Callable[[EventMsg], Awaitable[None]]
TOOL_NAMES = "shell, apply_patch, update_plan, view_image"

NOT_ASKED = "not run: the user stopped the task before this call was approved"
BARE_PATCH = (
    "error: a patch is not a command. Send it with the apply_patch tool "
    '({"input": "*** Begin Patch ..."}) or as ["apply_patch", PATCH].'
)


class ToolCallError(ValueError):
    """The model's call cannot be run as given; the message goes back to the model."""


@attrs.frozen(repr=False, eq=False)
class ShellCall(Value):
    call_id: str
    argv: tuple[str, ...]
    cwd: str
    timeout_ms: int
    escalated: bool
    justification: str | None


class ToolRouter:
    """Turns one ``function_call`` output item into its ``function_call_output``.

    Lives for one Task: it holds the Task's ``emit`` and the Session's
    approvals and sandbox, so every event it sends carries the Task's id.
    """

    def __init__(
        self,
        config: SessionConfig,
        engine: EngineConfig,
        approvals: Approvals,
        sandbox: SandboxStatus,
        emit: Emit,
        stopping: Callable[[], bool] = lambda: False,
        mcp: McpManager | None = None,
        attach: Callable[[Item], None] | None = None,
        functions: Mapping[str, FunctionTool] | None = None,
        terminals: dict[str, PtyCommand] | None = None,
        standby: ShellStandby | None = None,
    ) -> None:
        """``stopping`` says whether a ``stop`` or ``checkpoint`` is pending: then a
        call that needs approval is answered as not run instead of asking. ``mcp``:
        the Session's MCP servers, whose tools are offered beside the built-in ones.
        ``attach`` adds an item to the Task's next request (``view_image``'s image;
        without it the tool answers that it is unavailable). ``functions``: the
        embedding program's function tools (``codexcore.engine._function_calls``).
        ``terminals``: the Session's commands in a PTY, where the model's go under
        ``EngineConfig.pty_commands``. ``standby``: the Session's shell waiting in the
        next unconfined command's cgroup (``codexcore.tools.exec.ShellStandby``)."""
        self._terminals = terminals
        self._standby = standby
        self._mcp = mcp
        self._functions = functions or {}
        self._dynamic = {spec.name: spec for spec in config.dynamic_tools}
        self._config = config
        self._engine = engine
        self._approvals = approvals
        self._sandbox = sandbox
        self._emit = emit
        self._stopping = stopping
        self._attach = attach
        policy = config.sandbox_policy
        self._spec = SandboxSpec(policy.type, policy.writable_roots, policy.network_access)
        self._patches = PatchCalls(config, self._spec, approvals, emit, self._ask)

    async def specs(self) -> list[dict[str, Any]]:
        """The tools the next request offers: the built-in ones, then the MCP servers'
        (once their startup has settled: the first Turn waits at most that long)."""
        self._ready_a_shell()
        builtin = [*TOOLS, ask.ASK_USER_TOOL] if self._config.ask_user else list(TOOLS)
        functions = [tool.spec for tool in self._functions.values()]
        if self._dynamic:
            from ._dynamic_tools import specs_for_model

            functions += specs_for_model(self._dynamic.values(), self._functions)
        if self._mcp is None:
            return [*builtin, *functions]
        await self._mcp.wait_started()
        return [*builtin, *functions, *self._mcp_specs()]

    def _mcp_specs(self) -> list[dict[str, Any]]:
        """The MCP tools, less any whose name a function tool has (registration refuses
        the names a configured server's tools take, so only a cut-short name can)."""
        specs = self._mcp.specs() if self._mcp is not None else []
        clashing = [spec["name"] for spec in specs if spec["name"] in self._functions]
        if clashing:
            log.warning("MCP tools not offered: a function tool has the name", names=clashing)
        return [spec for spec in specs if spec["name"] not in self._functions]

    async def call(self, item: Item, diff: TurnDiffTracker) -> Item:
        """The output item answering the call ``item``; never raises for a bad call."""
        if item.get("type") != "function_call":
            return call_output(item, _not_runnable(item))
        call_id = str(item.get("call_id", ""))
        name = item.get("name")
        try:
            if name == "shell":
                output = await self._shell(self._parse_shell(call_id, item.get("arguments")), diff)
            elif name == "apply_patch":
                patch = _json_object(item.get("arguments")).get("input")
                if not isinstance(patch, str):
                    raise ToolCallError("apply_patch: 'input' must be the patch text")
                output = await self._patches.run(call_id, patch, self._config.cwd, diff)
            elif name == "update_plan":
                output = await self._update_plan(item.get("arguments"))
            elif name == "view_image":
                output = await self._view_image(call_id, item.get("arguments"))
            elif name == ask.NAME:
                output = await self._ask_user(call_id, item.get("arguments"))
            elif (function := self._functions.get(str(name))) is not None:
                output = await self._function(call_id, function, item.get("arguments"))
            elif (declared := self._dynamic.get(str(name))) is not None:
                output = await self._client_tool(call_id, declared, item.get("arguments"))
            elif self._mcp is not None and (tool := self._mcp.lookup(str(name))) is not None:
                output = await call_mcp_tool(
                    call_id,
                    tool,
                    item.get("arguments"),
                    manager=self._mcp,
                    policy=self._config.approval_policy,
                    approvals=self._approvals,
                    ask=self._ask,
                    emit=self._emit,
                    cwd=self._config.cwd,
                    limit_bytes=self._engine.exec_output_limit,
                )
            else:
                raise ToolCallError(f"unknown tool {name!r}; the tools are: {self._names()}")
        except ToolCallError as exc:
            output = f"error: {exc}"
        except ApprovalWithdrawn:
            output = NOT_ASKED
        return function_output(call_id, output)

    def _ready_a_shell(self) -> None:
        """An unconfined command runs in a cgroup of its own, which costs ~20 ms to
        enter: have a shell enter the next one while the model answers."""
        unconfined_here = (
            self._spec.mode == "danger-full-access"
            and self._engine.command_runner is None
            and not self._engine.pty_commands
        )
        if self._standby is not None and unconfined_here:
            self._standby.prepare(self._config.cwd, command_environment())

    def _names(self) -> str:
        return ", ".join([TOOL_NAMES, *self._functions, *self._dynamic])

    async def _client_tool(self, call_id: str, spec: DynamicToolSpec, arguments: Any) -> str:
        from ._dynamic_tools import call_dynamic_tool

        return await call_dynamic_tool(
            call_id,
            spec,
            arguments,
            approvals=self._approvals,
            emit=self._emit,
            attach=self._attach,
            timeout_ms=self._config.dynamic_tool_timeout_ms,
            limit_bytes=self._engine.exec_output_limit,
        )

    async def _function(self, call_id: str, tool: FunctionTool, arguments: Any) -> str:
        # Loaded with the first call of a function tool: a program without them never does.
        from ._function_calls import call_function_tool

        return await call_function_tool(
            call_id,
            tool,
            arguments,
            policy=self._config.approval_policy,
            approvals=self._approvals,
            ask=self._ask,
            emit=self._emit,
            attach=self._attach,
            cwd=self._config.cwd,
            limit_bytes=self._engine.exec_output_limit,
        )

    # --- shell ---------------------------------------------------------------

    def _parse_shell(self, call_id: str, arguments: Any) -> ShellCall:
        args = _json_object(arguments)
        command = args.get("command")
        if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
            raise ToolCallError("shell: 'command' must be a non-empty array of strings")
        workdir = args.get("workdir")
        if workdir is not None and not isinstance(workdir, str):
            raise ToolCallError("shell: 'workdir' must be a string")
        # exec and chdir cannot take a NUL: say so, rather than fail inside os.
        if any("\0" in arg for arg in command):
            raise ToolCallError("shell: 'command' contains a NUL byte, which no argument can hold")
        if workdir is not None and "\0" in workdir:
            raise ToolCallError("shell: 'workdir' contains a NUL byte, which no path can hold")
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

    async def _shell(self, call: ShellCall, diff: TurnDiffTracker) -> str:
        invocation = patches.extract_patch_from_argv(call.argv)
        if invocation is not None:
            cwd = os.path.join(call.cwd, invocation.workdir or "")
            return await self._patches.run(call.call_id, invocation.patch, cwd, diff)
        if patches.is_bare_patch(call.argv):
            return BARE_PATCH
        plan = self._plan(call)
        if plan is ExecPlan.REFUSE:
            return self._refusal(call)
        if plan in (ExecPlan.ASK_THEN_RUN, ExecPlan.ASK_THEN_CONFINED):
            answer = await self._ask_exec(call, call.justification)
            if answer.decision == "denied":
                return denial("command", answer)
        confined = plan in (ExecPlan.RUN_CONFINED, ExecPlan.ASK_THEN_CONFINED)
        await asyncio.to_thread(diff.before_command, self._patches.writable_roots())
        result = await self._run(call, confined=confined)
        if confined and self._should_offer_unconfined(result):
            reason = "the sandbox seems to have blocked it; run it again without the sandbox?"
            try:
                if (await self._ask_exec(call, reason)).decision != "denied":
                    result = await self._run(call, confined=False)
            except ApprovalWithdrawn:
                pass  # stopping: the confined run is this call's answer
        return format_for_model(result, limit_bytes=self._engine.exec_output_limit)

    def _plan(self, call: ShellCall) -> ExecPlan:
        if self._approvals.is_command_approved(call.argv, call.cwd) and not call.escalated:
            return ExecPlan.RUN_CONFINED if self._can_confine() else ExecPlan.RUN
        return plan_exec(
            self._config.approval_policy,
            confine=self._spec.mode != "danger-full-access",
            can_confine=self._sandbox.kind == "bwrap",
            known_safe=is_known_safe_command(call.argv),
            escalation_requested=call.escalated,
        )

    def _can_confine(self) -> bool:
        return self._spec.mode != "danger-full-access" and self._sandbox.kind == "bwrap"

    def _refusal(self, call: ShellCall) -> str:
        if call.escalated:
            return "error: running outside the sandbox needs approval, and this session never asks"
        return (
            "error: not run: commands must be confined but no sandbox is available here "
            f"({self._sandbox.reason}), and this session never asks for approval"
        )

    def _should_offer_unconfined(self, result: ExecResult) -> bool:
        return self._config.approval_policy == "on-failure" and is_likely_sandbox_denial(
            result.exit_code, result.aggregated_output, self._spec
        )

    async def _ask(self, call_id: str, request: EventMsg) -> Answer:
        """Send an approval request and wait for the user's answer.

        Raises :class:`TaskAborted` on ``abort``, and :class:`ApprovalWithdrawn`
        once a ``stop`` or ``checkpoint`` is pending: nothing more is asked then.
        A stop handled while the request waited for room in the event queue is
        caught by the second check; one handled later withdraws the waiting
        request (``Approvals.withdraw_pending``).
        """
        if self._stopping():
            raise ApprovalWithdrawn(call_id)
        await self._emit(request)
        if self._stopping():
            raise ApprovalWithdrawn(call_id)
        answer = await self._approvals.wait(call_id)
        if answer.decision == "abort":
            raise TaskAborted(call_id, answer.reason)
        return answer

    async def _ask_exec(self, call: ShellCall, reason: str | None) -> Answer:
        request = ExecApprovalRequest(call.call_id, call.argv, call.cwd, reason)
        answer = await self._ask(call.call_id, request)
        if answer.decision == "approved_for_session":
            self._approvals.approve_command_for_session(call.argv, call.cwd)
        return answer

    async def _run_in_pty(self, call: ShellCall, spec: SandboxSpec) -> ExecResult:
        from ._terminals import run_exec_in_pty  # the PTY code loads with its first use

        assert self._terminals is not None
        return await run_exec_in_pty(
            self._terminals,
            call.call_id,
            call.argv,
            call.cwd,
            call.timeout_ms,
            spec,
            self._sandbox,
            self._emit,
            "agent",
        )

    async def _run(self, call: ShellCall, *, confined: bool) -> ExecResult:
        """Run the call's command; interrupted (the Task cancelled), it ends with the
        output so far and how it was stopped, in its ``exec_command_end`` (recorded,
        so a replay shows it) and in what the model is told (:class:`CallInterrupted`)."""
        runner = self._engine.command_runner
        try:
            if not confined and runner is not None:
                return await run_elsewhere(runner, call, self._emit)
            spec = self._spec if confined else SandboxSpec(mode="danger-full-access")
            if self._engine.pty_commands and self._terminals is not None:
                return await self._run_in_pty(call, spec)
            return await run_exec(
                call.call_id,
                call.argv,
                call.cwd,
                call.timeout_ms,
                spec,
                self._sandbox,
                self._emit,
                standby=self._standby,
            )
        except CommandInterrupted as exc:
            result = exc.result
            await self._emit(
                ExecCommandEnd(
                    call.call_id,
                    result.stdout,
                    result.stderr,
                    result.aggregated_output,
                    result.exit_code,
                    result.duration_ms,
                    "failed",
                )
            )
            limit = self._engine.exec_output_limit
            raise CallInterrupted(format_for_model(result, limit_bytes=limit)) from None

    # --- update_plan and view_image --------------------------------------------------

    async def _update_plan(self, arguments: Any) -> str:
        try:
            update = parse_plan(_json_object(arguments))
        except PlanError as exc:
            raise ToolCallError(f"update_plan: {exc}; the plan was not changed") from None
        await self._emit(update)
        return PLAN_UPDATED

    async def _view_image(self, call_id: str, arguments: Any) -> str:
        path = _json_object(arguments).get("path")
        if not isinstance(path, str):
            raise ToolCallError("view_image: 'path' must be the image file's path")
        if self._attach is None:
            raise ToolCallError("view_image is unavailable in this session")
        roots = self._patches.writable_roots() or [self._config.cwd]
        try:
            image = await asyncio.to_thread(load_image, path, self._config.cwd, roots)
        except ImageError as exc:
            raise ToolCallError(f"view_image: {exc}") from None
        self._attach(image_message(image))
        await self._emit(ViewImageToolCall(call_id, image.path))
        return attached(image)

    async def _ask_user(self, call_id: str, arguments: Any) -> str:
        """``request_user_input``: ask, then wait for the answer as for an approval."""
        if not self._config.ask_user:
            raise ToolCallError(ask.UNAVAILABLE)
        try:
            request = ask.parse_request(call_id, _json_object(arguments))
        except ask.AskError as exc:
            raise ToolCallError(f"{ask.NAME}: {exc}; nothing was asked") from None
        if self._stopping():
            return ask.WITHDRAWN
        await self._emit(request)
        try:
            if self._stopping():  # a stop handled while the event waited for room
                raise ApprovalWithdrawn(call_id)
            return ask.reply_output(await self._approvals.wait_for_reply(request))
        except ApprovalWithdrawn:
            return ask.WITHDRAWN

    # --- apply_patch ------------------------------------------------------------


async def run_exec(
    call_id: str,
    argv: tuple[str, ...],
    cwd: str,
    timeout_ms: int,
    spec: SandboxSpec,
    sandbox: SandboxStatus,
    emit: Emit,
    source: ExecCommandSource = "agent",
    standby: ShellStandby | None = None,
) -> ExecResult:
    """Run ``argv`` under ``spec`` (confined unless it is danger-full-access), with
    its ``exec_command_begin``/``output_delta``/``end`` events; the caller decided
    that it may run. Cancelled, the command's process group is killed and reaped
    before :class:`~codexcore.tools.exec.CommandInterrupted` (a ``CancelledError``
    with the output so far) propagates, and no ``exec_command_end`` is sent: the
    caller says how it ended (:meth:`ToolRouter._run`)."""
    await emit(ExecCommandBegin(call_id, argv, cwd, source))

    async def on_output(stream: OutputStream, chunk: bytes) -> None:
        await emit(ExecCommandOutputDelta(call_id, stream, chunk, source))

    with confine(argv, spec, cwd, bwrap=sandbox.executable or "bwrap") as command:
        result = await run_command(
            command.argv,
            cwd=cwd,
            timeout_ms=timeout_ms,
            on_output=on_output,
            env=command_environment(),
            pass_fds=command.pass_fds,
            # Confined too: bwrap sets its die-with-parent signal only once it
            # runs, so a SIGKILL of ours in its first instants would miss it.
            reap=True,
            # A cgroup only unconfined: bwrap's PID namespace already holds all
            # a confined command starts, and moving into a cgroup has its cost.
            cgroup=spec.mode == "danger-full-access",
            report_interruption=True,
            standby=standby,
        )
    return await emit_exec_end(emit, call_id, result, source)


async def run_elsewhere(runner: CommandRunner, call: ShellCall, emit: Emit) -> ExecResult:
    """``call`` run by ``runner`` (see ``EngineConfig.command_runner``) between its begin
    and end events (cancelled, no end event, as with :func:`run_exec`; a runner that
    knows what the command did raises ``CommandInterrupted`` with it)."""
    await emit(ExecCommandBegin(call.call_id, call.argv, call.cwd))
    result = await runner(call.call_id, call.argv, call.cwd, call.timeout_ms)
    return await emit_exec_end(emit, call.call_id, result)


async def emit_exec_end(
    emit: Emit, call_id: str, result: ExecResult, source: ExecCommandSource = "agent"
) -> ExecResult:
    """Send a finished command's end event; ``result`` back. The Task cancelled while
    it waits to be sent: the command still ran, so :class:`CommandInterrupted` carries
    what it did (the caller sends the end and tells the model), never "it did not run"."""
    end = ExecCommandEnd(
        call_id,
        result.stdout,
        result.stderr,
        result.aggregated_output,
        result.exit_code,
        result.duration_ms,
        _status(result),
        source,
    )
    try:
        await emit(end)
    except asyncio.CancelledError:
        raise CommandInterrupted(result) from None
    return result


def _not_runnable(item: Item) -> str:
    kind, name = item.get("type"), item.get("name")
    what = f"{kind} {name!r}" if isinstance(name, str) else str(kind)
    return f"error: {what} cannot run here; the tools are the functions {TOOL_NAMES}"


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
