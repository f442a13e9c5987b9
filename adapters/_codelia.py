"""Seed 000's run flow on the JSON-RPC dialect: what the Codelia TUI drives.

``run.start`` submits the UI's input to the connection's session as a
``user_input`` whose submission id is the run's id, so every event of the
Task carries it. Each event goes through :mod:`._codelia_events` to become
``agent.event`` notifications ``{run_id, seq, event, meta}`` (``seq`` from 0
per run, gap-free); the Task's terminal event becomes exactly one terminal
``run.status``. Approvals become ``ui.confirm.request`` requests to the UI,
in Codelia's order (``permission.preview`` -> ``permission.ready`` ->
``run.status awaiting_ui`` -> the request -> ``run.status running``).

Everything one run sends goes out under the run's lock, so its
notifications keep their order whichever task sends them (the session's
event listener, or the task that waits for the UI's answer to a confirm).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import uuid
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from codexcore._logging import get_logger
from codexcore.protocol import (
    ApplyPatchApprovalRequest,
    ConfigureSession,
    ErrorEvent,
    Event,
    ExecApproval,
    ExecApprovalRequest,
    ImageInput,
    InputItem,
    Interrupt,
    Op,
    PatchApproval,
    ResumeSession,
    ReviewDecision,
    SessionConfigured,
    ShutdownComplete,
    Submission,
    TaskComplete,
    TextInput,
    TokenCount,
    TurnAborted,
    UserInput,
    WarningEvent,
    encode_event,
)

from ._codelia_events import NOT_SENT, AgentEvent, RunView, build, codexcore_event
from ._codelia_models import ModelList, ModelSet, current_model, model_list, model_set
from ._host import Attachment, NotAccepted
from ._jsonrpc import INVALID_PARAMS, RpcError
from ._jsonrpc_methods import MethodTable

if TYPE_CHECKING:
    from ._jsonrpc_server import RpcContext

log = get_logger(__name__)

RUNTIME_BUSY = -32001
RUN_NOT_FOUND = -32002
SESSION_NOT_FOUND = -32004
SESSION_LOAD_FAILED = -32005
SERVER_ERROR = -32000

KEPT_RUNS = 100
"""Finished runs remembered per connection, so run.cancel can answer with their status."""
CANCEL_WAIT = 10.0
"""Seconds run.cancel waits for the interrupted Task's end (it comes within one)."""
NO_CONFIRM = "denied: the UI cannot ask for confirmation (it did not declare supports_confirm)"


@attrs.frozen
class RunStart:
    input: dict[str, Any]
    tools: list[Any] | None = None  # the UI's own tools: accepted, not offered to the model
    tool_choice: Any = None
    session_id: str | None = None
    force_compaction: bool | None = None
    ui_context: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen
class RunCancel:
    run_id: str
    reason: str | None = None


class Run:
    """One ``run.start``: its events' view, its seq, its status."""

    def __init__(self, run_id: str, preflight: bool) -> None:
        self.id = run_id
        self.view = RunView(run_id, preflight=preflight)
        self.seq = 0
        self.status = "running"
        self.finished = False
        self.lock = asyncio.Lock()
        self.gate = asyncio.Event()  # open once run.start's answer is on its way
        self.done = asyncio.Event()
        self.confirms: set[asyncio.Task[None]] = set()


@attrs.define
class Codelia:
    """One connection's runs, and the model it will use next."""

    ctx: RpcContext
    runs: dict[str, Run] = attrs.field(factory=dict)
    active: Run | None = None
    listening: bool = False
    model: str | None = None  # from the session's latest session_configured
    effort: str | None = None
    pending: dict[str, Any] = attrs.field(factory=dict)  # configure_session fields for next run
    chosen: bool = False  # model.set was used on this connection
    waiters: dict[str, asyncio.Future[Event]] = attrs.field(factory=dict)
    tasks: set[asyncio.Task[None]] = attrs.field(factory=set)

    @property
    def wants_codexcore(self) -> bool:
        return self.ctx.client_capabilities.get("codexcore_events") is True

    async def attachment(self) -> Attachment:
        attachment = await self.ctx.session()
        if not self.listening:
            self.ctx.on_event(self.on_event)
            self.listening = True
        return attachment

    async def submit(self, op: Op, sub_id: str | None = None) -> str:
        sub_id = sub_id or f"codelia-{uuid.uuid4().hex}"
        attachment = await self.attachment()
        try:
            await attachment.submit(Submission(sub_id, op))
        except NotAccepted as exc:
            raise RpcError(SERVER_ERROR, exc.message, {"code": exc.code}) from None
        return sub_id

    async def ask_engine(self, op: Op) -> Event:
        """Submit ``op`` and wait for its ``session_configured`` (or ``error``)."""
        sub_id = f"codelia-{uuid.uuid4().hex}"
        future: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self.waiters[sub_id] = future
        try:
            await self.submit(op, sub_id)
            async with asyncio.timeout(30):
                return await future
        finally:
            self.waiters.pop(sub_id, None)

    def spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # --- the session's events -----------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        msg = event.msg
        if isinstance(msg, SessionConfigured):
            self.model, self.effort = msg.model, msg.reasoning_effort
        if isinstance(msg, SessionConfigured | ErrorEvent):
            waiter = self.waiters.get(event.id)
            if waiter is not None and not waiter.done():
                waiter.set_result(event)
        if isinstance(msg, WarningEvent):
            log.warning("engine warning", message=msg.message)
        if isinstance(msg, ShutdownComplete):
            await self.session_over()
        run = self.runs.get(event.id)
        if run is None or run.finished:
            return
        await run.gate.wait()
        await self.deliver(run, event)

    async def session_over(self) -> None:
        """The session ended: a run whose Task never started (its input was still queued)
        gets its terminal status here, as every run must."""
        for run in list(self.runs.values()):
            if not run.finished:
                await run.gate.wait()
                async with run.lock:
                    await self.finish(run, "cancelled", "the session ended")

    async def deliver(self, run: Run, event: Event) -> None:
        msg = event.msg
        async with run.lock:
            if run.finished:
                return
            wire = orjson.loads(encode_event(event))
            meta = {"codexcore": wire}
            events = build(run.view, msg)
            if not events and self.wants_codexcore and msg.TYPE in NOT_SENT:
                events = [codexcore_event(wire["msg"])]
            for agent_event in events:
                await self.send_event(run, agent_event, meta)
            if isinstance(msg, TokenCount):
                await self.send_context(run, msg)
            terminal = _terminal(msg)
            if terminal is not None:
                await self.finish(run, *terminal)
        if isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
            await self.approval(run, msg)

    async def send_event(self, run: Run, event: AgentEvent, meta: Mapping[str, Any]) -> None:
        params = {"run_id": run.id, "seq": run.seq, "event": event, "meta": meta}
        run.seq += 1
        await self.ctx.notify("agent.event", params)

    async def send_status(self, run: Run, status: str, message: str | None = None) -> None:
        run.status = status
        params: dict[str, Any] = {"run_id": run.id, "status": status}
        if message:
            params["message"] = message
        await self.ctx.notify("run.status", params)

    async def send_context(self, run: Run, usage: TokenCount) -> None:
        from codexcore.engine import context_window

        window = context_window(current_model(self))
        used = usage.input_tokens + usage.output_tokens
        left = max(0, min(100, round(100 * (1 - used / window))))
        await self.ctx.notify("run.context", {"run_id": run.id, "context_left_percent": left})

    async def finish(self, run: Run, status: str, message: str | None) -> None:
        """The run's one terminal status (call with its lock held); nothing of it follows."""
        if run.finished:
            return
        await self.send_status(run, status, message)
        run.finished = True
        run.done.set()
        if self.active is run:
            self.active = None
        current = asyncio.current_task()
        for task in run.confirms:
            if task is not current:
                task.cancel()
        finished = [r for r in self.runs.values() if r.finished]
        for old in finished[: max(0, len(finished) - KEPT_RUNS)]:
            del self.runs[old.id]

    # --- approvals --------------------------------------------------------------------------

    async def approval(
        self, run: Run, request: ExecApprovalRequest | ApplyPatchApprovalRequest
    ) -> None:
        if self.ctx.client_capabilities.get("supports_confirm") is not True:
            await self.decide(run, request, "denied", NO_CONFIRM)
            return
        async with run.lock:
            if run.finished:
                return
            await self.send_status(run, "awaiting_ui", "waiting for confirmation")
        task = self.spawn(self.confirm(run, request))
        run.confirms.add(task)
        task.add_done_callback(run.confirms.discard)

    async def confirm(
        self, run: Run, request: ExecApprovalRequest | ApplyPatchApprovalRequest
    ) -> None:
        from ._jsonrpc_server import ConnectionClosed

        try:
            answer = await self.ctx.request("ui.confirm.request", confirm_params(run.id, request))
        except ConnectionClosed:
            return  # the UI is gone: the request stays unanswered (see docs/jsonrpc.md)
        except RpcError as exc:
            answer = {"ok": False, "reason": f"the UI could not confirm: {exc.message}"}
        ok, remember, reason = _confirm_result(answer)
        async with run.lock:
            if run.finished:
                return
            await self.send_status(run, "running")
        decision: ReviewDecision = "approved_for_session" if ok and remember else "approved"
        await self.decide(run, request, decision if ok else "denied", None if ok else reason)

    async def decide(
        self,
        run: Run,
        request: ExecApprovalRequest | ApplyPatchApprovalRequest,
        decision: ReviewDecision,
        reason: str | None,
    ) -> None:
        """Answer the engine; a denial also closes the call's line in the UI (the engine
        runs nothing, so no event would)."""
        if decision == "denied":
            async with run.lock:
                tool = run.view.open_calls.pop(request.call_id, None)
                if tool is not None and not run.finished:
                    result = f"denied: {reason}" if reason else "denied"
                    event = {
                        "type": "tool_result",
                        "tool": tool,
                        "result": result,
                        "tool_call_id": request.call_id,
                        "is_error": True,
                    }
                    await self.send_event(run, event, {})
        op: Op
        if isinstance(request, ExecApprovalRequest):
            op = ExecApproval(request.call_id, decision, reason)
        else:
            op = PatchApproval(request.call_id, decision, reason)
        with contextlib.suppress(RpcError):  # the session ended: nothing waits for it
            await self.submit(op)


def _terminal(msg: Any) -> tuple[str, str | None] | None:
    if isinstance(msg, TaskComplete):
        return ("completed", None)
    if isinstance(msg, TurnAborted):
        return ("cancelled", msg.reason)
    if isinstance(msg, ErrorEvent):
        return ("error", msg.message)
    return None


def confirm_params(
    run_id: str, request: ExecApprovalRequest | ApplyPatchApprovalRequest
) -> dict[str, Any]:
    """``ui.confirm.request``'s params for an approval request (seed 000, section 7.1)."""
    if isinstance(request, ExecApprovalRequest):
        title = "Run command?"
        lines = [shlex.join(request.command), f"in {request.cwd}"]
    else:
        title = "Apply patch?"
        lines = [
            f"{path} -> {target}" if target != path else path
            for path, target in {
                p: request.resolved_paths.get(p, p) for p in request.changes
            }.items()
        ]
    if request.reason:
        lines.append(request.reason)
    return {
        "run_id": run_id,
        "title": title,
        "message": "\n".join(lines),
        "confirm_label": "Allow",
        "cancel_label": "Deny",
        "danger_level": "danger" if request.reason else "normal",
        "allow_remember": True,
        "allow_reason": True,
    }


def _confirm_result(answer: Any) -> tuple[bool, bool, str | None]:
    """``{ok, remember?, reason?}`` (Codelia sends ``reason: null`` when there is none)."""
    if not isinstance(answer, dict):
        return False, False, "the UI's answer was not an object"
    reason = answer.get("reason")
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else None
    return answer.get("ok") is True, answer.get("remember") is True, reason


# --- the methods ---------------------------------------------------------------------------

_STATES: weakref.WeakKeyDictionary[RpcContext, Codelia] = weakref.WeakKeyDictionary()


def state_of(ctx: RpcContext) -> Codelia:
    state = _STATES.get(ctx)
    if state is None:
        state = _STATES[ctx] = Codelia(ctx)
    return state


def _items(value: Mapping[str, Any]) -> tuple[InputItem, ...]:
    """``input`` ({type: text, text} or {type: parts, parts}) as the engine's input items."""
    kind = value.get("type")
    if kind == "text" and isinstance(value.get("text"), str):
        return (TextInput(value["text"]),)
    if kind != "parts" or not isinstance(value.get("parts"), list):
        raise RpcError(
            INVALID_PARAMS,
            "Invalid params: params.input: expected {type: text, text} or {type: parts, parts}",
        )
    items: list[InputItem] = []
    for n, part in enumerate(value["parts"]):
        where = f"params.input.parts[{n}]"
        if (
            isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            items.append(TextInput(part["text"]))
            continue
        image = part.get("image_url") if isinstance(part, dict) else None
        url = image.get("url") if isinstance(image, dict) else None
        if not (part.get("type") == "image_url" and isinstance(url, str)):
            raise RpcError(
                INVALID_PARAMS, f"Invalid params: {where}: expected a text or image_url part"
            )
        items.append(ImageInput(url))
    if not items:
        raise RpcError(INVALID_PARAMS, "Invalid params: params.input.parts: empty")
    return tuple(items)


async def run_start(ctx: RpcContext, params: RunStart) -> dict[str, Any]:
    state = state_of(ctx)
    if state.active is not None:
        raise RpcError(RUNTIME_BUSY, f"runtime busy: run {state.active.id} is still running")
    items = () if params.force_compaction else _items(params.input)
    attachment = await state.attachment()
    if params.session_id is not None and params.session_id not in (
        attachment.session_id,
        *attachment.session.aliases,
    ):
        await _resume(state, attachment, params.session_id)
    run = Run(
        f"run-{uuid.uuid4().hex[:16]}",
        ctx.client_capabilities.get("supports_permission_preflight_events") is True,
    )
    if state.active is not None:  # another run.start got in while we resumed
        raise RpcError(RUNTIME_BUSY, f"runtime busy: run {state.active.id} is still running")
    state.runs[run.id] = run
    state.active = run
    try:
        if params.force_compaction:
            state.spawn(_compaction(state, run))
        else:
            if state.pending:
                await state.submit(ConfigureSession(**state.pending))
                state.pending = {}
            await state.submit(UserInput(items), run.id)
    except BaseException:
        del state.runs[run.id]
        state.active = None
        raise
    # Open the gate once this answer is queued: it is, by the time a task scheduled now runs.
    asyncio.get_running_loop().call_soon(lambda: state.spawn(_open(state, run)))
    return {"run_id": run.id}


async def _open(state: Codelia, run: Run) -> None:
    async with run.lock:
        if not run.finished:
            await state.send_status(run, "running")
    run.gate.set()


async def _resume(state: Codelia, attachment: Attachment, session_id: str) -> None:
    live = state.ctx.host.session(session_id)
    if live is not None and live is not attachment.session:
        raise RpcError(
            SESSION_LOAD_FAILED,
            f"session {session_id} is live on another connection: attaching to it is not supported",
        )
    answer = await state.ask_engine(ResumeSession(session_id))
    if isinstance(answer.msg, ErrorEvent):
        code = SESSION_NOT_FOUND if answer.msg.code == "unknown_session" else SESSION_LOAD_FAILED
        raise RpcError(code, answer.msg.message)


async def _compaction(state: Codelia, run: Run) -> None:
    """``force_compaction``: codexcore does not compact, and says so in Codelia's terms."""
    await run.gate.wait()
    now = int(asyncio.get_running_loop().time() * 1000)
    async with run.lock:
        for event in (
            {"type": "compaction_start", "timestamp": now},
            {"type": "compaction_complete", "timestamp": now, "compacted": False},
            {
                "type": "final",
                "content": "codexcore does not compact conversations: nothing was compacted.",
            },
        ):
            await state.send_event(run, event, {})
        await state.finish(run, "completed", None)


async def run_cancel(ctx: RpcContext, params: RunCancel) -> dict[str, Any]:
    state = state_of(ctx)
    run = state.runs.get(params.run_id)
    if run is None:
        raise RpcError(RUN_NOT_FOUND, f"run not found: {params.run_id}")
    if run.finished:
        return {"ok": False, "status": run.status}
    log.info("run cancel", run=run.id, reason=params.reason)
    with contextlib.suppress(RpcError):  # the session is over: its end ends the run
        await state.submit(Interrupt())
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CANCEL_WAIT):
            await run.done.wait()
    return {"ok": run.status == "cancelled", "status": run.status}


async def _model_list(ctx: RpcContext, params: ModelList) -> dict[str, Any]:
    return model_list(state_of(ctx), params)


async def _model_set(ctx: RpcContext, params: ModelSet) -> dict[str, Any]:
    return model_set(state_of(ctx), params)


def register(table: MethodTable) -> None:
    """Seed 000's run flow: run.start, run.cancel, model.list, model.set, and the
    runtime-to-UI confirm with its preflight events."""
    table.add("run.start", run_start, RunStart)
    table.add("run.cancel", run_cancel, RunCancel)
    table.add("model.list", _model_list, ModelList)
    table.add("model.set", _model_set, ModelSet)
    table.provide("supports_ui_requests")
    table.provide("supports_permission_preflight_events")
