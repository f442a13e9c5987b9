"""Seed 004's control methods: ``get_status``, ``stop``, ``checkpoint``, ``inject_prompt``,
``subscribe`` and ``unsubscribe``; the ``event`` notifications come from the
session's :class:`~._status.SessionStatus`.

The commands are the engine's ops, submitted as the connection's own
(:meth:`~codexcore.adapters.jsonrpc.RpcContext.session`): ``stop`` and ``checkpoint``
end the running Task after its current Turn, ``inject_prompt`` is
``inject_input``. On a per-session socket (``session_sockets``) the
connection acts on that socket's session; elsewhere on its own session.
``set_interactive_mode`` records the wish; the mode is on only while a command
of the session runs in a terminal (a PTY: a user shell command with ``pty``);
``write_pty`` then writes to that command (the engine's ``write_pty``), and
answers the protocol's "not in interactive mode" otherwise.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.host._host import HostRefusal, NotAccepted
from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.protocol import (
    Checkpoint,
    InjectInput,
    Op,
    Stop,
    Submission,
    TextInput,
    WritePty,
)

from ._status import ALL_EVENTS, EVENT_TYPES, SessionStatus, statuses

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable
    from codexcore.adapters.jsonrpc._server import RpcContext


# --- the methods ------------------------------------------------------------------------------


@attrs.frozen
class NoParams:
    pass


@attrs.frozen
class InjectPrompt:
    """``{prompt, start?}``: ``start: true`` starts a Task with it when none runs (else
    the prompt waits for the next Task, as a Ralph loop's next iteration)."""

    prompt: str
    start: bool = False


@attrs.frozen
class InteractiveMode:
    enabled: bool


@attrs.frozen
class PtyData:
    data: str


_EVENT_NAMES = {"enum": [ALL_EVENTS, *EVENT_TYPES]}


@attrs.frozen
class Subscription:
    """``{events}``: one event type, or a list of them; ``"*"`` is all."""

    events: Any = attrs.field(
        metadata={"schema": {"anyOf": [_EVENT_NAMES, {"type": "array", "items": _EVENT_NAMES}]}}
    )


async def _status_of(ctx: RpcContext) -> SessionStatus:
    session_id = ctx.bound_session or (await ctx.session()).session_id
    try:
        status = await statuses(ctx.host).get(session_id)
    except HostRefusal as exc:
        raise RpcError(SERVER_ERROR, exc.message, {"code": exc.code}) from None
    status.clients.setdefault(ctx, set())
    return status


async def _submit(ctx: RpcContext, op: Op) -> None:
    attachment = await ctx.session()
    try:
        # Unique ids: the engine drops a submission whose id it saw lately as a duplicate.
        await attachment.submit(Submission(f"ctl-{uuid.uuid4().hex}", op))
    except NotAccepted as exc:
        raise RpcError(SERVER_ERROR, exc.message, {"code": exc.code}) from None


async def get_status(ctx: RpcContext, _: NoParams) -> dict[str, Any]:
    return (await _status_of(ctx)).fields()


async def stop(ctx: RpcContext, _: NoParams) -> dict[str, Any]:
    status = await _status_of(ctx)
    await _submit(ctx, Stop())
    await status.stop_requested()
    return {"status": "stop_requested"}


async def checkpoint(ctx: RpcContext, _: NoParams) -> dict[str, Any]:
    status = await _status_of(ctx)
    await _submit(ctx, Checkpoint())
    await status.stop_requested()
    return {"status": "checkpoint_requested"}


async def inject_prompt(ctx: RpcContext, params: InjectPrompt) -> dict[str, Any]:
    await _status_of(ctx)
    await _submit(ctx, InjectInput((TextInput(params.prompt),), start=params.start))
    return {"status": "prompt_injected", "prompt": params.prompt}


async def set_interactive_mode(ctx: RpcContext, params: InteractiveMode) -> dict[str, Any]:
    status = await _status_of(ctx)
    await status.want_interactive(params.enabled)
    return {"interactive_mode": status.interactive_mode}


async def write_pty(ctx: RpcContext, params: PtyData) -> dict[str, Any]:
    status = await _status_of(ctx)
    if not status.interactive_mode:
        return {"status": "ignored", "reason": "not in interactive mode"}
    await _submit(ctx, WritePty(params.data, call_id=status.terminal))
    return {"status": "forwarded"}


def _event_types(value: Any) -> list[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list):
        raise RpcError(INVALID_PARAMS, "Invalid params: params.events: expected an array")
    allowed = (*EVENT_TYPES, ALL_EVENTS)
    for index, name in enumerate(names):
        if name not in allowed:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: params.events[{index}]: expected one of {list(allowed)}, "
                f"got {name!r}",
            )
    return names


def _listed(events: set[str]) -> list[str]:
    return [name for name in (ALL_EVENTS, *EVENT_TYPES) if name in events]


async def subscribe(ctx: RpcContext, params: Subscription) -> dict[str, Any]:
    names = _event_types(params.events)
    events = (await _status_of(ctx)).clients[ctx]
    events.update(names)
    return {"subscribed": _listed(events)}


async def unsubscribe(ctx: RpcContext, params: Subscription) -> dict[str, Any]:
    names = _event_types(params.events)
    events = (await _status_of(ctx)).clients[ctx]
    if ALL_EVENTS in names:
        events.clear()
    else:
        if ALL_EVENTS in events:  # "all but these": spell "*" out first
            events.discard(ALL_EVENTS)
            events.update(EVENT_TYPES)
        events.difference_update(names)
    return {"subscribed": _listed(events)}


def _status_result(value: str, **more: Any) -> dict[str, Any]:
    properties = {"status": {"const": value}, **more}
    return {"type": "object", "properties": properties, "required": list(properties)}


_TEXT = {"type": "string"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
STATUS_FIELDS: dict[str, Any] = {
    "task_name": _TEXT,
    "task_dir": _TEXT,
    "iteration": {"type": "integer", "minimum": 0},
    "max_iterations": {"type": ["integer", "null"]},
    "current_story": _NULLABLE_TEXT,
    "agent": {"const": "codexcore"},
    "agent_id": _TEXT,
    "status": {"enum": ["idle", "running", "awaiting_approval", "stopping", "stopped"]},
    "interactive_mode": {"type": "boolean"},
    "started_at": _TEXT,
    "updated_at": _TEXT,
    "recent_output": {"type": "array", "items": _TEXT},
}
"""``get_status``'s result, field by field (``state_change`` carries some of them)."""

_SUBSCRIBED = {
    "type": "object",
    "properties": {"subscribed": {"type": "array", "items": {"enum": [ALL_EVENTS, *EVENT_TYPES]}}},
    "required": ["subscribed"],
}
_EVENT = {
    "type": "object",
    "properties": {
        "type": {"enum": list(EVENT_TYPES)},
        "timestamp": _TEXT,
        "data": {"type": "object"},
    },
    "required": ["type", "timestamp", "data"],
}


def add_control_methods(table: MethodTable) -> None:
    """Register seed 004's methods in ``table``."""
    status = {"type": "object", "properties": STATUS_FIELDS, "required": list(STATUS_FIELDS)}
    errors = (SERVER_ERROR,)
    table.add(
        "get_status",
        get_status,
        NoParams,
        summary="The session's status (the Ralph-style session sockets' fields)",
        result=status,
        errors=errors,
    )
    table.add(
        "stop",
        stop,
        NoParams,
        summary="End the running Task after its current Turn",
        result=_status_result("stop_requested"),
        errors=errors,
    )
    table.add(
        "checkpoint",
        checkpoint,
        NoParams,
        summary="Write the rollout and pause after the current Turn until the next input",
        result=_status_result("checkpoint_requested"),
        errors=errors,
    )
    table.add(
        "inject_prompt",
        inject_prompt,
        InjectPrompt,
        summary="Give the model this prompt with its next request, before the next prompt "
        "(start: true starts a Task with it when none runs)",
        result=_status_result("prompt_injected", prompt=_TEXT),
        errors=errors,
    )
    table.add(
        "set_interactive_mode",
        set_interactive_mode,
        InteractiveMode,
        summary="Ask for interactive mode; answers whether it is on (only while a command "
        "runs in a terminal)",
        result={
            "type": "object",
            "properties": {"interactive_mode": {"type": "boolean"}},
            "required": ["interactive_mode"],
        },
        errors=errors,
    )
    table.add(
        "write_pty",
        write_pty,
        PtyData,
        summary="Write to the terminal of the command running in interactive mode",
        result={
            "type": "object",
            "properties": {
                "status": {"enum": ["forwarded", "ignored"]},
                "reason": _TEXT,
            },
            "required": ["status"],
        },
        errors=errors,
    )
    for name, handler, summary in (
        ("subscribe", subscribe, "Receive these event notifications; answers all subscribed"),
        ("unsubscribe", unsubscribe, "Stop these event notifications; answers what is left"),
    ):
        table.add(
            name,
            handler,
            Subscription,
            summary=summary,
            result=_SUBSCRIBED,
            notifications=("event",),
            errors=errors,
        )
    table.sends(
        "event",
        "Ralph-style session sockets: output (one line of agent text or command output: "
        "data.line) or state_change (the get_status fields that changed) of a subscribed session",
        _EVENT,
    )
