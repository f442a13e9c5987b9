"""Codex: the engine behind the submission and event queues.

Theory of operation
-------------------
A single asyncio task, the dispatcher, takes Submissions off the submission
queue one at a time. What it does with each is decided by one table, ``PLAN``,
keyed by the engine's state and the Op's type: an optional abort of the
running Task, then an action. The state is never stored; it is read off the
Session (none yet, idle, or running a Task).

A Task runs in an asyncio task of its own (the runner), so the dispatcher
keeps reading Submissions (``interrupt``, approvals) while it works. A second
asyncio task, the supervisor, waits for the runner's outcome and sends the one
terminal event every ``task_started`` gets under the same id:
``task_complete``, ``turn_aborted`` or ``error``. Aborting cancels only the
runner (even one that never got to run) and waits for the supervisor, so the
terminal event of the old Task always precedes anything that follows.

Events are numbered (``seq``) as they enter the bounded event queue. A UI that
stops reading pauses the engine there: backpressure, not unbounded memory.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import functools
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import janus

from .._logging import get_logger
from ..protocol import (
    AbortReason,
    Checkpoint,
    Compact,
    ConfigureSession,
    ErrorEvent,
    Event,
    EventMsg,
    ExecApproval,
    ForkSession,
    GetHistory,
    InjectInput,
    Interrupt,
    ListMcpTools,
    ListSessions,
    ListSkills,
    Op,
    OverrideTurnContext,
    PatchApproval,
    ProtocolError,
    ResumeSession,
    RunUserShellCommand,
    SandboxKind,
    SessionConfigured,
    SessionHistory,
    SessionList,
    Shutdown,
    ShutdownComplete,
    Stop,
    Submission,
    SubmissionAck,
    TaskComplete,
    TaskStarted,
    TokenUsage,
    TurnAborted,
    UserInput,
    UserTurn,
    WarningEvent,
    decode_submission,
)
from ..tools._sandbox_status import SandboxStatus
from ._approvals import Answer, TaskAborted
from ._clients import ModelClientPool
from ._compact import ContextWindowExceeded, auto_compact_limit
from ._config import BadTurnContext, EngineConfig, SessionConfig
from ._dedupe import SeenIds
from ._history import History, Item, UnknownBookmark
from ._mcp import McpManager
from ._queues import LoopQueue
from ._requests import InputError, user_message
from ._rollout import (
    BadRollout,
    LoadedSession,
    RolloutWriter,
    UnknownSession,
    config_record,
    default_home,
    find_rollout,
    list_sessions,
    load_session,
    meta_record,
    read_session_events,
)
from ._session import RunningTask, Session, StopRequest, new_agent_id
from ._skills import SkillCatalogues, list_skills, mention_parts, session_context
from ._task import Task, TurnSettings

if TYPE_CHECKING:
    import httpx

    from ..model import ModelClient
    from ._tools import ToolRouter

log = get_logger(__name__)
_T = TypeVar("_T")

_NOT_STARTED = "the engine is not started: use `async with Codex()`"
_LOOP_ONLY = (
    "this engine's queues are loop-only (Codex(threadsafe=False)): "
    "use enqueue(), submit() and next_event() on its loop"
)


def _probe_sandbox() -> SandboxStatus:
    """:func:`~codexcore.tools.sandbox.probe_sandbox`: the sandbox helpers load only when
    a policy wants confinement (a ``danger-full-access`` session never loads them)."""
    from ..tools.sandbox import probe_sandbox

    return probe_sandbox()


UNCONFINED = SandboxStatus("none", "the sandbox policy is danger-full-access")

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


class EngineClosed(Exception):
    """The engine has shut down: no more submissions, and the event stream has ended."""


@attrs.frozen
class Rejected:
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


class SubmissionRejected(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message, self.code = message, code


class State(enum.Enum):
    """The engine's state, read off the Session. ``STOPPING`` and ``PAUSING`` are
    ``RUNNING`` with a ``stop`` or a ``checkpoint`` pending: the Task ends after
    its current Turn."""

    UNCONFIGURED = "unconfigured"
    IDLE = "idle"
    RUNNING = "running"
    STOPPING = "stopping"
    PAUSING = "pausing"


Action = Callable[["Codex", Submission, Any], Awaitable[None]]
"""An action gets the Submission and what ``_prepare`` made of its Op, checked
before anything was aborted: model input for user_input and inject_input, a
loaded rollout for resume_session and fork_session, the directory to run in for
run_user_shell_command, None for the rest."""


@attrs.frozen
class Step:
    abort: AbortReason | None
    action: Action


class Codex:
    """The agent engine: put Submissions in, read Events out.

    Use it as ``async with Codex(config) as codex``: ``await codex.submit(op)``
    returns the submission id, and ``async for event in codex.events()`` reads
    events until ``shutdown_complete``. The queue pair is public
    (``submission_queue`` and ``event_queue``, bounded janus queues) so
    adapters can reach it from other threads.

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
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clients: ModelClientPool | None = None,
        threadsafe: bool = True,
        http_client: httpx.AsyncClient | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        self.config = config or EngineConfig()
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
        self._warned_models: set[str] = set()  # unknown models already warned about
        self._skills = SkillCatalogues()

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

    # --- dispatch -------------------------------------------------------------

    @property
    def agent_id(self) -> str:
        """The agent of the current Session (seed 003's ``agent_id``): recorded in its
        rollout's ``session_meta`` and kept on resume, so it is stable for the
        session's whole life; before the first Session, the one it will take."""
        session = self._session
        return session.agent_id if session is not None else self._first_agent_id

    @property
    def state(self) -> State:
        """What ``PLAN`` is keyed by now; ``STOPPING`` or ``PAUSING`` while the running
        Task has a ``stop`` or ``checkpoint`` pending."""
        if self._session is None:
            return State.UNCONFIGURED
        running = self._session.running
        if running is None:
            return State.IDLE
        return _STOP_STATES[running.stop.kind]

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
            await self._shutdown(Submission("", Shutdown()), [])
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
            prepared = await self._prepare(item.op)
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

    # --- actions --------------------------------------------------------------

    async def _configure(self, sub: Submission, _: object) -> None:
        op = sub.op
        assert isinstance(op, ConfigureSession)
        base = self._session.config if self._session else self.config.session
        config = base.overlay(op)
        if self._session is None:
            self._session = await self._new_session(config)
        else:
            self._session.reconfigure(config)
        await self._announce_session(sub.id)

    async def _new_session(
        self,
        config: SessionConfig,
        *,
        session_id: str | None = None,
        history: History | None = None,
        forked_from: str | None = None,
        append_to: Path | None = None,
        token_total: TokenUsage | None = None,
        agent_id: str | None = None,
    ) -> Session:
        """A Session, recorded in a new rollout (or appended to ``append_to``)
        unless the engine is ephemeral. A new rollout's file is created with
        the Session's first content: the forked branch, else its first Turn."""
        reserved, self._first_session_id = self._first_session_id, None
        session_id = session_id or reserved or str(uuid.uuid4())
        if agent_id is None:  # the first new Session's agent is the one announced
            agent_id = new_agent_id() if self._session is not None else self._first_agent_id
        rollout = None
        if not self.config.ephemeral:
            if append_to is not None:
                rollout = RolloutWriter(append_to)
            else:
                now = datetime.datetime.now(datetime.UTC)
                rollout = RolloutWriter.create(self._home(), session_id, now)
                rollout.record(meta_record(session_id, now, config.cwd, forked_from, agent_id))
            rollout.record(config_record(config))
            if history is not None and append_to is None:
                for change in history.branch():
                    rollout.record_change(*change)
        if self._session is not None:
            await self._session.stop_shells()
            await self._session.stop_mcp()
            self._session.close()
        return Session(
            config,
            self._clients,
            session_id=session_id,
            history=history,
            rollout=rollout,
            home=str(self._home()),
            project_doc_max_bytes=self.config.project_doc_max_bytes,
            token_total=token_total,
            agent_id=agent_id,
        )

    def _home(self) -> Path:
        return Path(self.config.home) if self.config.home else default_home()

    async def _announce_session(self, sub_id: str) -> None:
        """``session_configured``, saying what really confines commands."""
        session = self._require_session()
        c = session.config
        kind: SandboxKind
        if c.sandbox_policy.type == "danger-full-access":
            kind, reason = "none", UNCONFINED.reason
        else:
            if session.sandbox is None:
                # Starts bwrap once per process (then cached): off the loop, and
                # only when a policy wants confinement.
                session.sandbox = await asyncio.to_thread(_probe_sandbox)
            kind, reason = session.sandbox.kind, session.sandbox.reason
        await self._emit(
            sub_id,
            SessionConfigured(
                session.id,
                c.model,
                c.cwd,
                c.approval_policy,
                c.sandbox_policy,
                c.history_mode,
                c.reasoning_effort,
                kind,
                reason,
            ),
        )
        if kind == "none" and c.sandbox_policy.type != "danger-full-access":
            await self._emit(
                sub_id,
                WarningEvent(
                    f"commands cannot be confined ({reason}); every command that is not "
                    "known to be safe will need approval"
                ),
            )
        if session.mcp is None and self.config.mcp_servers:
            # A new Session's servers start now, in parallel, reporting under this id.
            session.mcp = McpManager(self.config.mcp_servers, self._emitter(sub_id), c.cwd)
            session.mcp.start()
        await self._warn_if_unknown(sub_id, c.model)

    async def _warn_if_unknown(self, sub_id: str, model: str) -> None:
        """One warning per engine for each model the catalogue does not know."""
        if model in self._warned_models or self.config.models.lookup(model) is not None:
            return
        self._warned_models.add(model)
        assumed = self.config.models.details(model)
        await self._emit(
            sub_id,
            WarningEvent(
                f"model {model!r} is not in the model catalogue: assuming a "
                f"{assumed.context_window}-token context window and "
                f"{assumed.max_output_tokens} output tokens (describe it under "
                f"[models.{json.dumps(model)}] in config.toml)"
            ),
        )

    # --- per-turn settings ----------------------------------------------------------

    async def _override_turn_context(self, sub: Submission, config: SessionConfig) -> None:
        """New per-turn settings (checked by ``_prepare``): the running Task, if any,
        takes them up at its next request."""
        session = self._require_session()
        confining = config.sandbox_policy.type != "danger-full-access"
        if confining and session.sandbox is None:
            session.sandbox = await asyncio.to_thread(_probe_sandbox)
        was_confining = session.config.sandbox_policy.type != "danger-full-access"
        if config != session.config:
            session.reconfigure(config)
        if confining and not was_confining and session.sandbox and session.sandbox.kind == "none":
            await self._emit(
                sub.id,
                WarningEvent(
                    f"commands cannot be confined ({session.sandbox.reason}); every command "
                    "that is not known to be safe will need approval"
                ),
            )
        await self._warn_if_unknown(sub.id, config.model)

    async def _configure_with_turn_context(self, sub: Submission, config: SessionConfig) -> None:
        self._session = await self._new_session(config)
        await self._announce_session(sub.id)

    async def _user_turn(self, sub: Submission, prepared: tuple[SessionConfig, list[Item]]) -> None:
        config, first_input = prepared
        await self._override_turn_context(sub, config)
        await self._start_task(sub, first_input)

    async def _configure_and_turn(
        self, sub: Submission, prepared: tuple[SessionConfig, list[Item]]
    ) -> None:
        config, first_input = prepared
        self._session = await self._new_session(config)
        await self._announce_session(sub.id)
        await self._start_task(sub, first_input)

    def _turn_settings(self, op: OverrideTurnContext | UserTurn) -> SessionConfig:
        base = self._session.config if self._session else self.config.session
        try:
            return base.with_turn_settings(op)
        except BadTurnContext as exc:
            raise SubmissionRejected(
                f"{op.TYPE}: {exc} (nothing was changed)", "bad_turn_context"
            ) from None

    async def _configure_and_start(self, sub: Submission, first_input: list[Item]) -> None:
        self._session = await self._new_session(self.config.session)
        await self._announce_session(sub.id)
        await self._start_task(sub, first_input)

    async def _configure_and_compact(self, sub: Submission, _: object) -> None:
        self._session = await self._new_session(self.config.session)
        await self._announce_session(sub.id)
        await self._start_task(sub, None)

    async def _start_compaction(self, sub: Submission, _: object) -> None:
        """``compact``: a Task that compacts the History and makes no Turn."""
        await self._start_task(sub, None)

    async def _start_task(self, sub: Submission, first_input: list[Item] | None) -> None:
        """Start a Task on ``first_input``; None starts a compaction Task."""
        session = self._require_session()
        if isinstance(sub.op, UserInput) and sub.op.last_response_id is not None:
            server = session.config.history_mode == "server"
            session.history.fork(sub.op.last_response_id, allow_external=server)
            session.rebranched()
        window = self.config.models.details(session.config.model).context_window
        await self._emit(sub.id, TaskStarted(window))
        # What the Task runs under is fixed now, though its objects are built in the runner.
        under = (session.config, session.sandbox or UNCONFINED, session.client())
        # Let the event queue's reader (a host's pump, woken by the first put) send
        # task_started before the Task's two asyncio tasks are made: the client need
        # not wait for that work. A cancel (request_close) landing meanwhile is
        # raised once the Task exists, so the abort that follows still gives
        # task_started its one terminal event.
        cancelled = await _yield_uncancelled()
        stop = StopRequest()
        runner = asyncio.create_task(
            self._run_task(session, sub.id, first_input, stop, *under),
            name=f"codexcore-task-{sub.id}",
        )
        supervisor = asyncio.create_task(self._supervise(sub.id, runner))
        session.running = RunningTask(sub.id, runner, supervisor, stop=stop)
        if cancelled:
            raise asyncio.CancelledError

    async def _run_task(
        self,
        session: Session,
        sub_id: str,
        first_input: list[Item] | None,
        stop: StopRequest,
        config: SessionConfig,
        sandbox: SandboxStatus,
        client: ModelClient,
    ) -> TaskComplete:
        """The runner: a Task under the configuration it started with."""
        # Everything from here to the first request runs without a pause: let the
        # events already emitted, task_started first, reach the UI before it.
        await asyncio.sleep(0)
        emit = self._emitter(sub_id)

        from ._tools import ToolRouter  # the tool stack loads with the first Task

        def tools_for(config: SessionConfig) -> ToolRouter:
            confine = session.sandbox or sandbox
            return ToolRouter(
                config,
                self.config,
                session.approvals,
                confine,
                emit,
                stop.pending,
                mcp=session.mcp,
                attach=session.add_context,
            )

        tools = tools_for(config)
        settings = TurnSettings(
            lambda: session.config, tools_for, session.context, self.config.models, session.totals
        )
        if first_input is not None:  # a Task with input (not a compaction): the catalogue once
            home = str(self._home())
            skills = await session_context(self._skills, session.history, config.cwd, home)
            first_input = [*skills, *first_input]
        task = Task(
            session_id=session.id,
            config=config,
            history=session.history,
            client=client,
            tools=tools,
            emit=emit,
            take_injected=session.take_injected,
            take_context=session.take_context,
            stop_requested=lambda: stop.kind,
            settings=settings,
            auto_compact_limit=auto_compact_limit(
                self.config.models.details(config.model).context_window,
                self.config.model_auto_compact_token_limit,
            ),
        )
        return await (task.compact() if first_input is None else task.run(first_input))

    async def _list_skills(self, sub: Submission, _: object) -> None:
        assert isinstance(sub.op, ListSkills)
        cwd = (self._session.config if self._session else self.config.session).cwd
        answer = await list_skills(self._skills, sub.op, cwd, str(self._home()))
        await self._emit(sub.id, answer)

    async def _mentioned(
        self, op: UserInput | InjectInput | UserTurn, cwd: str
    ) -> list[dict[str, str]]:
        """The skills the input's text mentions (``$name``), as content parts."""
        return await mention_parts(self._skills, op.items, cwd, str(self._home()))

    async def _prepare(
        self, op: Op
    ) -> list[Item] | LoadedSession | str | SessionConfig | tuple[SessionConfig, list[Item]] | None:
        if isinstance(op, UserInput | InjectInput):
            cwd = (self._session.config if self._session else self.config.session).cwd
            return self._task_input(op, await self._mentioned(op, cwd))
        if isinstance(op, OverrideTurnContext):
            return self._turn_settings(op)
        if isinstance(op, UserTurn):
            config = self._turn_settings(op)
            return config, self._task_input(op, await self._mentioned(op, config.cwd))
        if isinstance(op, RunUserShellCommand):
            from ._user_shell import BadCwd, resolve_cwd

            root = (self._session.config if self._session else self.config.session).cwd
            try:
                return resolve_cwd(op.cwd, root)
            except BadCwd as exc:
                raise SubmissionRejected(str(exc), "bad_cwd") from None
        if isinstance(op, ResumeSession | ForkSession):
            loaded = await self._load(op.session_id)
            if isinstance(op, ForkSession):
                try:
                    loaded.history.fork(op.response_id)
                except UnknownBookmark:
                    raise SubmissionRejected(
                        f"session {op.session_id} has no response {op.response_id!r}",
                        "unknown_response_id",
                    ) from None
            return loaded
        return None

    def _task_input(
        self, op: UserInput | InjectInput | UserTurn, skills: list[dict[str, str]]
    ) -> list[Item]:
        """The model input an Op brings (with the skills its text mentions)."""
        try:
            message = user_message(op.items)
            message["content"].extend(skills)
        except InputError as exc:
            raise SubmissionRejected(str(exc), "bad_input") from None
        if isinstance(op, UserInput) and op.last_response_id is not None:
            session = self._session
            config = session.config if session else self.config.session
            known = session is not None and session.history.knows(op.last_response_id)
            if config.history_mode == "client" and not known:
                raise SubmissionRejected(
                    f"last_response_id {op.last_response_id!r} is not a response of this "
                    "session (client history mode can only fork from its own responses)",
                    "unknown_response_id",
                )
        return [message]

    async def _supervise(self, sub_id: str, runner: asyncio.Task[TaskComplete]) -> None:
        """Wait for the Task's outcome and send its one terminal event."""
        await asyncio.wait({runner})
        session = self._require_session()
        mine = session.running if session.running and session.running.sub_id == sub_id else None
        if mine is not None:
            session.approvals.drop_pending()
            # User shell records the Task took no request for: the next one sends them.
            if leftover := session.take_context():
                session.history.record(leftover, None)
        await self._emit(sub_id, self._terminal(runner, mine))
        # The Task counts as running until its terminal event is queued, so the
        # next Task's task_started always comes after it.
        if mine is not None and session.running is mine:
            session.running = None

    def _terminal(self, runner: asyncio.Task[TaskComplete], mine: RunningTask | None) -> EventMsg:
        if runner.cancelled():
            return TurnAborted(mine.abort_reason if mine else "interrupted")
        exc = runner.exception()
        if exc is None:
            return runner.result()
        if isinstance(exc, TaskAborted):
            return TurnAborted("interrupted")
        return _error_for(exc)

    async def _abort(self, reason: AbortReason) -> None:
        session = self._session
        if session is None or session.running is None:
            return
        running = session.running
        running.abort_reason = reason
        session.approvals.drop_pending()
        running.runner.cancel()
        await asyncio.wait({running.supervisor})

    async def _inject(self, sub: Submission, task_input: list[Item]) -> None:
        """Input for the running Task's next request; it lifts a pending checkpoint.

        A Task that has made its last request already (its terminal event is on
        its way) gets none: the input starts the next Task, as when idle.
        """
        session = self._require_session()
        running = session.running
        assert running is not None, "PLAN runs this action only while a Task runs"
        if running.runner.done():
            await self._start_after(running, sub, task_input)
            return
        running.stop.kind = None
        for item in task_input:
            session.inject(item)

    async def _inject_when_stopping(self, sub: Submission, task_input: list[Item]) -> None:
        """A stop stands: the input waits for the next Task's first request."""
        session = self._require_session()
        running = session.running
        assert running is not None, "PLAN runs this action only while a Task runs"
        if running.runner.done():
            await self._start_after(running, sub, task_input)
            return
        for item in task_input:
            session.inject(item)
        await self._emit(
            sub.id,
            WarningEvent(
                "the running task is stopping and makes no further model request: "
                "this input goes with the next task's first request"
            ),
        )

    async def _start_after(
        self, running: RunningTask, sub: Submission, task_input: list[Item]
    ) -> None:
        # Only the terminal event is left to send, so waiting cannot block on the UI's
        # answers; task_started must follow it.
        await asyncio.wait({running.supervisor})
        await self._start_task(sub, task_input)

    async def _request_stop(self, sub: Submission, _: object) -> None:
        """``stop`` or ``checkpoint``: the Task ends after its current Turn. Waiting
        approvals are withdrawn, so the Turn can end without anyone answering."""
        session = self._require_session()
        running = session.running
        assert running is not None, "PLAN runs this action only while a Task runs"
        running.stop.kind = "stop" if isinstance(sub.op, Stop) else "checkpoint"
        session.approvals.withdraw_pending()

    async def _resolve_approval(self, sub: Submission, _: object) -> None:
        op = sub.op
        assert isinstance(op, ExecApproval | PatchApproval)
        session = self._session
        if session is None or not session.approvals.resolve(op.id, Answer(op.decision, op.reason)):
            raise SubmissionRejected(
                f"no approval request with call_id {op.id!r} is waiting", "unknown_call_id"
            )
        if session.rollout is not None:
            # Who approved what, and why: kept with the session, not sent to any UI.
            session.rollout.record(
                {"type": "approval", "op": op.TYPE, "call_id": op.id}
                | {"decision": op.decision, "reason": op.reason}
            )

    # --- the user's shell -----------------------------------------------------

    async def _configure_and_shell(self, sub: Submission, cwd: str) -> None:
        self._session = await self._new_session(self.config.session)
        await self._announce_session(sub.id)
        await self._user_shell(sub, cwd)

    async def _user_shell(self, sub: Submission, cwd: str) -> None:
        """Start the user's command (in ``cwd``, checked by ``_prepare``) beside
        whatever runs; the dispatcher goes on."""
        session = self._require_session()
        shell = asyncio.create_task(
            self._run_user_shell(session, sub, cwd), name=f"codexcore-user-shell-{sub.id}"
        )
        session.shells.add(shell)
        shell.add_done_callback(session.shells.discard)

    async def _run_user_shell(self, session: Session, sub: Submission, cwd: str) -> None:
        from ._user_shell import run_user_shell, user_shell_record

        op = sub.op
        assert isinstance(op, RunUserShellCommand)
        result = await run_user_shell(
            op.command,
            op.timeout_ms,
            cwd=cwd,
            config=session.config,
            sandbox=session.sandbox or UNCONFINED,
            emit=self._emitter(sub.id),
        )
        if not op.record:
            return  # the UI hands the result to the model itself
        record = user_shell_record(op.command, result, limit_bytes=self.config.exec_output_limit)
        running = session.running
        if running is not None and not running.runner.done():
            session.add_context(record)  # the History is the running Task's to write
        else:
            session.history.record([record], None)

    async def _interrupt_shells(self, sub: Submission, _: object) -> None:
        if self._session is not None:
            await self._session.stop_shells()

    async def _list_mcp_tools(self, sub: Submission, _: object) -> None:
        """What the MCP servers offer and where each is, now: never waits for a startup."""
        session = self._require_session()
        if session.mcp is not None:
            answer = session.mcp.list_response()
        else:
            answer = McpManager(self.config.mcp_servers, self._emitter(sub.id), "").list_response()
        await self._emit(sub.id, answer)

    async def _configure_and_list_mcp_tools(self, sub: Submission, _: object) -> None:
        self._session = await self._new_session(self.config.session)
        await self._announce_session(sub.id)
        await self._list_mcp_tools(sub, None)

    async def _ignore(self, sub: Submission, _: object) -> None:
        log.debug("nothing to do", sub_id=sub.id, op=type(sub.op).__name__)

    async def _shutdown(self, sub: Submission, _: object) -> None:
        if self._session is not None:
            await self._session.stop_shells()
            await self._session.stop_mcp()
        if self._owns_clients:
            await self._clients.aclose()
        self._closed = True
        await self._emit(sub.id, ShutdownComplete())
        if self._session is not None:
            self._session.close()

    # --- recorded sessions ------------------------------------------------------

    async def _list_sessions(self, sub: Submission, _: object) -> None:
        op = sub.op
        assert isinstance(op, ListSessions)
        bad: list[BadRollout] = []
        found = await asyncio.to_thread(
            functools.partial(list_sessions, on_bad=bad.append), self._home(), op.cwd, op.limit
        )
        for exc in bad:
            await self._emit(sub.id, WarningEvent(f"skipped a session file: {exc}"))
        await self._emit(sub.id, SessionList(tuple(found)))

    async def _get_history(self, sub: Submission, _: object) -> None:
        op = sub.op
        assert isinstance(op, GetHistory)
        session = self._session
        session_id = op.session_id or (session.id if session else self._first_session_id)
        if session_id is None:
            raise SubmissionRejected("no session yet, and no session_id given", "unknown_session")
        events = self._unwritten_events(session_id)
        if events is None:
            path = await self._rollout_of(session_id)
            events = await self._read(read_session_events, session_id, path)
        page = tuple(events[op.offset : op.offset + op.limit])
        await self._emit(sub.id, SessionHistory(session_id, op.offset, len(events), page))

    async def _resume_session(self, sub: Submission, loaded: LoadedSession) -> None:
        self._session = await self._new_session(
            loaded.config,
            session_id=loaded.session_id,
            history=loaded.history,
            append_to=loaded.path,
            token_total=loaded.token_total,
            agent_id=loaded.agent_id,
        )
        await self._announce_session(sub.id)

    async def _fork_session(self, sub: Submission, loaded: LoadedSession) -> None:
        op = sub.op
        assert isinstance(op, ForkSession)
        history = History()
        for kind, items, response_id in loaded.history.branch():
            history.replay(kind, items, response_id)
        self._session = await self._new_session(
            loaded.config, history=history, forked_from=op.session_id
        )
        await self._announce_session(sub.id)

    def _unwritten_events(self, session_id: str) -> list[Event] | None:
        """The events of this engine's session ``session_id`` while its file does not
        exist yet (none before the first Session); None for any other session."""
        session = self._session
        if session is None:
            return [] if session_id == self._first_session_id else None
        if session.id != session_id or session.rollout is None:
            return None
        return session.rollout.held_events()

    async def _load(self, session_id: str) -> LoadedSession:
        await self._rollout_of(session_id)
        return await self._read(load_session, session_id, self._home(), session_id)

    async def _read(self, read: Callable[..., _T], session_id: str, *args: Any) -> _T:
        """``read(*args)`` off the loop; a recorded session that cannot be read is refused,
        naming its file and the problem."""
        try:
            return await asyncio.to_thread(read, *args)
        except BadRollout as exc:
            raise SubmissionRejected(
                f"recorded session {session_id!r} cannot be read: {exc}", "bad_session"
            ) from None

    async def _rollout_of(self, session_id: str) -> Path:
        try:
            return await asyncio.to_thread(find_rollout, self._home(), session_id)
        except UnknownSession:
            raise SubmissionRejected(
                f"no recorded session {session_id!r} under {self._home()}", "unknown_session"
            ) from None

    def _require_session(self) -> Session:
        assert self._session is not None, "PLAN runs this action only with a Session"
        return self._session


async def _yield_uncancelled() -> bool:
    """Let every task that is ready run once; True if this task was cancelled meanwhile
    (the caller finishes what it must, then raises CancelledError itself)."""
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError:
        return True
    return False


def _error_for(exc: BaseException) -> ErrorEvent:
    from ..model import ModelError

    if isinstance(exc, ModelError):
        return ErrorEvent(exc.message, exc.code)
    if isinstance(exc, ContextWindowExceeded):
        reason = "context_window_exceeded"
        return ErrorEvent(str(exc), reason, codex_error_info=reason)
    log.exception("task failed", exc_info=exc)
    return ErrorEvent(f"internal error: {exc}", "internal")


_U, _I, _R = State.UNCONFIGURED, State.IDLE, State.RUNNING
_S, _P = State.STOPPING, State.PAUSING
_RUNNING = (_R, _S, _P)  # a Task runs (and may have a stop or checkpoint pending)
_STOP_STATES = {None: _R, "stop": _S, "checkpoint": _P}

PLAN: dict[tuple[State, type[Any]], Step] = {
    # configure_session: create or reconfigure; a running Task is aborted.
    (_U, ConfigureSession): Step(None, Codex._configure),
    (_I, ConfigureSession): Step(None, Codex._configure),
    **{(s, ConfigureSession): Step("reconfigured", Codex._configure) for s in _RUNNING},
    # user_input: start a Task, replacing a running one; no Session yet means defaults.
    (_U, UserInput): Step(None, Codex._configure_and_start),
    (_I, UserInput): Step(None, Codex._start_task),
    **{(s, UserInput): Step("replaced", Codex._start_task) for s in _RUNNING},
    # inject_input: feeds the running Task's next request (lifting a checkpoint),
    # or starts one; a stop stands, and the input waits for the next Task.
    (_U, InjectInput): Step(None, Codex._configure_and_start),
    (_I, InjectInput): Step(None, Codex._start_task),
    (_R, InjectInput): Step(None, Codex._inject),
    (_P, InjectInput): Step(None, Codex._inject),
    (_S, InjectInput): Step(None, Codex._inject_when_stopping),
    # interrupt: stops the running Task now, and the user's shell commands.
    (_U, Interrupt): Step(None, Codex._ignore),
    (_I, Interrupt): Step(None, Codex._interrupt_shells),
    **{(s, Interrupt): Step("interrupted", Codex._interrupt_shells) for s in _RUNNING},
    # override_turn_context: new per-turn settings, from the next model request on;
    # never aborts. user_turn: those settings, then a Task, as user_input.
    (_U, OverrideTurnContext): Step(None, Codex._configure_with_turn_context),
    **{(s, OverrideTurnContext): Step(None, Codex._override_turn_context) for s in (_I, *_RUNNING)},
    (_U, UserTurn): Step(None, Codex._configure_and_turn),
    (_I, UserTurn): Step(None, Codex._user_turn),
    **{(s, UserTurn): Step("replaced", Codex._user_turn) for s in _RUNNING},
    # run_user_shell_command: runs beside a Task, never disturbing it.
    (_U, RunUserShellCommand): Step(None, Codex._configure_and_shell),
    **{(s, RunUserShellCommand): Step(None, Codex._user_shell) for s in (_I, *_RUNNING)},
    # stop, checkpoint: the running Task ends after its current Turn (the latest
    # of the two names the end); otherwise nothing to stop.
    **{(s, op): Step(None, Codex._ignore) for s in (_U, _I) for op in (Stop, Checkpoint)},
    **{(s, op): Step(None, Codex._request_stop) for s in _RUNNING for op in (Stop, Checkpoint)},
    # approvals answer a waiting request by call_id; anything else is rejected.
    **{
        (s, op): Step(None, Codex._resolve_approval)
        for s in State
        for op in (ExecApproval, PatchApproval)
    },
    # recorded sessions: listing and reading never disturb a Task; switching
    # to a resumed or forked session aborts it, as reconfiguring does.
    **{(s, ListSessions): Step(None, Codex._list_sessions) for s in State},
    **{(s, GetHistory): Step(None, Codex._get_history) for s in State},
    # list_skills: reads the skills folders (or the kept catalogue); never disturbs a Task.
    **{(s, ListSkills): Step(None, Codex._list_skills) for s in State},
    **{(s, ResumeSession): Step(None, Codex._resume_session) for s in (_U, _I)},
    **{(s, ResumeSession): Step("reconfigured", Codex._resume_session) for s in _RUNNING},
    **{(s, ForkSession): Step(None, Codex._fork_session) for s in (_U, _I)},
    **{(s, ForkSession): Step("reconfigured", Codex._fork_session) for s in _RUNNING},
    # compact: a compaction Task, replacing a running one (as Codex's Op::Compact does).
    (_U, Compact): Step(None, Codex._configure_and_compact),
    (_I, Compact): Step(None, Codex._start_compaction),
    **{(s, Compact): Step("replaced", Codex._start_compaction) for s in _RUNNING},
    # list_mcp_tools: answered at once, beside a Task; the first starts the Session's servers.
    (_U, ListMcpTools): Step(None, Codex._configure_and_list_mcp_tools),
    **{(s, ListMcpTools): Step(None, Codex._list_mcp_tools) for s in (_I, *_RUNNING)},
    # shutdown: abort, release, say goodbye.
    **{(s, Shutdown): Step("shutdown", Codex._shutdown) for s in State},
}
