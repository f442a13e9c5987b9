"""The loop-only queue behind Codex(threadsafe=False): janus's async semantics, one loop."""

from __future__ import annotations

import asyncio

import janus
import pytest

from codexcore.engine._queues import LoopQueue

pytestmark = pytest.mark.anyio


async def test_items_come_out_in_order_and_a_full_queue_holds_the_putter() -> None:
    queue: LoopQueue[int] = LoopQueue(2)
    await queue.put(1)
    await queue.put(2)
    assert queue.full()
    assert queue.qsize() == 2
    third = asyncio.create_task(queue.put(3))
    await asyncio.sleep(0.01)
    assert not third.done()  # backpressure: waits for room
    assert await queue.get() == 1
    await third
    assert [await queue.get(), await queue.get()] == [2, 3]
    assert queue.empty()


async def test_a_waiting_getter_gets_the_next_item() -> None:
    queue: LoopQueue[str] = LoopQueue(4)
    getters = [asyncio.create_task(queue.get()) for _ in range(2)]
    await asyncio.sleep(0)
    queue.put_nowait("a")
    queue.put_nowait("b")
    assert await asyncio.gather(*getters) == ["a", "b"]


async def test_a_cancelled_getter_passes_its_item_on() -> None:
    """An item handed to a getter cancelled at the same moment is not lost."""
    queue: LoopQueue[str] = LoopQueue(4)
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait("x")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    assert await second == "x"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_nowait_errors_are_janus_errors() -> None:
    queue: LoopQueue[int] = LoopQueue(1)
    with pytest.raises(janus.AsyncQueueEmpty):
        queue.get_nowait()
    queue.put_nowait(1)
    with pytest.raises(janus.AsyncQueueFull):
        queue.put_nowait(2)


async def test_shutdown_drains_then_fails_and_wakes_every_waiter() -> None:
    queue: LoopQueue[int] = LoopQueue(1)
    getter_queue: LoopQueue[int] = LoopQueue(1)
    await queue.put(1)
    putter = asyncio.create_task(queue.put(2))
    getter = asyncio.create_task(getter_queue.get())
    await asyncio.sleep(0)
    queue.shutdown()
    getter_queue.shutdown()
    with pytest.raises(janus.AsyncQueueShutDown):
        await putter
    with pytest.raises(janus.AsyncQueueShutDown):
        await getter
    assert queue.closed
    assert await queue.get() == 1  # what was queued still comes out
    with pytest.raises(janus.AsyncQueueShutDown):
        await queue.get()
    with pytest.raises(janus.AsyncQueueShutDown):
        queue.put_nowait(3)


async def test_immediate_shutdown_drops_what_is_queued() -> None:
    queue: LoopQueue[int] = LoopQueue(4)
    queue.put_nowait(1)
    queue.put_nowait(2)
    queue.shutdown(immediate=True)
    assert queue.empty()
    assert queue.unfinished_tasks == 0
    with pytest.raises(janus.AsyncQueueShutDown):
        await queue.get()


async def test_join_waits_for_every_task_done() -> None:
    queue: LoopQueue[int] = LoopQueue()
    queue.put_nowait(1)
    joined = asyncio.create_task(queue.join())
    await asyncio.sleep(0.01)
    assert not joined.done()
    await queue.get()
    queue.task_done()
    await asyncio.wait_for(joined, 1)
    with pytest.raises(ValueError, match="too many times"):
        queue.task_done()
