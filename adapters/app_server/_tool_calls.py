"""A thread's calls of the client's own tools (Codex's dynamic tools): the engine's
``dynamic_tool_call_request`` asked of the client as the server request
``item/tool/call``, and its answer given back as the op ``dynamic_tool_response``.

As Codex does, an answer that is an error, or a result that is no
``DynamicToolCallResponse``, is a failed call whose text says so: the Task goes on. A
client that goes away without answering leaves the call to the engine, which
closes it after the session's ``dynamic_tool_timeout_ms`` (over stdio the thread
ends with the connection, which aborts it at once). A call the engine closes
first (an interrupt, the timeout) stops waiting for the client: the request is
resolved (``serverRequest/resolved``) and a late answer is dropped.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import attrs

from codexcore._logging import get_logger
from codexcore.protocol import (
    DynamicToolCallRequest,
    DynamicToolOutputImage,
    DynamicToolOutputItem,
    DynamicToolOutputText,
    DynamicToolResponse,
)

from ._wire import AppError

if TYPE_CHECKING:
    from ._items import Note
    from ._thread import AppThread
    from ._wire import Response

log = get_logger(__name__)

METHOD = "item/tool/call"


@attrs.define
class _Pending:
    task: asyncio.Task[None] | None = None
    request_id: Any = None

    def sent(self, request_id: Any) -> None:
        self.request_id = request_id


class ToolCalls:
    """The calls of one thread's client tools that wait for the client."""

    def __init__(self, thread: AppThread) -> None:
        self.thread = thread
        self._pending: dict[str, _Pending] = {}

    def ask(self, turn_id: str, msg: DynamicToolCallRequest) -> None:
        """Ask the client in a task of its own: events go on flowing meanwhile."""
        pending = self._pending[msg.call_id] = _Pending()
        pending.task = asyncio.create_task(self._call(turn_id, msg, pending))

    async def _call(self, turn_id: str, msg: DynamicToolCallRequest, pending: _Pending) -> None:
        thread = self.thread
        params = {
            "threadId": thread.id,
            "turnId": turn_id,
            "callId": msg.call_id,
            "namespace": None,
            "tool": msg.tool,
            "arguments": msg.arguments,
        }
        try:
            rid, answer = await thread.client.request(METHOD, params, pending.sent)
        except (ConnectionError, AppError) as exc:
            log.info("client tool call not answered: left to the timeout", error=str(exc))
            self._pending.pop(msg.call_id, None)
            return
        self._pending.pop(msg.call_id, None)
        try:
            await thread.client.notify([self._resolved(rid)])
            await thread.submit(response_of(msg.call_id, answer))
        except (AppError, ConnectionError) as exc:
            log.info("client tool answer not delivered", error=str(exc))

    def _resolved(self, request_id: Any) -> Note:
        return ("serverRequest/resolved", {"threadId": self.thread.id, "requestId": request_id})

    def asking(self, call_id: str) -> bool:
        """Whether the client is being asked for this call (:meth:`ended` has work)."""
        pending = self._pending.get(call_id)
        return pending is not None and pending.task is not None

    async def ended(self, call_id: str) -> None:
        """The engine closed the call (interrupted, timed out): stop asking the client."""
        pending = self._pending.pop(call_id, None)
        if pending is None or pending.task is None:
            return
        pending.task.cancel()
        await asyncio.gather(pending.task, return_exceptions=True)
        if pending.request_id is not None:
            await self.thread.client.notify([self._resolved(pending.request_id)])

    async def aclose(self) -> None:
        tasks = [p.task for p in self._pending.values() if p.task is not None]
        self._pending.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def response_of(call_id: str, answer: Response) -> DynamicToolResponse:
    """The client's answer as the engine's op; an error or a malformed result is a
    failed call whose text says what went wrong (the model reads it)."""
    if answer.error is not None:
        why = answer.error.get("message") if isinstance(answer.error, dict) else answer.error
        return _failed(call_id, f"dynamic tool request failed: the client answered {why!r}")
    try:
        success, items = _result(answer.result)
    except ValueError as exc:
        return _failed(call_id, f"dynamic tool response was invalid: {exc}")
    return DynamicToolResponse(call_id, success=success, content_items=items)


def _failed(call_id: str, text: str) -> DynamicToolResponse:
    return DynamicToolResponse(call_id, text, False, (DynamicToolOutputText(text),))


def _result(result: Any) -> tuple[bool, tuple[DynamicToolOutputItem, ...]]:
    """Codex's ``DynamicToolCallResponse {contentItems, success}`` (``output``, text, as
    Codex's first versions had it, is taken too); raises ValueError naming the fault."""
    if not isinstance(result, dict):
        raise ValueError("the result must be an object {contentItems, success}")
    success = result.get("success")
    if not isinstance(success, bool):
        raise ValueError("success must be a boolean")
    items = result.get("contentItems")
    if items is None and isinstance(result.get("output"), str):
        return success, (DynamicToolOutputText(result["output"]),)
    if not isinstance(items, list):
        raise ValueError("contentItems must be a list")
    return success, tuple(_item(n, item) for n, item in enumerate(items))


def _item(n: int, item: Any) -> DynamicToolOutputItem:
    kind = item.get("type") if isinstance(item, dict) else None
    if kind == "inputText" and isinstance(item.get("text"), str):
        return DynamicToolOutputText(item["text"])
    if kind == "inputImage" and isinstance(item.get("imageUrl"), str):
        return DynamicToolOutputImage(item["imageUrl"])
    if kind == "inputAudio":
        raise ValueError(f"contentItems[{n}]: audio is not supported by codexcore")
    raise ValueError(
        f"contentItems[{n}] must be {{type: inputText, text}} or {{type: inputImage, imageUrl}}"
    )
