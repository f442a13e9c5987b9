"""Seed 000's run opening in one write: run.start's answer, ``run.status running`` and the
run's first ``agent.event`` reach the UI together (one wake-up of the client, as the
native dialect's ack and ``task_started`` do), and a held answer never waits for long."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.adapters.host._host import HostConfig, SessionHost, host_engine_config
from codexcore.adapters.jsonrpc._methods import standard_methods
from codexcore.adapters.jsonrpc._options import RpcOptions
from codexcore.adapters.jsonrpc._server import RpcConnection, RpcContext
from codexcore.adapters.transports._conduit import Lines
from codexcore.engine import SessionConfig
from codexcore.testing import ScriptedModel, text_response

from .test_jsonrpc_runner import MemoryConduit, req

pytestmark = pytest.mark.anyio


class WriteLog(MemoryConduit):
    """A conduit that also keeps each write apart: what one wake-up of the client brings."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[list[Any]] = []

    def write(self, data: bytes) -> None:
        self.writes.append([orjson.loads(line) for line in data.splitlines()])
        super().write(data)

    async def until(self, done: Any, within: float = 5.0) -> None:
        try:
            async with asyncio.timeout(within):
                while not done(self.writes):
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"not within {within} s; writes: {self.writes}") from None


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, model: ScriptedModel, options: RpcOptions | None = None
) -> AsyncIterator[WriteLog]:
    engine = host_engine_config(session=SessionConfig(cwd=str(tmp_path)), home=str(tmp_path))
    host = SessionHost(HostConfig(engine=engine), transport=model.mock_transport())
    await host.start()
    conduit = WriteLog()
    connection = RpcConnection(
        host,
        conduit,
        Lines(conduit, 1024 * 1024),
        options or RpcOptions(),
        require_initialize=False,
        stdio=True,
        stuck_timeout=None,
    )
    task = asyncio.create_task(connection.run(None))
    try:
        yield conduit
    finally:
        conduit.end()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)
        task.cancel()
        await host.aclose()


def _kinds(write: list[Any]) -> list[str]:
    """Each line of a write: ``answer``, or its method (and the event's or status' type)."""
    kinds = []
    for message in write:
        params = message.get("params") or {}
        if "result" in message:
            kinds.append("answer")
        elif message["method"] == "agent.event":
            kinds.append(f"agent.event {params['event']['type']}")
        elif message["method"] == "run.status":
            kinds.append(f"run.status {params['status']}")
        else:
            kinds.append(message["method"])
    return kinds


async def test_run_start_answer_status_and_first_event_leave_in_one_write(
    tmp_path: Path,
) -> None:
    """On a session that is running (the first run also configures it, and its answer
    leaves once the engine has taken the input, before that work)."""
    model = ScriptedModel([text_response("Done."), text_response("Again.")])
    async with serving(tmp_path, model) as conduit:
        for rid in ("1", "2"):
            conduit.writes.clear()
            conduit.feed(req(rid, "run.start", input={"type": "text", "text": "hi"}))
            await conduit.until(lambda ws: any("run.status completed" in _kinds(w) for w in ws))
    first = _kinds(conduit.writes[0])
    assert first[:3] == ["answer", "run.status running", "agent.event step_start"], conduit.writes
    every = [kind for write in conduit.writes for kind in _kinds(write)]
    assert every[-1] == "run.status completed"
    assert "agent.event final" in every


def _holding_table() -> RpcOptions:
    table = standard_methods()
    releases: list[Any] = []

    async def held(ctx: RpcContext, params: dict[str, Any]) -> str:
        releases.append(ctx.hold_answer(params.get("longest", 60.0)))
        return "held"

    async def follow(ctx: RpcContext, params: dict[str, Any]) -> str:
        await ctx.notify("test.follows", {})
        releases.pop()()
        return "followed"

    table.add("held", held, dict)
    table.add("follow", follow, dict)
    return RpcOptions(methods=table)


async def test_a_held_answer_leaves_with_what_released_it(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedModel([]), _holding_table()) as conduit:
        conduit.feed(req("1", "held"), req("2", "follow"))
        await conduit.until(lambda writes: len([m for w in writes for m in w]) >= 3)
    first = conduit.writes[0]
    assert [m.get("result", m.get("method")) for m in first] == ["held", "test.follows"]
    assert conduit.writes[1] == [{"jsonrpc": "2.0", "id": "2", "result": "followed"}]


async def test_a_held_answer_leaves_after_its_longest_wait(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedModel([]), _holding_table()) as conduit:
        conduit.feed(req("1", "held", longest=0.05))
        await conduit.until(lambda writes: bool(writes), within=5.0)
    assert conduit.writes[0] == [{"jsonrpc": "2.0", "id": "1", "result": "held"}]
