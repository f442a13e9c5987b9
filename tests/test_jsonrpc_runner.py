"""The JSON-RPC runner over an in-memory conduit and a real SessionHost: concurrency,
runtime-to-UI requests, the bound on calls, backpressure, the lazy session."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.adapters.host._host import HostConfig, SessionHost, host_engine_config
from codexcore.adapters.jsonrpc import ConnectionClosed, RpcConnection, RpcContext, RpcOptions
from codexcore.adapters.jsonrpc._machine import RpcError
from codexcore.adapters.jsonrpc._methods import MethodTable, standard_methods
from codexcore.adapters.transports._conduit import Lines
from codexcore.engine import SessionConfig
from codexcore.protocol import ConfigureSession, Event, Submission
from codexcore.testing import ScriptedModel

pytestmark = pytest.mark.anyio


class MemoryConduit:
    """A Conduit whose peer is the test: ``feed`` what the client sends, ``recv`` what it gets.

    ``stuck`` makes drain() wait (a client that reads nothing)."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.written = bytearray()
        self.changed = asyncio.Event()
        self.unstuck = asyncio.Event()
        self.unstuck.set()
        self.unsent = 0  # written while the client reads nothing, as a transport's buffer
        self.closed = False

    def feed(self, *messages: Any) -> None:
        for message in messages:
            self.inbox.put_nowait(message if isinstance(message, bytes) else orjson.dumps(message))
            self.inbox.put_nowait(b"\n")

    def end(self) -> None:
        self.inbox.put_nowait(b"")

    async def read(self) -> bytes:
        return await self.inbox.get()

    def write(self, data: bytes) -> None:
        self.written += data
        self.unsent = 0 if self.unstuck.is_set() else self.unsent + len(data)
        self.changed.set()

    def write_eof(self) -> None:
        pass

    def pending(self) -> int:
        return 0 if self.unstuck.is_set() else self.unsent

    async def drain(self) -> None:
        await self.unstuck.wait()

    async def close(self, flush_timeout: float | None) -> None:
        self.closed = True
        self.changed.set()

    def abort(self) -> None:
        self.closed = True
        self.changed.set()

    async def recv(self, within: float = 5.0) -> Any:
        """The next whole line written, decoded."""
        try:
            async with asyncio.timeout(within):
                while b"\n" not in self.written:
                    if self.closed:
                        raise AssertionError("closed without writing a line")
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"nothing within {within} s; have {bytes(self.written)!r}"
            ) from None
        first, _, rest = bytes(self.written).partition(b"\n")
        self.written[:] = rest
        return orjson.loads(first)


def req(rid: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, options: RpcOptions | None = None, *, stdio: bool = True
) -> AsyncIterator[tuple[MemoryConduit, RpcConnection, asyncio.Task[bool]]]:
    engine = host_engine_config(session=SessionConfig(cwd=str(tmp_path)), home=str(tmp_path))
    host = SessionHost(
        HostConfig(engine=engine, send_buffer_bytes=4096),
        transport=ScriptedModel([]).mock_transport(),
    )
    await host.start()
    conduit = MemoryConduit()
    connection = RpcConnection(
        host,
        conduit,
        Lines(conduit, 1024 * 1024),
        options or RpcOptions(),
        require_initialize=False,
        stdio=stdio,
        stuck_timeout=None,
    )
    task = asyncio.create_task(connection.run(None))
    try:
        yield conduit, connection, task
    finally:
        conduit.end()
        conduit.unstuck.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)
        task.cancel()
        await host.aclose()
        assert host.session_count == 0


def table_with_test_methods(gate: asyncio.Event) -> RpcOptions:
    table = standard_methods()

    async def slow(ctx: RpcContext, params: dict[str, Any]) -> str:
        await gate.wait()
        return "slow done"

    async def release(ctx: RpcContext, params: dict[str, Any]) -> str:
        gate.set()
        return "released"

    async def fail(ctx: RpcContext, params: dict[str, Any]) -> None:
        raise ValueError("secret-internal-detail")

    async def ask(ctx: RpcContext, params: dict[str, Any]) -> Any:
        try:
            return await ctx.request("ui.confirm.request", {"title": "Run?", "message": "ls"})
        except ConnectionClosed:
            return "closed"
        except RpcError as exc:
            return f"error {exc.code}"

    async def whoami(ctx: RpcContext, params: dict[str, Any]) -> str:
        return (await ctx.session()).session_id

    async def configure(ctx: RpcContext, params: dict[str, Any]) -> str:
        async def forward(event: Event) -> None:
            await ctx.notify("test.event", {"type": event.msg.TYPE, "seq": event.seq})

        ctx.on_event(forward)
        attachment = await ctx.session()
        await attachment.submit(Submission("c1", ConfigureSession()))
        return "submitted"

    methods: list[tuple[str, Any]] = [
        ("slow", slow),
        ("release", release),
        ("fail", fail),
        ("ask", ask),
        ("whoami", whoami),
        ("configure", configure),
    ]
    for name, handler in methods:
        table.add(name, handler, dict)
    return RpcOptions(methods=table, max_pending=3)


async def test_a_long_request_does_not_block_the_next_frame(tmp_path: Path) -> None:
    gate = asyncio.Event()
    async with serving(tmp_path, table_with_test_methods(gate)) as (ui, _, _):
        ui.feed(req(1, "slow"), req(2, "release"))
        assert await ui.recv() == {"jsonrpc": "2.0", "id": 2, "result": "released"}
        assert await ui.recv() == {"jsonrpc": "2.0", "id": 1, "result": "slow done"}


async def test_calls_beyond_the_bound_get_32004_and_the_connection_goes_on(tmp_path: Path) -> None:
    gate = asyncio.Event()
    async with serving(tmp_path, table_with_test_methods(gate)) as (ui, _, _):
        ui.feed(req(1, "slow"), req(2, "slow"), req(3, "slow"), req(4, "slow"))
        over = await ui.recv()
        assert (over["id"], over["error"]["code"]) == (4, -32004), over
        ui.feed(req(5, "release"))  # room again only once one is answered: still over
        assert (await ui.recv())["error"]["code"] == -32004
        gate.set()
        done = [await ui.recv() for _ in range(3)]
        assert sorted(m["id"] for m in done) == [1, 2, 3]
        ui.feed(req(6, "release"))
        assert await ui.recv() == {"jsonrpc": "2.0", "id": 6, "result": "released"}


async def test_an_internal_error_is_logged_with_its_traceback_and_never_sent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    async with serving(tmp_path, table_with_test_methods(asyncio.Event())) as (ui, _, _):
        ui.feed(req("f", "fail"))
        answer = await ui.recv()
        assert answer == {
            "jsonrpc": "2.0",
            "id": "f",
            "error": {"code": -32603, "message": "Internal error in fail"},
        }
    failures = [r for r in caplog.records if "method failed" in r.getMessage()]
    assert failures
    assert failures[0].exc_info is not None
    assert "secret-internal-detail" in str(failures[0].exc_info[1])


async def test_a_codelia_methods_fault_is_the_protocols_runtime_internal_error(
    tmp_path: Path,
) -> None:
    """The Codelia runtime protocol's -32000 is "runtime internal error": a fault in one of
    its methods answers that (the traceback stays in the log), not JSON-RPC's -32603."""
    table = MethodTable()

    async def fail(ctx: RpcContext, params: dict[str, Any]) -> None:
        raise ValueError("secret-internal-detail")

    table.add("tool.call", fail, dict)
    async with serving(tmp_path, RpcOptions(methods=table)) as (ui, _, _):
        ui.feed(req("t", "tool.call"))
        assert await ui.recv() == {
            "jsonrpc": "2.0",
            "id": "t",
            "error": {"code": -32000, "message": "runtime internal error in tool.call"},
        }


async def test_runtime_requests_are_correlated_and_strays_are_ignored(tmp_path: Path) -> None:
    async with serving(tmp_path, table_with_test_methods(asyncio.Event())) as (ui, _, _):
        ui.feed(req(1, "ask"))
        asked = await ui.recv()
        assert asked["method"] == "ui.confirm.request"
        assert isinstance(asked["id"], str)
        ui.feed(
            {"jsonrpc": "2.0", "id": "no-such", "result": {"ok": False}},
            {"jsonrpc": "2.0", "id": 12345, "result": {"ok": False}},
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"ok": True, "reason": None}},
        )
        assert await ui.recv() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"ok": True, "reason": None},
        }
        ui.feed(req(2, "ask"))
        asked = await ui.recv()
        ui.feed({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32003, "message": "no"}})
        assert (await ui.recv())["result"] == "error -32003"


async def test_a_pending_runtime_request_fails_when_input_ends(tmp_path: Path) -> None:
    async with serving(tmp_path, table_with_test_methods(asyncio.Event())) as (ui, _, task):
        ui.feed(req(1, "ask"))
        assert (await ui.recv())["method"] == "ui.confirm.request"
        ui.end()
        assert await ui.recv() == {"jsonrpc": "2.0", "id": 1, "result": "closed"}
        assert await asyncio.wait_for(task, 5) is True
        assert ui.closed


async def test_the_session_is_made_once_on_first_use_and_its_events_reach_listeners(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, table_with_test_methods(asyncio.Event())) as (ui, conn, _):
        assert conn.host.session_count == 0  # nothing asked for one yet
        ui.feed(req(1, "whoami"), req(2, "whoami"))
        ids = {(await ui.recv())["result"] for _ in range(2)}
        assert len(ids) == 1
        assert conn.host.session_count == 1
        ui.feed(req(3, "configure"))
        seen = [await ui.recv() for _ in range(3)]
        events = [m["params"]["type"] for m in seen if m.get("method") == "test.event"]
        assert events == ["submission_ack", "session_configured"]
        assert {"jsonrpc": "2.0", "id": 3, "result": "submitted"} in seen


async def test_a_client_that_floods_without_reading_is_slowed_not_buffered(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (ui, conn, _):
        ui.unstuck.clear()  # the client reads nothing: every drain waits
        for n in range(2000):
            ui.feed({"jsonrpc": "2.0", "id": n})  # each answered -32600 by the reader itself
        await asyncio.sleep(0)
        for _ in range(200):  # let the server run as far as it can
            await asyncio.sleep(0)
        # The outbox holds at most send_buffer_bytes (4 KiB) beyond one write in progress:
        # the reader stopped taking frames, so most of the flood is still unread.
        assert conn.outbox._bytes <= 4096
        assert ui.inbox.qsize() > 3000, ui.inbox.qsize()
        ui.unstuck.set()
        answers = [await ui.recv() for _ in range(2000)]
        assert [a["id"] for a in answers] == list(range(2000))
