"""An app-server client that stops reading: the server holds its Turn on a real pipe
rather than buffering the notifications, and loses none of them once it reads again."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.adapters.app_server import serve_app_server
from codexcore.adapters.host import HostConfig, SessionHost
from codexcore.adapters.stdio import WRITE_HIGH_WATER, FdConduit
from codexcore.testing import ScriptedModel, text_response

pytestmark = pytest.mark.anyio

WAIT = 30.0
ONE_BATCH = 256 * 1024
"""More than the notifications of one batch of small events (64 KiB of events)."""


class WatchedConduit(FdConduit):
    """The real stdio conduit, noting how much was left unsent before each write."""

    def __init__(self, in_fd: int, out_fd: int) -> None:
        super().__init__(in_fd, out_fd)
        self.unsent_before_writes: list[int] = []
        self.behind = asyncio.Event()  # set once the transport is over its mark

    def write(self, data: bytes) -> None:
        self.unsent_before_writes.append(self.pending())
        super().write(data)
        if self.pending() > WRITE_HIGH_WATER:
            self.behind.set()


async def test_a_client_that_stops_reading_holds_the_turn_and_loses_nothing(
    tmp_path: Path,
) -> None:
    text = "".join(f"{n:07d} " for n in range(100_000))  # 800 kB in 4000 deltas
    model = ScriptedModel([text_response(text, chunks=4000)])
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    loop = asyncio.get_running_loop()
    async with SessionHost(HostConfig(), transport=model.mock_transport()) as host:
        conduit = await WatchedConduit.open(in_r, out_w)
        assert isinstance(conduit, WatchedConduit)
        serving = asyncio.create_task(serve_app_server(conduit, host))
        reader = asyncio.StreamReader(limit=1 << 24)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(out_r, "rb", buffering=0)
        )

        def send(message: dict[str, Any]) -> None:
            os.write(in_w, orjson.dumps(message) + b"\n")

        async def until(check: Any) -> dict[str, Any]:
            async with asyncio.timeout(WAIT):
                while True:
                    message: dict[str, Any] = orjson.loads(await reader.readline())
                    if check(message):
                        return message

        send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t"}}})
        await until(lambda m: m.get("id") == 1)
        send({"method": "initialized"})
        send({"id": 2, "method": "thread/start", "params": {"cwd": str(tmp_path)}})
        thread = (await until(lambda m: m.get("id") == 2))["result"]["thread"]["id"]
        input_ = [{"type": "text", "text": "talk"}]
        send({"id": 3, "method": "turn/start", "params": {"threadId": thread, "input": input_}})
        async with asyncio.timeout(WAIT):
            await conduit.behind.wait()  # the client has not read: the pipe is full

        deltas: list[str] = []

        def collect(message: dict[str, Any]) -> bool:
            if message.get("method") == "item/agentMessage/delta":
                deltas.append(message["params"]["delta"])
            return message.get("method") == "turn/completed"

        completed = await until(collect)
        assert completed["params"]["turn"]["status"] == "completed"
        assert "".join(deltas) == text  # every delta, in order
        # Never more written while far behind: what waits unsent stays bounded.
        assert max(conduit.unsent_before_writes) <= WRITE_HIGH_WATER + ONE_BATCH
        os.close(in_w)
        async with asyncio.timeout(WAIT):
            await serving
