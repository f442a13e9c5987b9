"""The threads face: a Codex engine on a background thread, driven with blocking calls.

This is what an IDE plugin or a notebook embeds. The engine runs its own event
loop on a thread of its own, so it works whether or not the calling program
runs an asyncio loop, and the caller never blocks that loop::

    with CodexThread() as codex:
        result = codex.run("list the files")  # one Task: blocks until it ends
        print(result.final_message)

Or the stream, which goes on for the engine's whole life (iteration ends only
after a ``Shutdown``: break out at the event you wait for)::

    with CodexThread() as codex:
        sub_id = codex.submit(UserInput((TextInput("list the files"),)))
        for event in codex:
            if event.id == sub_id and event.msg.TYPE in TERMINAL_EVENT_TYPES:
                break

With ``on_event`` every event is handed to the callback on a delivery thread
instead (a UI toolkit would post it to its own main thread from there); the
engine's loop never runs UI code.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import janus

from codexcore._logging import get_logger
from codexcore.engine import (
    Approver,
    Codex,
    EngineClosed,
    EngineConfig,
    ModelClientPool,
    Rejected,
    TaskInput,
    TaskResult,
)
from codexcore.engine._run import answer, ends, task_op
from codexcore.protocol import Event, Op, Submission

from .transports._loop_thread import LoopThread

if TYPE_CHECKING:
    import httpx

    from codexcore.engine._function_registry import ToolRegistry
    from codexcore.tools.functions import FunctionTool

log = get_logger(__name__)

EventCallback = Callable[[Event], None]


class CodexThread:
    """A :class:`~codexcore.Codex` on its own thread, with blocking methods.

    It takes what ``Codex`` takes (``config``, the openai SDK's ``api_key``,
    ``base_url``, ``max_retries``, ``default_headers``, ``timeout``, and
    ``http_client``, ``transport``, ``clients``, ``session_id``, ``agent_id``;
    not ``threadsafe``: its queues are reached from other threads), plus
    ``on_event`` and the thread's ``name``. A missing key raises
    :class:`~codexcore.MissingApiKey` here, as ``Codex`` does.

    ``run`` runs one Task and returns its :class:`~codexcore.TaskResult`.
    ``submit`` blocks while the submission queue is full; ``next_event``
    blocks until an event arrives or ``timeout`` (seconds) passes, raising
    :class:`TimeoutError`, and raises :class:`~codexcore.EngineClosed` once
    the stream has ended. ``close`` shuts the engine down and joins its
    threads; it is idempotent. All methods are safe to call from any thread.
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int | None = None,
        default_headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clients: ModelClientPool | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        on_event: EventCallback | None = None,
        name: str = "codexcore",
        tools: Iterable[FunctionTool | Callable[..., Any]] = (),
    ) -> None:
        self._codex = Codex(
            config,
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            default_headers=default_headers,
            timeout=timeout,
            http_client=http_client,
            transport=transport,
            clients=clients,
            session_id=session_id,
            agent_id=agent_id,
            tools=tools,
        )
        self._on_event = on_event
        self._name = name
        self._ids = itertools.count(1)
        self._runner: LoopThread[None] = LoopThread(
            self._main, name=name, logger=__name__, what="engine thread failed"
        )
        self._delivery: threading.Thread | None = None
        self._close_lock = threading.Lock()

    @property
    def tools(self) -> ToolRegistry:
        """The engine's function tools (:attr:`~codexcore.Codex.tools`):
        add and remove them from any thread; a Task offers those registered when it
        started. A tool that must run on the UI's thread takes a
        :class:`~codexcore.CallbackExecutor` (``docs/tools.md``)."""
        return self._codex.tools

    def start(self) -> CodexThread:
        """Start the engine's thread; returns once its queues exist."""
        if self._runner.started:
            raise RuntimeError("CodexThread.start() called twice")
        self._runner.start()
        if self._on_event is not None:
            self._delivery = threading.Thread(
                target=self._deliver, name=f"{self._name}-events", daemon=True
            )
            self._delivery.start()
        return self

    def __enter__(self) -> CodexThread:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _main(self, ready: concurrent.futures.Future[None]) -> None:
        await self._codex.start()
        ready.set_result(None)
        await self._codex.wait_finished()
        await self._codex.aclose()

    # --- the queue pair, blocking ---------------------------------------------

    def submit(self, op: Op, *, id: str | None = None, timeout: float | None = None) -> str:
        """Queue ``op``; returns its submission id."""
        sub_id = f"t{next(self._ids)}" if id is None else id
        self.put(Submission(sub_id, op), timeout=timeout)
        return sub_id

    def put(self, item: Submission | Rejected, *, timeout: float | None = None) -> None:
        """Queue an already-built submission (or a :class:`Rejected` one from an adapter)."""
        try:
            self._codex.submission_queue.sync_q.put(item, timeout=timeout)
        except janus.SyncQueueShutDown:
            raise EngineClosed("the engine has shut down") from None
        except queue.Full:
            raise TimeoutError("the submission queue stayed full") from None

    def next_event(self, timeout: float | None = None) -> Event:
        if self._on_event is not None:
            raise RuntimeError("events go to the on_event callback of this CodexThread")
        return self._get(timeout)

    def _get(self, timeout: float | None) -> Event:
        try:
            return self._codex.event_queue.sync_q.get(timeout=timeout)
        except janus.SyncQueueShutDown:
            raise EngineClosed("the event stream has ended") from None
        except queue.Empty:
            raise TimeoutError(f"no event within {timeout} s") from None

    def run(
        self, task: TaskInput, *, approve: Approver | None = None, timeout: float | None = None
    ) -> TaskResult:
        """Run one Task and return its result once its terminal event has arrived.

        ``task`` is a prompt (sent as a ``UserInput``), a ``UserInput`` or a
        ``UserTurn``. Approval requests of the Task are answered with
        ``approve(request)`` (called on this thread), or ``denied`` without it.
        ``timeout`` bounds the whole Task (seconds): :class:`TimeoutError`,
        and the Task goes on. ``run`` reads the event stream itself, so it is
        not for a CodexThread with ``on_event``, nor while another thread
        iterates the stream.
        """
        if self._on_event is not None:
            raise RuntimeError("events go to the on_event callback of this CodexThread")
        deadline = None if timeout is None else time.monotonic() + timeout
        sub_id = self.submit(task_op(task), timeout=timeout)
        events: list[Event] = []
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                event = self._get(left)
            except TimeoutError:
                raise TimeoutError(f"the Task {sub_id} did not end within {timeout} s") from None
            events.append(event)
            if ends(event, sub_id):
                return TaskResult(sub_id, tuple(events), event)
            reply = answer(event, sub_id, approve)
            if reply is not None:
                self.submit(reply)

    def __iter__(self) -> Iterator[Event]:
        """Every event of the engine's life: iteration ends only after ``shutdown_complete``
        (after ``close()`` or a ``Shutdown``), not when a Task ends. To wait for one
        Task, use :meth:`run`, or break out at its terminal event."""
        while True:
            try:
                yield self.next_event()
            except EngineClosed:
                return

    def _deliver(self) -> None:
        assert self._on_event is not None
        while True:
            try:
                event = self._get(None)
            except EngineClosed:
                return
            try:
                self._on_event(event)
            except Exception:  # one broken callback must not stop the stream
                log.exception("on_event callback failed", seq=event.seq)

    # --- teardown --------------------------------------------------------------

    def close(self, timeout: float | None = 10.0) -> None:
        """Shut the engine down and join its threads."""
        with self._close_lock:
            runner = self._runner
            if runner.loop is None:
                return
            if not runner.stopped.done():
                # The engine may finish (and its loop close) between the check
                # and the call: then there is nothing left to ask.
                with contextlib.suppress(RuntimeError):
                    runner.loop.call_soon_threadsafe(self._codex.request_close)
            runner.stopped.result(timeout)
            runner.join(timeout)
            if self._delivery is not None:
                self._delivery.join(timeout)
