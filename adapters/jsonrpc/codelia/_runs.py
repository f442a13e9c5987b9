"""Seed 000's runs: one connection's runs, their events, statuses and confirms.

A run's Task events (they carry the run's id: it is the ``user_input``'s
submission id) go through :mod:`._events` to become ``agent.event``
notifications ``{run_id, seq, event, meta}`` (``seq`` from 0 per run,
gap-free); the Task's terminal event becomes exactly one terminal
``run.status``. Approvals become ``ui.confirm.request`` requests to the UI, in
Codelia's order (``permission.preview`` -> ``permission.ready`` ->
``run.status awaiting_ui`` -> the request -> ``run.status running``).

Everything one run sends goes out under the run's lock, so its notifications
keep their order whichever task sends them (the session's event listener, or
the task that waits for the UI's answer to a confirm).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import shlex
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from codexcore._logging import get_logger
from codexcore.adapters.host._host import Attachment, NotAccepted
from codexcore.adapters.jsonrpc._machine import RpcError
from codexcore.protocol import (
    ApplyPatchApprovalRequest,
    ErrorEvent,
    Event,
    ExecApproval,
    ExecApprovalRequest,
    ListSkillsResponse,
    McpListToolsResponse,
    Op,
    PatchApproval,
    RequestUserInput,
    ReviewDecision,
    SessionConfigured,
    ShutdownComplete,
    Submission,
    TaskComplete,
    TokenCount,
    TurnAborted,
    TurnComplete,
    WarningEvent,
    decode_event,
    encode_event,
)

from ._deltas import event_head, is_delta, take_deltas
from ._diagnostics import RunDiagnostics
from ._events import MAPPING, AgentEvent, RunView, build, codexcore_event
from ._models import current_model

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext

log = get_logger(__name__)

SERVER_ERROR = -32000
RUNTIME_BUSY = -32001

READ_TYPED = frozenset(
    {
        *MAPPING,
        SessionConfigured.TYPE,
        ErrorEvent.TYPE,
        McpListToolsResponse.TYPE,
        ListSkillsResponse.TYPE,
        WarningEvent.TYPE,
        ShutdownComplete.TYPE,
        TokenCount.TYPE,
        TurnComplete.TYPE,
        RequestUserInput.TYPE,
    }
)
"""The event types this module reads as typed ``Event`` objects (:meth:`Codelia.on_event`);
every other is only passed on, as its wire form (:meth:`Codelia.pass_on`): decoding one
costs several times parsing it."""

KEPT_RUNS = 100
"""Finished runs remembered per connection, so run.cancel can answer with their status."""
NO_CONFIRM = "the UI cannot ask for confirmation (its initialize said supports_confirm: false)"


class Run:
    """One ``run.start``: its events' view, its seq, its status."""

    def __init__(self, run_id: str, preflight: bool, diagnostics: bool = False) -> None:
        self.id = run_id
        self.head = event_head(run_id)  # how its events' encoding begins
        self.diagnostics = RunDiagnostics(run_id) if diagnostics else None
        self.view = RunView(run_id, preflight=preflight)
        self.seq = 0
        self.status = "running"
        self.finished = False
        self.lock = asyncio.Lock()
        self.gate = asyncio.Event()  # open once run.start's answer is on its way
        self.done = asyncio.Event()
        self.confirms: set[asyncio.Task[None]] = set()
        self.opening: Callable[[], None] | None = None  # see open_now()

    def open_now(self) -> None:
        """Let run.start's answer and ``run.status running``, held so far, leave with
        whatever followed them (the run's first ``agent.event``, if it is built)."""
        opening, self.opening = self.opening, None
        if opening is not None:
            opening()


@attrs.define
class Codelia:
    """One connection's runs, and the model it will use next."""

    ctx: RpcContext
    runs: dict[str, Run] = attrs.field(factory=dict)
    active: Run | None = None
    listening: bool = False
    model: str | None = None  # from the session's latest session_configured
    effort: str | None = None
    cwd: str | None = None  # the session's, to show patch paths inside it short
    chosen: bool = False  # model.set was used on this connection
    ask_user_set: bool = False  # the session was told this UI answers the model's questions
    configured: SessionConfigured | None = None  # the session's latest settings
    waiters: dict[str, asyncio.Future[Event]] = attrs.field(factory=dict)
    answers: dict[str, tuple[type, ...]] = attrs.field(factory=dict)  # what each waiter waits for
    tasks: set[asyncio.Task[None]] = attrs.field(factory=set)
    finished: collections.deque[str] = attrs.field(factory=collections.deque)  # oldest first

    @property
    def wants_codexcore(self) -> bool:
        return self.ctx.client_capabilities.get("codexcore_events") is True

    async def attachment(self, session_id: str | None = None) -> Attachment:
        """The connection's session (with ``session_id``: that live session, attached
        to when the connection has none yet)."""
        if session_id is None and self.listening and self.ctx.attachment is not None:
            return self.ctx.attachment  # what ctx.session() answers, without its lock
        joining = self.ctx.attachment is None and session_id is not None
        live = self.ctx.host.session(session_id) if joining and session_id else None
        attachment = await self.ctx.session(session_id)
        if not self.listening:
            self.ctx.on_raw_events(self.on_raw)
            self.listening = True
        if live is not None and attachment.session is live:
            for request in live.waiting_approvals():
                await self.adopt(request)
        return attachment

    async def adopt(self, request: Event) -> None:
        """Take on a Task that waits for an approval its UI never gave (that UI left):
        it becomes a run of this connection, and the approval is asked again here.
        It sends no diagnostics: its earlier requests went to the UI that left."""
        if request.id in self.runs:
            return
        run = Run(
            request.id,
            self.ctx.client_capabilities.get("supports_permission_preflight_events") is True,
        )
        self.runs[run.id] = run
        self.active = run
        async with run.lock:
            await self.send_status(
                run, "running", "a task of this session, waiting for confirmation"
            )
        run.gate.set()
        log.info("confirm asked again", run=run.id, call=getattr(request.msg, "call_id", None))
        await self.deliver(run, request)

    async def submit(self, op: Op, sub_id: str | None = None) -> str:
        sub_id = sub_id or f"codelia-{uuid.uuid4().hex}"
        attachment = await self.attachment()
        try:
            await attachment.submit(Submission(sub_id, op))
        except NotAccepted as exc:
            raise not_accepted(exc) from None
        return sub_id

    async def ask_engine(self, op: Op, answer: type = SessionConfigured) -> Event:
        """Submit ``op`` and wait for its ``answer`` (default ``session_configured``) or
        ``error``."""
        sub_id = f"codelia-{uuid.uuid4().hex}"
        future: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self.waiters[sub_id] = future
        self.answers[sub_id] = (answer, ErrorEvent)
        try:
            await self.submit(op, sub_id)
            async with asyncio.timeout(30):
                return await future
        finally:
            self.waiters.pop(sub_id, None)
            self.answers.pop(sub_id, None)

    def spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # --- the session's events -----------------------------------------------------------

    async def on_raw(self, batch: list[bytes]) -> None:
        """A batch of the session's events, encoded, in order: the active run's deltas
        take the hot path (:func:`take_deltas`), every other event :meth:`on_event`."""
        at, end = 0, len(batch)
        opening = None
        while at < end:
            run = self.active
            if (
                run is not None
                and is_delta(run.head, batch[at])
                and run.gate.is_set()
                and not run.finished
            ):
                at = await self.send_deltas(run, batch, at)
            if at < end:
                wire = orjson.loads(batch[at])  # parsed once: decoded, and meta's copy
                if opening is None and run is not None and wire["id"] == run.id:
                    opening = run
                if wire["msg"]["type"] in READ_TYPED:
                    await self.on_event(decode_event(wire), wire)
                else:
                    await self.pass_on(wire)
                at += 1
        if opening is not None:
            # The engine has taken the run's input: its answer waits no longer, even
            # if no agent.event came of this batch.
            opening.open_now()

    async def send_deltas(self, run: Run, batch: list[bytes], at: int) -> int:
        """The run of ``run``'s deltas at ``batch[at:]``, sent as one write under the
        run's lock (as :meth:`deliver` sends); the index of the first event after them."""
        async with run.lock:
            if run.finished:
                return at
            lines: list[bytes] | None = [] if self.wants_codexcore else None
            after, run.seq = take_deltas(run.id, run.seq, batch, at, lines)
            if lines:
                await self.ctx.send_lines(lines)
                run.open_now()
        return after

    async def on_event(self, event: Event, wire: dict[str, Any] | None = None) -> None:
        """One of the session's events (``wire``: its native encoding, parsed)."""
        msg = event.msg
        if isinstance(msg, SessionConfigured):
            self.model, self.effort, self.cwd = msg.model, msg.reasoning_effort, msg.cwd
            self.configured = msg
        waiter = self.waiters.get(event.id)
        if waiter is not None and not waiter.done() and isinstance(msg, self.answers[event.id]):
            waiter.set_result(event)  # what an ask_engine under this id waits for
        if isinstance(msg, WarningEvent):
            log.warning("engine warning", warning=msg.message)
        if isinstance(msg, ShutdownComplete):
            await self.session_over()
        run = self.runs.get(event.id)
        if run is None or run.finished:
            return
        await run.gate.wait()
        await self.deliver(run, event, wire)

    async def pass_on(self, wire: dict[str, Any]) -> None:
        """An event no Codelia UI is sent and nothing here reads (its native encoding,
        parsed): a client that asked for every EventMsg gets it, as :func:`agent_events`
        would make it, without its decoding."""
        run = self.runs.get(wire["id"])
        if run is None or run.finished or not self.wants_codexcore:
            return
        await run.gate.wait()
        async with run.lock:
            if not run.finished:
                meta = {"codexcore": {"seq": wire["seq"]}}
                await self.send_event(run, codexcore_event(wire["msg"]), meta)

    async def session_over(self) -> None:
        """The session ended: a run whose Task never started (its input was still queued)
        gets its terminal status here, as every run must."""
        for run in list(self.runs.values()):
            if not run.finished:
                await run.gate.wait()
                async with run.lock:
                    await self.finish(run, "cancelled", "the session ended")

    async def deliver(self, run: Run, event: Event, wire: dict[str, Any] | None = None) -> None:
        msg = event.msg
        async with run.lock:
            if run.finished:
                return
            events, meta = agent_events(run.view, event, self.wants_codexcore, wire)
            for agent_event in events:
                await self.send_event(run, agent_event, meta)
            if isinstance(msg, TokenCount):
                await self.send_context(run, msg)
            await self.diagnose(run, msg)
            terminal = terminal_status(msg)
            if terminal is not None:
                await self.finish(run, *terminal)
        if isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
            await self.approval(run, msg)
        elif isinstance(msg, RequestUserInput):
            await self.question(run, msg)

    async def send_event(self, run: Run, event: AgentEvent, meta: Mapping[str, Any]) -> None:
        params = {"run_id": run.id, "seq": run.seq, "event": event, "meta": meta}
        run.seq += 1
        await self.ctx.notify("agent.event", params)
        if run.opening is not None:  # the run's first agent.event: with its answer, now
            run.open_now()

    async def send_status(self, run: Run, status: str, message: str | None = None) -> None:
        run.status = status
        params: dict[str, Any] = {"run_id": run.id, "status": status}
        if message:
            params["message"] = message
        await self.ctx.notify("run.status", params)

    async def send_context(self, run: Run, usage: TokenCount) -> None:
        """``run.context`` from the engine's ``token_count.info``: how much of the
        answering model's context window the last request left (its usage is
        what the conversation fills now)."""
        models = self.ctx.host.engine_config.models
        left = context_left(usage, lambda: models.details(current_model(self)).context_window)
        await self.ctx.notify("run.context", {"run_id": run.id, "context_left_percent": left})

    async def diagnose(self, run: Run, msg: Any) -> None:
        """The run's opt-in ``run.diagnostics``: usage kept, one ``llm_call`` per request."""
        if run.diagnostics is None:
            return
        if isinstance(msg, TokenCount):
            run.diagnostics.token_count(msg)
        elif isinstance(msg, TurnComplete):
            prices = self.ctx.host.engine_config.models.details
            call = run.diagnostics.llm_call(msg, current_model(self), prices)
            await self.ctx.notify("run.diagnostics", call)

    async def finish(self, run: Run, status: str, message: str | None) -> None:
        """The run's one terminal status (call with its lock held); nothing of it follows.
        With diagnostics, the run's ``run_summary`` goes just before it, as in Codelia."""
        if run.finished:
            return
        if run.diagnostics is not None:
            await self.ctx.notify("run.diagnostics", run.diagnostics.run_summary())
        await self.send_status(run, status, message)
        run.open_now()
        run.finished = True
        run.done.set()
        if self.active is run:
            self.active = None
        current = asyncio.current_task()
        for task in run.confirms:
            if task is not current:
                task.cancel()
        self.finished.append(run.id)
        while len(self.finished) > KEPT_RUNS:
            self.runs.pop(self.finished.popleft(), None)

    # --- approvals --------------------------------------------------------------------------

    async def approval(
        self, run: Run, request: ExecApprovalRequest | ApplyPatchApprovalRequest
    ) -> None:
        # Only a UI that said it cannot confirm is not asked: one whose initialize
        # carries no ui_capabilities (the protocol's own example) is.
        if self.ctx.client_capabilities.get("supports_confirm") is False:
            await self.decide(run, request, "denied", NO_CONFIRM)
            return
        await self.wait_for_ui(run, self.confirm(run, request), "waiting for confirmation")

    async def question(self, run: Run, request: RequestUserInput) -> None:
        from ._ask import ask

        await self.wait_for_ui(run, ask(self, run, request), "waiting for the user's answer")

    async def wait_for_ui(self, run: Run, asking: Any, why: str) -> None:
        """``run.status awaiting_ui``, then ``asking`` in a task the run's end cancels."""
        async with run.lock:
            if run.finished:
                asking.close()
                return
            await self.send_status(run, "awaiting_ui", why)
        task = self.spawn(asking)
        run.confirms.add(task)
        task.add_done_callback(run.confirms.discard)

    async def confirm(
        self, run: Run, request: ExecApprovalRequest | ApplyPatchApprovalRequest
    ) -> None:
        from codexcore.adapters.jsonrpc._outbox import ConnectionClosed

        try:
            answer = await self.ctx.request(
                "ui.confirm.request", confirm_params(run.id, request, self.cwd)
            )
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


def agent_events(
    view: RunView, event: Event, wants_codexcore: bool, wire: dict[str, Any] | None = None
) -> tuple[list[AgentEvent], dict[str, Any]]:
    """The ``agent.event``s one of a run's engine events becomes, and the ``meta`` each
    carries: the same for a live run and for one ``session.history`` replays.

    ``meta.codexcore`` is the engine's event ``{id, seq, msg}``, except where the
    ``event`` already is its ``msg`` (a ``codexcore.*`` event, for a client that asked
    for every EventMsg): there it is ``{seq}`` alone, as the native event's ``id`` is
    the run's id and its ``msg`` is the ``event``, its type without ``codexcore.``.
    ``wire`` is the event's native encoding, parsed, when the caller has it."""
    if wire is None:
        wire = orjson.loads(encode_event(event))
    events = build(view, event.msg)
    if not events and wants_codexcore:
        return [codexcore_event(wire["msg"])], {"codexcore": {"seq": event.seq}}
    return events, {"codexcore": wire}


def context_left(usage: TokenCount, fallback_window: Callable[[], int]) -> int:
    """``run.context``'s ``context_left_percent`` after ``usage``: how much of the
    answering model's window the last request left (``fallback_window``: the
    catalogue's word, for an engine that reports no info)."""
    info = usage.info
    if info is not None and info.model_context_window:
        window, used = info.model_context_window, info.last_token_usage.total_tokens
    else:
        window, used = fallback_window(), usage.input_tokens + usage.output_tokens
    return max(0, min(100, round(100 * (1 - used / window))))


def not_accepted(exc: NotAccepted) -> RpcError:
    """The protocol's code for a submission the session did not take: another client
    controls it (-32001, runtime busy), or it ended (-32000, runtime internal error)."""
    code = RUNTIME_BUSY if exc.code == "not_controller" else SERVER_ERROR
    return RpcError(code, exc.message, {"code": exc.code})


def terminal_status(msg: Any) -> tuple[str, str | None] | None:
    if isinstance(msg, TaskComplete):
        return ("completed", None)
    if isinstance(msg, TurnAborted):
        return ("cancelled", msg.reason)
    if isinstance(msg, ErrorEvent):
        return ("error", msg.message)
    return None


def confirm_params(
    run_id: str,
    request: ExecApprovalRequest | ApplyPatchApprovalRequest,
    cwd: str | None = None,
) -> dict[str, Any]:
    """``ui.confirm.request``'s params for an approval request (seed 000, section 7.1).

    A patch's files are named relative to the session's ``cwd`` when they land
    inside it, and by where they really land otherwise: the Codelia TUI redraws
    only its bottom rows, and a long line there pushes the call's own line out
    of reach, so the short form is kept for the common case.
    """
    if isinstance(request, ExecApprovalRequest):
        title = "Run command?"
        lines = [shown_command(request.command), f"in {request.cwd}"]
    else:
        title = "Apply patch?"
        lines = [
            _landing(path, request.resolved_paths.get(path, path), cwd) for path in request.changes
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


SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash"})


def shown_command(argv: tuple[str, ...] | list[str]) -> str:
    """A command as the user reads it: a shell's script (``bash -lc SCRIPT``) as written,
    as the protocol's own example shows one; any other argv quoted for a shell."""
    if len(argv) == 3 and argv[0] in SHELLS and argv[1] in ("-c", "-lc"):
        return argv[2]
    return shlex.join(argv)


def _landing(path: str, target: str, cwd: str | None) -> str:
    """How a confirm names one file of a patch: short inside ``cwd``, else where it lands."""
    if target == path and cwd and path.startswith(cwd.rstrip(os.sep) + os.sep):
        return os.path.relpath(path, cwd)
    return path if target == path else f"{path} -> {target}"


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
    """The Codelia runtime's state on connection ``ctx`` (made on first use)."""
    state = _STATES.get(ctx)
    if state is None:
        state = _STATES[ctx] = Codelia(ctx)
    return state
