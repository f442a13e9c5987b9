"""A 20-turn thread over WebSocket beside the same thread over stdio, and a bare echo.

Three things, measured in alternating rounds of one run:

- stdio: ``codexcore serve --stdio``, spawned as a UI spawns it, in the native dialect:
  ``configure_session``, then 20 ``user_input`` Turns, each read until its
  ``task_complete``. Every fifth Turn runs ``echo hello`` (two model requests), the
  others are one answer (as ``bench_vs_codex.py``'s sessions).
- WebSocket: the same thread against ``codexcore serve --ws 127.0.0.1:0`` (its first
  message a native ``hello``), from a ``websockets`` client.
- bare echo: a ``websockets`` echo server in a process of its own (this file with
  ``--echo-server``), and ``cat`` on a pipe pair: the round trip of a line the size of
  a small event, the floor each transport puts under a Turn.

The scripted model runs on a thread of this process (``TimedServer``: the model's
share is summed and taken out). Goal (issue 30): the WebSocket thread's Turns per
second at least 0.9x stdio's, compared round by round.

Run ``.venv/bin/python bench/bench_websocket.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from _common import Table, fmt_ms, fmt_ratio, fmt_us, header, paired_ratio, parse_args, verdict
from _vs_codex_model import COMMAND_MARK, TimedServer, scripted_server

PY = sys.executable
TURNS = 20
GOAL = 0.9
TIMEOUT = 60.0
ECHO_LINE = (
    b'{"id":"t1","seq":42,"msg":{"type":"agent_message_delta","delta":"' + b"x" * 64 + b'"}}'
)


def prompt(turn: int) -> str:
    if turn % 5 == 0:
        return f"Turn {turn}: {COMMAND_MARK} in the shell, then tell me what it printed."
    return f"Turn {turn}: just acknowledge this."


def env_for(base_url: str, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))}
    return {
        **env,
        "CODEXCORE_HOME": home,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-bench",
        "PYTHONUNBUFFERED": "1",
    }


def configure(workdir: str) -> dict[str, Any]:
    return {
        "id": "configure",
        "op": {
            "type": "configure_session",
            "cwd": workdir,
            "approval_policy": "never",
            "sandbox_policy": {
                "type": "danger-full-access",
                "writable_roots": [],
                "network_access": False,
            },
        },
    }


# --- one thread, over either transport -------------------------------------------------


class Link:
    """Lines to and from a server: ``send`` one object, ``recv`` the next line."""

    send: Callable[[dict[str, Any]], Awaitable[None]]
    recv: Callable[[], Awaitable[bytes]]


async def until(link: Link, what: str, sub_id: str | None = None) -> dict[str, Any]:
    async with asyncio.timeout(TIMEOUT):
        while True:
            line = await link.recv()
            if not line:
                raise RuntimeError(f"the server closed before {what}")
            message: dict[str, Any] = orjson.loads(line)
            kind = message["msg"]["type"] if "seq" in message else message.get("type")
            if kind == "error" or (kind == "turn_aborted" and message.get("id") == sub_id):
                raise RuntimeError(f"the Turn failed: {message}")
            if kind == what and (sub_id is None or message.get("id") == sub_id):
                return message


@dataclass
class Thread:
    wall: float  # the 20 Turns, first input sent to last task_complete read
    model: float  # the scripted model's share of it


async def run_turns(link: Link, http: TimedServer, workdir: str) -> Thread:
    await link.send(configure(workdir))
    await until(link, "session_configured")
    busy0, _ = http.snapshot()
    began = time.perf_counter()
    for turn in range(1, TURNS + 1):
        sub_id = f"turn-{turn}"
        await link.send({"id": sub_id, "op": {"type": "user_input", "items": [
            {"type": "text", "text": prompt(turn)}]}})  # fmt: skip
        await until(link, "task_complete", sub_id)
    wall = time.perf_counter() - began
    busy1, _ = http.snapshot()
    return Thread(wall, busy1 - busy0)


async def over_stdio(http: TimedServer, workdir: str, home: str) -> Thread:
    process = await asyncio.create_subprocess_exec(
        PY, "-m", "codexcore", "serve", "--stdio", "--ephemeral",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=env_for(http.base_url, home), cwd=workdir, limit=1 << 24,
    )  # fmt: skip
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    link = Link()

    async def send(message: dict[str, Any]) -> None:
        stdin.write(orjson.dumps(message) + b"\n")
        await stdin.drain()

    link.send, link.recv = send, stdout.readline
    try:
        return await run_turns(link, http, workdir)
    finally:
        stdin.close()
        async with asyncio.timeout(TIMEOUT):
            await process.wait()


async def over_websocket(http: TimedServer, workdir: str, home: str) -> Thread:
    from websockets.asyncio.client import connect

    process = await asyncio.create_subprocess_exec(
        PY, "-m", "codexcore", "serve", "--ws", "127.0.0.1:0", "--ephemeral",
        stderr=subprocess.PIPE, env=env_for(http.base_url, home), cwd=workdir,
    )  # fmt: skip
    try:
        url = await _listening_url(process)
        async with connect(url, compression=None, max_size=1 << 24) as ws:
            link = Link()

            async def send(message: dict[str, Any]) -> None:
                await ws.send(orjson.dumps(message).decode())

            async def recv() -> bytes:
                message = await ws.recv()
                return message.encode() if isinstance(message, str) else message

            link.send, link.recv = send, recv
            await send({"type": "hello", "protocol_version": 1,
                        "client": {"name": "bench", "version": "0"}})  # fmt: skip
            await until(link, "welcome")
            return await run_turns(link, http, workdir)
    finally:
        process.terminate()
        async with asyncio.timeout(TIMEOUT):
            await process.wait()


async def over_tcp(http: TimedServer, workdir: str, home: str) -> Thread:
    """The same thread over ``serve --tcp``: the socket host's own share, without WebSocket."""
    process = await asyncio.create_subprocess_exec(
        PY, "-m", "codexcore", "serve", "--tcp", "127.0.0.1:0", "--ephemeral",
        stderr=subprocess.PIPE, env={**env_for(http.base_url, home), "CODEXCORE_TOKEN": "t"},
        cwd=workdir,
    )  # fmt: skip
    try:
        address = await _listening_url(process, rb"listening on tcp (\S+):(\d+)")
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 24)
        link = Link()

        async def send(message: dict[str, Any]) -> None:
            writer.write(orjson.dumps(message) + b"\n")
            await writer.drain()

        link.send, link.recv = send, reader.readline
        await send({"type": "hello", "protocol_version": 1, "token": "t",
                    "client": {"name": "bench", "version": "0"}})  # fmt: skip
        await until(link, "welcome")
        thread = await run_turns(link, http, workdir)
        writer.close()
        return thread
    finally:
        process.terminate()
        async with asyncio.timeout(TIMEOUT):
            await process.wait()


async def _listening_url(
    process: asyncio.subprocess.Process, pattern: bytes = rb"listening on (ws://\S+)"
) -> str:
    assert process.stderr is not None
    async with asyncio.timeout(TIMEOUT):
        while line := await process.stderr.readline():
            if match := re.search(pattern, line):
                return b":".join(match.groups()).decode()
    raise RuntimeError("the server did not say where it listens")


# --- the bare echoes ---------------------------------------------------------------------


async def echo_server() -> None:
    """This file with ``--echo-server``: a bare ``websockets`` echo; prints its URL."""
    from websockets.asyncio.server import ServerConnection, serve

    async def echo(ws: ServerConnection) -> None:
        async for message in ws:
            await ws.send(message)

    async with serve(echo, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"ws://127.0.0.1:{port}", flush=True)
        await asyncio.Future()


async def ws_echo_rtt(count: int) -> float:
    """The median round trip of ``ECHO_LINE`` through the echo server, in seconds."""
    from websockets.asyncio.client import connect

    process = await asyncio.create_subprocess_exec(
        PY, __file__, "--echo-server", stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        url = (await process.stdout.readline()).decode().strip()
        text = ECHO_LINE.decode()
        async with connect(url, compression=None) as ws:
            times = []
            for _ in range(count):
                began = time.perf_counter()
                await ws.send(text)
                await ws.recv()
                times.append(time.perf_counter() - began)
        return statistics.median(times)
    finally:
        process.terminate()
        await process.wait()


async def pipe_echo_rtt(count: int) -> float:
    """The same through ``cat`` on a pipe pair: stdio's floor."""
    process = await asyncio.create_subprocess_exec(
        "cat", stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None
    assert process.stdout is not None
    times = []
    for _ in range(count):
        began = time.perf_counter()
        process.stdin.write(ECHO_LINE + b"\n")
        await process.stdin.drain()
        await process.stdout.readline()
        times.append(time.perf_counter() - began)
    process.stdin.close()
    await process.wait()
    return statistics.median(times)


# --- the run -------------------------------------------------------------------------------


async def measure(rounds: int, echoes: int) -> dict[str, list[Any]]:
    results: dict[str, list[Any]] = {name: [] for name in ("stdio", "ws", "tcp", "ws echo",
                                                           "pipe echo")}  # fmt: skip
    with scripted_server() as (http, model), tempfile.TemporaryDirectory() as tmp:
        workdir, home = os.path.join(tmp, "work"), os.path.join(tmp, "home")
        os.makedirs(workdir)
        runs: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("stdio", lambda: over_stdio(http, workdir, home)),
            ("ws", lambda: over_websocket(http, workdir, home)),
            ("tcp", lambda: over_tcp(http, workdir, home)),
            ("ws echo", lambda: ws_echo_rtt(echoes)),
            ("pipe echo", lambda: pipe_echo_rtt(echoes)),
        ]
        for _, run in runs:  # warm-up: imports, caches, the model's first answers
            await run()
        for i in range(rounds):
            shift = i % len(runs)
            for name, run in [*runs[shift:], *runs[:shift]]:
                results[name].append(await run())
        if model.unexpected:
            raise RuntimeError(f"the model saw requests it did not expect: {model.unexpected}")
    return results


def report(results: dict[str, list[Any]]) -> None:
    stdio: list[Thread] = results["stdio"]
    ws: list[Thread] = results["ws"]
    table = Table(
        f"A {TURNS}-turn thread, codexcore's native dialect: WebSocket beside stdio",
        ["transport", "thread wall (median)", "per Turn", "per Turn beyond the model",
         "bare echo round trip"],
    )  # fmt: skip
    for name, threads, echo in (
        ("stdio", stdio, fmt_us(statistics.median(results["pipe echo"]))),
        ("WebSocket", ws, fmt_us(statistics.median(results["ws echo"]))),
        ("TCP (the socket host without WebSocket)", results["tcp"], "-"),
    ):
        wall = statistics.median(t.wall for t in threads)
        beyond = statistics.median((t.wall - t.model) / TURNS for t in threads)
        table.add(name, fmt_ms(wall), fmt_ms(wall / TURNS), fmt_ms(beyond), echo)
    # Turns per second, WebSocket over stdio, round by round: wall of stdio over wall of ws.
    ratio = paired_ratio([1 / t.wall for t in ws], [1 / t.wall for t in stdio])
    table.note(
        f"WebSocket Turns/s over stdio's, median of {len(ws)} paired rounds: "
        f"{fmt_ratio(ratio)} (goal ≥ {GOAL}x: {verdict(ratio >= GOAL)})"
    )
    tcp_ratio = paired_ratio([1 / t.wall for t in ws], [1 / t.wall for t in results["tcp"]])
    table.note(
        f"WebSocket Turns/s over TCP's (the same socket host), paired: {fmt_ratio(tcp_ratio)}"
    )
    table.note(
        "bare echo: the median round trip of one 110-byte line, through a websockets echo "
        "server in its own process and through `cat` on a pipe pair"
    )
    print(table.render())


def main() -> None:
    if "--echo-server" in sys.argv:
        asyncio.run(echo_server())
        return
    args = parse_args(__doc__.splitlines()[0])
    header("bench_websocket", args.quick)
    rounds, echoes = (1, 200) if args.quick else (7, 2000)
    report(asyncio.run(measure(rounds, echoes)))


if __name__ == "__main__":
    main()
