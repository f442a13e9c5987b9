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
import contextlib
import datetime
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import orjson
from redis.exceptions import RedisError, ResponseError

from codexcore._logging import get_logger
from codexcore.engine import Codex, EngineClosed, EngineConfig, ModelClientPool, Rejected
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ConfigureSession,
    Event,
    ProtocolError,
    ResumeSession,
    ShutdownComplete,
    Submission,
    SubmissionAck,
    TurnAborted,
    WarningEvent,
    decode_submission,
    encode_event,
)
from codexcore.tools._safe_read import open_regular

from . import _keys
from ._keys import GROUP, Keys, event_id
from ._streams import Entries, StreamReader
from ._workspace import workspace_id

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = get_logger(__name__)
_T = TypeVar("_T")

INTERNAL = "redis-pool:"
"""Submission ids of the worker's own submissions; their events are not published."""

DELTAS = frozenset({"agent_message_delta", "agent_reasoning_delta", "exec_command_output_delta"})
BATCH = 256
RETRY_DELAY = 0.2


@attrs.frozen
class PoolConfig:
    """How a worker pool behaves; every process of a pool should use the same values.

    ``lease`` seconds without renewal and a worker's sessions go to others.
    ``replay_events`` events are kept per session stream (approximately: Redis
    trims whole nodes, so at least that many). ``duplicate_ttl`` seconds a
    submission id is remembered. An ended session's keys expire after
    ``ended_ttl`` seconds. ``max_sessions`` bounds what one worker owns.
    """

    keys: Keys = attrs.field(factory=Keys)
    lease: float = 5.0
    replay_events: int = 4_096
    duplicate_ttl: float = 600.0
    ended_ttl: float = 600.0
    max_sessions: int = 10_000


class Fenced(Exception):
    """The session has a newer owner: this worker must not write to it any more."""


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
        async with asyncio.TaskGroup() as group:
            group.create_task(self._claim_forever())
            group.create_task(self._lease_forever())
            group.create_task(self._claims_forever())

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
                    await self._take(fields[b"session"].decode(), entry_id.decode(), fresh=True)

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
            session_id = fields[b"session"].decode()
            if session_id not in self.sessions:
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
                session_id = fields[b"session"].decode()
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


class OwnedSession:
    """One session this worker owns: its engine, its pump and its submissions."""

    def __init__(
        self,
        worker: Worker,
        session_id: str,
        entry_id: str,
        fence: int,
        next_seq: int,
        cursor: str,
        agent_id: str | None = None,
    ) -> None:
        self.worker = worker
        self.id = session_id
        self.entry_id = entry_id
        self.fence = fence
        self.next_seq = next_seq
        self.cursor = cursor
        self.running: str | None = None  # the Task whose terminal event is still due
        self.codex = Codex(
            worker.config,
            clients=worker.clients,
            threadsafe=False,
            session_id=session_id,
            agent_id=agent_id,
        )
        self._lock = asyncio.Lock()  # one write at a time, in seq order
        self._inbox: list[tuple[bytes, dict[bytes, bytes]]] = []
        self._inbox_ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._rollout: Path | None = None
        self._rollout_offset = 0
        self._dropped = False
        self._internal = 0

    # --- start, stop ----------------------------------------------------------------

    async def start(self, *, previous: str, running: str) -> None:
        await self.codex.start()
        await asyncio.sleep(0)  # see SessionHost._create
        if previous:
            await self._restore()
        if running:
            self.running = running
            who = previous or "unknown"
            await self.write(
                [
                    Event(
                        running,
                        0,
                        WarningEvent(
                            f"worker {who} was lost while running this Task; "
                            f"worker {self.worker.name} took the session over"
                        ),
                    ),
                    Event(running, 0, TurnAborted("worker_lost")),
                ]
            )
        self._tasks = [
            asyncio.create_task(self._pump(), name=f"codexcore-worker-pump-{self.id}"),
            asyncio.create_task(self._accept_forever(), name=f"codexcore-worker-in-{self.id}"),
        ]
        self.worker.reader.add(self.worker.keys.inbox(self.id), self.cursor, self._feed)

    async def _restore(self) -> None:
        """Rebuild the engine's session from what Redis holds of it."""
        keys, redis = self.worker.keys, self.worker.redis_any
        lines: list[bytes] = await self.worker.retry(
            lambda: redis.lrange(keys.history(self.id), 0, -1)
        )
        if lines and not self.worker.config.ephemeral:
            self._write_rollout(lines)
            await self._internal_submit(ResumeSession(self.id))
            return
        configs: list[bytes] = await self.worker.retry(
            lambda: redis.lrange(keys.configs(self.id), 0, -1)
        )
        for data in configs:
            op = decode_submission(data).op
            await self._internal_submit(op)

    async def _internal_submit(self, op: Any) -> None:
        self._internal += 1
        await self.codex.enqueue(Submission(f"{INTERNAL}{self._internal}", op))

    def _write_rollout(self, lines: list[bytes]) -> None:
        for old in self.worker.home.glob(f"sessions/*/*/*/rollout-*-{self.id}.jsonl"):
            old.unlink(missing_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        day = self.worker.home / "sessions" / f"{now:%Y}" / f"{now:%m}" / f"{now:%d}"
        day.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = day / f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{self.id}.jsonl"
        data = b"\n".join(lines) + b"\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self._rollout, self._rollout_offset = path, len(data)

    def drop(self, why: str) -> None:
        """Stop serving the session here without writing anything more to it."""
        if self._dropped:
            return
        self._dropped = True
        log.warning("session dropped", session=self.id, worker=self.worker.name, why=why)
        self.worker.reader.remove(self.worker.keys.inbox(self.id))
        self.worker.forget(self)
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self.codex.request_close()
        closer = asyncio.create_task(self.codex.aclose())
        self._tasks.append(closer)

    async def hand_over(self) -> None:
        """A graceful stop: offer the session to the other workers now."""
        keys = self.worker.keys
        with contextlib.suppress(Fenced, RedisError, OSError):
            await self.worker.script("HAND_OVER")(
                keys=[keys.fence(self.id), keys.lease(self.id), keys.sessions],
                args=[self.fence, GROUP, self.entry_id, self.id],
            )
        self.drop("handed over")
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- submissions ----------------------------------------------------------------

    def _feed(self, entries: Entries) -> None:
        self._inbox.extend(entries)
        self._inbox_ready.set()

    async def _accept_forever(self) -> None:
        while True:
            while not self._inbox:
                self._inbox_ready.clear()
                await self._inbox_ready.wait()
            entry_id, fields = self._inbox.pop(0)
            try:
                await self._accept(entry_id.decode(), fields)
            except Fenced:
                self.drop("fenced off: another worker took the session over")
                return
            except EngineClosed:
                return

    async def _accept(self, entry_id: str, fields: dict[bytes, bytes]) -> None:
        item = _submission_of(fields)
        keys, worker = self.worker.keys, self.worker
        if isinstance(item, Rejected):
            sub_id, ttl, config = item.id, "", b""
        else:
            sub_id, ttl = item.id, str(int(worker.pool.duplicate_ttl * 1000))
            config = fields[b"s"] if isinstance(item.op, ConfigureSession) else b""
        fresh = await worker.retry(
            lambda: worker.script("ACCEPT")(
                keys=[
                    keys.fence(self.id),
                    keys.state(self.id),
                    keys.seen(self.id, sub_id),
                    keys.configs(self.id),
                ],
                args=[self.fence, entry_id, ttl, config],
            )
        )
        if fresh:
            await self.codex.enqueue(item)
        else:
            # Accepted before (through any gateway, by any worker): acked, not run again.
            await self.write([Event(sub_id, 0, SubmissionAck(sub_id, duplicate=True))])

    # --- events ---------------------------------------------------------------------

    async def _pump(self) -> None:
        codex = self.codex
        try:
            while True:
                try:
                    event: Event | None = await codex.next_event()
                except EngineClosed:
                    return
                batch: list[Event] = []
                while event is not None and len(batch) < BATCH:
                    batch.append(event)
                    event = codex.next_event_nowait() if len(batch) < BATCH else None
                published = [e for e in batch if not e.id.startswith(INTERNAL)]
                if published:
                    await self.write(published)
                if any(isinstance(e.msg, ShutdownComplete) for e in published):
                    await self._end()
                    return
        except Fenced:
            self.drop("fenced off: another worker took the session over")

    async def write(self, events: list[Event]) -> None:
        """Number, encode and append ``events`` with the history lines that go with
        them, as one fenced script; raises :class:`Fenced`."""
        async with self._lock:
            if self._dropped:
                raise Fenced
            seq, now_running = self.next_seq, self.running
            pairs: list[bytes | str] = []
            for event in events:
                kind = event.msg.TYPE
                if kind == "task_started":
                    now_running = event.id
                elif kind in TERMINAL_EVENT_TYPES and event.id == now_running:
                    now_running = None
                data = encode_event(Event(event.id, seq, event.msg))
                pairs += [event_id(seq), data]
                seq += 1
            lines = self._new_rollout_lines(events)
            running = "" if now_running == self.running else (now_running or "-")
            keys, worker = self.worker.keys, self.worker
            await worker.retry(
                lambda: worker.script("EMIT")(
                    keys=[
                        keys.fence(self.id),
                        keys.events(self.id),
                        keys.state(self.id),
                        keys.history(self.id),
                    ],
                    args=[
                        self.fence,
                        worker.pool.replay_events,
                        running,
                        seq,
                        len(events),
                        *pairs,
                        *lines,
                    ],
                )
            )
            self.next_seq, self.running = seq, now_running

    def _new_rollout_lines(self, events: list[Event]) -> list[bytes]:
        """The whole lines the engine added to its rollout since the last write.

        The engine records before it queues an event, so the lines of every
        event written now are among them.
        """
        if self.worker.config.ephemeral:
            return []
        if self._rollout is None:
            if all(e.msg.TYPE in DELTAS for e in events):
                return []
            found = list(self.worker.home.glob(f"sessions/*/*/*/rollout-*-{self.id}.jsonl"))
            if not found:
                return []
            self._rollout = found[0]
        try:  # found by name: a FIFO put there is refused, never waited on
            file, size = open_regular(str(self._rollout))
            with file:
                file.seek(self._rollout_offset)
                data = file.read(max(0, size - self._rollout_offset))
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self._rollout_offset += end
        return data[:end].splitlines()

    async def _end(self) -> None:
        """The session has shut down: release it; its keys expire after a while."""
        keys, worker = self.worker.keys, self.worker
        with contextlib.suppress(Fenced):
            await worker.retry(
                lambda: worker.script("END")(
                    keys=[
                        keys.fence(self.id),
                        keys.lease(self.id),
                        keys.state(self.id),
                        keys.sessions,
                        *keys.session_keys(self.id),
                    ],
                    args=[self.fence, GROUP, self.entry_id, int(worker.pool.ended_ttl)],
                )
            )
        log.info("session ended", session=self.id)
        self._dropped = True
        worker.reader.remove(keys.inbox(self.id))
        worker.forget(self)
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()


def _submission_of(fields: dict[bytes, bytes]) -> Submission | Rejected:
    if b"r" in fields:
        value = orjson.loads(fields[b"r"])
        return Rejected(str(value["id"]), str(value["message"]), str(value["code"]))
    try:
        return decode_submission(fields[b"s"])
    except (KeyError, ProtocolError) as exc:
        return Rejected("", f"a submission the gateway could not pass on: {exc}")
