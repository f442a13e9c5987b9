"""The app-server methods codexcore implements, each mapped onto the session host and
the engine's ops. Every other method is answered "method not found" (-32601)."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import TYPE_CHECKING, Any

from codexcore import __version__
from codexcore.adapters.host import HostRefusal
from codexcore.protocol import (
    ConfigureSession,
    ForkSession,
    Interrupt,
    OverrideTurnContext,
    ResumeSession,
    UserInput,
)

from . import _records as records
from ._params import EFFORTS, Params
from ._thread import AppThread
from ._warm import warm_up
from ._wire import ANSWERED, INTERNAL_ERROR, INVALID_REQUEST, AppError, invalid_params

if TYPE_CHECKING:
    from ._server import Connection, Handler
    from ._wire import Request

INTERRUPT_TIMEOUT = 30.0
"""How long ``turn/interrupt`` waits for the turn to end before answering anyway."""
DEFAULT_PAGE = 25


async def initialize(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    info = p.raw.get("clientInfo")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        raise invalid_params("params.clientInfo.name", "is required (a string)")
    capabilities = p.raw.get("capabilities") or {}
    if not isinstance(capabilities, dict):
        raise invalid_params("params.capabilities", "must be an object")
    opt_out = capabilities.get("optOutNotificationMethods") or []
    if not isinstance(opt_out, list) or not all(isinstance(m, str) for m in opt_out):
        raise invalid_params(
            "params.capabilities.optOutNotificationMethods", "must be a list of method names"
        )
    conn.client_info, conn.opt_out, conn.initialized = info, frozenset(opt_out), True
    family, system = records.platform()
    home = records.home_of(conn.host.engine_config.home)
    return {
        "userAgent": f"codexcore/{__version__} ({info['name']}; {info.get('version', '')})",
        "codexHome": str(home.resolve()),
        "platformFamily": family,
        "platformOs": system,
    }


# --- threads -----------------------------------------------------------------------------


async def _attach(conn: Connection, session_id: str | None = None) -> AppThread:
    # A thread is ready for its first Turn when answered: wait for (or do) the warm-up.
    await asyncio.to_thread(warm_up)
    host = conn.host
    live = host.session(session_id) if session_id else None
    try:
        attachment = await host.attach(
            token=host.config.token,
            session_id=session_id,
            last_seq=live.next_seq - 1 if live is not None else None,
            lossless=True,
            events=True,  # the follower maps the events themselves: no decoding again
        )
    except HostRefusal as exc:
        raise AppError(INTERNAL_ERROR, exc.message, {"code": exc.code}) from None
    return AppThread(conn, attachment)


def _unsupported(p: Params, *names: str) -> None:
    for name in names:
        if p.raw.get(name):
            raise invalid_params(f"params.{name}", "is not supported by codexcore")


def _thread_ops(p: Params) -> dict[str, Any]:
    _unsupported(p, "developerInstructions", "config", "ephemeral")
    return {
        "model": p.string("model"),
        "cwd": p.string("cwd"),
        "approval_policy": p.approval_policy(),
        "sandbox_policy": p.sandbox_mode(),
    }


async def _answer_thread(
    conn: Connection,
    call: Request,
    thread: AppThread,
    turns: list[dict[str, Any]],
    *,
    started: bool,
) -> Any:
    configured = thread.configured
    assert configured is not None
    wire = records.thread_wire(
        thread.id,
        cwd=configured.cwd,
        preview=thread.preview,
        created_at=thread.created_at,
        updated_at=records.now_seconds(),
        status="active" if thread.running_turn() else "idle",
        turns=turns,
        model=configured.model,
        forked_from=thread.forked_from,
    )
    await conn.answer(call.id, {"thread": wire, **records.session_fields(configured)})
    if started:
        await conn.notify([("thread/started", {"thread": {**wire, "turns": []}})])
    return ANSWERED


_REFUSED_TOOL = re.compile(r"dynamic_tools\[(\d+)\]: (.*)", re.DOTALL)
"""The engine's refusal of a declared tool: which one, and why."""


def _tool_refusal(exc: AppError) -> AppError:
    """A tool the engine refused (a name taken, a bad schema) as invalid params naming it."""
    code = exc.data.get("code") if isinstance(exc.data, dict) else None
    found = _REFUSED_TOOL.search(exc.message)
    if code not in ("tool_name_taken", "bad_dynamic_tool") or found is None:
        return exc
    return invalid_params(f"params.dynamicTools[{found[1]}]", found[2])


def _no_tools(p: Params) -> None:
    if p.raw.get("dynamicTools") is not None:
        raise invalid_params(
            "params.dynamicTools",
            "is taken by thread/start only (a thread's client tools are not recorded)",
        )


async def thread_start(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    ops = _thread_ops(p)
    instructions = p.string("baseInstructions")
    tools = p.dynamic_tools()
    thread = await _attach(conn)
    try:
        await thread.configure(
            ConfigureSession(instructions=instructions, dynamic_tools=tools, **ops)
        )
    except AppError as exc:
        await thread.aclose(end=True)
        raise _tool_refusal(exc) from None
    conn.adopt(thread)
    return await _answer_thread(conn, call, thread, [], started=True)


async def thread_resume(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    thread_id = p.required("threadId")
    ops = _thread_ops(p)
    _no_tools(p)
    home = records.home_of(conn.host.engine_config.home)
    known = [t for t in conn.threads.values() if t.id == thread_id]
    if known:
        thread = known[0]
    else:
        path = records.rollout_of(home, thread_id)
        events = await asyncio.to_thread(records.recorded_events, path)
        live = conn.host.session(thread_id) is not None
        thread = await _attach(conn, thread_id if live else None)
        thread.preview = records.preview_of(events)
        thread.seed(events, live=live)
        if not live:
            await thread.configure(ResumeSession(thread_id))
        else:
            thread.configured = records.configured_of(events)
            thread.ask_waiting()
        conn.adopt(thread)
    return await _apply_and_answer(conn, call, thread, ops, started=False)


async def thread_fork(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    source = p.required("threadId")
    ops = _thread_ops(p)
    _no_tools(p)
    home = records.home_of(conn.host.engine_config.home)
    path = records.rollout_of(home, source)
    events = await asyncio.to_thread(records.recorded_events, path)
    response_id = records.last_response_id(events)
    if response_id is None:
        raise invalid_params("params.threadId", f"thread {source!r} has no turn to fork from")
    thread = await _attach(conn)
    await thread.configure(ForkSession(source, response_id))
    thread.forked_from, thread.preview = source, records.preview_of(events)
    thread.seed(events, live=False)
    conn.adopt(thread)
    return await _apply_and_answer(conn, call, thread, ops, started=True)


async def _apply_and_answer(
    conn: Connection, call: Request, thread: AppThread, ops: dict[str, Any], *, started: bool
) -> Any:
    """A resumed or forked thread: the request's settings from its next turn on, then
    the answer with its turns (none with ``excludeTurns``)."""
    overrides = {k: v for k, v in ops.items() if v is not None}
    if overrides:
        await thread.submit(OverrideTurnContext(**overrides))
        thread.configured = records.with_overrides(thread.configured, overrides)
    turns = [] if Params(call.params).boolean("excludeTurns") else thread.turns()
    return await _answer_thread(conn, call, thread, turns, started=started)


async def thread_list(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    limit = p.integer("limit") or DEFAULT_PAGE
    cursor = p.string("cursor") or "0"
    if not cursor.isdigit():
        raise invalid_params("params.cursor", "is not a cursor this server gave")
    offset = int(cursor)
    home = records.home_of(conn.host.engine_config.home)
    found = await asyncio.to_thread(
        records.list_threads, home, archived=bool(p.boolean("archived")), limit=limit, offset=offset
    )
    data = [records.summary_wire(s, _status(conn, s.session_id)) for s in found[:limit]]
    more = len(found) > limit
    return {"data": data, "nextCursor": str(offset + limit) if more else None}


def _status(conn: Connection, thread_id: str) -> str:
    hosted = conn.host.session(thread_id)
    if hosted is None:
        return "notLoaded"
    return "active" if hosted.running_task is not None else "idle"


async def thread_read(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    thread_id = p.required("threadId")
    include = bool(p.boolean("includeTurns"))
    home = records.home_of(conn.host.engine_config.home)
    path = records.find_any(home, thread_id)
    events = await asyncio.to_thread(records.recorded_events, path)
    configured = records.configured_of(events)
    wire = records.thread_wire(
        thread_id,
        cwd=configured.cwd if configured else "",
        preview=records.preview_of(events),
        created_at=records.created_of(path),
        updated_at=records.updated_of(path),
        status=_status(conn, thread_id),
        turns=records.turns_of(thread_id, events) if include else [],
        model=configured.model if configured else None,
        path=str(path),
    )
    return {"thread": wire}


async def thread_archive(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    thread_id = p.required("threadId")
    home = records.home_of(conn.host.engine_config.home)
    path = records.rollout_of(home, thread_id)
    for key, thread in list(conn.threads.items()):
        if thread.id == thread_id:
            del conn.threads[key]
            await thread.aclose(end=True)
    conn.host.end_session(thread_id)
    await asyncio.to_thread(records.archive, home, path)
    await conn.answer(call.id, {})
    await conn.notify([("thread/archived", {"threadId": thread_id})])
    return ANSWERED


# --- turns -------------------------------------------------------------------------------


async def turn_start(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    thread = conn.thread(p.required("threadId"))
    items = p.input_items()
    overrides: dict[str, Any] = {
        "model": p.string("model"),
        "effort": p.effort(),
        "sandbox_policy": p.sandbox_policy(),
        "approval_policy": p.approval_policy(),
        "cwd": p.string("cwd"),
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    schema = p.raw.get("outputSchema")
    if schema is not None and not isinstance(schema, dict):
        raise invalid_params("params.outputSchema", "must be a JSON Schema object")
    if thread.running_turn() is not None:
        raise AppError(INVALID_REQUEST, "a turn is already running on this thread")
    turn_id = str(uuid.uuid4())
    turn: dict[str, Any] = {"id": turn_id, "items": [], "status": "inProgress", "error": None}
    if overrides:
        await thread.submit(OverrideTurnContext(**overrides))
    if not thread.preview:
        thread.preview = " ".join(getattr(item, "text", "") for item in items).strip()
    thread.started_turns.add(turn_id)
    await conn.answer(call.id, {"turn": turn})
    await thread.submit(UserInput(items, output_schema=schema), turn_id)
    return ANSWERED


async def turn_interrupt(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    thread = conn.thread(p.required("threadId"))
    turn_id = p.required("turnId")
    turn = thread.mapper.turns.get(turn_id)
    if turn is None and turn_id not in thread.started_turns:
        raise invalid_params("params.turnId", f"no turn {turn_id!r} on this thread")
    if turn is not None and turn.completed_at is not None:
        return {}
    ended = thread.turn_end(turn_id)
    await thread.submit(Interrupt())
    try:
        await asyncio.wait_for(asyncio.shield(ended), INTERRUPT_TIMEOUT)
    except TimeoutError:
        raise AppError(INTERNAL_ERROR, f"turn {turn_id} did not end in time") from None
    return {}


# --- models ------------------------------------------------------------------------------


async def model_list(conn: Connection, call: Request) -> Any:
    p = Params(call.params)
    limit = p.integer("limit") or 100
    cursor = p.string("cursor") or "0"
    if not cursor.isdigit():
        raise invalid_params("params.cursor", "is not a cursor this server gave")
    offset = int(cursor)
    config = conn.host.engine_config
    default = config.session.model
    models = config.models.models()
    names = sorted(models, key=lambda name: (name != default, name))
    data = []
    for name in names[offset : offset + limit]:
        details = models[name]
        efforts = (
            sorted(EFFORTS, key=_EFFORT_ORDER.index) if details.supports_reasoning_summaries else []
        )
        data.append(
            {
                "id": name,
                "model": name,
                "displayName": name,
                "description": f"{name}: a context window of {details.context_window} tokens",
                "hidden": False,
                "isDefault": name == default,
                "defaultReasoningEffort": "medium",
                "supportedReasoningEfforts": [
                    {"reasoningEffort": e, "description": f"{e} reasoning effort"} for e in efforts
                ],
                "inputModalities": ["text", "image"],
            }
        )
    more = offset + limit < len(names)
    return {"data": data, "nextCursor": str(offset + limit) if more else None}


_EFFORT_ORDER = ["minimal", "low", "medium", "high"]

HANDLERS: dict[str, Handler] = {
    "initialize": initialize,
    "thread/start": thread_start,
    "thread/resume": thread_resume,
    "thread/fork": thread_fork,
    "thread/list": thread_list,
    "thread/read": thread_read,
    "thread/archive": thread_archive,
    "turn/start": turn_start,
    "turn/interrupt": turn_interrupt,
    "model/list": model_list,
}
IN_TASK = frozenset({"turn/interrupt"})
"""Methods that wait on the engine, run beside the reader (the others, in order)."""
