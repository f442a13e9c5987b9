"""The receiver of seed 003's control messages, on the session host (``docs/control.md``).

One implementation behind both dialects: a native connection's
``control.*.request`` line and the JSON-RPC methods ``control.stdin`` /
``control.interrupt`` all call :meth:`ControlReceiver.handle` with the
request and the connection's :class:`~codexcore.adapters.transports.Credential`, and get the
ack envelope back. Nothing here is engine logic: the work is done by the
engine's own ops, submitted to the target session's engine as the host's own
submissions (no attachment, so no control of the session is taken from its
client): ``inject_input`` (it feeds a running Task, or starts one when idle),
``interrupt`` then ``user_input`` for ``interrupt: true``, and ``interrupt``.

The steps of a request, each ending in an ack when it fails: the envelope's
rules (``rejected``); the sender, bound to the connection's credential, and
the team (``rejected``, deny by default); the replay window on ``sent_at``
(``rejected``); the dedupe store's atomic claim (a duplicate: ``ok``,
``duplicate: true``, the first ack's detail); the target (``not_live``,
``not_found``); the content (inline, or a ``content_ref`` read now:
``rejected``); the session's bound on pending control input (``busy``); then
the submission, confirmed by the engine's ``submission_ack`` (stdin) or the
interrupted Task's terminal event (interrupt) within the ack deadline
(``ok``, else ``timeout``).
"""

from __future__ import annotations

import asyncio
import hmac
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codexcore._logging import get_logger
from codexcore.engine import EngineClosed, State, default_home, recorded_agent_id
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    Event,
    InjectInput,
    Interrupt,
    Submission,
    SubmissionAck,
    TextInput,
    UserInput,
)

from ._names import candidates, is_agent
from ._store import PENDING, Audit, DedupeStore, Key, read_content_ref
from ._wire import (
    ControlConfig,
    ControlSender,
    Credential,
    Invalid,
    Request,
    Result,
    StdinRequest,
    ack,
    identity,
    now_utc,
    parse_request,
    partial_envelope,
)

if TYPE_CHECKING:
    from codexcore.adapters.host._host import HostedSession, SessionHost

log = get_logger("codexcore.control")

_RUNNING = (State.RUNNING, State.STOPPING, State.PAUSING)
AUDIT_FILE = "control-audit.jsonl"
"""The audit file's name in the engine's home, where it is written by default."""

_ERRORS: dict[str, str] = {"timeout": "ack_timeout", "not_live": "session_ended"}
"""The ack's ``error`` for the results a submitted request can end in (``ok``: none)."""
_CARRIED_OUT = ("ok", "timeout")
"""Results after which the input may have reached the engine: their keys are kept."""


class Outcome(Exception):
    """How a request ends before its input reaches the engine: ``result``, ``detail``
    and the ack's ``error`` (a short code naming the failure)."""

    def __init__(self, result: Result, detail: str, error: str) -> None:
        super().__init__(detail)
        self.result, self.detail, self.error = result, detail, error


class Watch:
    """The events of one hosted session that control requests wait for."""

    def __init__(self, hosted: HostedSession) -> None:
        self.acks: dict[str, asyncio.Future[None]] = {}
        self.ends: dict[str | None, list[asyncio.Future[None]]] = {}
        self.pending = 0  # submissions made and not yet acknowledged by the engine
        self.stop = hosted.observe(self.see)

    def see(self, event: Event) -> None:
        msg = event.msg
        if isinstance(msg, SubmissionAck):
            _resolve(self.acks.pop(msg.id, None))
        elif msg.TYPE in TERMINAL_EVENT_TYPES:
            for key in (event.id, None):
                for future in self.ends.pop(key, ()):
                    _resolve(future)

    def ack_of(self, sub_id: str) -> asyncio.Future[None]:
        future = self.acks[sub_id] = asyncio.get_running_loop().create_future()
        self.pending += 1
        future.add_done_callback(self._acked)
        return future

    def _acked(self, _: asyncio.Future[None]) -> None:
        self.pending -= 1

    def end_of(self, task_id: str | None) -> asyncio.Future[None]:
        """The terminal event of ``task_id`` (None: of whichever Task ends next)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.ends.setdefault(task_id, []).append(future)
        return future

    def close(self) -> None:
        self.stop()
        for future in self.acks.values():
            future.cancel()
        for futures in self.ends.values():
            for future in futures:
                future.cancel()


def _resolve(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


class ControlReceiver:
    """Answers control requests for the sessions of a
    :class:`~codexcore.adapters.host.SessionHost`."""

    def __init__(self, host: SessionHost, config: ControlConfig) -> None:
        self.host = host
        self.config = config
        self.audit = Audit(self._audit_path(), verbose=config.verbose_messages, side="receiver")
        self._store: DedupeStore | None = None
        self._watches: dict[HostedSession, Watch] = {}
        self._inflight: dict[Key, asyncio.Future[dict[str, Any]]] = {}

    @property
    def store(self) -> DedupeStore:
        """The dedupe store, opened on first use (so a host never asked opens no file)."""
        if self._store is None:
            self._store = DedupeStore(self._store_path(), self.config.dedupe_ttl)
        return self._store

    def _store_path(self) -> str:
        if self.config.store_path is not None:
            return self.config.store_path
        if self.host.engine_config.ephemeral:
            return ":memory:"
        home = self.host.engine_config.home
        return str((Path(home) if home else default_home()) / "control" / "dedupe.sqlite3")

    def _audit_path(self) -> str | None:
        """``audit_file``; by default ``control-audit.jsonl`` in the engine's home (none for
        an ephemeral engine, which writes nothing); ``""``: no file."""
        path = self.config.audit_file
        if path is not None or self.host.engine_config.ephemeral:
            return path or None
        home = self.host.engine_config.home
        return str((Path(home) if home else default_home()) / AUDIT_FILE)

    def close(self) -> None:
        for watch in self._watches.values():
            watch.close()
        self._watches.clear()
        if self._store is not None:
            self._store.close()
        self.audit.close()

    # --- the request --------------------------------------------------------------------

    async def handle(self, message: Any, credential: Credential) -> dict[str, Any]:
        """The ack envelope for one request (never raises for a bad request)."""
        try:
            request = parse_request(message, self.config)
        except Invalid as exc:
            fields = partial_envelope(message)
            answer = ack(fields, "rejected", exc.detail, error=exc.code)
            sender = partial_sender(message)
            self.audit.record("rejected", {**fields, "sender": sender, "detail": exc.detail})
            self.audit.record("ack", self._audit_fields(answer, sender))
            return answer
        envelope = request.envelope
        text = request.content if isinstance(request, StdinRequest) else None
        self.audit.record("request", self._request_fields(request, credential), text=text)
        try:
            answer = await self._decide(request, credential)
        except Exception:
            log.exception("control request failed", request_id=envelope.request_id)
            answer = ack(
                identity(envelope), "internal_error", "the receiver failed", error="internal_error"
            )
        self.audit.record("ack", self._audit_fields(answer, envelope.sender))
        return answer

    def _request_fields(self, request: Request, credential: Credential) -> dict[str, Any]:
        envelope = request.envelope
        fields = {**identity(envelope), "sender": envelope.sender}
        retry = envelope.meta.get("retry_count")
        return {
            **fields,
            "thread_id": envelope.thread_id,
            "transport": credential.transport,
            "retry_count": retry if isinstance(retry, int) else None,
            "interrupt": getattr(request, "interrupt", None),
        }

    @staticmethod
    def _audit_fields(answer: dict[str, Any], sender: Any) -> dict[str, Any]:
        keep = ("type", "request_id", "team", "session_id", "agent_id", "result", "duplicate")
        fields = {name: answer.get(name) for name in keep}
        extra = {"detail": answer.get("detail"), "error": answer.get("error")}
        return {**fields, "sender": sender, **extra}

    async def _decide(self, request: Request, credential: Credential) -> dict[str, Any]:
        envelope = request.envelope
        fields = identity(envelope)
        problem = self._authorise(request, credential) or self._replay_problem(request)
        if problem is not None:
            error, why = problem
            self.audit.record("rejected", {**fields, "sender": envelope.sender, "detail": why})
            return ack(fields, "rejected", why, error=error)
        key: Key = (envelope.team, envelope.session_id, envelope.agent_id, envelope.request_id)
        first = self._inflight.get(key)
        if first is not None:  # the same request, still being answered here
            return self._duplicate(fields, envelope.sender, await asyncio.shield(first))
        seen = self.store.claim(key)
        if seen is not None:
            result, detail = seen
            if result == PENDING:
                detail = "accepted before this receiver restarted; not run again"
            return self._duplicate(fields, envelope.sender, {"detail": detail, "result": result})
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            answer = await self._carry_out(request, key)
        finally:
            self._inflight.pop(key, None)
        if not future.done():
            future.set_result(answer)
        return answer

    def _duplicate(
        self, fields: dict[str, Any], sender: str, first: dict[str, Any]
    ) -> dict[str, Any]:
        if first.get("result") not in (*_CARRIED_OUT, PENDING):  # never carried out
            return ack(fields, first["result"], first.get("detail"), error=first.get("error"))
        self.audit.record("duplicate", {**fields, "sender": sender, "result": "ok"})
        return ack(fields, "ok", first.get("detail"), duplicate=True)

    async def _carry_out(self, request: Request, key: Key) -> dict[str, Any]:
        fields = identity(request.envelope)
        try:
            hosted = await self._target(request)
            if isinstance(request, StdinRequest):
                result, detail = await self._stdin(hosted, request, key)
            else:
                result, detail = await self._interrupt(hosted, key)
        except Outcome as exc:
            self.store.release(key)
            if exc.result == "rejected":
                self.audit.record("rejected", {**fields, "detail": exc.detail})
            return ack(fields, exc.result, exc.detail, error=exc.error)
        except BaseException:
            self.store.release(key)
            raise
        self.store.finish(key, result, detail)
        if result == "timeout":
            self.audit.record("timeout", {**fields, "sender": request.envelope.sender})
        return ack(fields, result, detail, error=_ERRORS.get(result))

    # --- the rules ----------------------------------------------------------------------------

    def _authorise(self, request: Request, credential: Credential) -> tuple[str, str] | None:
        """Why the sender may not send this, as (error, detail) (None: it may). Deny by
        default."""
        config = self.config
        envelope = request.envelope
        if config.team is None:
            why = "unauthorised: this host accepts no control messages (no [control] team)"
        elif (sender := self._sender(envelope.sender, credential)) is None:
            why = f"unauthorised: sender {envelope.sender!r} is unknown on this connection"
        elif envelope.team != config.team:
            why = f"unauthorised: team {envelope.team!r} is not this host's team"
        elif sender.team != envelope.team:
            why = f"unauthorised: sender {sender.name!r} is not in team {envelope.team!r}"
        else:
            return None
        return "unauthorized", why

    def _sender(self, name: str, credential: Credential) -> ControlSender | None:
        """The configured sender ``name`` if the connection's credential is its own."""
        for sender in self.config.senders:
            if sender.name != name:
                continue
            if credential.transport in ("tcp", "websocket"):
                given, wanted = credential.token or "", sender.token
                if wanted and hmac.compare_digest(given.encode(), wanted.encode()):
                    return sender
            elif sender.uid is not None and credential.uid == sender.uid:
                return sender
        return None

    def _replay_problem(self, request: Request) -> tuple[str, str] | None:
        age = (now_utc() - request.envelope.sent_at).total_seconds()
        if age > self.config.max_age:
            limit = self.config.max_age
            return (
                "stale_request",
                f"stale: sent_at is {age:.0f} s old, over the {limit:g} s allowed",
            )
        if -age > self.config.max_skew:
            return "clock_skew", (
                f"sent_at is {-age:.0f} s in the future, beyond the allowed clock skew of "
                f"{self.config.max_skew:g} s"
            )
        return None

    async def _target(self, request: Request) -> HostedSession:
        """The live session the request names: by its ids or by the names it was given
        (:mod:`._names`)."""
        envelope = request.envelope
        found = candidates(self.host, envelope.session_id)
        live = [hosted for hosted in found if not hosted.ended and not self.host.closing]
        if not live:
            # Off the loop: finding a recording globs the home's sessions.
            recorded = await asyncio.to_thread(self._recorded, envelope.session_id)
            if found or recorded is not None:
                agent = recorded or envelope.agent_id
                if agent == envelope.agent_id or any(is_agent(h, envelope.agent_id) for h in found):
                    raise Outcome(
                        "not_live",
                        f"session {envelope.session_id} is not live here",
                        "session_not_live",
                    )
            raise Outcome(
                "not_found",
                f"no session {envelope.session_id} with that agent",
                "session_not_found",
            )
        for hosted in live:
            if is_agent(hosted, envelope.agent_id):
                return hosted
        raise Outcome(
            "not_found",
            f"session {envelope.session_id}'s agent is not {envelope.agent_id!r}",
            "agent_not_found",
        )

    def _recorded(self, session_id: str) -> str | None:
        """The agent of a session recorded in this host's home, if there is one."""
        engine = self.host.engine_config
        if engine.ephemeral:
            return None
        home = Path(engine.home) if engine.home else default_home()
        return recorded_agent_id(home, session_id)

    async def _content(self, request: StdinRequest) -> str:
        if request.content is not None:
            text = request.content
        else:
            assert request.content_ref is not None
            config = self.config
            try:
                text = await asyncio.to_thread(
                    read_content_ref,
                    request.content_ref,
                    config.allowed_content_dirs,
                    request.content_encoding,
                    config.max_ref_bytes,
                )
            except Invalid as exc:
                raise Outcome("rejected", exc.detail, "content_ref_invalid") from None
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.config.soft_limit_bytes:
            log.warning(
                "control input over the soft limit",
                request_id=request.envelope.request_id,
                bytes=size,
                soft_limit=self.config.soft_limit_bytes,
            )
        return text

    # --- the work -----------------------------------------------------------------------------

    def _watch(self, hosted: HostedSession) -> Watch:
        watch = self._watches.get(hosted)
        if watch is None:
            watch = self._watches[hosted] = Watch(hosted)
            if hosted.pump is not None:
                hosted.pump.add_done_callback(lambda _: self._unwatch(hosted))
        return watch

    def _unwatch(self, hosted: HostedSession) -> None:
        watch = self._watches.pop(hosted, None)
        if watch is not None:
            watch.close()

    async def _stdin(
        self, hosted: HostedSession, request: StdinRequest, key: Key
    ) -> tuple[Result, str]:
        text = await self._content(request)
        watch = self._claim_room(hosted)
        running = hosted.running_task is not None or hosted.codex.state in _RUNNING
        items = (TextInput(text),)
        if request.interrupt and running:
            subs = [_submission(Interrupt()), _submission(UserInput(items))]
            detail = "accepted: interrupted the running task and started one"
        else:
            subs = [_submission(InjectInput(items))]
            detail = "accepted: injected" if running else "accepted: started a task"
        confirmed = watch.ack_of(subs[-1].id)
        await self._enqueue(hosted, subs, confirmed)
        return await self._confirm(confirmed, detail, key)

    async def _interrupt(self, hosted: HostedSession, key: Key) -> tuple[Result, str]:
        watch = self._claim_room(hosted)
        task_id = hosted.running_task
        running = task_id is not None or hosted.codex.state in _RUNNING
        sub = _submission(Interrupt())
        acked = watch.ack_of(sub.id)
        ended = watch.end_of(task_id) if running else acked
        await self._enqueue(hosted, [sub], acked)
        return await self._confirm(ended, "interrupted" if running else "idle", key)

    def _claim_room(self, hosted: HostedSession) -> Watch:
        watch = self._watch(hosted)
        if watch.pending >= self.config.max_pending:
            raise Outcome(
                "busy",
                f"the session has {watch.pending} control inputs pending "
                f"(its limit is {self.config.max_pending})",
                "too_many_pending",
            )
        return watch

    async def _enqueue(
        self, hosted: HostedSession, subs: list[Submission], confirmed: asyncio.Future[None]
    ) -> None:
        try:
            async with asyncio.timeout(self.config.ack_timeout):
                for sub in subs:
                    await hosted.codex.enqueue(sub)
        except TimeoutError:
            confirmed.cancel()
            raise Outcome("busy", "the session's submission queue is full", "queue_full") from None
        except EngineClosed:
            confirmed.cancel()
            raise Outcome("not_live", "the session is shutting down", "session_not_live") from None

    async def _confirm(
        self, done: asyncio.Future[None], detail: str, key: Key
    ) -> tuple[Result, str]:
        try:
            async with asyncio.timeout(self.config.ack_timeout):
                await asyncio.wait({done})  # the future is left alone: a late ack still counts
        except TimeoutError:
            done.add_done_callback(lambda _: self._confirmed_late(done, key, detail))
            return "timeout", f"not confirmed within {self.config.ack_timeout:g} s"
        if done.cancelled():
            return "not_live", "the session ended before confirming"
        return "ok", detail

    def _confirmed_late(self, done: asyncio.Future[None], key: Key, detail: str) -> None:
        """A timed-out request's confirmation came after all: a retry's duplicate ack
        says what happened, not that it was late."""
        if done.cancelled() or self._store is None:
            return
        self.store.finish(key, "ok", detail)
        team, session_id, agent_id, request_id = key
        fields = {"request_id": request_id, "team": team, "session_id": session_id}
        self.audit.record("confirmed late", {**fields, "agent_id": agent_id, "result": "ok"})


def partial_sender(message: Any) -> str | None:
    sender = message.get("sender") if isinstance(message, dict) else None
    return sender if isinstance(sender, str) and len(sender) <= 256 else None


def _submission(op: Any) -> Submission:
    # Ids of their own: the engine drops an id it saw lately as a duplicate.
    return Submission(f"control-{uuid.uuid4().hex}", op)


def receiver(host: SessionHost) -> ControlReceiver:
    """``host``'s control receiver: a host extension, made at the first control request."""
    return host.extension(_receiver_of)


def _receiver_of(host: SessionHost) -> ControlReceiver:
    return ControlReceiver(host, host.config.control)
