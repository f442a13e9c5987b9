"""A Task's life in the engine: started, fed, stopped, answered, ended.

:func:`start_task` sends ``task_started`` and makes the Task's two asyncio
tasks. The runner (:func:`run_task`) runs the Task under the configuration it
started with, so the dispatcher keeps reading Submissions meanwhile. The
supervisor (:func:`supervise`) waits for the runner's outcome and sends the
one terminal event every ``task_started`` gets under the same id:
``task_complete``, ``turn_aborted`` or ``error``. While the Task runs,
``inject_input`` feeds its next model request, ``stop`` and ``checkpoint`` end
it after its current Turn, and approvals (and the user's answers to the
model's questions) answer the requests it waits on.
Aborting it is the dispatcher's (``Codex._abort``): cancel the runner, wait
for the supervisor.

Loaded with the first Submission that needs it, and the Task machinery
(:mod:`._task`) with it: a server's first answer needs neither (issue 20).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._logging import get_logger
from ..protocol import (
    ErrorEvent,
    EventMsg,
    ExecApproval,
    InjectInput,
    PatchApproval,
    Stop,
    Submission,
    TaskComplete,
    TaskStarted,
    TurnAborted,
    UserInput,
    UserInputAnswer,
    UserTurn,
    WarningEvent,
)
from ..tools._sandbox_status import SandboxStatus
from ._approvals import Answer, TaskAborted
from ._ask_user import AnswerError, check_answer
from ._compact import ContextWindowExceeded, auto_compact_limit
from ._config import SessionConfig
from ._history import Item
from ._requests import InputError, output_schema_problem, user_message
from ._session import RunningTask, Session, StopRequest
from ._session_lifecycle import UNCONFINED
from ._skills import mention_parts, session_context
from ._submissions import SubmissionRejected
from ._task import Task, TurnSettings

if TYPE_CHECKING:
    from ..model import ModelClient
    from ._codex import Codex
    from ._task import Emit
    from ._tools import ToolRouter

log = get_logger(__name__)


async def task_input(codex: Codex, op: UserInput | InjectInput | UserTurn, cwd: str) -> list[Item]:
    """The model input an Op brings, with the skills its text mentions (``$name``,
    looked up from ``cwd``)."""
    schema = None if isinstance(op, InjectInput) else op.output_schema
    if schema is not None and (problem := output_schema_problem(schema)):
        raise SubmissionRejected(problem, "bad_output_schema")
    skills = await mention_parts(codex._skills, op.items, cwd, str(codex._home()))
    try:
        message = user_message(op.items)
        message["content"].extend(skills)
    except InputError as exc:
        raise SubmissionRejected(str(exc), "bad_input") from None
    if isinstance(op, UserInput) and op.last_response_id is not None:
        _check_fork_point(codex, op.last_response_id)
    return [message]


def _check_fork_point(codex: Codex, response_id: str) -> None:
    """In client history mode a Task can fork only from one of the Session's responses."""
    session = codex._session
    known = session is not None and session.history.knows(response_id)
    if codex._session_config().history_mode == "client" and not known:
        raise SubmissionRejected(
            f"last_response_id {response_id!r} is not a response of this "
            "session (client history mode can only fork from its own responses)",
            "unknown_response_id",
        )


async def start_compaction(codex: Codex, sub: Submission, _: object) -> None:
    """``compact``: a Task that compacts the History and makes no Turn."""
    await start_task(codex, sub, None)


async def start_task(codex: Codex, sub: Submission, first_input: list[Item] | None) -> None:
    """Start a Task on ``first_input``; None starts a compaction Task."""
    session = codex._require_session()
    if isinstance(sub.op, UserInput) and sub.op.last_response_id is not None:
        server = session.config.history_mode == "server"
        session.history.fork(sub.op.last_response_id, allow_external=server)
        session.rebranched()
    window = codex.config.models.details(session.config.model).context_window
    await codex._emit(sub.id, TaskStarted(window))
    # What the Task runs under is fixed now, though its objects are built in the runner.
    under = (session.config, session.sandbox or UNCONFINED, session.client())
    # Let the event queue's reader (a host's pump, woken by the first put) send
    # task_started before the Task's two asyncio tasks are made: the client need
    # not wait for that work. A cancel (request_close) landing meanwhile is
    # raised once the Task exists, so the abort that follows still gives
    # task_started its one terminal event.
    cancelled = await _yield_uncancelled()
    stop = StopRequest()
    schema = sub.op.output_schema if isinstance(sub.op, UserInput | UserTurn) else None
    runner = asyncio.create_task(
        run_task(codex, session, sub.id, first_input, stop, *under, output_schema=schema),
        name=f"codexcore-task-{sub.id}",
    )
    supervisor = asyncio.create_task(supervise(codex, sub.id, runner))
    session.running = RunningTask(sub.id, runner, supervisor, stop=stop)
    if cancelled:
        raise asyncio.CancelledError


async def _yield_uncancelled() -> bool:
    """Let every task that is ready run once; True if this task was cancelled meanwhile
    (the caller finishes what it must, then raises CancelledError itself)."""
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError:
        return True
    return False


async def run_task(
    codex: Codex,
    session: Session,
    sub_id: str,
    first_input: list[Item] | None,
    stop: StopRequest,
    config: SessionConfig,
    sandbox: SandboxStatus,
    client: ModelClient,
    *,
    output_schema: dict[str, Any] | None = None,
) -> TaskComplete:
    """The runner: a Task under the configuration it started with (its final answer
    under ``output_schema``, when the op that started it gave one)."""
    # Everything from here to the first request runs without a pause: let the
    # events already emitted, task_started first, reach the UI before it.
    await asyncio.sleep(0)
    emit = codex._emitter(sub_id)
    tools_for = _tool_routers(codex, session, sandbox, stop, emit)
    tools = tools_for(config)
    settings = TurnSettings(
        lambda: session.config, tools_for, session.context, codex.config.models, session.totals
    )
    if first_input is not None:  # a Task with input (not a compaction): the catalogue once
        home = str(codex._home())
        skills = await session_context(codex._skills, session.history, config.cwd, home)
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
            codex.config.models.details(config.model).context_window,
            codex.config.model_auto_compact_token_limit,
        ),
        output_schema=output_schema,
    )
    return await (task.compact() if first_input is None else task.run(first_input))


def _tool_routers(
    codex: Codex, session: Session, sandbox: SandboxStatus, stop: StopRequest, emit: Emit
) -> Callable[[SessionConfig], ToolRouter]:
    """What makes the Task's tool router for a configuration (new per-turn settings
    make a new one); a sandbox probed since the Task started is used from then on."""
    from ._tools import ToolRouter  # the tool stack loads with the first Task

    # The function tools as the Task starts: a change applies from the next Task on.
    functions = codex._function_tools.snapshot() if codex._function_tools else None

    def tools_for(config: SessionConfig) -> ToolRouter:
        confine = session.sandbox or sandbox
        return ToolRouter(
            config,
            codex.config,
            session.approvals,
            confine,
            emit,
            stop.pending,
            mcp=session.mcp,
            attach=session.add_context,
            functions=functions,
            terminals=session.terminals,
            standby=session.standby,
        )

    return tools_for


async def supervise(codex: Codex, sub_id: str, runner: asyncio.Task[TaskComplete]) -> None:
    """Wait for the Task's outcome and send its one terminal event."""
    await asyncio.wait({runner})
    session = codex._require_session()
    mine = session.running if session.running and session.running.sub_id == sub_id else None
    if mine is not None:
        session.approvals.drop_pending()
        # User shell records the Task took no request for: the next one sends them.
        if leftover := session.take_context():
            session.history.record(leftover, None)
    await codex._emit(sub_id, _terminal(runner, mine))
    # The Task counts as running until its terminal event is queued, so the
    # next Task's task_started always comes after it.
    if mine is not None and session.running is mine:
        session.running = None


def _terminal(runner: asyncio.Task[TaskComplete], mine: RunningTask | None) -> EventMsg:
    if runner.cancelled():
        return TurnAborted(mine.abort_reason if mine else "interrupted")
    exc = runner.exception()
    if exc is None:
        return runner.result()
    if isinstance(exc, TaskAborted):
        return TurnAborted("interrupted")
    return _error_for(exc)


def _error_for(exc: BaseException) -> ErrorEvent:
    from ..model import ModelError

    if isinstance(exc, ModelError):
        return ErrorEvent(exc.message, exc.code)
    if isinstance(exc, ContextWindowExceeded):
        reason = "context_window_exceeded"
        return ErrorEvent(str(exc), reason, codex_error_info=reason)
    log.exception("task failed", exc_info=exc)
    return ErrorEvent(f"internal error: {exc}", "internal")


def _running(codex: Codex) -> tuple[Session, RunningTask]:
    session = codex._require_session()
    running = session.running
    assert running is not None, "PLAN runs this action only while a Task runs"
    return session, running


async def inject_when_idle(codex: Codex, sub: Submission, task_input: list[Item]) -> None:
    """No Task runs: the input starts one, or (``start: false``) waits for the next
    Task's first request, before that Task's own input."""
    if _starts(sub):
        await start_task(codex, sub, task_input)
        return
    session = codex._require_session()
    for item in task_input:
        session.inject(item)


def _starts(sub: Submission) -> bool:
    return not isinstance(sub.op, InjectInput) or sub.op.start


async def inject(codex: Codex, sub: Submission, task_input: list[Item]) -> None:
    """Input for the running Task's next request; it lifts a pending checkpoint.

    A Task that has made its last request already (its terminal event is on
    its way) gets none: the input starts the next Task, as when idle (or waits
    for it, with ``start: false``).
    """
    session, running = _running(codex)
    if running.runner.done():
        await _start_after(codex, running, sub, task_input)
        return
    running.stop.kind = None
    for item in task_input:
        session.inject(item)


async def inject_when_stopping(codex: Codex, sub: Submission, task_input: list[Item]) -> None:
    """A stop stands: the input waits for the next Task's first request."""
    session, running = _running(codex)
    if running.runner.done():
        await _start_after(codex, running, sub, task_input)
        return
    for item in task_input:
        session.inject(item)
    await codex._emit(
        sub.id,
        WarningEvent(
            "the running task is stopping and makes no further model request: "
            "this input goes with the next task's first request"
        ),
    )


async def _start_after(
    codex: Codex, running: RunningTask, sub: Submission, task_input: list[Item]
) -> None:
    # Only the terminal event is left to send, so waiting cannot block on the UI's
    # answers; task_started must follow it.
    await asyncio.wait({running.supervisor})
    await inject_when_idle(codex, sub, task_input)


async def request_stop(codex: Codex, sub: Submission, _: object) -> None:
    """``stop`` or ``checkpoint``: the Task ends after its current Turn. Waiting
    approvals are withdrawn, so the Turn can end without anyone answering."""
    session, running = _running(codex)
    running.stop.kind = "stop" if isinstance(sub.op, Stop) else "checkpoint"
    session.approvals.withdraw_pending()


async def resolve_approval(codex: Codex, sub: Submission, _: object) -> None:
    op = sub.op
    assert isinstance(op, ExecApproval | PatchApproval)
    session = codex._session
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


async def answer_question(codex: Codex, sub: Submission, _: object) -> None:
    """``user_input_answer``: the reply to the model's waiting ``request_user_input``."""
    op = sub.op
    assert isinstance(op, UserInputAnswer)
    session = codex._session
    request = session.approvals.question(op.id) if session is not None else None
    if session is None or request is None:
        raise SubmissionRejected(
            f"no request_user_input with call_id {op.id!r} is waiting", "unknown_call_id"
        )
    try:
        check_answer(request, op)
    except AnswerError as exc:
        raise SubmissionRejected(f"user_input_answer: {exc}", "bad_answer") from None
    session.approvals.reply(op.id, None if op.cancelled else op.response)
    if session.rollout is not None:
        # That it was answered; the answer itself (perhaps a secret) is the call's output.
        session.rollout.record(
            {"type": "user_input_answer", "call_id": op.id} | {"cancelled": op.cancelled}
        )
