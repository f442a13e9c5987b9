"""Seed 003's control messages on the JSON-RPC dialect: ``control.stdin`` and
``control.interrupt``. The params are the request envelope exactly as the seed
writes it and the result is the ack envelope; every outcome, a rejection
included, is an ack (``result``), never a JSON-RPC error, so a sender reads one
shape. The work is :class:`~._receiver.ControlReceiver`'s, shared with the native
dialect; the connection's credential (:attr:`~codexcore.adapters.jsonrpc.RpcContext.credential`)
decides who the sender may be.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError

from ._wire import (
    CONTENT_REF_SCHEMA,
    INTERRUPT_ACK,
    INTERRUPT_REQUEST,
    INTERRUPT_REQUEST_SCHEMA,
    STDIN_ACK,
    STDIN_REQUEST,
    STDIN_REQUEST_SCHEMA,
    ack,
    ack_schema,
    partial_envelope,
)

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable
    from codexcore.adapters.jsonrpc._server import RpcContext


_S, _I = STDIN_REQUEST_SCHEMA, INTERRUPT_REQUEST_SCHEMA
_NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 256}
_NAMES: dict[str, Any] = {"oneOf": [_NAME, {"type": "array", "items": _NAME, "maxItems": 16}]}
_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
REGISTER_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string"},
        "agent_id": {"type": "string"},
        "names": {
            "type": "object",
            "properties": {"session_id": _LIST, "agent_id": _LIST},
            "required": ["session_id", "agent_id"],
        },
    },
    "required": ["session_id", "agent_id", "names"],
}


@attrs.frozen
class StdinParams:
    """``control.stdin``'s params: a ``control.stdin.request`` envelope, with exactly
    one of ``content`` and ``content_ref`` (described only: the receiver reads the raw
    object, so an ack can name any rule a request breaks)."""

    v: Any = attrs.field(metadata={"schema": _S["properties"]["v"]})
    request_id: Any = attrs.field(metadata={"schema": _S["properties"]["request_id"]})
    team: Any = attrs.field(metadata={"schema": _S["properties"]["team"]})
    session_id: Any = attrs.field(metadata={"schema": _S["properties"]["session_id"]})
    agent_id: Any = attrs.field(metadata={"schema": _S["properties"]["agent_id"]})
    sender: Any = attrs.field(metadata={"schema": _S["properties"]["sender"]})
    sent_at: Any = attrs.field(metadata={"schema": _S["properties"]["sent_at"]})
    type: Any = attrs.field(default=None, metadata={"schema": _S["properties"]["type"]})
    content: Any = attrs.field(default=None, metadata={"schema": _S["properties"]["content"]})
    content_ref: Any = attrs.field(default=None, metadata={"schema": CONTENT_REF_SCHEMA})
    content_encoding: Any = attrs.field(
        default=None, metadata={"schema": _S["properties"]["content_encoding"]}
    )
    content_preview: Any = attrs.field(
        default=None, metadata={"schema": _S["properties"]["content_preview"]}
    )
    interrupt: Any = attrs.field(default=None, metadata={"schema": _S["properties"]["interrupt"]})
    thread_id: Any = attrs.field(default=None, metadata={"schema": _S["properties"]["thread_id"]})
    meta: Any = attrs.field(default=None, metadata={"schema": _S["properties"]["meta"]})


@attrs.frozen
class InterruptParams:
    """``control.interrupt``'s params: a ``control.interrupt.request`` envelope."""

    v: Any = attrs.field(metadata={"schema": _I["properties"]["v"]})
    request_id: Any = attrs.field(metadata={"schema": _I["properties"]["request_id"]})
    team: Any = attrs.field(metadata={"schema": _I["properties"]["team"]})
    session_id: Any = attrs.field(metadata={"schema": _I["properties"]["session_id"]})
    agent_id: Any = attrs.field(metadata={"schema": _I["properties"]["agent_id"]})
    sender: Any = attrs.field(metadata={"schema": _I["properties"]["sender"]})
    sent_at: Any = attrs.field(metadata={"schema": _I["properties"]["sent_at"]})
    signal: Any = attrs.field(metadata={"schema": _I["properties"]["signal"]})
    type: Any = attrs.field(default=None, metadata={"schema": _I["properties"]["type"]})
    thread_id: Any = attrs.field(default=None, metadata={"schema": _I["properties"]["thread_id"]})
    meta: Any = attrs.field(default=None, metadata={"schema": _I["properties"]["meta"]})


async def _handle(ctx: RpcContext, params: dict[str, Any], kind: str) -> dict[str, Any]:
    if params.get("type", kind) != kind:
        detail = f"type: this method takes {kind!r}, got {str(params.get('type'))[:64]!r}"
        fields = {**partial_envelope(params), "type": kind}
        return ack(fields, "rejected", detail, error="invalid_request")
    from ._receiver import receiver

    return await receiver(ctx.host).handle({"type": kind, **params}, ctx.credential)


@attrs.frozen
class RegisterParams:
    """``control.register``'s params: the names to know the connection's session by, each
    a string or a list of them (``[]`` removes that kind; one left out keeps its names)."""

    session_id: Any = attrs.field(default=None, metadata={"schema": _NAMES})
    agent_id: Any = attrs.field(default=None, metadata={"schema": _NAMES})


async def control_register(ctx: RpcContext, params: dict[str, Any]) -> dict[str, Any]:
    from ._names import register
    from ._wire import Invalid

    attachment = await ctx.session()
    try:
        return register(ctx.host, attachment.session, params)
    except Invalid as exc:
        raise RpcError(INVALID_PARAMS, exc.detail) from None


async def control_stdin(ctx: RpcContext, params: dict[str, Any]) -> dict[str, Any]:
    return await _handle(ctx, params, STDIN_REQUEST)


async def control_interrupt(ctx: RpcContext, params: dict[str, Any]) -> dict[str, Any]:
    return await _handle(ctx, params, INTERRUPT_REQUEST)


def add_control_message_methods(table: MethodTable) -> None:
    """Register ``control.stdin``, ``control.interrupt`` and ``control.register`` in
    ``table``."""
    table.add(
        "control.register",
        control_register,
        dict,
        summary="ATM-style control: the names a sender knows this connection's session by "
        "(session_id: the sender's view, agent_id: the worker's); result: its ids and names",
        result=REGISTER_RESULT,
        shapes=(RegisterParams,),
        errors=(INVALID_PARAMS,),
    )
    table.add(
        "control.stdin",
        control_stdin,
        dict,
        summary="ATM-style control: give a live session input (params: control.stdin.request; "
        "result: control.stdin.ack)",
        result=ack_schema(STDIN_ACK),
        shapes=(StdinParams,),
    )
    table.add(
        "control.interrupt",
        control_interrupt,
        dict,
        summary="ATM-style control: interrupt a live session's running Task (params: "
        "control.interrupt.request; result: control.interrupt.ack)",
        result=ack_schema(INTERRUPT_ACK),
        shapes=(InterruptParams,),
    )
