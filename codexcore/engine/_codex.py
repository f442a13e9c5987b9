"""Codex: the engine behind the submission and event queues.

Theory of operation
-------------------
A single asyncio task, the dispatcher, takes Submissions off the submission
queue one at a time. What it does with each is decided by one table, ``PLAN``
(:mod:`._submissions`), keyed by the engine's state and the Op's type: an
optional abort of the running Task, then an action. The state is never
stored; it is read off the Session (none yet, idle, or running a Task).

A Task runs in an asyncio task of its own (the runner), so the dispatcher
keeps reading Submissions (``interrupt``, approvals) while it works. A second
asyncio task, the supervisor, waits for the runner's outcome and sends the one
terminal event every ``task_started`` gets under the same id:
``task_complete``, ``turn_aborted`` or ``error`` (:mod:`._task_lifecycle`).
Aborting cancels only the runner (even one that never got to run) and waits
for the supervisor, so the terminal event of the old Task always precedes
anything that follows.

Events are numbered (``seq``) as they enter the bounded event queue. A UI that
stops reading pauses the engine there: backpressure, not unbounded memory.

This module holds the engine itself: its lifecycle, the queue pair, the
dispatcher and the event stream. What each Op does lives with what it acts on
(see :mod:`._submissions`); those actions reach the engine through its
private members (``_session``, ``_emit`` …), as methods of its own would.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import janus

from .._api_key import MissingApiKey
from .._logging import get_logger
from ..protocol import (
    AbortReason,
    ErrorEvent,
    Event,
    EventMsg,
    Op,
    ProtocolError,
    Shutdown,
    Submission,
    SubmissionAck,
    WarningEvent,
    decode_submission,
)
from ..protocol._value import Value
from ._clients import ModelClientPool
from ._config import EngineConfig, SessionConfig
from ._dedupe import SeenIds
from ._queues import LoopQueue
from ._rollout import default_home
from ._run import Approver, TaskInput, TaskResult, answer, ends, task_op
from ._session import Session, new_agent_id
from ._session_lifecycle import shutdown
from ._skills import SkillCatalogues
from ._submissions import PLAN, State, SubmissionRejected, prepare, state_of

if TYPE_CHECKING:
    import httpx

    from ..tools.functions import FunctionTool
    from ._function_registry import ToolRegistry

log = get_logger(__name__)

_NOT_STARTED = "the engine is not started: use `async with Codex()`"
_LOOP_ONLY = (
    "this engine's queues are loop-only (Codex(threadsafe=False)): "
    "use enqueue(), submit() and next_event() on its loop"
)

UNRECORDED = frozenset(
    {
        "agent_message_delta",
        "agent_reasoning_delta",
        "exec_command_output_delta",
        # An answer about now (a UI may poll mcp.list), not part of the conversation.
        "mcp_list_tools_response",
    }
)
"""Streaming deltas are not recorded: the complete agent_message, agent_reasoning
and exec_command_end that follow carry the same content, and one write per
delta (each releasing the GIL to the UI's thread) halved the engine's rate.
The Codex CLI leaves them out of its rollouts too."""


def _carries_credentials(
    transport: httpx.AsyncBaseTransport | None, http_client: httpx.AsyncClient | None
) -> bool:
    """Whether no unauthenticated request can leave: a MockTransport answers in process,
    and a client with an ``auth`` or an ``Authorization`` header of its own sends that."""
    if transport is not None:
        import httpx

        return isinstance(transport, httpx.MockTransport)
    if http_client is not None:
        return http_client.auth is not None or "authorization" in http_client.headers
    return False


class EngineClosed(Exception):
    """The engine has shut down: no more submissions, and the event stream has ended."""


@attrs.frozen(repr=False, eq=False)
class Rejected(Value):
    """A submission that could not be decoded, put on the queue so its ``error``
    event is numbered in order with everything else. Adapters make these."""

    id: str
    message: str
    code: str = "bad_submission"


def parse_submission(data: bytes | str | dict[str, Any]) -> Submission | Rejected:
    """Decode one submission from the wire; a bad one becomes a :class:`Rejected`
    naming the problem, to be queued like any submission so it is answered in order."""
    try:
        return decode_submission(data)
    except ProtocolError as exc:
        return Rejected(exc.submission_id, exc.message)


class Codex:
    """The agent engine: put Submissions in, read Events out.

    Use it as ``async with Codex(config) as codex``. Two ways to drive it:

    - one Task at a time: ``result = await codex.run("fix the test")`` submits
      the prompt, reads events until that Task's terminal event, and returns a
      :class:`~codexcore.engine.TaskResult` (``final_message``, ``events``,
      ``terminal``);
    - the stream: ``await codex.submit(op)`` returns the submission id, and
      ``async for event in codex.events()`` reads every event of the engine's
      life, ending only after ``shutdown_complete`` (break out at the event
      you wait for).

    The queue pair is public (``submission_queue`` and ``event_queue``,
    bounded janus queues) so adapters can reach it from other threads.

    The openai SDK's client options are taken by their names and override
    ``config``: ``api_key``, ``base_url``, ``max_retries``, ``default_headers``
    and ``timeout`` (see :meth:`EngineConfig.with_client_options`). With no
    key at all (``api_key`` None and ``$OPENAI_API_KEY`` unset) for OpenAI's
    API, the constructor raises :class:`~codexcore.MissingApiKey`, as the
    command line refuses to start, rather than send unauthenticated requests;
    ``api_key=""`` means "send none" (a local server).

    ``threadsafe=False`` is for a consumer on the engine's own loop (a session
    host): the queues are then loop-only and about three times cheaper per
    event, and only ``enqueue``, ``submit`` and ``next_event`` reach them.

    ``transport`` replaces the HTTP transport of the model client: the
    official seam for tests (see :mod:`codexcore.testing`). ``http_client``,
    an ``httpx.AsyncClient`` of the caller's, carries the model requests
    instead, with its auth, headers, limits, proxy and event hooks; the caller
    closes it (see :class:`~codexcore.model.ModelClient` for how base_url
    and the key apply). ``clients`` shares model clients between engines (a
    session host passes one pool to all of them and closes it itself);
    without it the engine owns a pool.

    ``session_id`` is the id the engine's first new Session takes (a session
    host passes the id it announced); other new Sessions get fresh ids, and a
    resumed one keeps its recorded id. ``agent_id`` likewise names the first
    Session's agent (see :attr:`agent_id`).

    ``tools`` are the embedding program's own functions offered to the model
    (function tools, or plain functions made so); :attr:`tools` adds and
    removes them later (see ``docs/tools.md``).
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
        threadsafe: bool = True,
        session_id: str | None = None,
        agent_id: str | None = None,
        tools: Iterable[FunctionTool | Callable[..., Any]] = (),
    ) -> None:
        self.config = (config or EngineConfig()).with_client_options(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            default_headers=default_headers,
            timeout=timeout,
        )
        if clients is None and not _carries_credentials(transport, http_client):
            missing = self.config.missing_key()
            if missing is not None:
                raise MissingApiKey(missing)
        self._function_tools: ToolRegistry | None = None
        for tool in tools:
            self.tools.add(tool)
        self._first_session_id = session_id
        self._first_agent_id = agent_id or new_agent_id()
        self._threadsafe = threadsafe
        self._owns_clients = clients is None
        self._clients = clients or ModelClientPool(
            self.config, transport=transport, http_client=http_client
        )
        self._session: Session | None = None
        self._seq = 0
        self._ids = itertools.count(1)
        self._submissions: janus.Queue[Submission | Rejected] | None = None
        self._events: janus.Queue[Event] | None = None
        # The engine's own ends of the queue pair: janus's async sides, or loop-only queues.
        self._submission_q: janus.AsyncQueue[Submission | Rejected] | None = None
        self._event_q: janus.AsyncQueue[Event] | None = None
        self._emit_lock = asyncio.Lock()
        self._locked_emits = 0  # emitters holding or awaiting _emit_lock
        self._dispatcher: asyncio.Task[None] | None = None
        self._closed = False
        self._discarding = False
        self._dispatching = False
        self._close_requested = False
        self._recording_news: str | None = None  # for the next event's emitter to tell
        acks = self.config.acknowledge_submissions
        self._seen = SeenIds(self.config.duplicate_ttl) if acks else None
        self._skills = SkillCatalogues()

    @property
    def tools(self) -> ToolRegistry:
        """The function tools this engine offers the model: ``add``, ``remove``, list.

        Safe to change from any thread; a Task offers those registered when it started.
        """
        if self._function_tools is None:
            # Loaded only by a program that uses function tools (start-up, issue 20).
            from ._ask_user import NAME as ASK_USER
            from ._function_registry import ToolRegistry
            from ._requests import TOOLS

            # The ask tool is built in too, offered whenever a UI turns it on.
            builtin = [*(spec["name"] for spec in TOOLS), ASK_USER]
            self._function_tools = ToolRegistry(
                builtin, self.config.mcp_servers, self._client_tools
            )
        return self._function_tools

    # --- lifecycle ----------------------------------------------------------

    async def start(self) -> None:
        """Create the queues and start the dispatcher on the running loop."""
        if self._dispatcher is not None:
            raise RuntimeError("Codex.start() called twice")
        config = self.config
        if self._threadsafe:
            self._submissions = janus.Queue(config.submission_queue_size)
            self._events = janus.Queue(config.event_queue_size)
            self._submission_q, self._event_q = self._submissions.async_q, self._events.async_q
        else:
            self._submission_q = LoopQueue(config.submission_queue_size)
            self._event_q = LoopQueue(config.event_queue_size)
        self._dispatcher = asyncio.create_task(self._dispatch_forever(), name="codexcore")

    async def __aenter__(self) -> Codex:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Shut down (if nobody did) and release everything.

        Events nobody has read by then may be discarded, so that closing never
        waits on a UI that stopped reading. To see ``shutdown_complete``,
        submit ``Shutdown`` and read until the stream ends before closing.
        """
        if self._dispatcher is None:
            return
        self.request_close()
        await self.wait_finished()
        if self._function_tools is not None:
            from ..tools.functions import release_idle_workers

            # No thread of the engine's is left behind it (a running one, abandoned
            # by an interrupt, ends when its function returns).
            await asyncio.to_thread(release_idle_workers)
        for queue in (self._submissions, self._events):
            if queue is not None:
                await queue.wait_closed()

    def request_close(self, *, discard: bool = True) -> None:
        """Begin shutting down without waiting; call it on the engine's loop.

        With ``discard`` (for a UI that may have stopped reading) events that
        find the queue full are dropped so closing cannot hang. A reader that
        always drains the queue (a session host's pump) passes
        ``discard=False`` and loses nothing.
        """
        if discard:
            self._discarding = True
            # One slot is enough: an emit blocked on a full queue completes, and
            # from then on emits that find the queue full drop their event.
            queue = self._events_in()
            if queue.full():
                queue.get_nowait()
        self._close_requested = True
        # Cancelling a task before its first step skips its try/finally, so a
        # dispatcher that has not run yet finds the request when it starts.
        if self._dispatcher is not None and self._dispatching:
            self._dispatcher.cancel()

    async def wait_finished(self) -> None:
        """Wait until the engine has shut down (after ``shutdown`` or ``request_close``)."""
        if self._dispatcher is not None:
            await asyncio.wait({self._dispatcher})

    # --- the queue pair -----------------------------------------------------

    @property
    def submission_queue(self) -> janus.Queue[Submission | Rejected]:
        self._submissions_in()  # names the problem if the engine is not started
        if self._submissions is None:
            raise RuntimeError(_LOOP_ONLY)
        return self._submissions

    @property
    def event_queue(self) -> janus.Queue[Event]:
        self._events_in()
        if self._events is None:
            raise RuntimeError(_LOOP_ONLY)
        return self._events

    def _submissions_in(self) -> janus.AsyncQueue[Submission | Rejected]:
        if self._submission_q is None:
            raise RuntimeError(_NOT_STARTED)
        return self._submission_q

    def _events_in(self) -> janus.AsyncQueue[Event]:
        if self._event_q is None:
            raise RuntimeError(_NOT_STARTED)
        return self._event_q

    def new_id(self) -> str:
        """A fresh submission id (``s1``, ``s2`` …) for callers that do not choose one."""
        return f"s{next(self._ids)}"

    async def submit(self, op: Op, *, id: str | None = None) -> str:
        """Queue ``op`` and return its submission id (waits while the queue is full)."""
        sub_id = self.new_id() if id is None else id
        await self.enqueue(Submission(sub_id, op))
        return sub_id

    async def enqueue(self, item: Submission | Rejected) -> None:
        """Queue a decoded submission, or a line that failed to decode (answered by
        an ``error`` event in its turn); waits while the queue is full."""
        try:
            await self._submissions_in().put(item)
        except janus.AsyncQueueShutDown:
            raise EngineClosed("the engine has shut down") from None

    async def next_event(self) -> Event:
        """The next event; raises EngineClosed after the stream has ended."""
        try:
            return await self._events_in().get()
        except janus.AsyncQueueShutDown:
            raise EngineClosed("the event stream has ended") from None

    def next_event_nowait(self) -> Event | None:
        """The next event if one is queued, else None (also once the stream has ended)."""
        try:
            return self._events_in().get_nowait()
        except (janus.AsyncQueueEmpty, janus.AsyncQueueShutDown):
            return None

    async def events(self) -> AsyncIterator[Event]:
        """Every event, ending after ``shutdown_complete``."""
        while True:
            try:
                yield await self.next_event()
            except EngineClosed:
                return

    async def run(self, task: TaskInput, *, approve: Approver | None = None) -> TaskResult:
        """Run one Task and return its result, once its terminal event has arrived.

        ``task`` is a prompt (sent as a ``UserInput``), a ``UserInput`` or a
        ``UserTurn``. The Task's approval requests are answered with
        ``approve(request)`` (a ``ReviewDecision``), or ``denied`` without it.
        ``run`` reads the event stream itself: do not read it elsewhere
        meanwhile. Raises EngineClosed if the engine shuts down first.
        """
        sub_id = await self.submit(task_op(task))
        events: list[Event] = []
        while True:
            event = await self.next_event()
            events.append(event)
            if ends(event, sub_id):
                return TaskResult(sub_id, tuple(events), event)
            reply = answer(event, sub_id, approve)
            if reply is not None:
                await self.submit(reply)

    # --- dispatch -------------------------------------------------------------

    @property
    def agent_id(self) -> str:
        """The agent of the current Session (the ``agent_id`` of ATM-style control
        messages): recorded in its rollout's ``session_meta`` and kept on resume, so it
        is stable for the session's whole life; before the first Session, the one it
        will take."""
        session = self._session
        return session.agent_id if session is not None else self._first_agent_id

    @property
    def state(self) -> State:
        """What ``PLAN`` is keyed by now; ``STOPPING`` or ``PAUSING`` while the running
        Task has a ``stop`` or ``checkpoint`` pending."""
        return state_of(self._session)

    async def _dispatch_forever(self) -> None:
        self._dispatching = True
        try:
            if self._close_requested:
                raise asyncio.CancelledError
            while not self._closed:
                await self._dispatch(await self._submissions_in().get())
        except asyncio.CancelledError:
            # request_close(): shut down exactly as a Shutdown submission would.
            await self._abort("shutdown")
            await shutdown(self, Submission("", Shutdown()), [])
        finally:
            self._submissions_in().shutdown(immediate=True)
            self._events_in().shutdown()

    async def _dispatch(self, item: Submission | Rejected) -> None:
        if isinstance(item, Rejected):
            await self._emit(item.id, ErrorEvent(item.message, item.code))
            return
        if self._seen is not None:
            fresh = self._seen.accept(item.id)
            await self._emit(item.id, SubmissionAck(item.id, duplicate=not fresh))
            if not fresh:
                return
        step = PLAN[self.state, type(item.op)]
        try:
            # Check before aborting: a bad submission must not cost the running Task.
            prepared = await prepare(self, item.op)
            if step.abort is not None:
                await self._abort(step.abort)
            await step.action(self, item, prepared)
        except SubmissionRejected as exc:
            await self._emit(item.id, ErrorEvent(exc.message, exc.code))
        except Exception as exc:  # the engine goes on whatever one submission does
            log.exception("submission failed", sub_id=item.id, op=type(item.op).__name__)
            await self._emit(item.id, ErrorEvent(f"internal error: {exc}", "internal"))

    # --- emitting ---------------------------------------------------------------

    async def _emit(self, sub_id: str, msg: EventMsg) -> None:
        """Number ``msg``, record it, and put it on the event queue: in order, with
        backpressure, and recorded before any UI can see it."""
        queue = self._events_in()
        if self._discarding and (self._emit_lock.locked() or queue.full()):
            log.debug("event discarded while closing", type=type(msg).__name__)
            return
        if not self._locked_emits and not queue.full():
            # The common case: room, and no emitter holding or awaiting the lock.
            # Nothing here suspends (see below), so nothing can interleave, and
            # the lock's two calls into asyncio would only add work.
            await queue.put(self._number(sub_id, msg))
        else:
            self._locked_emits += 1
            try:
                await self._emit_locked(queue, sub_id, msg)
            finally:
                self._locked_emits -= 1
        if self._recording_news is not None:
            await self._tell_recording(sub_id)

    async def _tell_recording(self, sub_id: str) -> None:
        """Warn that recording the session failed, or works again (see RolloutWriter).

        Said after the event whose recording brought the news, under its id;
        the warning's own recording can bring news only by changing the state
        again, so this ends.
        """
        news, self._recording_news = self._recording_news, None
        if news is not None:
            await self._emit(sub_id, WarningEvent(news))

    async def _emit_locked(
        self, queue: janus.AsyncQueue[Event], sub_id: str, msg: EventMsg
    ) -> None:
        """``_emit`` when the queue is full or another emitter is waiting: in turn."""
        async with self._emit_lock:
            # Numbered now: a cancel landing in _deliver still delivers it, so
            # the next event must not reuse its seq.
            event = self._number(sub_id, msg)
            if queue.full():
                await self._deliver(queue, event)
            else:
                # With room, put() never suspends (so no cancel can land half-way;
                # only this loop's thread puts), and unlike put_nowait it wakes an
                # asyncio reader directly, not via call_soon_threadsafe and a new
                # task two loop turns later (600 us -> 50 us to task_started).
                await queue.put(event)

    @staticmethod
    async def _deliver(queue: janus.AsyncQueue[Event], event: Event) -> None:
        """Put a recorded event even if the emitter is cancelled meanwhile.

        A recorded event that never arrived, or a reused seq, would make the
        recording and the stream disagree; the cancellation is delivered
        once the event is queued (an abort cannot outrun a full queue anyway:
        its own terminal event needs the same room).
        """
        put = asyncio.ensure_future(queue.put(event))
        cancelled = False
        while not put.done():
            try:
                await asyncio.shield(put)
            except asyncio.CancelledError:
                cancelled = True
        put.result()
        if cancelled:
            raise asyncio.CancelledError

    def _number(self, sub_id: str, msg: EventMsg) -> Event:
        """The next event: its seq taken, and recorded before anyone can see it."""
        event = Event(sub_id, self._seq, msg)
        self._seq += 1
        session = self._session
        if session is not None and session.rollout is not None and msg.TYPE not in UNRECORDED:
            rollout = session.rollout
            rollout.record_event(event)
            if rollout.news is not None:  # set by this record or an earlier History record
                self._recording_news = rollout.take_news()
        return event

    def _emitter(self, sub_id: str) -> Callable[[EventMsg], Awaitable[None]]:
        # A partial, not a wrapping coroutine: every streamed delta passes here.
        return functools.partial(self._emit, sub_id)

    async def _abort(self, reason: AbortReason) -> None:
        """Cancel the running Task, if any, and wait until its terminal event is queued."""
        session = self._session
        if session is None or session.running is None:
            return
        running = session.running
        running.abort_reason = reason
        session.approvals.drop_pending()
        running.runner.cancel()
        await asyncio.wait({running.supervisor})

    # --- for the actions ------------------------------------------------------

    def _require_session(self) -> Session:
        assert self._session is not None, "PLAN runs this action only with a Session"
        return self._session

    def _client_tools(self) -> list[str]:
        """The names of the tools a client declared (none while ``__init__`` runs)."""
        session = getattr(self, "_session", None)
        config = session.config if session else self.config.session
        return [spec.name for spec in config.dynamic_tools]

    def _session_config(self) -> SessionConfig:
        """The Session's settings, or the defaults a new one would take."""
        return self._session.config if self._session else self.config.session

    def _home(self) -> Path:
        return Path(self.config.home) if self.config.home else default_home()
