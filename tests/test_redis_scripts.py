"""The pool's Lua scripts against a real redis-server: lease, fencing, dedupe, retention."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ResponseError

from codexcore.adapters.redis_pool import _keys
from codexcore.adapters.redis_pool._keys import Keys, event_id

from .redis_helpers import redis_server

pytestmark = pytest.mark.anyio

KEYS = Keys("t")
SID = "s-1"


@pytest.fixture
async def r() -> AsyncIterator[Any]:
    from redis.asyncio import Redis

    async with redis_server() as server:
        client = Redis.from_url(server.url)
        await client.hset(KEYS.state(SID), mapping={"next_seq": 0})
        try:
            yield client
        finally:
            await client.aclose()


async def take(r: Any, worker: str, lease_ms: int = 60_000) -> Any:
    script = r.register_script(_keys.TAKE)
    return await script(
        keys=[KEYS.fence(SID), KEYS.lease(SID), KEYS.state(SID)], args=[worker, lease_ms]
    )


async def emit(r: Any, fence: int, seqs: range, maxlen: int = 100) -> Any:
    script = r.register_script(_keys.EMIT)
    pairs: list[Any] = []
    for seq in seqs:
        pairs += [event_id(seq), f"event {seq}"]
    return await script(
        keys=[KEYS.fence(SID), KEYS.events(SID), KEYS.state(SID), KEYS.history(SID)],
        args=[fence, maxlen, "", seqs.stop, len(seqs), *pairs, b"line"],
    )


async def test_a_live_lease_cannot_be_taken_and_each_takeover_raises_the_fence(r: Any) -> None:
    first = await take(r, "w1")
    assert first[:2] == [1, b""]
    assert await take(r, "w2") == b"owned"  # w1's lease is live
    await r.delete(KEYS.lease(SID))  # as its TTL would
    second = await take(r, "w2")
    assert second[:2] == [2, b"w1"]  # the new fence, and who was there before
    await r.hset(KEYS.state(SID), "ended", "1")
    await r.delete(KEYS.lease(SID))
    assert await take(r, "w3") == b"gone"


async def test_a_stale_fence_writes_nothing(r: Any) -> None:
    await take(r, "w1", lease_ms=1)
    await asyncio.sleep(0.01)
    assert (await take(r, "w2"))[0] == 2
    with pytest.raises(ResponseError, match=_keys.FENCED):
        await emit(r, 1, range(0, 3))
    assert await r.xlen(KEYS.events(SID)) == 0
    assert await r.llen(KEYS.history(SID)) == 0
    assert await emit(r, 2, range(0, 3)) == [3, []]
    entries = await r.xrange(KEYS.events(SID))
    assert [e[0] for e in entries] == [b"0-1", b"1-1", b"2-1"]
    assert await r.hget(KEYS.state(SID), "next_seq") == b"3"
    # A second writer cannot slip an event in under a seq already written.
    with pytest.raises(ResponseError):
        await emit(r, 2, range(2, 3))


async def test_an_entry_forged_ahead_of_the_numbering_is_taken_out_of_its_way(r: Any) -> None:
    """``XADD events *`` gets an id of the current time: every later ``<seq>-1`` would be
    refused. EMIT takes such entries out, sets the stream's last id back, and answers them."""
    await take(r, "w1")
    assert await emit(r, 1, range(0, 2)) == [2, []]
    at_next = await r.xadd(KEYS.events(SID), {"e": b"also"}, id="2-1")  # the next id itself
    forged = await r.xadd(KEYS.events(SID), {"e": b"forged"})
    assert await emit(r, 1, range(2, 4)) == [
        2,
        [[at_next, [b"e", b"also"]], [forged, [b"e", b"forged"]]],
    ]
    entries = await r.xrange(KEYS.events(SID))
    assert [e[0] for e in entries] == [b"0-1", b"1-1", b"2-1", b"3-1"]
    assert entries[2][1] == {b"e": b"event 2"}
    # Forged, then taken out by a gateway: the stream's last id stays ahead all the same.
    await r.xdel(KEYS.events(SID), await r.xadd(KEYS.events(SID), {"e": b"forged"}))
    assert await emit(r, 1, range(4, 5)) == [1, []]
    assert (await r.xrevrange(KEYS.events(SID), count=1))[0][0] == b"4-1"


async def test_a_renewal_with_a_stale_fence_is_refused(r: Any) -> None:
    await take(r, "w1", lease_ms=1)
    await asyncio.sleep(0.01)
    await take(r, "w2")
    await r.xgroup_create(KEYS.sessions, "workers", id="0", mkstream=True)
    entry = await r.xadd(KEYS.sessions, {"session": SID})
    await r.xreadgroup("workers", "w2", {KEYS.sessions: ">"})
    renew = r.register_script(_keys.RENEW)

    async def renewal(worker: str, fence: int) -> Any:
        keys = [KEYS.sessions, KEYS.fence(SID), KEYS.lease(SID)]
        return await renew(keys=keys, args=[worker, 5000, "workers", fence, entry])

    assert await renewal("w1", 1) == [0]
    assert await r.get(KEYS.lease(SID)) == b"w2 2"
    assert await renewal("w2", 2) == [1]
    assert await r.pttl(KEYS.lease(SID)) > 4000


async def test_submission_ids_are_accepted_once_within_their_ttl(r: Any) -> None:
    await take(r, "w1")
    accept = r.register_script(_keys.ACCEPT)

    async def once(entry: str, ttl_ms: int) -> Any:
        keys = [KEYS.fence(SID), KEYS.state(SID), KEYS.seen(SID, "u1"), KEYS.configs(SID)]
        return await accept(keys=keys, args=[1, entry, ttl_ms, ""])

    assert await once("1-0", 200) == 1
    assert await once("2-0", 200) == 0
    assert await r.hget(KEYS.state(SID), "cursor") == b"2-0"
    for _ in range(250):  # Redis expires the key on its own clock
        if not await r.exists(KEYS.seen(SID, "u1")):
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the seen key outlived its TTL by 5 s")
    assert await once("3-0", 200) == 1  # remembered for the TTL only


async def test_the_event_stream_is_trimmed_to_the_replay_limit(r: Any) -> None:
    await take(r, "w1")
    for start in range(0, 1000, 100):
        await emit(r, 1, range(start, start + 100), maxlen=200)
    length = await r.xlen(KEYS.events(SID))
    assert 200 <= length < 400, length  # approximate trimming keeps whole nodes
    last = await r.xrevrange(KEYS.events(SID), count=1)
    assert last[0][0] == b"999-1"
