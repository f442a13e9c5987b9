"""Poison entries on the pool's streams, written into a real redis-server under real workers.

A malformed entry (a foreign producer, an older or newer codexcore, a hand-typed
``XADD``) is acknowledged, logged at warning with its stream and id, moved to the
dead-letter stream, and the reader goes on; bad input on a session's submission
stream is also an ``error`` event on that session.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from codexcore.adapters.redis_pool import Keys
from codexcore.testing import ScriptedModel, text_response

from .redis_helpers import Pool, open_session, pool
from .server_helpers import Client, say

pytestmark = pytest.mark.anyio

KEYS = Keys()


def answers(count: int) -> list[Any]:
    return [text_response(f"done {n}") for n in range(count)]


async def run_task(ui: Client, sub_id: str, within: float = 20) -> dict[str, Any]:
    await ui.send(say(sub_id, "go"))
    return await ui.until("task_complete", id=sub_id, within=within)


async def eventually(check: Any, what: str, within: float = 15.0) -> Any:
    """``await check()`` until it answers something true; fails naming ``what``."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.05)


async def dead_letters(r: Any) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in await r.xrange(KEYS.dead_letter)]


async def delivered(r: Any, entry_id: bytes) -> bool:
    groups = await r.xinfo_groups(KEYS.sessions)
    return any(g["last-delivered-id"] >= entry_id for g in groups if g["name"] == b"workers")


def warned(running: Pool, stream: str, entry_id: bytes) -> bool:
    text = "\n".join(line for w in running.workers.values() for line in w.stderr)
    return "poison entry" in text and stream in text and entry_id.decode() in text


async def test_a_malformed_entry_per_worker_on_the_sessions_stream_stops_no_worker(
    tmp_path: Path,
) -> None:
    """The attack as reported: ``XADD codexcore:sessions * foo bar`` once per worker."""
    model = ScriptedModel(answers(1))
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await asyncio.gather(running.worker("w1"), running.worker("w2"))
        from redis.asyncio import Redis

        redis: Any = Redis.from_url(running.redis.url)
        try:
            poison = [await redis.xadd(KEYS.sessions, {"foo": "bar"}) for _ in range(2)]
            await eventually(lambda: delivered(redis, poison[-1]), "both entries delivered")
            ui, session_id = await open_session(gateway)
            await run_task(ui, "u1")
            assert await running.owner(session_id) in {"w1", "w2"}
            letters = await eventually(
                lambda: _at_least(dead_letters(redis), 2), "two dead letters"
            )
            assert {f[b"id"] for f in letters} == set(poison)
            assert {f[b"stream"] for f in letters} == {KEYS.sessions.encode()}
            assert all(f[b"f:foo"] == b"bar" for f in letters)
            assert all(b"no 'session' field" in f[b"reason"] for f in letters)
            # Acknowledged: nothing of them is left pending or in the stream.
            assert (await redis.xpending(KEYS.sessions, "workers"))["pending"] == 1  # the session
            assert not set(poison) & await _ids(redis, KEYS.sessions)
            for entry_id in poison:
                assert warned(running, KEYS.sessions, entry_id), [
                    w.stderr[-5:] for w in running.workers.values()
                ]
        finally:
            await redis.aclose()


async def _at_least(letters: Any, count: int) -> list[dict[bytes, bytes]] | None:
    found: list[dict[bytes, bytes]] = await letters
    return found if len(found) >= count else None


async def _ids(r: Any, stream: str) -> set[bytes]:
    return {entry_id for entry_id, _ in await r.xrange(stream)}


async def test_a_poison_entry_left_pending_by_a_dead_worker_is_moved_aside(
    tmp_path: Path,
) -> None:
    """Delivered before the fix (or to a worker that died mid-decode) and never acked:
    the live workers claim it once, move it aside, and serve sessions."""
    from redis.asyncio import Redis

    model = ScriptedModel(answers(1))
    async with pool(model, tmp_path) as running:
        redis: Any = Redis.from_url(running.redis.url)
        try:
            await redis.xgroup_create(KEYS.sessions, "workers", id="0", mkstream=True)
            poison = await redis.xadd(KEYS.sessions, {"session": b"\xff\xfe not utf-8"})
            await redis.xreadgroup("workers", "ghost", {KEYS.sessions: ">"}, count=1)
            gateway = await running.gateway()
            await running.worker("w1", "--lease", "2.5")
            letters = await eventually(lambda: _at_least(dead_letters(redis), 1), "a dead letter")
            assert letters[0][b"id"] == poison
            assert await _pending_ids(redis) == set()
            ui, _ = await open_session(gateway)
            await run_task(ui, "u1")
            # Claimed once: not again and again.
            assert len(await dead_letters(redis)) == 1
        finally:
            await redis.aclose()


async def _pending_ids(r: Any) -> set[bytes]:
    pending = await r.xpending_range(KEYS.sessions, "workers", min="-", max="+", count=100)
    return {entry["message_id"] for entry in pending}


POISON_INPUT: list[dict[str, bytes]] = [
    {"r": b"not json"},  # the attack as reported
    {"r": b'{"unexpected": 1}'},  # JSON without the expected fields
    {"r": b"[1, 2]"},  # JSON, not an object
    {"s": b"not a submission"},
    {"foo": b"bar"},  # neither field
]


async def test_bad_input_on_a_session_stream_is_an_error_event_and_the_next_task_runs(
    tmp_path: Path,
) -> None:
    from redis.asyncio import Redis

    model = ScriptedModel(answers(2))
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await running.worker("w1")
        ui, session_id = await open_session(gateway)
        await run_task(ui, "u1")
        redis: Any = Redis.from_url(running.redis.url)
        inbox = KEYS.inbox(session_id)
        try:
            ids = [await redis.xadd(inbox, fields) for fields in POISON_INPUT]
            await run_task(ui, "u2")
            errors = ui.of("error")
            assert len(errors) == len(POISON_INPUT), errors
            for error, entry_id in zip(errors, ids, strict=True):
                assert error["code"] == "bad_submission"
                assert entry_id.decode() in error["message"]
                assert KEYS.dead_letter in error["message"]
            letters = await dead_letters(redis)
            assert [f[b"id"] for f in letters] == ids
            assert {f[b"stream"] for f in letters} == {inbox.encode()}
            assert letters[0][b"f:r"] == b"not json"
            assert ids[0].decode() not in str(await _ids(redis, inbox))
            ui.check_invariants()
            assert warned(running, inbox, ids[0])
        finally:
            await redis.aclose()


@pytest.mark.parametrize("where", ["between", "ahead", "a copy ahead"])
async def test_a_poison_event_is_skipped_by_every_gateway_and_moved_aside_once(
    tmp_path: Path, where: str
) -> None:
    """``between`` two events' ids, or ``ahead`` of the numbering (``XADD events *``: an
    id of the current time, which would block the worker's every later id); ``a copy``
    of the last event decodes, but not under its seq's entry id."""
    from redis.asyncio import Redis

    model = ScriptedModel(answers(2))
    async with pool(model, tmp_path) as running:
        a, b = await running.gateway(), await running.gateway()
        await running.worker("w1")
        ui, session_id = await open_session(a)
        watcher = await b.client()
        await watcher.greet(session_id=session_id, last_seq=-1, control=False)
        await run_task(ui, "u1")
        redis: Any = Redis.from_url(running.redis.url)
        events = KEYS.events(session_id)
        try:
            last, fields = (await redis.xrevrange(events, count=1))[0]
            seq = int(last.split(b"-")[0])
            forged = f"{seq}-5" if where == "between" else "*"
            data = fields[b"e"] if where == "a copy ahead" else b"not an event"
            forged = (await redis.xadd(events, {"e": data}, id=forged)).decode()
            # Both gateways have read it before the next Task writes (the worst case).
            await eventually(lambda: _at_least(dead_letters(redis), 1), "a dead letter")
            await run_task(ui, "u2")
            await watcher.until("task_complete", id="u2")
            assert watcher.events() == ui.events()
            ui.check_invariants()
            letters = await eventually(lambda: _at_least(dead_letters(redis), 1), "a dead letter")
            assert len(letters) == 1, letters  # two gateways, one move
            assert letters[0][b"id"] == forged.encode()
            # A gateway opening the session afterwards replays cleanly.
            late = await b.client()
            await late.greet(session_id=session_id, last_seq=-1, control=False)
            await late.until("task_complete", id="u2")
            assert late.events() == ui.events()
        finally:
            await redis.aclose()
