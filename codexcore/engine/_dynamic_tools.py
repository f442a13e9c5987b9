"""The client's own tools (dynamic tools): checked, offered, called and waited for.

A client declares them with ``configure_session`` or ``override_turn_context``
(:class:`~codexcore.protocol.DynamicToolSpec`); they live in the Session's
configuration (``SessionConfig.dynamic_tools``), so a running Task takes a new
list up at its next request, as any per-turn setting. A name is refused when
another tool has it (built-in, MCP, in-process function tool): never shadowed.

A call is shown as an MCP tool call of the server ``client`` and asked of the
client with ``dynamic_tool_call_request``; the Task then waits for the op
``dynamic_tool_response`` as it waits for an approval
(:class:`~._approvals.Approvals`): ``interrupt`` and ``shutdown`` end the wait
(the model reads the call as aborted), ``stop`` does not (the call is running,
not asking). No answer within ``dynamic_tool_timeout_ms`` closes the call with
an error output and the Task goes on.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol import (
    ConfigureSession,
    DynamicToolCallRequest,
    DynamicToolOutputImage,
    DynamicToolResponse,
    DynamicToolSpec,
    EventMsg,
    McpInvocation,
    McpToolCallBegin,
    McpToolCallEnd,
    OverrideTurnContext,
    Submission,
)
from ..tools.output import truncate_middle
from ._mcp import DELIMITER, duration_since
from ._submissions import SubmissionRejected

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from ._approvals import Approvals
    from ._codex import Codex
    from ._history import Item

SERVER = "client"
"""The server name a dynamic tool's call is shown under."""

DEFAULT_TIMEOUT_MS = 300_000
"""How long a call waits for the client's answer unless the session says otherwise."""

ABORTED = "aborted: the user interrupted the call"
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_declaration(codex: Codex, op: ConfigureSession | OverrideTurnContext) -> None:
    """Refuse (``SubmissionRejected``) a declaration the engine cannot take: a name
    that is taken or malformed, a schema that is no object schema, a bad timeout."""
    timeout = getattr(op, "dynamic_tool_timeout_ms", None)
    if timeout is not None and timeout <= 0:
        raise SubmissionRejected(
            f"{op.TYPE}: dynamic_tool_timeout_ms must be positive, not {timeout}",
            "bad_dynamic_tool",
        )
    if op.dynamic_tools is None:
        return
    taken = _taken_names(codex)
    seen: set[str] = set()
    for n, spec in enumerate(op.dynamic_tools):
        where = f"{op.TYPE}: dynamic_tools[{n}]"
        if not NAME.fullmatch(spec.name):
            raise SubmissionRejected(
                f"{where}: name {spec.name!r}: the model takes 1 to 64 letters, digits, _ or -",
                "bad_dynamic_tool",
            )
        schema = spec.input_schema
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise SubmissionRejected(
                f"{where}: input_schema must be a JSON Schema object with type 'object'",
                "bad_dynamic_tool",
            )
        why = taken(spec.name) or ("another of these tools" if spec.name in seen else None)
        if why is not None:
            raise SubmissionRejected(
                f"{where}: the name {spec.name!r} is taken by {why}; nothing was changed",
                "tool_name_taken",
            )
        seen.add(spec.name)


def _taken_names(codex: Codex) -> Callable[[str], str | None]:
    from ._ask_user import NAME as ASK_USER
    from ._requests import TOOLS

    builtin = {*(spec["name"] for spec in TOOLS), ASK_USER}
    servers = tuple(codex.config.mcp_servers)
    functions = codex._function_tools

    def taken(name: str) -> str | None:
        if name in builtin:
            return "a built-in tool"
        for server in servers:
            if name.startswith(f"{server}{DELIMITER}"):
                return f"the tools of the MCP server {server!r}"
        if functions is not None and name in functions:
            return "a function tool of the program codexcore runs in"
        return None

    return taken


def model_spec(spec: DynamicToolSpec) -> dict[str, Any]:
    """The tool as the Responses API takes it (not strict: the client's schema is free)."""
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "strict": False,
        "parameters": spec.input_schema,
    }


def specs_for_model(specs: Iterable[DynamicToolSpec], taken: Iterable[str]) -> list[dict[str, Any]]:
    taken = set(taken)
    return [model_spec(spec) for spec in specs if spec.name not in taken]


async def call_dynamic_tool(
    call_id: str,
    spec: DynamicToolSpec,
    raw_arguments: Any,
    *,
    approvals: Approvals,
    emit: Callable[[EventMsg], Awaitable[None]],
    attach: Callable[[Item], None] | None,
    timeout_ms: int,
    limit_bytes: int,
) -> str:
    """Ask the client to run one call of ``spec``; the text the model is given."""
    arguments = _arguments(raw_arguments)
    if isinstance(arguments, str):
        return f"error: {spec.name}: {arguments}; it was not called"
    called = McpInvocation(SERVER, spec.name, arguments)
    answer = approvals.expect_tool_answer(call_id)
    started = time.monotonic()
    try:
        await emit(McpToolCallBegin(call_id, called))
        await emit(DynamicToolCallRequest(call_id, spec.name, arguments))
        async with asyncio.timeout(timeout_ms / 1000):
            response = await answer
    except TimeoutError:
        message = (
            f"error: {spec.name}: the client that offers this tool did not answer within "
            f"{timeout_ms} ms; the call was abandoned"
        )
        await emit(McpToolCallEnd(call_id, called, duration_since(started), {"Err": message}))
        return message
    except asyncio.CancelledError:
        await emit(McpToolCallEnd(call_id, called, duration_since(started), {"Err": ABORTED}))
        raise
    finally:
        approvals.forget_tool_call(call_id)
    text, images = output_of(response)
    result = _call_tool_result(response, text, images)
    await emit(McpToolCallEnd(call_id, called, duration_since(started), {"Ok": result}))
    # Let the end event go out now, not once the next model request is ready: the
    # client waits on it (measured in bench/bench_function_tools.py, remote).
    await asyncio.sleep(0)
    if images:
        text = _attach(spec.name, images, attach, text)
    text = text if response.success else f"error: {text}"
    return truncate_middle(text, limit_bytes)


def output_of(response: DynamicToolResponse) -> tuple[str, list[str]]:
    """The model's text and the images' URLs: ``content_items`` when given, else ``output``."""
    if response.content_items is None:
        return response.output, []
    texts = [getattr(item, "text", "") for item in response.content_items]
    images = [
        item.image_url
        for item in response.content_items
        if isinstance(item, DynamicToolOutputImage)
    ]
    return "\n".join(text for text in texts if text), images


def _call_tool_result(
    response: DynamicToolResponse, text: str, images: list[str]
) -> dict[str, Any]:
    """The answer as MCP's ``CallToolResult``, as the end event carries a tool's result."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for url in images:
        head, _, data = url.partition(",")
        if not head.startswith("data:"):
            content.append({"type": "text", "text": f"<image {url}>"})
            continue
        mime = head.removeprefix("data:").split(";")[0] or "image/png"
        content.append({"type": "image", "data": data, "mimeType": mime})
    result: dict[str, Any] = {"content": content}
    if not response.success:
        result["isError"] = True
    return result


def _attach(name: str, images: list[str], attach: Callable[[Item], None] | None, text: str) -> str:
    if attach is None:
        return f"{text}\n({name} returned images, and images cannot be shown here)"
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": f"<images from the tool {name}>"}]
    parts += [{"type": "input_image", "image_url": url, "detail": "auto"} for url in images]
    attach({"type": "message", "role": "user", "content": parts})
    return f"{text}\n({name} returned {len(images)} image(s); they follow)".lstrip()


def _arguments(raw: Any) -> dict[str, Any] | str:
    """The model's arguments as a JSON object, or what is wrong with them."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = orjson.loads(raw) if isinstance(raw, str | bytes) else raw
    except orjson.JSONDecodeError as exc:
        return f"arguments are not valid JSON ({exc})"
    return value if isinstance(value, dict) else "arguments must be a JSON object"


async def answer(codex: Codex, sub: Submission, _: object) -> None:
    """``dynamic_tool_response``: the client's answer to a waiting call."""
    op = sub.op
    assert isinstance(op, DynamicToolResponse)
    session = codex._session
    if session is None or not session.approvals.answer_tool(op):
        raise SubmissionRejected(
            f"no call of a client tool with call_id {op.call_id!r} is waiting (it was "
            "answered, timed out or aborted, or never made)",
            "unknown_call_id",
        )
