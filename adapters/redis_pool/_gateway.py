"""The gateway side: a session host whose sessions run on the workers.

A gateway is a :class:`~codexcore.adapters.host.SessionHost` given a
:class:`Gateway` as its engine source: every dialect, handshake, token,
control rule and replay works as on a single server. A session's engine is a
:class:`RemoteEngine`: a submission is appended to the session's submission
stream; events are read from its event stream (shared by every gateway, the
replay buffer) and handed to the host's pump as if an engine had made them.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
from redis.exceptions import RedisError

from codexcore._logging import get_logger
from codexcore.adapters.host._host import HostRefusal
from codexcore.engine import EngineClosed, Rejected, State, new_agent_id
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    Event,
    ShutdownComplete,
    Submission,
    encode_submission,
)

from ._keys import Keys
from ._poison import DEAD_LETTER_MAXLEN, DeadLetters, Fields, Poison, event_of
from ._streams import Entries, StreamReader

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = get_logger(__name__)

INBOX_MAXLEN = 1_000
"""Submissions kept per session stream (workers read them within moments)."""

SUBMIT_PATIENCE = 15.0
"""How long a submission waits for Redis (a restart) before the client is told."""


class RemoteEngine:
    """A session's engine as a gateway sees it (a :class:`HostedEngine`).

    ``state`` is read off the events: running from ``task_started`` to its
    terminal event. The stream ends after ``shutdown_complete``, or when the
    host closes it (the session goes on, on its worker).
    """

    def __init__(self, gateway: Gateway, session_id: str, agent_id: str) -> None:
        self._gateway = gateway
        self.session_id = session_id
        self.agent_id = agent_id  # chosen by the creating gateway; workers take it up
        self._queue: collections.deque[Event] = collections.deque()
        self._ready = asyncio.Event()
        self._ended = False  # no events after the queued ones
        self._configured = False
        self._running: str | None = None
        self.last_id = b"0-0"  # of the last event read from the stream

    @property
    def state(self) -> State:
        if self._running is not None:
            return State.RUNNING
        return State.IDLE if self._configured else State.UNCONFIGURED

    def feed(self, entries: Entries) -> None:
        for entry_id, fields in entries:
            event = self._gateway.event_of(self, entry_id, fields)
            if event is not None:
                self.last_id = entry_id
                self.take(event)
        self._ready.set()

    def take(self, event: Event) -> None:
        """One new event of the stream, in order."""
        if self._ended:
            return
        self.observe(event)
        self._queue.append(event)
        if isinstance(event.msg, ShutdownComplete):
            self._end()

    def observe(self, event: Event) -> None:
        """Follow the session's state through ``event`` (also the past ones, when opened)."""
        kind = event.msg.TYPE
        if kind == "session_configured":
            self._configured = True
        elif kind == "task_started":
            self._running = event.id
        elif kind in TERMINAL_EVENT_TYPES and event.id == self._running:
            self._running = None

    async def enqueue(self, item: Submission | Rejected) -> None:
        if self._ended:
            raise EngineClosed("the session has ended")
        await self._gateway.submit(self.session_id, item)

    async def next_event(self) -> Event:
        while not self._queue:
            if self._ended:
                raise EngineClosed("the event stream has ended")
            self._ready.clear()
            await self._ready.wait()
        return self._queue.popleft()

    def next_event_nowait(self) -> Event | None:
        return self._queue.popleft() if self._queue else None

    def request_close(self, *, discard: bool = True) -> None:
        """Stop following the session here (it goes on, on its worker)."""
        self._end()

    async def aclose(self) -> None:
        self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._gateway.forget(self.session_id)
        self._ready.set()


class Gateway:
    """The engine source of a gateway's host (an :class:`EngineSource`)."""

    def __init__(
        self,
        redis: Redis,
        reader: StreamReader,
        keys: Keys,
        *,
        replay_events: int,
        dead_letter_maxlen: int = DEAD_LETTER_MAXLEN,
    ) -> None:
        self._redis = redis
        self._reader = reader
        self._keys = keys
        self._replay_events = replay_events
        self._dead = DeadLetters(redis, keys, dead_letter_maxlen, "gateway")

    def event_of(self, engine: RemoteEngine, entry_id: bytes, fields: Fields) -> Event | None:
        """The event of one entry of a session's event stream; None for a poison entry,
        moved aside (by whichever gateway gets there first) and skipped."""
        try:
            return event_of(entry_id, fields)
        except Poison as poison:
            key = self._keys.events(engine.session_id)

            def gone(out: bool) -> None:
                # Out of the stream: read on from the last event, wherever the poison was.
                if out:
                    self._reader.rewind(key, engine.last_id, engine.feed)

            self._dead.move_soon(key, entry_id, fields, poison, then=gone)
            return None

    async def create(self, session_id: str) -> RemoteEngine:
        keys = self._keys
        agent_id = new_agent_id()
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hset(
                    keys.state(session_id),
                    mapping={"created": time.time(), "next_seq": 0, "agent_id": agent_id},
                )
                pipe.xadd(keys.sessions, {"session": session_id})
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise HostRefusal(
                "unavailable", f"the session store cannot be reached now ({exc}); try again"
            ) from None
        engine = RemoteEngine(self, session_id, agent_id)
        self._reader.add(keys.events(session_id), b"0-0", engine.feed)
        log.info("session created", session=session_id)
        return engine

    async def open(self, session_id: str) -> tuple[RemoteEngine, Sequence[Event]] | None:
        """A session some gateway created, with the events its stream still holds."""
        try:
            return await self._open(session_id)
        except (RedisError, OSError) as exc:
            raise HostRefusal(
                "unavailable", f"the session store cannot be reached now ({exc}); try again"
            ) from None

    async def _open(self, session_id: str) -> tuple[RemoteEngine, Sequence[Event]] | None:
        keys = self._keys
        redis: Any = self._redis
        state = await redis.hgetall(keys.state(session_id))
        if not state or state.get(b"ended") == b"1":
            return None
        entries = await redis.xrevrange(keys.events(session_id), count=self._replay_events or 1)
        entries.reverse()
        engine = RemoteEngine(self, session_id, _agent_of(state))
        past: list[Event] = []
        for entry_id, fields in entries:
            event = self.event_of(engine, entry_id, fields)
            if event is not None:
                engine.last_id = entry_id
                engine.observe(event)
                past.append(event)
        if not past and entries:
            engine.last_id = entries[-1][0]  # never from the stream's start: its old events
        self._reader.add(keys.events(session_id), engine.last_id, engine.feed)
        return engine, past

    def forget(self, session_id: str) -> None:
        self._reader.remove(self._keys.events(session_id))

    async def submit(self, session_id: str, item: Submission | Rejected) -> None:
        fields: dict[str, bytes]
        if isinstance(item, Rejected):
            fields = {
                "r": orjson.dumps({"id": item.id, "message": item.message, "code": item.code})
            }
        else:
            fields = {"s": encode_submission(item)}
        redis: Any = self._redis
        deadline = time.monotonic() + SUBMIT_PATIENCE
        while True:
            try:
                await redis.xadd(
                    self._keys.inbox(session_id), fields, maxlen=INBOX_MAXLEN, approximate=True
                )
                return
            except (RedisError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise EngineClosed(f"the session store is unreachable: {exc}") from None
                log.warning("redis write failed; retrying", error=str(exc))
                await asyncio.sleep(0.2)


def _agent_of(state: dict[bytes, bytes]) -> str:
    """The agent id the creating gateway recorded in a session's state."""
    return state.get(b"agent_id", b"").decode() or "unknown"
