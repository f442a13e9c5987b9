"""Seed 004's control methods: ``get_status``, ``stop``, ``checkpoint``, ``inject_prompt``,
``subscribe`` and ``unsubscribe``; the ``event`` notifications come from the
session's :class:`~._control_status.SessionStatus`.

The commands are the engine's ops, submitted as the connection's own
(:meth:`~._jsonrpc_server.RpcContext.session`): ``stop`` and ``checkpoint``
end the running Task after its current Turn, ``inject_prompt`` is
``inject_input``. On a per-session socket (``session_sockets``) the
connection acts on that socket's session; elsewhere on its own session.
``set_interactive_mode`` and ``write_pty`` stay unregistered: codexcore runs no
agent in a terminal to forward keystrokes to.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.protocol import Checkpoint, InjectInput, Op, Stop, Submission, TextInput

from ._control_status import ALL_EVENTS, EVENT_TYPES, SessionStatus, statuses
from ._host import HostRefusal, NotAccepted
from ._jsonrpc import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from ._jsonrpc_methods import MethodTable
    from ._jsonrpc_server import RpcContext

SERVER_ERROR = -32000


# --- the methods ------------------------------------------------------------------------------


@attrs.frozen
class NoParams:
    pass


@attrs.frozen
class InjectPrompt:
    prompt: str


@attrs.frozen
class Subscription:
    events: Any


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
    await _submit(ctx, InjectInput((TextInput(params.prompt),)))
    return {"status": "prompt_injected", "prompt": params.prompt}


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


def add_control_methods(table: MethodTable) -> None:
    """Register seed 004's methods in ``table``."""
    table.add("get_status", get_status, NoParams)
    table.add("stop", stop, NoParams)
    table.add("checkpoint", checkpoint, NoParams)
    table.add("inject_prompt", inject_prompt, InjectPrompt)
    table.add("subscribe", subscribe, Subscription)
    table.add("unsubscribe", unsubscribe, Subscription)
