"""Function tools: the embedding program's own Python functions, offered to the model.

``@function_tool`` (or ``FunctionTool.of(fn)``) turns a function, sync or async,
into a tool: its name, description and parameters' JSON Schema come from the
signature, type hints and docstring (:mod:`.function_schema`), or are given.
Register it with ``Codex(tools=[...])`` or ``codex.tools.add(...)``; see
``docs/tools.md``.

Where the call runs: an async function on the engine's loop; a sync one on a
worker thread of its own (daemon threads, so a function that never returns
cannot hold up the program's exit), or through the ``executor`` the tool was
given, such as a :class:`CallbackExecutor` that posts each call to a UI thread.

This module is loaded only by a program that makes function tools: nothing on
the engine's or a server's start-up path imports it.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import dataclasses
import enum
import inspect
import queue
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, overload

import attrs
import orjson

from .function_schema import FunctionSchema, bind, function_schema

F = TypeVar("F", bound=Callable[..., Any])

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What the Responses API takes as a function's name."""

IDLE_WORKER_SECONDS = 60.0
"""How long a worker thread with nothing to run waits before it ends."""


@attrs.frozen(repr=False)
class ToolImage:
    """An image a function tool returns: the model sees it with its next request.

    ``data`` is the encoded image (PNG, JPEG, GIF or WebP) and ``mime_type`` its type.
    """

    data: bytes
    mime_type: str = "image/png"

    def __repr__(self) -> str:
        return f"ToolImage({self.mime_type}, {len(self.data)} bytes)"

    @property
    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode('ascii')}"


@attrs.frozen(eq=False)
class FunctionTool:
    """A Python function the model may call, with what the model is told of it.

    ``needs_approval``: the user is asked before each call (unless they approved
    the tool for the session), as for a command that is not known to be safe;
    under the approval policy ``never`` such a tool is refused. ``executor``
    runs a sync function (default: a worker thread of codexcore's).
    """

    function: Callable[..., Any]
    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = True
    needs_approval: bool = False
    executor: concurrent.futures.Executor | None = attrs.field(default=None, repr=False)
    schema: FunctionSchema | None = attrs.field(default=None, repr=False)
    is_async: bool = attrs.field(init=False)
    spec: dict[str, Any] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not TOOL_NAME.fullmatch(self.name):
            raise ValueError(
                f"tool name {self.name!r}: the model takes 1 to 64 letters, digits, _ or -"
            )
        is_async = inspect.iscoroutinefunction(self.function) or inspect.iscoroutinefunction(
            getattr(self.function, "__call__", None)  # noqa: B004 (an async callable object)
        )
        object.__setattr__(self, "is_async", is_async)
        spec = {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "strict": self.strict,
            "parameters": self.parameters,
        }
        object.__setattr__(self, "spec", spec)

    @classmethod
    def of(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | None = None,
        strict: bool | None = None,
        needs_approval: bool = False,
        executor: concurrent.futures.Executor | None = None,
    ) -> FunctionTool:
        """The tool for ``function``; what is not given is read off the function.

        With ``parameters`` (a JSON Schema object) the function is called with the
        model's arguments as keywords, unconverted; ``strict`` then defaults to False.
        """
        if isinstance(function, FunctionTool):
            raise TypeError(f"{function.name!r} is already a FunctionTool")
        if parameters is not None:
            return cls(
                function,
                name or function.__name__,
                description or inspect.getdoc(function) or "",
                parameters,
                bool(strict),
                needs_approval,
                executor,
            )
        schema = function_schema(function, name=name, description=description, strict=strict)
        return cls(
            function,
            schema.name,
            schema.description,
            schema.parameters,
            schema.strict,
            needs_approval,
            executor,
            schema,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself (a decorated function stays callable)."""
        return self.function(*args, **kwargs)

    def bind(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The call's arguments from the model's; raises ``ArgumentError`` naming the problem."""
        if self.schema is None:
            return [], dict(arguments)
        return bind(self.schema.signature, arguments)

    def invoke(self, args: list[Any], kwargs: dict[str, Any]) -> Awaitable[Any]:
        """Run the function where it runs (see the module); await it on the engine's loop.

        Cancelled, an async function is cancelled; a sync one that already started
        is abandoned (its thread goes on, its result is dropped).
        """
        if self.is_async:
            result: Awaitable[Any] = self.function(*args, **kwargs)
            return result
        if self.executor is not None:
            future = self.executor.submit(self.function, *args, **kwargs)
            return asyncio.wrap_future(future)
        running: Awaitable[Any] = _WORKERS.run(self.function, args, kwargs)
        return running


@overload
def function_tool(function: F, /) -> FunctionTool: ...


@overload
def function_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool | None = None,
    needs_approval: bool = False,
    executor: concurrent.futures.Executor | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool | None = None,
    needs_approval: bool = False,
    executor: concurrent.futures.Executor | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make ``function`` a :class:`FunctionTool`: ``@function_tool`` or
    ``@function_tool(needs_approval=True, ...)``. The result is still callable."""

    def make(fn: Callable[..., Any]) -> FunctionTool:
        return FunctionTool.of(
            fn,
            name=name,
            description=description,
            strict=strict,
            needs_approval=needs_approval,
            executor=executor,
        )

    return make(function) if function is not None else make


class CallbackExecutor(concurrent.futures.Executor):
    """Runs each call where ``post`` puts it: on a UI toolkit's own thread.

    ``post`` receives a callable without arguments and must arrange for it to run
    on that thread (``invokeLater``, ``QTimer.singleShot(0, job)``,
    ``root.after(0, job)``, or ``queue.put`` for a thread that polls its queue and
    calls what it takes). ``post`` itself is called on the engine's thread, so it
    must not block.
    """

    def __init__(self, post: Callable[[Callable[[], None]], object]) -> None:
        self._post = post

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return  # interrupted before the UI thread got to it
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        self._post(job)
        return future


class _Workers:
    """Daemon threads for sync functions, started as needed and ended when idle.

    Not ``asyncio.to_thread``: the default executor's threads are joined when a
    loop or the interpreter shuts down, so one abandoned function that never
    returns would hang the embedding program's exit.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # workers waiting for a job and not yet promised one
        self._released: list[threading.Thread] = []  # told to end by release_idle

    def run(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((loop, future, fn, args, kwargs))
        with self._lock:
            if self._idle:
                self._idle -= 1  # that worker takes this job
                return future
        threading.Thread(target=self._work, name="codexcore-tool", daemon=True).start()
        return future

    def release_idle(self, timeout: float = 2.0) -> None:
        """End the idle workers and wait for them (an engine closes: no thread of its
        own is left behind). A busy one, an abandoned call's, ends when it returns."""
        with self._lock:
            count, self._idle = self._idle, 0
        for _ in range(count):
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        while count and time.monotonic() < deadline:
            with self._lock:
                ended, self._released = self._released, []
            for thread in ended:
                thread.join(max(0.0, deadline - time.monotonic()))
                count -= 1
            if count:
                time.sleep(0.001)  # a released worker is on its way out

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=IDLE_WORKER_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # nobody counts on this worker: end it
                        self._idle -= 1
                        return
                continue  # a job was promised to an idle worker: wait for it
            if job is None:
                with self._lock:
                    self._released.append(threading.current_thread())
                return
            outcome = _run_job(*job)
            # Idle before the caller learns the result: an engine closing right after
            # it (release_idle) must count this worker, or it lingers.
            with self._lock:
                self._idle += 1
            if outcome is not None:
                _settle(job[0], job[1], *outcome)


def _run_job(
    loop: Any, future: Any, fn: Callable[..., Any], args: Any, kwargs: Any
) -> tuple[Any, BaseException | None] | None:
    """``fn``'s result or exception; None when the call was interrupted before it began."""
    if future.cancelled():
        return None
    try:
        return fn(*args, **kwargs), None
    except BaseException as exc:
        return None, exc


def _settle(loop: Any, future: Any, result: Any, exc: BaseException | None) -> None:
    def settle() -> None:
        if future.cancelled():
            return  # abandoned: the Task went on without it
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    # RuntimeError: the engine's loop has closed since; nobody waits for this result.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(settle)


_WORKERS = _Workers()


def release_idle_workers() -> None:
    """End the idle worker threads of sync function tools (see ``_Workers``)."""
    _WORKERS.release_idle()


# --- results ---------------------------------------------------------------------------


def call_tool_result(value: Any) -> tuple[dict[str, Any], ToolImage | None]:
    """A function's return value as MCP's ``CallToolResult`` (what the events carry and
    the model's text is made from), and the image to attach, if it returned one."""
    if isinstance(value, ToolImage):
        encoded = base64.b64encode(value.data).decode("ascii")
        content = {"type": "image", "data": encoded, "mimeType": value.mime_type}
        return {"content": [content]}, value
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}, None
    text = orjson.dumps(value, default=_jsonable).decode()
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    structured = orjson.loads(text)
    if isinstance(structured, dict):
        result["structuredContent"] = structured
    return result, None


def error_result(message: str) -> dict[str, Any]:
    """The ``CallToolResult`` of a function that raised: the tool's own failure."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _jsonable(value: Any) -> Any:
    """What orjson cannot write itself: attrs instances, enums' values, sets, bytes."""
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=False)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"a {type(value).__name__} is not JSON; return str, JSON or a ToolImage")
