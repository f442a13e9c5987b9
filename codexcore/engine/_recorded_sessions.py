"""Recorded sessions: ``list_sessions``, ``get_history``, ``resume_session``, ``fork_session``.

Listing and reading never disturb a Task. Resuming or forking makes the loaded
Session the engine's (the dispatcher aborts a running Task first, as
reconfiguring does): a resumed one keeps its id and appends to its rollout, a
forked one starts a new rollout with the branch it was forked at. Rollouts are
read off the loop; one that cannot be read is refused, naming its file and the
problem.

A session has one writer: resuming locks the rollout before reading it (so what
is read is all there is), and a session open elsewhere, in another process or
another engine of this one, is refused before anything is aborted, naming the
process (``session_busy``). Resuming the engine's own Session hands its lock on.
Forking, listing and reading take no lock.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from ..protocol import (
    Event,
    ForkSession,
    GetHistory,
    ListSessions,
    ResumeSession,
    SessionHistory,
    SessionList,
    Submission,
    WarningEvent,
)
from ..protocol._value import Value
from ._history import History, UnknownBookmark
from ._rollout import BadRollout, UnknownSession
from ._rollout_lock import RolloutLock, SessionBusy, take_lock
from ._rollout_reader import LoadedSession, find_rollout, load_session, read_session_events
from ._rollout_reader import list_sessions as recorded_sessions
from ._session_lifecycle import announce_session, new_session
from ._submissions import SubmissionRejected

if TYPE_CHECKING:
    from ._codex import Codex
    from ._config import SessionConfig

_T = TypeVar("_T")


@attrs.frozen(repr=False, eq=False)
class Resuming(Value):
    """A recorded session about to be resumed, and the lock on its rollout
    (None when the engine records nothing)."""

    loaded: LoadedSession
    lock: RolloutLock | None


async def load(codex: Codex, op: ResumeSession | ForkSession) -> LoadedSession | Resuming:
    """The recorded session ``op`` names, a fork's History moved to its branch;
    a session to resume comes with its rollout locked."""
    if isinstance(op, ResumeSession):
        return await _lock_and_load(codex, op.session_id)
    loaded = await _load(codex, op.session_id)
    if isinstance(op, ForkSession):
        try:
            loaded.history.fork(op.response_id)
        except UnknownBookmark:
            raise SubmissionRejected(
                f"session {op.session_id} has no response {op.response_id!r}",
                "unknown_response_id",
            ) from None
    return loaded


async def list_sessions(codex: Codex, sub: Submission, _: object) -> None:
    op = sub.op
    assert isinstance(op, ListSessions)
    bad: list[BadRollout] = []
    found = await asyncio.to_thread(
        functools.partial(recorded_sessions, on_bad=bad.append), codex._home(), op.cwd, op.limit
    )
    for exc in bad:
        await codex._emit(sub.id, WarningEvent(f"skipped a session file: {exc}"))
    await codex._emit(sub.id, SessionList(tuple(found)))


async def get_history(codex: Codex, sub: Submission, _: object) -> None:
    op = sub.op
    assert isinstance(op, GetHistory)
    session = codex._session
    session_id = op.session_id or (session.id if session else codex._first_session_id)
    if session_id is None:
        raise SubmissionRejected("no session yet, and no session_id given", "unknown_session")
    events = _unwritten_events(codex, session_id)
    if events is None:
        path = await _rollout_of(codex, session_id)
        events = await _read(read_session_events, session_id, path)
    page = tuple(events[op.offset : op.offset + op.limit])
    await codex._emit(sub.id, SessionHistory(session_id, op.offset, len(events), page))


async def resume_session(codex: Codex, sub: Submission, resuming: Resuming) -> None:
    loaded = resuming.loaded
    try:
        codex._session = await new_session(
            codex,
            _for_this_engine(codex, loaded.config),
            session_id=loaded.session_id,
            history=loaded.history,
            append_to=loaded.path,
            lock=resuming.lock,
            token_total=loaded.token_total,
            agent_id=loaded.agent_id,
        )
    finally:
        if resuming.lock is not None:
            resuming.lock.release()  # a no-op once the new rollout writer took it
    await announce_session(codex, sub.id)


async def fork_session(codex: Codex, sub: Submission, loaded: LoadedSession) -> None:
    op = sub.op
    assert isinstance(op, ForkSession)
    history = History()
    for kind, items, response_id in loaded.history.branch():
        history.replay(kind, items, response_id)
    codex._session = await new_session(
        codex, _for_this_engine(codex, loaded.config), history=history, forked_from=op.session_id
    )
    await announce_session(codex, sub.id)


def _for_this_engine(codex: Codex, recorded: SessionConfig) -> SessionConfig:
    """The recorded configuration, but with this engine's word on where the model is,
    whether its UI answers the model's questions and which tools its client answers:
    the model's address belongs to the process that runs now (a local server or proxy
    moves between runs, as Codex takes the provider from the current configuration),
    and the rest are the connected UI's abilities; none is the conversation's."""
    now = codex._session_config()
    return attrs.evolve(
        recorded,
        base_url=now.base_url,
        ask_user=now.ask_user,
        dynamic_tools=now.dynamic_tools,
        dynamic_tool_timeout_ms=now.dynamic_tool_timeout_ms,
    )


def _unwritten_events(codex: Codex, session_id: str) -> list[Event] | None:
    """The events of this engine's session ``session_id`` while its file does not
    exist yet (none before the first Session); None for any other session."""
    session = codex._session
    if session is None:
        return [] if session_id == codex._first_session_id else None
    if session.id != session_id or session.rollout is None:
        return None
    return session.rollout.held_events()


async def _lock_and_load(codex: Codex, session_id: str) -> Resuming:
    """The session locked, then read: nobody appends to it between the two."""
    path = await _rollout_of(codex, session_id)
    if codex.config.ephemeral:  # nothing will be appended: no lock to take
        return Resuming(await _load(codex, session_id), None)
    lock = _own_lock(codex, session_id, path)
    if lock is None:
        try:
            lock = await asyncio.to_thread(take_lock, path, session_id)
        except SessionBusy as exc:
            raise SubmissionRejected(str(exc), "session_busy") from None
        except OSError:
            pass  # not writable here: resumed unrecorded, and the writer says so
    try:
        return Resuming(await _load(codex, session_id), lock)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _own_lock(codex: Codex, session_id: str, path: Path) -> RolloutLock | None:
    """The engine's own Session's lock, shared, when that Session is the one resumed."""
    session = codex._session
    if session is None or session.id != session_id or session.rollout is None:
        return None
    if session.rollout.path != path:
        return None
    return session.rollout.shared_lock()


async def _load(codex: Codex, session_id: str) -> LoadedSession:
    await _rollout_of(codex, session_id)
    return await _read(load_session, session_id, codex._home(), session_id)


async def _read(read: Callable[..., _T], session_id: str, *args: Any) -> _T:
    """``read(*args)`` off the loop; a recorded session that cannot be read is refused,
    naming its file and the problem."""
    try:
        return await asyncio.to_thread(read, *args)
    except BadRollout as exc:
        raise SubmissionRejected(
            f"recorded session {session_id!r} cannot be read: {exc}", "bad_session"
        ) from None


async def _rollout_of(codex: Codex, session_id: str) -> Path:
    try:
        return await asyncio.to_thread(find_rollout, codex._home(), session_id)
    except UnknownSession:
        raise SubmissionRejected(
            f"no recorded session {session_id!r} under {codex._home()}", "unknown_session"
        ) from None
