"""Seed 003's control acks: ``control.stdin`` acks per second and p50 ack latency, over a
Unix socket and over TCP, beside a bare socket round trip measured in the same run.

The server is ``codexcore serve --unix PATH --tcp 127.0.0.1:0`` (a process of its
own, its [control] table in a temporary CODEXCORE_HOME, the durable dedupe store
on disk), with one session whose Task is running: its model request hangs (a
scripted Responses server in this process), so every ``control.stdin`` is an
``inject_input`` into the running Task and what is timed is the control path:
the JSON-RPC call, parsing, the sender bound to the credential (peer uid on Unix,
the sender's token on TCP), the replay window, the SQLite claim and answer, the
submission, the engine's ``submission_ack`` and the ack.

The bare limit is an echo server (this file, ``--echo``, also a process of its
own, asyncio streams) answering each line with a line of the ack's size: the
same client code, the same sockets, nothing else. Two loads each: one request
at a time (p50 latency, and acks/s), and 16 in flight (acks/s; 16 is the
session's default bound on pending control input).

Run ``.venv/bin/python bench/bench_control.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from codexcore.testing import Hang, ScriptedModel, ScriptedResponsesServer, text_response

PY = sys.executable
TEAM, SENDER, TOKEN, SENDER_TOKEN = "bench", "bench-ops", "bench-host-token", "bench-sender"
WINDOW = 16
LIMIT = 16 * 1024 * 1024


# --- the bare echo server (this file, run with --echo) -----------------------------------------


async def echo(unix: str) -> None:
    ack = orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {"pad": "x" * 230}}) + b"\n"

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.readline():
            writer.write(ack)
            await writer.drain()
        writer.close()

    tcp = await asyncio.start_server(serve, "127.0.0.1", 0, limit=LIMIT)
    await asyncio.start_unix_server(serve, unix, limit=LIMIT)
    print(f"echo tcp {tcp.sockets[0].getsockname()[1]}", file=sys.stderr, flush=True)
    await asyncio.Event().wait()


# --- clients -------------------------------------------------------------------------------------


class Rpc:
    """A JSON-RPC client: many calls in flight, answers matched by id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.ids = iter(range(1, 1 << 62))
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while line := await self.reader.readline():
            answer = orjson.loads(line)
            future = self.waiting.pop(answer.get("id"), None)
            if future is None and self.waiting and answer.get("id") == 0:  # the echo's
                future = self.waiting.pop(min(self.waiting))
            if future is not None:
                future.set_result(answer)

    async def call(self, method: str, params: Any) -> Any:
        rid = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[rid] = future
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.writer.write(orjson.dumps(message) + b"\n")
        return await future

    def close(self) -> None:
        self.task.cancel()
        self.writer.close()


async def connect(unix: str | None, port: int | None) -> Rpc:
    if unix is not None:
        reader, writer = await asyncio.open_unix_connection(unix, limit=LIMIT)
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=LIMIT)
    return Rpc(reader, writer)


def stdin_request(session_id: str, agent_id: str) -> dict[str, Any]:
    now = time.time()
    return {
        "type": "control.stdin.request",
        "v": 1,
        "request_id": f"req_{uuid.uuid4().hex}",
        "session_id": session_id,
        "agent_id": agent_id,
        "team": TEAM,
        "sender": SENDER,
        "sent_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + "Z",
        "content": "bench input: keep going",
        "meta": {"ui_source": "bench", "retry_count": 0},
    }


async def measure(
    send: Callable[[], Awaitable[None]], count: int, window: int
) -> tuple[float, float, float]:
    """(acks per second, p50 and p99 latency in ms) for ``count`` sends, ``window`` in flight."""
    latencies: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        await send()
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    pending: set[asyncio.Task[None]] = set()
    for _ in range(count):
        if len(pending) >= window:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        pending.add(asyncio.create_task(one()))
    await asyncio.gather(*pending)
    elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return count / elapsed, statistics.median(latencies) * 1000, p99 * 1000


# --- processes -----------------------------------------------------------------------------------


async def spawn(argv: list[str], env: dict[str, str], *patterns: str) -> tuple[Any, list[str]]:
    """Start ``argv``; wait for a stderr line with each of ``patterns``; those lines."""
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
    )
    assert process.stderr is not None
    found: dict[str, str] = {}
    async with asyncio.timeout(30):
        while len(found) < len(patterns):
            line = (await process.stderr.readline()).decode()
            if not line:
                raise RuntimeError(f"{argv} exited")
            found.update({p: line.strip() for p in patterns if p in line})
    process._bench_drain = asyncio.create_task(_drain(process.stderr))  # type: ignore[attr-defined]
    return process, [found[p] for p in patterns]


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


def write_home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[control]\nteam = "{TEAM}"\n[[control.senders]]\nname = "{SENDER}"\n'
        f'team = "{TEAM}"\nuid = {os.getuid()}\ntoken_env = "BENCH_SENDER_TOKEN"\n'
    )


async def main(quick: bool) -> int:
    count = 300 if quick else 3000
    hanging = text_response("never")
    model = ScriptedModel([type(hanging)(steps=(hanging.steps[0], Hang()))])
    with tempfile.TemporaryDirectory(prefix="cx-bench-") as tmp:
        home, unix, echo_unix = Path(tmp) / "home", f"{tmp}/s.sock", f"{tmp}/e.sock"
        write_home(home)
        async with ScriptedResponsesServer(model) as api:
            env = {
                **{
                    k: v
                    for k, v in os.environ.items()
                    if not k.startswith(("OPENAI_", "CODEXCORE_"))
                },
                "CODEXCORE_HOME": str(home),
                "CODEXCORE_TOKEN": TOKEN,
                "BENCH_SENDER_TOKEN": SENDER_TOKEN,
                "OPENAI_BASE_URL": api.base_url,
                "OPENAI_API_KEY": "bench",
            }
            argv = [PY, "-m", "codexcore", "serve", "--unix", unix, "--tcp", "127.0.0.1:0"]
            argv += ["--approval-mode", "full-access", "--cwd", tmp]
            server, (tcp_line,) = await spawn(argv, env, "listening on tcp")
            echo_proc, (echo_line,) = await spawn([PY, __file__, "--echo", echo_unix], env, "echo")
            port, echo_port = int(tcp_line.rsplit(":", 1)[1]), int(echo_line.split()[-1])
            try:
                rows = await run_all(unix, port, echo_unix, echo_port, count, model)
            finally:
                for process in (server, echo_proc):
                    process.kill()
                    await process.wait()
    print(f"control acks ({count} requests per row; {os.cpu_count()} cores)")
    print(
        "| transport | load | control acks/s | p50 ms | p99 ms | bare round trips/s "
        "| bare p50 ms | bare p99 ms |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| {} | {} | {:,.0f} | {:.3f} | {:.2f} | {:,.0f} | {:.3f} | {:.2f} |".format(*row))
    return 0


async def run_all(
    unix: str, port: int, echo_unix: str, echo_port: int, count: int, model: ScriptedModel
) -> list[tuple[Any, ...]]:
    session_id, agent_id, owner = await start_task(unix, model)
    rows = []
    for name, where, echo_where, token in (
        ("unix", (unix, None), (echo_unix, None), TOKEN),
        ("tcp", (None, port), (None, echo_port), SENDER_TOKEN),
    ):
        control = await connect(*where)
        await control.call("initialize", _init(token))
        bare = await connect(*echo_where)

        async def send_control(control: Rpc = control) -> None:
            answer = await control.call("control.stdin", stdin_request(session_id, agent_id))
            assert answer["result"]["result"] == "ok", answer

        async def send_bare(bare: Rpc = bare) -> None:
            await bare.call("echo", stdin_request(session_id, agent_id))

        for load, window in (("1 in flight", 1), (f"{WINDOW} in flight", WINDOW)):
            await measure(send_control, count // 10, window)  # warm up
            measured = await measure(send_control, count, window)
            bare_measured = await measure(send_bare, count, window)
            rows.append((name, load, *measured, *bare_measured))
        control.close()
        bare.close()
    owner.close()
    return rows


async def start_task(unix: str, model: ScriptedModel) -> tuple[str, str, asyncio.StreamWriter]:
    """A native client makes the session and starts its Task (whose model request hangs)."""
    reader, writer = await asyncio.open_unix_connection(unix, limit=LIMIT)
    hello = {
        "type": "hello",
        "protocol_version": 1,
        "client": {"name": "bench", "version": "0"},
        "token": TOKEN,
    }
    writer.write(orjson.dumps(hello) + b"\n")
    welcome = orjson.loads(await reader.readline())
    text = [{"type": "text", "text": "start"}]
    writer.write(orjson.dumps({"id": "t1", "op": {"type": "user_input", "items": text}}) + b"\n")
    async with asyncio.timeout(30):
        while not model.requests:  # noqa: ASYNC110 (filled by the scripted server's thread)
            await asyncio.sleep(0.01)
    asyncio.create_task(_drain(reader))  # noqa: RUF006 (it ends with the connection)
    return welcome["session_id"], welcome["agent_id"], writer


def _init(token: str) -> dict[str, Any]:
    return {
        "protocol_version": "0",
        "client": {"name": "bench", "version": "0"},
        "auth": {"token": token},
    }


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--echo":
        asyncio.run(echo(sys.argv[2]))
    sys.exit(asyncio.run(main("--quick" in sys.argv)))
