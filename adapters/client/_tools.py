"""The client's own tools: local Python functions the model calls through the server.

A :class:`~codexcore.adapters.client.RemoteCodex` made with ``tools=[...]`` (or
given some with ``client.tools.add``) declares them to its session as the
session's ``dynamic_tools`` and answers the model's calls of them: each
``dynamic_tool_call_request`` for one of its tools runs the function (an async
one on the client's loop, a sync one on a worker thread, as
:class:`~codexcore.tools.functions.FunctionTool` runs it) and is answered by
``dynamic_tool_response``; an exception is answered with ``success: false``
and its message. The names, descriptions and schemas are
:func:`~codexcore.function_tool`'s, read off the functions.

Declaring: a ``configure_session`` or ``override_turn_context`` the program
submits without ``dynamic_tools`` gets this client's (one with ``dynamic_tools``
is the program's own declaration, sent as it is); before the first input
(``user_input``, ``user_turn``, ``inject_input``, ``compact``) after the tools
changed, the library submits an ``override_turn_context`` with them. A call
sent again (after a reconnect, or to a client that attached late) runs once:
one already running or answered is not run again.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import attrs

from codexcore._logging import get_logger
from codexcore.protocol import (
    Compact,
    ConfigureSession,
    DynamicToolCallRequest,
    DynamicToolOutputImage,
    DynamicToolOutputText,
    DynamicToolResponse,
    DynamicToolSpec,
    InjectInput,
    Op,
    OverrideTurnContext,
    UserInput,
    UserTurn,
)
from codexcore.tools.functions import FunctionTool, call_tool_result

log = get_logger(__name__)

MAX_REMEMBERED = 1024
"""How many answered call ids a client remembers, to run a call sent again only once."""

Submit = Callable[[Op], Awaitable[str]]
_INPUT = (UserInput, UserTurn, InjectInput, Compact)


class ClientTools:
    """The functions this client offers the model (see the module). ``add`` and
    ``remove`` may be called from any thread; a change is declared with the next input."""

    def __init__(self, tools: Iterable[FunctionTool | Callable[..., Any]] = ()) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, FunctionTool] = {}
        self._changed = False
        self._running: dict[str, asyncio.Task[None]] = {}
        self._answered: collections.deque[str] = collections.deque(maxlen=MAX_REMEMBERED)
        self.extend(tools)

    def extend(self, tools: Iterable[FunctionTool | Callable[..., Any]]) -> None:
        for tool in tools:
            self.add(tool)

    def add(
        self,
        tool: FunctionTool | Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        executor: concurrent.futures.Executor | None = None,
    ) -> FunctionTool:
        """Offer ``tool`` (a :class:`FunctionTool`, or a function made one as
        :func:`~codexcore.function_tool` makes it); returns it. A name this client
        offers already raises ``ValueError``; one the server's tools have is refused
        by the server (an ``error`` event, code ``tool_name_taken``)."""
        if not isinstance(tool, FunctionTool):
            tool = FunctionTool.of(tool, name=name, description=description, executor=executor)
        with self._lock:
            if tool.name in self._tools:
                raise ValueError(f"this client offers a tool named {tool.name!r} already")
            self._tools = {**self._tools, tool.name: tool}
            self._changed = True
        return tool

    def remove(self, name: str) -> FunctionTool:
        """Stop offering the tool ``name``; returns it. Raises KeyError naming the tools."""
        with self._lock:
            if name not in self._tools:
                raise KeyError(f"no client tool named {name!r} (offered: {', '.join(self._tools)})")
            tools = dict(self._tools)
            removed = tools.pop(name)
            self._tools, self._changed = tools, True
        return removed

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[FunctionTool]:
        return iter(list(self._tools.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def specs(self) -> tuple[DynamicToolSpec, ...]:
        """The tools as the session is told of them."""
        return tuple(
            DynamicToolSpec(tool.name, tool.description, tool.parameters)
            for tool in self._tools.values()
        )

    # --- declaring ------------------------------------------------------------------------

    def declare(self, op: Op) -> tuple[Op | None, Op]:
        """What to submit for ``op``: an ``override_turn_context`` declaring the tools
        first (or None), and ``op`` itself, given the tools where it sets them."""
        with self._lock:
            if isinstance(op, ConfigureSession | OverrideTurnContext):
                if op.dynamic_tools is not None:  # the program declares them itself
                    self._changed = False
                    return None, op
                if self._tools or self._changed:
                    self._changed = False
                    return None, attrs.evolve(op, dynamic_tools=self.specs())
                return None, op
            if isinstance(op, _INPUT) and self._changed:
                self._changed = False
                return OverrideTurnContext(dynamic_tools=self.specs()), op
        return None, op

    # --- answering ------------------------------------------------------------------------

    def offer(self, request: DynamicToolCallRequest, submit: Submit) -> None:
        """Run the call ``request`` if it is of one of these tools and new (see the module)."""
        call_id = request.call_id
        if request.tool not in self._tools:
            return  # another client's tool
        if call_id in self._running or call_id in self._answered:
            return  # sent again: it runs, or ran, once
        task = asyncio.create_task(self._answer(request, submit), name=f"client-tool-{call_id}")
        self._running[call_id] = task
        task.add_done_callback(lambda _: self._running.pop(call_id, None))

    async def _answer(self, request: DynamicToolCallRequest, submit: Submit) -> None:
        response = await self.run(request)
        try:
            await submit(response)
        except Exception as exc:  # the session or the client ended meanwhile
            log.info("a client tool's answer was not sent", call_id=request.call_id, error=str(exc))
            return
        self._answered.append(request.call_id)

    async def run(self, request: DynamicToolCallRequest) -> DynamicToolResponse:
        """Run the call and say how it went, as the op that answers it."""
        tool = self._tools.get(request.tool)
        if tool is None:
            offered = ", ".join(self._tools) or "none"
            message = f"this client offers no tool {request.tool!r} (it offers: {offered})"
            return DynamicToolResponse(request.call_id, message, success=False)
        arguments = request.arguments if isinstance(request.arguments, dict) else {}
        try:
            args, kwargs = tool.bind(arguments)
            value = await tool.invoke(args, kwargs)
            result, image = call_tool_result(value)
        except Exception as exc:  # the tool's failure is the model's to read
            log.warning("client tool raised", tool=tool.name, exc_info=True)
            return DynamicToolResponse(request.call_id, f"{type(exc).__name__}: {exc}", False)
        text = result["content"][0].get("text", "")
        if image is None:
            return DynamicToolResponse(request.call_id, text)
        shown = f"{tool.name} returned an image ({image.mime_type})"
        items = (DynamicToolOutputText(shown), DynamicToolOutputImage(image.data_url))
        return DynamicToolResponse(request.call_id, shown, True, items)

    async def aclose(self) -> None:
        """Cancel the calls still running (an async function is cancelled; a sync one is
        abandoned on its worker)."""
        running = list(self._running.values())
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
