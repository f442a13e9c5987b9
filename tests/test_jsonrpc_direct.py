"""The JSON-RPC follower's direct delivery: a delivery begun in the session pump's step
that has to wait goes on, in order, exactly as an awaited coroutine would."""

from __future__ import annotations

import asyncio

import pytest

from codexcore.adapters.jsonrpc._server import _finish_started

pytestmark = pytest.mark.anyio


async def _stepped_once(coro: object) -> object:
    """Step ``coro`` by hand, as the pump's step does; what it waits on."""
    return coro.send(None)  # type: ignore[attr-defined]


async def test_a_delivery_that_waits_goes_on_with_results_and_sleeps() -> None:
    seen: list[object] = []
    first: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def delivery() -> None:
        seen.append("begun")
        seen.append(await first)
        await asyncio.sleep(0)
        seen.append(await asyncio.sleep(0.01, "slept"))

    coro = delivery()
    waiting_on = await _stepped_once(coro)
    assert waiting_on is first
    assert seen == ["begun"]
    finishing = asyncio.ensure_future(_finish_started(coro, waiting_on))
    first.set_result("answered")
    async with asyncio.timeout(5):
        await finishing
    assert seen == ["begun", "answered", "slept"]


async def test_a_cancel_reaches_the_delivery_and_its_exceptions_come_back() -> None:
    cleaned: list[str] = []
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def delivery() -> None:
        try:
            await never
        finally:
            cleaned.append("finally ran")

    coro = delivery()
    finishing = asyncio.ensure_future(_finish_started(coro, await _stepped_once(coro)))
    await asyncio.sleep(0)
    finishing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await finishing
    assert cleaned == ["finally ran"]
    assert never.cancelled()

    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def failing() -> None:
        await gate
        raise ValueError("listener failed")

    coro = failing()
    finishing = asyncio.ensure_future(_finish_started(coro, await _stepped_once(coro)))
    gate.set_result(None)
    with pytest.raises(ValueError, match="listener failed"):
        await finishing
