"""A connection's Tasks for the Copilot-CLI-style chat protocol: one at a time, in order.

Each ``chat``, ``generate`` or ``customize`` request becomes a :class:`Job`: one
Task on the connection's session, run by a task of its own once the Tasks before
it have ended (``asyncio.Lock`` is FIFO). The request's handler only waits for the
job's result, so a handler cancelled by ``$/cancelRequest`` leaves the job to end
cleanly: a queued job is dropped, a running one interrupted, once no request waits
for it any more. A ``generate`` or ``customize`` sent again with the same params
while the first is queued or running (the app's retry after its own timeout)
joins that job instead of running twice: both requests get its chunks and its
result.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import weakref
from typing import Any

import orjson

from codexcore._logging import get_logger
from codexcore.adapters.host._host import Attachment, NotAccepted
from codexcore.adapters.jsonrpc._errors import CONTEXT_TOO_LARGE, SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import INTERNAL_ERROR, Id, RpcError
from codexcore.adapters.jsonrpc._server import RpcContext, current_call
from codexcore.protocol import (
    AgentMessage,
    AgentMessageDelta,
    ApplyPatchApprovalRequest,
    ConfigureSession,
    ErrorEvent,
    EventMsg,
    ExecApproval,
    ExecApprovalRequest,
    Interrupt,
    PatchApproval,
    RequestUserInput,
    Stop,
    StreamError,
    Submission,
    TaskComplete,
    TurnAborted,
    decode_event,
)
from codexcore.protocol._wire import Tagged

log = get_logger(__name__)

NO_APPROVER = (
    "nobody can approve this: the client (the Copilot-CLI-style chat) has no approval dialog, "
    "and the approval policy asks for it"
)
"""The reason a denied approval carries: the model is told it, as a user's reason."""

TERMINAL = (TaskComplete, TurnAborted, ErrorEvent)
_WANTED = frozenset(
    msg.TYPE
    for msg in (
        AgentMessage,
        TaskComplete,
        TurnAborted,
        ErrorEvent,
        ExecApprovalRequest,
        ApplyPatchApprovalRequest,
        RequestUserInput,
        StreamError,
    )
)
"""The events of a job's Task that matter to it, besides its deltas."""

_ABANDONED = object()
"""Put in a running job's inbox when no request waits for it any more."""


class Job:
    """One Task for one or more requests (``requests``: their ids, the first its owner).

    Subclasses say what the Task is (:meth:`ops`), how its text streams
    (:meth:`take_deltas`, :meth:`delta`, :meth:`message`, :meth:`end`) and what
    its result is (:meth:`answer`). ``key`` (method and params) lets a retry join.
    """

    kind = "job"
    ask_user = False  # whether the model may ask the user in this job's Task

    def __init__(self, request_id: Id, *, quiet: bool, key: bytes | None = None) -> None:
        self.requests: list[Id] = [request_id]
        self.quiet = quiet  # the client said it takes no stream/chunk
        self.key = key
        self.sub_id = ""
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.runner: asyncio.Task[None] | None = None
        self.abandoned = False

    # --- what a subclass says ----------------------------------------------------------

    def ops(self) -> list[Tagged]:
        """The ops that start the Task (submitted under :attr:`sub_id`)."""
        raise NotImplementedError

    def take_deltas(self, batch: list[bytes], start: int, into: list[bytes]) -> int:
        """Stream a run of this Task's encoded deltas at ``batch[start:]`` without parsing
        them, if it can; the index after what it took (``start``: nothing taken)."""
        return start

    def delta(self, text: str, into: list[bytes]) -> None:
        """An ``agent_message_delta`` of the Task: add its chunks to ``into``."""

    def message(self, text: str, into: list[bytes]) -> None:
        """An ``agent_message`` (whole) of the Task ended: add what it still brings."""

    def end(self, msg: EventMsg, into: list[bytes]) -> None:
        """The Task ended with ``msg``: add the last (``done``) chunk."""

    def joined(self, request_id: Id, into: list[bytes]) -> None:
        """``request_id`` joins: add what it missed of the stream."""

    def retried(self) -> None:
        """The model stream failed and is retried: its text streams again from its start."""

    def left(self, request_id: Id) -> None:
        """``request_id`` was cancelled: nothing more is streamed to it."""

    def asked(self, request: RequestUserInput) -> None:
        """The model asked the user (``ask_user`` jobs): remember it for :meth:`answer`."""

    def answer(self, msg: EventMsg) -> dict[str, Any]:
        """The result, from the Task's terminal event; raises its :class:`RpcError`."""
        raise NotImplementedError


class Jobs:
    """A connection's jobs: one Task at a time, in arrival order."""

    def __init__(self, ctx: RpcContext) -> None:
        # Weak: the connection's table of jobs (_JOBS) must not keep its context alive.
        self._ctx = weakref.ref(ctx)
        self.turn = asyncio.Lock()
        self.current: Job | None = None
        self.attachment: Attachment | None = None
        self.ask_user = False  # what the session was last configured with
        self.exiting = False
        self.active = 0  # jobs not ended, queued or running
        self.idle = asyncio.Event()
        self.idle.set()
        self.waiting: dict[bytes, Job] = {}  # joinable jobs by key, until they end
        self._ids = itertools.count(1)

    @property
    def ctx(self) -> RpcContext:
        ctx = self._ctx()
        if ctx is None:  # only a handler or a listener asks, and their connection holds it
            raise RuntimeError("the connection of these jobs is gone")
        return ctx

    @property
    def streaming(self) -> bool:
        """Whether the client takes ``stream/chunk`` (its ``capabilities.streaming``)."""
        return self.ctx.client_capabilities.get("streaming") is not False

    async def run(self, request_id: Id, job: Job) -> dict[str, Any]:
        """Run ``job`` (or join the same one already waiting) for ``request_id``; its result."""
        same = self.waiting.get(job.key) if job.key is not None else None
        lines: list[bytes] = []
        if same is not None:
            log.info("request joins the same one", kind=job.kind, request=str(request_id))
            same.requests.append(request_id)
            same.joined(request_id, lines)
            job = same
        else:
            self._start(job)
        try:
            await self._send(job, lines)  # what a joining request missed of the stream
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            self._leave(job, request_id)
            raise

    def _start(self, job: Job) -> None:
        self.active += 1
        self.idle.clear()
        if job.key is not None:
            self.waiting[job.key] = job
        job.runner = asyncio.create_task(self._run(job))

    def _leave(self, job: Job, request_id: Id) -> None:
        """``request_id`` no longer waits (cancelled): the job ends when nobody does."""
        if request_id in job.requests:
            job.requests.remove(request_id)
            job.left(request_id)
        if job.requests or job.future.done():
            return
        job.abandoned = True
        if job.key is not None and self.waiting.get(job.key) is job:
            del self.waiting[job.key]
        ctx = self._ctx()
        if ctx is None or ctx.over.is_set():  # the connection is ending: nothing to wait for
            if job.runner is not None:
                job.runner.cancel()
        elif self.current is job:
            job.inbox.put_nowait(_ABANDONED)

    async def _run(self, job: Job) -> None:
        try:
            async with self.turn:
                if job.abandoned:
                    return
                self._refuse_if_exiting()
                attachment = await self._session()
                self._refuse_if_exiting()  # exit may have come while the session was made
                job.sub_id = f"{job.kind}-{next(self._ids)}"
                self.current = job
                try:
                    result = await self._task(job, attachment)
                finally:
                    if self.current is job:
                        self.current = None
            if not job.future.done():
                job.future.set_result(result)
        except RpcError as error:
            if not job.future.done():
                job.future.set_exception(error)
        except Exception:
            log.exception("request failed", kind=job.kind)
            if not job.future.done():
                job.future.set_exception(RpcError(INTERNAL_ERROR, f"Internal error in {job.kind}"))
        finally:
            if job.key is not None and self.waiting.get(job.key) is job:
                del self.waiting[job.key]
            if not job.future.done():
                job.future.cancel()
            self.active -= 1
            if not self.active:
                self.idle.set()

    def _refuse_if_exiting(self) -> None:
        if self.exiting:
            raise RpcError(
                SERVER_ERROR, "the server is exiting: this request was not run", {"code": "exiting"}
            )

    async def _session(self) -> Attachment:
        if self.attachment is None:
            self.attachment = await self.ctx.session()
            self.ctx.on_raw_events(self.listen)
        return self.attachment

    async def _task(self, job: Job, attachment: Attachment) -> dict[str, Any]:
        if job.ask_user != self.ask_user:  # the tool is offered for this kind of Task only
            await _submit(
                attachment, f"{job.sub_id}-configure", ConfigureSession(ask_user=job.ask_user)
            )
            self.ask_user = job.ask_user
        for n, op in enumerate(job.ops()):
            await _submit(attachment, job.sub_id if n == 0 else f"{job.sub_id}-{n}", op)
        interrupted = False
        while True:
            msg = await job.inbox.get()
            if msg is _ABANDONED:
                if not interrupted:
                    interrupted = True
                    await _submit(attachment, f"{job.sub_id}-cancel", Interrupt())
            elif isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
                await _deny(attachment, job, msg)
            elif isinstance(msg, RequestUserInput):
                # The question is the job's result: the app asks its user and sends the
                # answer with its next request. The Task ends after this Turn (a stop
                # withdraws the question), recorded whole.
                job.asked(msg)
                await _submit(attachment, f"{job.sub_id}-asked", Stop())
            else:
                return job.answer(msg)

    async def listen(self, batch: list[bytes]) -> None:
        """A batch of the session's events (encoded): the running job's are streamed
        (its deltas as one write) and answered."""
        job = self.current
        lines: list[bytes] = []
        at = 0
        while job is not None and at < len(batch):
            at = job.take_deltas(batch, at, lines)
            if at == len(batch):
                break
            raw = orjson.loads(batch[at])
            at += 1
            if raw["id"] != job.sub_id:
                continue
            kind = raw["msg"]["type"]
            if kind == AgentMessageDelta.TYPE:
                job.delta(raw["msg"]["delta"], lines)
            elif kind in _WANTED:
                await self._send(job, lines)  # in order, before what it brings
                lines = []
                await self._event(job, decode_event(raw).msg)
                job = self.current
        if job is not None:
            await self._send(job, lines)

    async def _send(self, job: Job, lines: list[bytes]) -> None:
        if lines and not job.quiet and not job.abandoned:
            await self.ctx.send_lines(lines)

    async def _event(self, job: Job, msg: EventMsg) -> None:
        lines: list[bytes] = []
        if isinstance(msg, AgentMessage):
            job.message(msg.message, lines)
        elif isinstance(msg, StreamError):
            job.retried()
        elif isinstance(msg, TERMINAL):
            self.current = None  # nothing more of this Task is streamed
            job.end(msg, lines)  # before the answer (unless nobody waits for it)
            job.inbox.put_nowait(msg)
        else:  # an approval request, a question
            job.inbox.put_nowait(msg)
        await self._send(job, lines)

    async def exit(self) -> None:
        """Answer every job (queued: refused; running: interrupted), then end the session."""
        self.exiting = True
        job, attachment = self.current, self.attachment
        if job is not None and attachment is not None:
            await _submit(attachment, f"{job.sub_id}-exit", Interrupt())
        await self.idle.wait()
        attachment = self.attachment  # a job may have made the session meanwhile
        if attachment is None:
            log.info("exit: no session to shut down", dialect="copilot-chat")
            self.ctx.over.set()
        else:
            log.info("exit: shutting the session down", session=attachment.session_id)
            self.ctx.host.end_session(attachment.session_id)


async def _deny(
    attachment: Attachment, job: Job, request: ExecApprovalRequest | ApplyPatchApprovalRequest
) -> None:
    log.info("approval denied: no one to ask", call=request.call_id, dialect="copilot-chat")
    op = (
        ExecApproval(request.call_id, "denied", NO_APPROVER)
        if isinstance(request, ExecApprovalRequest)
        else PatchApproval(request.call_id, "denied", NO_APPROVER)
    )
    await _submit(attachment, f"{job.sub_id}-deny-{request.call_id}", op)


async def _submit(attachment: Attachment, sub_id: str, op: Any) -> None:
    try:
        await attachment.submit(Submission(sub_id, op))
    except NotAccepted as exc:
        error = RpcError(SERVER_ERROR, f"the request failed: {exc.message}", {"code": exc.code})
        raise error from None


def job_key(method: str) -> bytes:
    """What makes two requests the same (a retry): the method and its params, keys sorted."""
    params = current_call().params
    try:
        text = orjson.dumps(params, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits
        text = json.dumps(params, sort_keys=True).encode()
    return method.encode() + b"\0" + text


def task_error(msg: EventMsg, failed: int, method: str) -> RpcError:
    """The error a request answers when its Task ended with ``msg`` (not ``task_complete``):
    ``failed`` (the method's own failure code), -32003 when the input exceeds the
    model's context window, -32603 for a fault inside the engine."""
    if isinstance(msg, TurnAborted):
        return RpcError(
            failed,
            f"the {method} was aborted ({msg.reason})",
            {"code": "aborted", "reason": msg.reason},
        )
    assert isinstance(msg, ErrorEvent)
    if msg.code == "internal":
        log.error("a Task failed inside the engine", method=method, error=msg.message)
        return RpcError(INTERNAL_ERROR, f"Internal error in {method}", {"code": msg.code})
    if "context_window_exceeded" in (msg.code, msg.codex_error_info):
        message = f"context too large: the input exceeds the model's context window ({msg.message})"
        return RpcError(CONTEXT_TOO_LARGE, message, {"code": msg.code})
    return RpcError(failed, f"the {method} failed: {msg.message}", {"code": msg.code})


_JOBS: weakref.WeakKeyDictionary[RpcContext, Jobs] = weakref.WeakKeyDictionary()


def jobs_of(ctx: RpcContext) -> Jobs:
    """The connection's :class:`Jobs` (one per connection, gone with it)."""
    jobs = _JOBS.get(ctx)
    if jobs is None:
        jobs = _JOBS[ctx] = Jobs(ctx)
    return jobs
