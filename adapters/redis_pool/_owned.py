"""One session a worker owns: its engine, the pump that writes its events to Redis,
and the submissions it accepts from its stream (see ``_worker`` for the theory)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError, ResponseError

from codexcore._logging import get_logger
from codexcore.engine import Codex, EngineClosed, Rejected
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

from ._keys import GROUP, event_id
from ._poison import Poison, input_of
from ._streams import Entries

if TYPE_CHECKING:
    from ._worker import Worker

log = get_logger(__name__)

INTERNAL = "redis-pool:"
"""Submission ids of the worker's own submissions; their events are not published."""

DELTAS = frozenset({"agent_message_delta", "agent_reasoning_delta", "exec_command_output_delta"})
BATCH = 256
FOREIGN = Poison("an entry at or above the session's next event id, which no owner wrote")


class Fenced(Exception):
    """The session has a newer owner: this worker must not write to it any more."""


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
            try:
                op = decode_submission(data).op
            except ProtocolError as exc:
                log.warning("unreadable configuration skipped", session=self.id, why=exc.message)
                continue
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
            except Exception:
                # Whatever one entry does, the session's next submissions are answered.
                log.exception("submission entry failed", session=self.id, id=entry_id.decode())

    async def _accept(self, entry_id: str, fields: dict[bytes, bytes]) -> None:
        try:
            item = input_of(fields)
        except Poison as poison:
            await self._refuse(entry_id, fields, poison)
            return
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

    async def _refuse(self, entry_id: str, fields: dict[bytes, bytes], poison: Poison) -> None:
        """An entry of the submission stream that is no submission: past it (the cursor
        moves, fenced), aside (the dead-letter stream), and an ``error`` event on the
        session, in order with the rest, so its clients hear of it."""
        keys, worker = self.worker.keys, self.worker
        await worker.retry(
            lambda: worker.script("ACCEPT")(
                keys=[
                    keys.fence(self.id),
                    keys.state(self.id),
                    keys.seen(self.id, ""),  # not written: no id to remember
                    keys.configs(self.id),
                ],
                args=[self.fence, entry_id, "", ""],
            )
        )
        stream = keys.inbox(self.id)
        await worker.dead.move(stream, entry_id, fields, poison)
        message = (
            f"a submission could not be read from the session's stream ({stream} entry "
            f"{entry_id}): {poison.reason}; it was moved to {worker.dead.key}"
        )
        await self.codex.enqueue(Rejected(poison.submission_id, message))

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
        except ResponseError:
            # Not expected (EMIT clears what was forged in its way): said aloud, and the
            # session left for another worker rather than silently stuck here.
            log.exception("the session's events cannot be written", session=self.id)
            self.drop("its events cannot be written")

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
            written = await worker.retry(
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
        for entry_id, flat in written[1]:
            # Entries no owner wrote, taken out of the way of the numbering by EMIT.
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
            worker.dead.move_soon(keys.events(self.id), entry_id, fields, FOREIGN, deleted=True)

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
