"""The worker side: engines for the sessions this worker owns.

Theory of operation
-------------------
A worker reads the sessions stream in the ``workers`` consumer group: each new
session goes to one worker, whose pending-entry list then holds it for as long
as the worker owns it. Owning is a lease (``lease`` key, ``<worker> <fence>``,
with a TTL) that the worker renews every third of the lease time, and a
fencing number (``fence``) that grows by one with every new owner. Every
write a worker makes to a session (its events, its history, the submissions
it accepts) is a Lua script that first checks the fencing number it took the
session with: a worker that was presumed dead and comes back writes nothing,
learns it was fenced off and drops the session.

A worker also claims (``XAUTOCLAIM``) sessions whose entries have been idle in
another worker's pending list for longer than the lease: when the lease is
gone the owner is dead, and the claimer takes the session over. It rebuilds
the session from its history (the rollout lines kept in Redis) with the
engine's own ``resume_session``, ends the Task that was running with
``turn_aborted`` (``worker_lost``) after a warning naming the lost worker, and
goes on with the submissions the lost worker had not accepted.

Events are numbered on from the session's ``next_seq``: for the first owner
that is the engine's own seq; after a takeover the numbering continues, so a
UI sees one gap-free sequence. Events the worker's own submissions cause (the
resume) are not published.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from redis.exceptions import RedisError, ResponseError

from codexcore._logging import get_logger
from codexcore.engine import EngineConfig, ModelClientPool

from . import _keys
from ._keys import GROUP, Keys
from ._owned import Fenced, OwnedSession
from ._poison import DEAD_LETTER_MAXLEN, DeadLetters, Poison, session_of
from ._streams import StreamReader
from ._workspace import workspace_id

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = get_logger(__name__)
_T = TypeVar("_T")

RETRY_DELAY = 0.2


@attrs.frozen
class PoolConfig:
    """How a worker pool behaves; every process of a pool should use the same values.

    ``lease`` seconds without renewal and a worker's sessions go to others.
    ``replay_events`` events are kept per session stream (approximately: Redis
    trims whole nodes, so at least that many). ``duplicate_ttl`` seconds a
    submission id is remembered. An ended session's keys expire after
    ``ended_ttl`` seconds. ``max_sessions`` bounds what one worker owns.
    ``dead_letter_maxlen`` entries are kept (approximately) in the dead-letter
    stream, where readers move the entries they cannot decode.
    """

    keys: Keys = attrs.field(factory=Keys)
    lease: float = 5.0
    replay_events: int = 4_096
    duplicate_ttl: float = 600.0
    ended_ttl: float = 600.0
    max_sessions: int = 10_000
    dead_letter_maxlen: int = DEAD_LETTER_MAXLEN


def default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Worker:
    """Owns sessions of the pool and runs each in an engine of this process."""

    def __init__(
        self,
        redis: Redis,
        reader: StreamReader,
        blocking: Redis,
        engine_config: EngineConfig,
        pool: PoolConfig,
        *,
        name: str | None = None,
        clients: ModelClientPool | None = None,
    ) -> None:
        self.redis = redis
        self.reader = reader
        self._blocking = blocking  # XREADGROUP blocks its connection
        self.pool = pool
        self.keys = pool.keys
        self.name = name or default_worker_name()
        # Each worker records its sessions in a home of its own; Redis holds the
        # lines every worker may need (see OwnedSession._restore).
        self.home = Path(engine_config.home or _default_home()) / "redis-workers" / self.name
        self.config = attrs.evolve(engine_config, acknowledge_submissions=True, home=str(self.home))
        self.clients = clients or ModelClientPool(self.config, shards=16)
        self.sessions: dict[str, OwnedSession] = {}
        self._suspects: set[str] = set()  # workers with no connection at the last look
        self._room = asyncio.Event()
        self._room.set()
        self.dead = DeadLetters(redis, self.keys, pool.dead_letter_maxlen, f"worker {self.name}")
        self._scripts = {
            name: redis.register_script(getattr(_keys, name))
            for name in ("TAKE", "RENEW", "EMIT", "ACCEPT", "END", "HAND_OVER", "RELEASE")
        }

    @property
    def redis_any(self) -> Any:
        """The client, for calls redis-py's loose annotations do not type well."""
        return self.redis

    def script(self, name: str) -> Any:
        return self._scripts[name]

    @property
    def lease_ms(self) -> int:
        return int(self.pool.lease * 1000)

    # --- lifecycle ------------------------------------------------------------------

    async def run(self) -> None:
        """Claim and serve sessions until cancelled."""
        await self._ensure_group()
        log.info("worker ready", worker=self.name, lease=self.pool.lease)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._claim_forever())
                group.create_task(self._lease_forever())
                group.create_task(self._claims_forever())
        except Exception:
            # Said aloud: a worker that stops claiming must not do so in silence.
            log.exception("worker stopped", worker=self.name)
            raise

    async def aclose(self) -> None:
        """Hand every session over to the other workers (a graceful stop)."""
        for session in list(self.sessions.values()):
            await session.hand_over()
        await self.clients.aclose()

    async def _ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.keys.sessions, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # --- claiming new sessions ------------------------------------------------------

    async def _claim_forever(self) -> None:
        while True:
            await self._room.wait()
            try:
                blocking: Any = self._blocking
                reply = await blocking.xreadgroup(
                    GROUP, self.name, {self.keys.sessions: ">"}, count=1, block=2000
                )
            except (RedisError, OSError) as exc:
                await self._redis_trouble(exc)
                continue
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    session_id = await self._offered(entry_id, fields)
                    if session_id is not None:
                        await self._take(session_id, entry_id.decode(), fresh=True)

    async def _offered(self, entry_id: bytes, fields: dict[bytes, bytes]) -> str | None:
        """The session an entry of the sessions stream offers; None for a poison entry,
        which is acknowledged and moved aside here (the worker goes on)."""
        try:
            return session_of(fields)
        except Poison as poison:
            await self.dead.move(self.keys.sessions, entry_id, fields, poison, group=GROUP)
            return None

    async def _agent_of(self, session_id: str) -> str | None:
        """The agent id the creating gateway chose (a resumed session keeps its
        recorded one anyway); None if Redis cannot say."""
        redis: Any = self.redis
        try:
            value = await redis.hget(self.keys.state(session_id), "agent_id")
        except (RedisError, OSError):
            return None
        return value.decode() if value else None

    async def _take(self, session_id: str, entry_id: str, *, fresh: bool = False) -> None:
        keys = self.keys
        try:
            taken: Any = await self.script("TAKE")(
                keys=[keys.fence(session_id), keys.lease(session_id), keys.state(session_id)],
                args=[self.name, self.lease_ms],
            )
        except (RedisError, OSError) as exc:
            await self._redis_trouble(exc)
            return
        if taken in (b"owned", b"gone"):
            # A new entry for a session a live worker owns is a second offer (a handover
            # that raced a takeover); an ended session's entry is done: drop both. A
            # claimed entry of a live owner goes back to it with its next renewal.
            if taken == b"gone" or fresh:
                await self._discard(entry_id)
            return
        fence = int(taken[0])
        previous, running, next_seq, cursor = (value.decode() for value in taken[1:])
        agent_id = await self._agent_of(session_id)
        session = OwnedSession(self, session_id, entry_id, fence, int(next_seq), cursor, agent_id)
        self.sessions[session_id] = session
        self._update_room()
        log.info("session taken", session=session_id, fence=fence, previous=previous or None)
        try:
            await session.start(previous=previous, running=running)
        except Fenced:
            session.drop("fenced off while starting")
        except Exception:
            log.exception("session start failed", session=session_id)
            session.drop("could not start")

    async def _discard(self, entry_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.keys.sessions, GROUP, entry_id)
            pipe.xdel(self.keys.sessions, entry_id)
            await pipe.execute()

    def forget(self, session: OwnedSession) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        self._update_room()

    def _update_room(self) -> None:
        if len(self.sessions) < self.pool.max_sessions:
            self._room.set()
        else:
            self._room.clear()

    # --- the lease ------------------------------------------------------------------

    async def _lease_forever(self) -> None:
        """Renew every third of the lease, in a task that does nothing else: a slow
        takeover or a busy disk must not make this worker's own leases run out."""
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.pool.lease / 3)
            try:
                await self._renew()
            except (RedisError, OSError) as exc:
                await self._redis_trouble(exc)
                continue
            now = time.monotonic()
            if now - renewed > self.pool.lease:
                log.warning("lease renewal late", worker=self.name, seconds=now - renewed)
            renewed = now

    async def _claims_forever(self) -> None:
        """Take over abandoned sessions: every second at most, and every third of the lease."""
        tick = min(self.pool.lease / 5, 1.0)
        looked = 0.0
        while True:
            try:
                if time.monotonic() - looked >= self.pool.lease / 3:
                    await self._heartbeat()
                    await self._claim_abandoned()
                    looked = time.monotonic()
                await self._claim_from_the_dead()
            except (RedisError, OSError) as exc:
                await self._redis_trouble(exc)
            await asyncio.sleep(tick)

    async def _heartbeat(self) -> None:
        """Say who this worker is and how it sees the workspace (for ``doctor``)."""
        cwd = self.config.session.cwd
        try:
            workspace = await asyncio.to_thread(workspace_id, cwd)
        except OSError as exc:
            workspace = f"unreachable: {exc}"
        key = self.keys.worker(self.name)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
                mapping={
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "cwd": cwd,
                    "workspace": workspace,
                    "sessions": len(self.sessions),
                },
            )
            pipe.pexpire(key, self.lease_ms * 3)
            await pipe.execute()

    async def _renew(self) -> None:
        owned = list(self.sessions.values())
        if not owned:
            return
        keys: list[str] = [self.keys.sessions]
        args: list[Any] = [self.name, self.lease_ms, GROUP]
        for session in owned:
            keys += [self.keys.fence(session.id), self.keys.lease(session.id)]
            args += [session.fence, session.entry_id]
        results = await self.script("RENEW")(keys=keys, args=args)
        for session, ok in zip(owned, results, strict=False):
            if not ok:
                session.drop("fenced off: another worker took the session over")

    async def _claim_abandoned(self) -> None:
        if not self._room.is_set():
            return
        reply = await self.redis.xautoclaim(
            self.keys.sessions, GROUP, self.name, self.lease_ms, "0-0", count=16
        )
        for entry_id, fields in reply[1]:
            if not fields:
                continue
            session_id = await self._offered(entry_id, fields)
            if session_id is not None and session_id not in self.sessions:
                await self._take(session_id, entry_id.decode())

    async def _claim_from_the_dead(self) -> None:
        """Take over the sessions of workers whose every Redis connection has closed.

        A killed process's sockets close at once, so its sessions move well
        before its lease runs out. Seen gone at two looks in a row (a Redis
        restart drops every connection for a moment, and workers reconnect
        within that); a frozen or cut-off worker keeps its connections open
        and waits out its lease. Fencing keeps either way safe.
        """
        if not self._room.is_set():
            return
        redis = self.redis_any
        try:
            clients = await redis.client_list()
        except ResponseError:
            return  # CLIENT LIST not allowed (ACLs): leases alone, then
        live = {
            c.get("name", "")[len(_keys.WORKER_CLIENT) :]
            for c in clients
            if c.get("name", "").startswith(_keys.WORKER_CLIENT)
        }
        summary = await redis.xpending(self.keys.sessions, GROUP)
        owners = {c["name"].decode() for c in summary.get("consumers", [])}
        gone = owners - live - {self.name}
        dead, self._suspects = gone & self._suspects, gone
        for worker in dead:
            await self._claim_from(worker)

    async def _claim_from(self, dead: str) -> None:
        redis, keys = self.redis_any, self.keys
        pending = await redis.xpending_range(
            keys.sessions, GROUP, min="-", max="+", count=100, consumername=dead
        )
        for entry in pending:
            claimed = await redis.xclaim(keys.sessions, GROUP, self.name, 0, [entry["message_id"]])
            for entry_id, fields in claimed:
                if not fields:
                    continue
                session_id = await self._offered(entry_id, fields)
                if session_id is None:
                    continue
                await self.script("RELEASE")(keys=[keys.lease(session_id)], args=[dead])
                log.info("worker gone: taking its session", worker=dead, session=session_id)
                await self._take(session_id, entry_id.decode())

    async def _redis_trouble(self, exc: BaseException) -> None:
        log.warning("redis unreachable; retrying", worker=self.name, error=str(exc))
        await asyncio.sleep(RETRY_DELAY)

    async def retry(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call()`` until Redis answers (a restart), unless fenced off."""
        while True:
            try:
                return await call()
            except ResponseError as exc:
                if _keys.FENCED in str(exc):
                    raise Fenced from None
                raise
            except (RedisError, OSError) as exc:
                await self._redis_trouble(exc)


def _default_home() -> Path:
    from codexcore.engine import default_home

    return default_home()
