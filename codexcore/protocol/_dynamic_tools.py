"""Tools a client declares and answers itself (Codex's dynamic tools), on the wire.

A client declares its tools with ``configure_session`` or
``override_turn_context`` (``dynamic_tools``: Codex's ``DynamicToolSpec``,
``{name, description, input_schema}``). The model's call of one is shown as
an MCP tool call of the server ``client`` (``mcp_tool_call_begin``/``end``) and
asked of the client by ``dynamic_tool_call_request`` (Codex's
``DynamicToolCallRequest``, less its ``turn_id``: the event's id is the
Task's). The client answers with the op ``dynamic_tool_response``: its
``output`` text and ``success``, and optionally ``content_items``, Codex's
``FunctionCallOutputContentItem`` list (``input_text``, ``input_image``), as
the app-server's ``item/tool/call`` response carries them.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from ._mcp import JsonValue
from ._value import Value
from ._wire import EVENT_MSGS, OPS, TOOL_OUTPUT_ITEMS, Tagged


@attrs.frozen(repr=False, eq=False)
class DynamicToolSpec(Value):
    """A tool the client offers the model: its ``name`` (1 to 64 letters, digits, ``_``
    or ``-``, taken by no built-in, MCP or function tool), what it does, and the JSON
    Schema (an object schema) of its arguments."""

    name: str
    description: str = ""
    input_schema: JsonValue = attrs.field(factory=lambda: {"type": "object", "properties": {}})


@TOOL_OUTPUT_ITEMS.register("input_text")
@attrs.frozen(repr=False, eq=False)
class DynamicToolOutputText(Tagged):
    """Text the model reads as (part of) the call's output."""

    text: str


@TOOL_OUTPUT_ITEMS.register("input_image")
@attrs.frozen(repr=False, eq=False)
class DynamicToolOutputImage(Tagged):
    """An image (a ``data:`` URL of a PNG, JPEG, GIF or WebP) the model sees with its
    next request."""

    image_url: str


DynamicToolOutputItem = Annotated[DynamicToolOutputText | DynamicToolOutputImage, TOOL_OUTPUT_ITEMS]


@EVENT_MSGS.register("dynamic_tool_call_request")
@attrs.frozen(repr=False, eq=False)
class DynamicToolCallRequest(Tagged):
    """The model called the client's tool ``tool``: the Task waits, as for an approval,
    for a ``dynamic_tool_response`` with this ``call_id``.

    ``arguments`` are the model's (a JSON object). Sent after the call's
    ``mcp_tool_call_begin`` (server ``client``); its ``mcp_tool_call_end`` comes
    with the answer, or with the error when none came within the session's
    ``dynamic_tool_timeout_ms``, or with ``aborted`` after an ``interrupt``. A
    client that attaches to the session while the call waits is sent this
    request again, with its original ``seq``.
    """

    call_id: str
    tool: str
    arguments: JsonValue = None


@OPS.register("dynamic_tool_response")
@attrs.frozen(repr=False, eq=False)
class DynamicToolResponse(Tagged):
    """Answer a ``dynamic_tool_call_request``; ``call_id`` is the request's.

    ``output`` is what the model reads; ``success`` false says the tool failed
    (the model reads ``output`` as the error). ``content_items``, when given,
    is the output instead, as Codex's app-server carries it: the texts in order,
    and each image shown to the model with its next request. An answer to a call
    that is not waiting (unknown, answered, timed out or aborted) is answered by
    ``error`` (code ``unknown_call_id``) and changes nothing.
    """

    call_id: str
    output: str = ""
    success: bool = True
    content_items: tuple[DynamicToolOutputItem, ...] | None = None
