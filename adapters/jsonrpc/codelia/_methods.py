"""Seed 000's run methods on the JSON-RPC dialect: what the Codelia TUI drives.

``run.start`` submits the UI's input to the connection's session as a
``user_input`` whose submission id is the run's id (with ``force_compaction``,
a ``compact``); ``run.cancel``
interrupts it; ``model.list``/``model.set`` are in :mod:`._models`.
What a run sends is :mod:`._runs`' work.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from codexcore._logging import get_logger
from codexcore.adapters.host._host import Attachment
from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.adapters.jsonrpc._methods import MethodTable
from codexcore.engine import State
from codexcore.protocol import (
    Compact,
    ErrorEvent,
    ImageInput,
    InputItem,
    Interrupt,
    ResumeSession,
    TextInput,
    UserInput,
)

from ._ask import turn_on
from ._context import keep_ui_context, ui_context_part
from ._models import ModelByName, ModelList, ModelReset, ModelSet, model_list, model_set
from ._runs import Codelia, Run, state_of
from ._skills import note_mentions

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext

log = get_logger(__name__)

RUNTIME_BUSY = -32001
RUN_NOT_FOUND = -32002
SESSION_NOT_FOUND = -32004
SESSION_LOAD_FAILED = -32005


_TEXT_PART = {
    "type": "object",
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
    "required": ["type", "text"],
}
INPUT_SCHEMA = {
    "oneOf": [
        _TEXT_PART,
        {
            "type": "object",
            "properties": {"type": {"const": "parts"}, "parts": {"type": "array", "minItems": 1}},
            "required": ["type", "parts"],
        },
    ]
}


@attrs.frozen
class RunStart:
    input: dict[str, Any] = attrs.field(metadata={"schema": INPUT_SCHEMA})
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
    ui_context = keep_ui_context(ctx, params.ui_context, "params.ui_context")
    attachment = await state.attachment(params.session_id)
    if state.active is not None:  # a Task we adopted on attaching: its confirm is asked again
        raise RpcError(
            RUNTIME_BUSY, f"runtime busy: run {state.active.id} waits for a confirmation"
        )
    if attachment.session.codex.state not in (State.UNCONFIGURED, State.IDLE):
        # Another client's Task (a native one, a control socket's): not ours to replace.
        raise RpcError(RUNTIME_BUSY, "runtime busy: the session is running a task")
    if params.session_id is not None and params.session_id not in (
        attachment.session_id,
        *attachment.session.aliases,
    ):
        await _resume(state, attachment, params.session_id)
    await note_mentions(ctx, items)
    await turn_on(state)  # the model may ask this UI questions
    run = Run(
        new_run_id(),
        ctx.client_capabilities.get("supports_permission_preflight_events") is True,
        diagnostics=ctx.diagnostics,
    )
    if state.active is not None:  # another run.start got in while we resumed
        raise RpcError(RUNTIME_BUSY, f"runtime busy: run {state.active.id} is still running")
    state.runs[run.id] = run
    state.active = run
    try:
        if params.force_compaction:
            # Codelia's /compact: the input is ignored, the run only compacts.
            await state.submit(Compact(), run.id)
        else:
            await state.submit(UserInput((*ui_context_part(ui_context), *items)), run.id)
    except BaseException:
        del state.runs[run.id]
        state.active = None
        raise
    # The engine emits the Task's first events (task_started: the run's step_start) as
    # it takes the input: the answer and run.status running wait for them, so the
    # three leave in one write (as the native dialect's ack and task_started do).
    run.opening = ctx.hold_answer(OPENING_WAIT)
    # run.status running, and the run's events, only once this answer is queued.
    ctx.after_answer(lambda: _open(state, run))
    return {"run_id": run.id}


OPENING_WAIT = 0.001
"""The longest run.start's answer waits for the run's first ``agent.event`` (the engine
takes the input and emits it in microseconds; a busy engine must not hold the answer)."""

_RUN_PREFIX = secrets.token_hex(4)
_RUN_NUMBERS = itertools.count()


def new_run_id() -> str:
    """``run-`` and 16 hex digits, unique in this process (a random prefix and a counter:
    no system call on the path to the run's first event, as uuid4's urandom is)."""
    return f"run-{_RUN_PREFIX}{next(_RUN_NUMBERS) % 2**32:08x}"


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
            f"session {session_id} is live, and this connection already has session "
            f"{attachment.session_id}: a new connection can attach to it",
        )
    answer = await state.ask_engine(ResumeSession(session_id))
    if isinstance(answer.msg, ErrorEvent):
        code = SESSION_NOT_FOUND if answer.msg.code == "unknown_session" else SESSION_LOAD_FAILED
        raise RpcError(code, answer.msg.message)


async def run_cancel(ctx: RpcContext, params: RunCancel) -> dict[str, Any]:
    state = state_of(ctx)
    run = state.runs.get(params.run_id)
    if run is None:
        raise RpcError(RUN_NOT_FOUND, f"run not found: {params.run_id}")
    if run.finished:
        return {"ok": False, "status": run.status}
    log.info("run cancel", run=run.id, reason=params.reason)
    # Codelia's runtime answers at once and the run's terminal status follows: the
    # interrupt is submitted once this answer is queued.
    ctx.after_answer(lambda: _interrupt(state))
    return {"ok": True, "status": run.status}


async def _interrupt(state: Codelia) -> None:
    with contextlib.suppress(RpcError):  # the session is over: its end ends the run
        await state.submit(Interrupt())


async def _model_list(ctx: RpcContext, params: ModelList) -> dict[str, Any]:
    return model_list(state_of(ctx), params)


async def _model_set(ctx: RpcContext, params: ModelSet) -> dict[str, Any]:
    return await model_set(state_of(ctx), params)


def register(table: MethodTable) -> None:
    """Seed 000's run flow: run.start, run.cancel, model.list, model.set, and the
    runtime-to-UI confirm with its preflight events."""
    from ._schemas import NOTIFICATIONS, RESULTS, declare

    run_errors = (RUNTIME_BUSY, SERVER_ERROR, SESSION_NOT_FOUND, SESSION_LOAD_FAILED)
    table.add(
        "run.start",
        run_start,
        RunStart,
        inline=True,  # it waits on nothing of the UI's: its answer one loop turn sooner
        summary="Start a run on the session (or on session_id's)",
        result=RESULTS["run.start"],
        notifications=NOTIFICATIONS,
        errors=run_errors,
    )
    table.add(
        "run.cancel",
        run_cancel,
        RunCancel,
        inline=True,
        summary="Cancel a run: best-effort and idempotent",
        result=RESULTS["run.cancel"],
        errors=(RUN_NOT_FOUND, SERVER_ERROR),
    )
    table.add(
        "model.list",
        _model_list,
        ModelList,
        inline=True,
        summary="The models, newest first, and the current one",
        result=RESULTS["model.list"],
    )
    table.add(
        "model.set",
        _model_set,
        ModelSet,
        inline=True,  # applies to the next run.start, which may follow at once
        summary="Choose the model (and reasoning) from the next model request",
        result=RESULTS["model.set"],
        shapes=(ModelByName, ModelReset),
    )
    declare(table)
    table.provide("supports_ui_requests")
    table.provide("supports_permission_preflight_events")
