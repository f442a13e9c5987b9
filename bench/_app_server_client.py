"""The client of ``bench_app_server.py``: the app-server protocol (JSON-RPC without the
``"jsonrpc"`` member, as ``codex app-server`` speaks it) over stdio or WebSocket, in
this process, the same client for every server.

The shapes are the pinned Codex CLI's own schema (``codex app-server
generate-json-schema``): ``initialize`` with ``clientInfo`` then the ``initialized``
notification, ``thread/start`` (its ``thread.id``), ``turn/start`` with ``threadId``
and ``input: [{"type": "text", "text": ...}]``, notifications read until
``turn/completed``; the server's ``item/commandExecution/requestApproval`` (and
``item/fileChange/requestApproval``) answered ``{"decision": "accept"}``.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

TIMEOUT = 60.0
"""Seconds any one answer (or one Turn) may take before the bench gives up."""
APPROVALS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")
DELTA = "item/agentMessage/delta"


class ServerGone(RuntimeError):
    """The server closed its side, or answered a request with an error."""


@dataclass
class Link:
    """One object out, the next message in, over whichever transport."""

    send: Callable[[dict[str, Any]], Awaitable[None]]
    recv: Callable[[], Awaitable[bytes]]


@dataclass
class TurnSeen:
    """What one Turn brought: every notification by method, and the moments that bound it."""

    began: float
    ended: float = 0.0
    methods: dict[str, int] = field(default_factory=dict)
    approvals: int = 0

    @property
    def notifications(self) -> int:
        return sum(self.methods.values())


class Client:
    """The app-server protocol over one :class:`Link`: requests, and Turns read to their end."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self._next = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read until its answer (notifications before it are dropped)."""
        self._next += 1
        ident = self._next
        await self.link.send({"id": ident, "method": method, "params": params})
        async with asyncio.timeout(TIMEOUT):
            while True:
                message = await self._read()
                if message.get("id") == ident and "method" not in message:
                    if "error" in message:
                        raise ServerGone(f"{method}: {message['error']}")
                    result: dict[str, Any] = message.get("result") or {}
                    return result
                if "method" in message and "id" in message:
                    await self._answer(message)

    async def initialize(self) -> None:
        await self.request(
            "initialize", {"clientInfo": {"name": "codexcore-bench", "version": "0"}}
        )
        await self.link.send({"method": "initialized"})

    async def start_thread(self, params: dict[str, Any]) -> str:
        result = await self.request("thread/start", params)
        return str(result["thread"]["id"])

    async def turn(self, thread: str, text: str) -> TurnSeen:
        """Run one Turn: ``turn/start``, then every message until ``turn/completed``."""
        self._next += 1
        ident = self._next
        seen = TurnSeen(time.perf_counter())
        await self.link.send({"id": ident, "method": "turn/start", "params": {
            "threadId": thread, "input": [{"type": "text", "text": text}]}})  # fmt: skip
        async with asyncio.timeout(TIMEOUT):
            while True:
                message = await self._read()
                method = message.get("method")
                if method is None:  # an answer: turn/start's own
                    if "error" in message:
                        raise ServerGone(f"turn/start: {message['error']}")
                    continue
                if "id" in message:
                    seen.approvals += await self._answer(message)
                    continue
                seen.methods[method] = seen.methods.get(method, 0) + 1
                if method == "error":
                    raise ServerGone(f"the Turn failed: {message.get('params')}")
                if method == "turn/completed":
                    seen.ended = time.perf_counter()
                    status = message["params"]["turn"].get("status")
                    if status != "completed":
                        raise ServerGone(f"the Turn ended {status}: {message['params']}")
                    return seen

    async def _read(self) -> dict[str, Any]:
        line = await self.link.recv()
        if not line:
            raise ServerGone("the server closed its side")
        message: dict[str, Any] = orjson.loads(line)
        return message

    async def _answer(self, request: dict[str, Any]) -> int:
        """Answer a server request: accept approvals; anything else is declined."""
        if request["method"] in APPROVALS:
            await self.link.send({"id": request["id"], "result": {"decision": "accept"}})
            return 1
        declined = {"code": -32601, "message": f"the bench does not answer {request['method']}"}
        await self.link.send({"id": request["id"], "error": declined})
        return 0


# --- the transports ---------------------------------------------------------------------


@dataclass
class Spawned:
    """A server process and the client talking to it."""

    process: asyncio.subprocess.Process
    client: Client


@asynccontextmanager
async def over_stdio(argv: list[str], env: dict[str, str], cwd: Path) -> AsyncIterator[Spawned]:
    """The server spawned as a UI spawns it, JSON-RPC on its stdin and stdout."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=env, cwd=cwd, limit=1 << 24,
    )  # fmt: skip
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def send(message: dict[str, Any]) -> None:
        stdin.write(orjson.dumps(message) + b"\n")
        await stdin.drain()

    try:
        yield Spawned(process, Client(Link(send, stdout.readline)))
    finally:
        stdin.close()
        await _end(process, patience=2.0)


@asynccontextmanager
async def over_websocket(argv: list[str], env: dict[str, str], cwd: Path) -> AsyncIterator[Spawned]:
    """The server listening on a loopback port (it prints ``listening on ws://...``)."""
    from websockets.asyncio.client import connect

    process = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=env, cwd=cwd,
    )  # fmt: skip
    try:
        url = await _listening_url(process)
        async with connect(url, compression=None, max_size=1 << 24) as ws:

            async def send(message: dict[str, Any]) -> None:
                await ws.send(orjson.dumps(message).decode())

            async def recv() -> bytes:
                message = await ws.recv()
                return message.encode() if isinstance(message, str) else message

            yield Spawned(process, Client(Link(send, recv)))
    finally:
        await _end(process, patience=0.0)


async def _listening_url(process: asyncio.subprocess.Process) -> str:
    stderr = process.stderr
    assert stderr is not None
    said: list[bytes] = []
    async with asyncio.timeout(TIMEOUT):
        while line := await stderr.readline():
            said.append(line)
            if match := re.search(rb"listening on:? (ws://\S+)", line):
                # Keep draining stderr so a chatty server never blocks on a full pipe.
                asyncio.get_running_loop().create_task(_drain(stderr))
                return match[1].decode()
    tail = b"".join(said[-20:]).decode(errors="replace")
    code = process.returncode
    raise ServerGone(f"the server did not say where it listens (exit {code}):\n{tail}")


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(1 << 16):
        pass


async def _end(process: asyncio.subprocess.Process, patience: float) -> None:
    """Give the server ``patience`` seconds to end (its input closed), then SIGTERM, SIGKILL."""
    if process.returncode is None and patience > 0:
        try:
            async with asyncio.timeout(patience):
                await process.wait()
                return
        except TimeoutError:
            pass
    if process.returncode is None:
        process.terminate()
        try:
            async with asyncio.timeout(5.0):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
