"""Seed 000's ``session.list`` and ``session.history``: recorded sessions, for a UI to resume.

Both ask the engine, through the connection's session, with its public ops
(``list_sessions``, ``get_history``), so they see the sessions under the
engine's own home, and the current session's events before its file exists.

``session.history`` replays a recorded session's past runs as the
``agent.event`` notifications a live run sent: each Task (``task_started`` ...
its terminal event, all under the run's id) goes through the same mapping
(:func:`._runs.agent_events`), numbered ``seq`` from 0 per run, gap-free, with
the run's ``run.status`` (``running``, then its terminal one) and its
``run.context`` (after each recorded token count) around them. Of the newest
``max_runs`` runs, the last ``max_events`` events are sent (each keeps its
seq), then the answer ``{runs, events_sent, truncated}``. The user's prompts
(the engine's ``user_message``) are replayed as Codelia's
``hidden_user_message``, as its runtime replays a run's input. What the UI
decided in a confirm is not an engine event: a denied call's line is closed by
its Turn's end ("not run").
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.host._host import NotAccepted
from codexcore.adapters.jsonrpc._errors import (
    SESSION_LIST_FAILED,
    SESSION_LOAD_FAILED,
    SESSION_NOT_FOUND,
)
from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.protocol import (
    ErrorEvent,
    Event,
    GetHistory,
    ListSessions,
    Op,
    SessionHistory,
    SessionList,
    SessionSummary,
    Submission,
    TaskStarted,
    TokenCount,
    UserMessage,
)

from ._events import AgentEvent, RunView, strip_ui_context
from ._runs import agent_events, context_left, terminal_status

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable
    from codexcore.adapters.jsonrpc._server import RpcContext

PAGE = 1000
"""Events asked of the engine per ``get_history``."""
ANSWER_WAIT = 60.0
"""Seconds an engine answer may take (reading a large rollout off the loop)."""


@attrs.frozen
class SessionListParams:
    limit: int = 50
    scope: str | None = None  # "all" or "current_workspace" (Codelia's TUI sends one)
    workspace_root: str | None = None


@attrs.frozen
class SessionHistoryParams:
    session_id: str
    max_runs: int = 20
    max_events: int = 1500


class _Answers:
    """One connection's questions to the engine, waiting for their answer event."""

    def __init__(self, ctx: RpcContext) -> None:
        self._waiting: dict[str, asyncio.Future[Event]] = {}
        ctx.on_event(self._event)

    async def _event(self, event: Event) -> None:
        future = self._waiting.get(event.id)
        answer = isinstance(event.msg, SessionList | SessionHistory | ErrorEvent)
        if answer and future is not None and not future.done():
            future.set_result(event)

    async def ask(self, ctx: RpcContext, op: Op) -> Event:
        """Submit ``op``; its answer (or the ``error`` rejecting it). NotAccepted passes."""
        sub_id = f"sessions-{uuid.uuid4().hex}"
        future: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self._waiting[sub_id] = future
        try:
            attachment = await ctx.session()
            await attachment.submit(Submission(sub_id, op))
            async with asyncio.timeout(ANSWER_WAIT):
                return await future
        finally:
            self._waiting.pop(sub_id, None)


_ANSWERS: weakref.WeakKeyDictionary[RpcContext, _Answers] = weakref.WeakKeyDictionary()


def _answers(ctx: RpcContext) -> _Answers:
    answers = _ANSWERS.get(ctx)
    if answers is None:
        answers = _ANSWERS[ctx] = _Answers(ctx)
    return answers


# --- session.list ----------------------------------------------------------------------------


async def session_list(ctx: RpcContext, params: SessionListParams) -> dict[str, Any]:
    """Recorded sessions, most recently written first (unreadable files are skipped)."""
    if params.scope not in (None, "all", "current_workspace"):
        raise RpcError(
            INVALID_PARAMS, "Invalid params: params.scope: expected all or current_workspace"
        )
    root = params.workspace_root if params.scope != "all" else None
    limit = params.limit if params.limit > 0 else None  # Codelia: 0 or less lists them all
    try:
        answer = await _answers(ctx).ask(ctx, ListSessions(cwd=root, limit=limit or 2**31))
    except (NotAccepted, RpcError, TimeoutError) as exc:
        raise RpcError(SESSION_LIST_FAILED, f"session list failed: {_why(exc)}") from None
    if not isinstance(answer.msg, SessionList):
        assert isinstance(answer.msg, ErrorEvent)
        raise RpcError(SESSION_LIST_FAILED, f"session list failed: {answer.msg.message}")
    result: dict[str, Any] = {"sessions": [_summary(s) for s in answer.msg.sessions]}
    if root is not None:
        result["current_workspace_root"] = root
    return result


def _summary(summary: SessionSummary) -> dict[str, Any]:
    """Codelia's ``SessionStateSummary`` (``run_id``, its last run's, is not recorded)."""
    shown: dict[str, Any] = {
        "session_id": summary.session_id,
        "updated_at": summary.updated_at,
        "message_count": summary.message_count,
        "workspace_root": summary.cwd,
    }
    if summary.last_user_message is not None:
        shown["last_user_message"] = strip_ui_context(summary.last_user_message)
    return shown


def _why(exc: Exception) -> str:
    if isinstance(exc, NotAccepted | RpcError):
        return exc.message
    return "the engine did not answer in time"


# --- session.history -------------------------------------------------------------------------


async def session_history(ctx: RpcContext, params: SessionHistoryParams) -> dict[str, Any]:
    """Replay the session's newest runs as ``agent.event``s, then say how many were sent."""
    session_id = params.session_id.strip()
    if not session_id:
        raise RpcError(INVALID_PARAMS, "Invalid params: params.session_id: required")
    if params.max_runs <= 0 or params.max_events <= 0:
        return {"runs": 0, "events_sent": 0, "truncated": False}
    recorded = await _recorded_events(ctx, session_id)
    runs = list(_runs(recorded))
    kept = runs[-params.max_runs :]
    wants_codexcore = ctx.client_capabilities.get("codexcore_events") is True
    preflight = ctx.client_capabilities.get("supports_permission_preflight_events") is True
    window = _fallback_window(ctx)
    replay = [
        notification
        for run_id, events in kept
        for notification in _replayed(run_id, events, preflight, wants_codexcore, window)
    ]
    sent = _newest_events(replay, params.max_events)
    for method, notification in sent:
        await ctx.notify(method, notification)
    events_sent = sum(method == "agent.event" for method, _ in sent)
    all_events = sum(method == "agent.event" for method, _ in replay)
    truncated = len(kept) < len(runs) or events_sent < all_events
    return {"runs": len(kept), "events_sent": events_sent, "truncated": truncated}


def _fallback_window(ctx: RpcContext) -> Callable[[], int]:
    """The configured model's window, for a recorded token count that names none."""
    config = ctx.host.engine_config
    return lambda: config.models.details(config.session.model).context_window


Notification = tuple[str, dict[str, Any]]


def _newest_events(replay: list[Notification], max_events: int) -> list[Notification]:
    """The replay from its ``max_events``-th ``agent.event`` from the end on (with the
    ``run.status`` and ``run.context`` among and after them)."""
    count = 0
    for at in range(len(replay) - 1, -1, -1):
        if replay[at][0] == "agent.event":
            count += 1
            if count == max_events:
                return replay[at:]
    return replay


async def _recorded_events(ctx: RpcContext, session_id: str) -> list[Event]:
    """Every event the engine recorded for the session, a page at a time."""
    events: list[Event] = []
    while True:
        try:
            answer = await _answers(ctx).ask(
                ctx, GetHistory(session_id=session_id, offset=len(events), limit=PAGE)
            )
        except (NotAccepted, RpcError, TimeoutError) as exc:
            raise RpcError(SESSION_LOAD_FAILED, _why(exc)) from None
        msg = answer.msg
        if isinstance(msg, ErrorEvent):
            code = SESSION_NOT_FOUND if msg.code == "unknown_session" else SESSION_LOAD_FAILED
            raise RpcError(code, msg.message)
        assert isinstance(msg, SessionHistory)
        events.extend(msg.events)
        if not msg.events or len(events) >= msg.total:
            return events


def _runs(events: Iterable[Event]) -> Iterable[tuple[str, list[Event]]]:
    """The Tasks in ``events``: each one's id (its run's) and its events, oldest first.

    A Task runs from its ``task_started`` to its terminal event under one id; a
    Task the process never finished ends with the record."""
    current: tuple[str, list[Event]] | None = None
    for event in events:
        if isinstance(event.msg, TaskStarted):
            if current is not None:
                yield current
            current = (event.id, [event])
        elif current is not None and event.id == current[0]:
            current[1].append(event)
            if terminal_status(event.msg) is not None:
                yield current
                current = None
    if current is not None:
        yield current


def _replayed(
    run_id: str,
    events: list[Event],
    preflight: bool,
    wants_codexcore: bool,
    window: Callable[[], int],
) -> list[Notification]:
    """A run's notifications as the live run sent them: ``run.status running`` first,
    each ``agent.event`` (``seq`` from 0, gap-free), ``run.context`` after each token
    count, and the terminal ``run.status`` (``cancelled`` for a run the record ends
    in the middle of: its process stopped).

    The user's prompt (a ``user_message``) becomes Codelia's ``hidden_user_message``,
    drawn as ``> prompt``, as Codelia's runtime replays a run's input (the live run
    sent nothing for it: a Codelia UI draws its own prompt); it is counted in the
    ``seq``, so the events after it are numbered one more than live."""
    view = RunView(run_id, preflight=preflight)
    out: list[Notification] = [("run.status", {"run_id": run_id, "status": "running"})]
    seq = 0
    for event in events:
        built, meta = agent_events(view, event, wants_codexcore)
        if isinstance(event.msg, UserMessage):
            built = [{"type": "hidden_user_message", "content": prompt_text(event.msg)}]
        for agent_event in built:
            out.append(("agent.event", _params(run_id, seq, agent_event, meta)))
            seq += 1
        if isinstance(event.msg, TokenCount):
            left = context_left(event.msg, window)
            out.append(("run.context", {"run_id": run_id, "context_left_percent": left}))
        terminal = terminal_status(event.msg)
        if terminal is not None:
            out.append(("run.status", _status(run_id, *terminal)))
            return out
    out.append(("run.status", _status(run_id, "cancelled", UNFINISHED)))
    return out


UNFINISHED = "the run did not finish: its runtime stopped first"


def _status(run_id: str, status: str, message: str | None) -> dict[str, Any]:
    return {"run_id": run_id, "status": status, **({"message": message} if message else {})}


def prompt_text(msg: UserMessage) -> str:
    """The prompt as the user typed it: the ``<ui_context>`` block the run added
    left out, an image as ``[image]`` (Codelia's replay text), after the text."""
    return strip_ui_context(msg.message) + "[image]" * len(msg.images or ())


def _params(run_id: str, seq: int, event: AgentEvent, meta: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": run_id, "seq": seq, "event": event, "meta": meta}


# --- registration ----------------------------------------------------------------------------


def add_session_methods(table: MethodTable) -> None:
    """Register ``session.list`` and ``session.history``."""
    table.add(
        "session.list",
        session_list,
        SessionListParams,
        summary="Recorded sessions, most recently written first",
        result=SESSION_LIST_RESULT,
        errors=(SESSION_LIST_FAILED,),
    )
    table.add(
        "session.history",
        session_history,
        SessionHistoryParams,
        summary="Replay a recorded session's newest runs as agent.event, then count them",
        result=SESSION_HISTORY_RESULT,
        notifications=("agent.event",),
        errors=(SESSION_NOT_FOUND, SESSION_LOAD_FAILED),
    )


SESSION_LIST_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sessions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "session_id": {"type": "string"},
                    "updated_at": {"type": "string"},
                    "run_id": {"type": "string"},
                    "message_count": {"type": "integer"},
                    "last_user_message": {"type": "string"},
                    "workspace_root": {"type": "string"},
                },
                "required": ["session_id", "updated_at"],
            },
        },
        "current_workspace_root": {"type": "string"},
    },
    "required": ["sessions"],
}
SESSION_HISTORY_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "runs": {"type": "integer", "minimum": 0},
        "events_sent": {"type": "integer", "minimum": 0},
        "truncated": {"type": "boolean"},
    },
    "required": ["runs", "events_sent", "truncated"],
}
