"""Driving codexcore servers in tests: real processes, real sockets, raw NDJSON lines.

Every wait has a timeout, and a wait that times out says what was seen
(the lines read so far, and the server's stderr).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import ssl
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from codexcore.protocol import TERMINAL_EVENT_TYPES

PY = sys.executable
TOKEN = "test-token-4f1d9a0c7b2e"
NOISE = frozenset(
    {"agent_message_delta", "agent_reasoning_delta", "exec_command_output_delta", "token_count"}
)
LINE_LIMIT = 64 * 1024 * 1024  # what the test side accepts in one line


def hello(token: str | None = TOKEN, **fields: Any) -> dict[str, Any]:
    return {
        "type": "hello",
        "protocol_version": 1,
        "client": {"name": "tests", "version": "0"},
        "token": token,
        **fields,
    }


def sub(sub_id: str, op_type: str, **fields: Any) -> dict[str, Any]:
    return {"id": sub_id, "op": {"type": op_type, **fields}}


def say(sub_id: str, text: str, **fields: Any) -> dict[str, Any]:
    return sub(sub_id, "user_input", items=[{"type": "text", "text": text}], **fields)


def kind(message: dict[str, Any]) -> str:
    """An event's msg type, a connection message's type, or a JSON-RPC message's
    method (``answer:ID`` for a response)."""
    if "jsonrpc" in message or ("type" not in message and "seq" not in message):
        # JSON-RPC, with its "jsonrpc" member or, as Codex's app-server, without.
        return str(message.get("method") or f"answer:{message.get('id')}")
    return str(message["msg"]["type"] if "seq" in message else message["type"])


class LineLink:
    """Something that speaks NDJSON lines and records every message it reads."""

    name = "link"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.eof = False

    async def _readline(self) -> bytes:
        raise NotImplementedError

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    async def _drain(self) -> None:
        raise NotImplementedError

    def context(self) -> str:
        return ""

    async def send(self, *messages: dict[str, Any] | bytes) -> None:
        for message in messages:
            data = message if isinstance(message, bytes) else orjson.dumps(message) + b"\n"
            self._write(data)
        await self._drain()

    async def recv(self, within: float = 10.0) -> dict[str, Any] | None:
        """The next message, or None at end of stream."""
        try:
            async with asyncio.timeout(within):
                line = await self._readline()
        except TimeoutError:
            raise AssertionError(
                f"{self.name}: nothing within {within} s; saw {self.summary()}{self.context()}"
            ) from None
        if not line:
            self.eof = True
            return None
        message: dict[str, Any] = orjson.loads(line)
        self.seen.append(message)
        return message

    async def until(
        self, what: str, *, id: str | None = None, within: float = 10.0
    ) -> dict[str, Any]:
        """Read until a message of kind ``what`` (and event ``id``) arrives; return it."""
        try:
            async with asyncio.timeout(within):
                while True:
                    message = await self.recv(within=within + 1)
                    if message is None:
                        raise AssertionError(
                            f"{self.name}: stream ended before {what}; saw {self.summary()}"
                            f"{self.context()}"
                        )
                    if kind(message) == what and (id is None or message.get("id") == id):
                        return message
        except TimeoutError:
            raise AssertionError(
                f"{self.name}: no {what} within {within} s; saw {self.summary()}{self.context()}"
            ) from None

    async def to_end(self, within: float = 10.0) -> None:
        while await self.recv(within) is not None:
            pass

    # --- looking at what was seen ----------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        return [m for m in self.seen if "seq" in m]

    def seqs(self) -> list[int]:
        return [int(m["seq"]) for m in self.events()]

    def types(self, *, id: str | None = None, noise: bool = False) -> list[str]:
        return [
            kind(m)
            for m in self.seen
            if (noise or kind(m) not in NOISE) and (id is None or m.get("id") == id)
        ]

    def of(self, what: str) -> list[dict[str, Any]]:
        return [m["msg"] if "seq" in m else m for m in self.seen if kind(m) == what]

    def output(self) -> bytes:
        return b"".join(base64.b64decode(m["chunk"]) for m in self.of("exec_command_output_delta"))

    def summary(self) -> list[str]:
        return [f"{m.get('seq', '-')}:{kind(m)}" for m in self.seen[-40:]]

    def check_invariants(self, *, first_seq: int = 0) -> None:
        """seq counts without gaps; each task_started has exactly one terminal event."""
        seqs = self.seqs()
        assert seqs == list(range(first_seq, first_seq + len(seqs))), seqs
        events = self.events()
        started = Counter(e["id"] for e in events if kind(e) == "task_started")
        ended = Counter(e["id"] for e in events if kind(e) in TERMINAL_EVENT_TYPES)
        for sub_id, count in started.items():
            assert ended[sub_id] == count, f"task {sub_id}: {count} started, {ended[sub_id]} ended"


class Client(LineLink):
    """A raw NDJSON client on a TCP or Unix socket, as a UI would write one."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str
    ) -> None:
        super().__init__()
        self.reader, self.writer, self.name = reader, writer, name
        self.server: ServerProcess | None = None

    @classmethod
    async def tcp(
        cls, address: tuple[str, int], *, ssl_context: ssl.SSLContext | None = None
    ) -> Client:
        reader, writer = await asyncio.open_connection(*address, ssl=ssl_context, limit=LINE_LIMIT)
        return cls(reader, writer, f"tcp client {writer.get_extra_info('sockname')}")

    @classmethod
    async def unix(cls, path: str | Path) -> Client:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=LINE_LIMIT)
        return cls(reader, writer, "unix client")

    async def _readline(self) -> bytes:
        try:
            return await self.reader.readline()
        except ConnectionError:
            return b""

    def _write(self, data: bytes) -> None:
        self.writer.write(data)

    async def _drain(self) -> None:
        await self.writer.drain()

    def context(self) -> str:
        return self.server.context() if self.server is not None else ""

    async def greet(self, **fields: Any) -> dict[str, Any]:
        """Send a hello; return the answer (``welcome`` or ``refused``)."""
        await self.send(hello(**fields))
        answer = await self.recv()
        assert answer is not None, f"{self.name}: closed without answering the hello"
        return answer

    def kill(self) -> None:
        """Drop the connection at once, as a crash or a dead network does."""
        self.writer.transport.abort()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


class _Process:
    """A codexcore subprocess whose stderr is collected (and shown when a wait fails)."""

    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None
        self.stderr: list[str] = []
        self._stderr_changed = asyncio.Event()
        self._stderr_task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path, **kw: Any) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            cwd=cwd,
            stderr=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
            **kw,
        )
        self._stderr_task = asyncio.create_task(self._collect_stderr())

    async def _collect_stderr(self) -> None:
        assert self.process is not None
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr.append(line.decode(errors="replace").rstrip("\n"))
            self._stderr_changed.set()
        self._stderr_changed.set()

    def context(self) -> str:
        return "\nserver stderr:\n  " + "\n  ".join(self.stderr[-30:])

    async def wait_stderr(self, pattern: str, within: float = 15.0) -> re.Match[str]:
        regex = re.compile(pattern)
        try:
            async with asyncio.timeout(within):
                while True:
                    for line in self.stderr:
                        if match := regex.search(line):
                            return match
                    if self.process is not None and self.process.returncode is not None:
                        raise AssertionError(f"server exited; wanted {pattern!r}{self.context()}")
                    self._stderr_changed.clear()
                    await self._stderr_changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {pattern!r} on stderr{self.context()}") from None

    async def wait_exit(self, within: float = 15.0) -> int:
        assert self.process is not None
        try:
            async with asyncio.timeout(within):
                code = await self.process.wait()
                if self._stderr_task is not None:
                    await self._stderr_task
        except TimeoutError:
            raise AssertionError(f"the server did not exit{self.context()}") from None
        return code

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self._stderr_task is not None:
            await self._stderr_task

    def memory_kib(self, field: str = "VmRSS") -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} for {self.pid}")


def server_env(base_url: str | None, **extra: str) -> dict[str, str]:
    """A clean environment for a server process; sessions are recorded in the test's
    CODEXCORE_HOME (set by conftest), never in the developer's ~/.codexcore."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))}
    env["CODEXCORE_HOME"] = os.environ["CODEXCORE_HOME"]
    if base_url is not None:
        env["OPENAI_BASE_URL"] = base_url
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


class StdioServer(_Process, LineLink):
    """``codexcore serve --stdio`` as a UI spawns it: lines in on stdin, out on stdout."""

    name = "stdio server"

    def __init__(self) -> None:
        _Process.__init__(self)
        LineLink.__init__(self)

    @classmethod
    async def start(
        cls,
        base_url: str | None,
        cwd: Path,
        *args: str,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> StdioServer:
        """``env``: variables added to the clean ``server_env``."""
        server = cls()
        command = argv or [PY, "-m", "codexcore", "serve", "--stdio", *args]
        await server._spawn(
            command,
            server_env(base_url, **(env or {})),
            cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return server

    async def _readline(self) -> bytes:
        assert self.process is not None
        assert self.process.stdout is not None
        return await self.process.stdout.readline()

    def _write(self, data: bytes) -> None:
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.write(data)

    async def _drain(self) -> None:
        assert self.process is not None
        assert self.process.stdin is not None
        await self.process.stdin.drain()

    async def close_stdin(self) -> None:
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.close()
        await self.process.stdin.wait_closed()


class ServerProcess(_Process):
    """``codexcore serve --tcp/--unix`` in a subprocess; clients connect with :meth:`client`."""

    def __init__(self) -> None:
        super().__init__()
        self.tcp: tuple[str, int] | None = None
        self.unix: Path | None = None
        self.tls: ssl.SSLContext | None = None
        self.clients: list[Client] = []

    @classmethod
    async def start(
        cls,
        base_url: str | None,
        cwd: Path,
        *args: str,
        tcp: bool = True,
        unix: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> ServerProcess:
        server = cls()
        argv = [PY, "-m", "codexcore", "serve", *args]
        if tcp:
            argv += ["--tcp", "127.0.0.1:0"]
        if unix is not None:
            argv += ["--unix", str(unix)]
        await server._spawn(argv, env or server_env(base_url, CODEXCORE_TOKEN=TOKEN), cwd)
        if tcp:
            match = await server.wait_stderr(r"listening on (?:tcp|tls) ([\d.]+):(\d+)")
            server.tcp = (match[1], int(match[2]))
        if unix is not None:
            match = await server.wait_stderr(r"listening on unix (\S+)")
            server.unix = Path(match[1])
        return server

    async def client(self, *, unix: bool = False) -> Client:
        if unix:
            assert self.unix is not None
            client = await Client.unix(self.unix)
        else:
            assert self.tcp is not None
            client = await Client.tcp(self.tcp, ssl_context=self.tls)
        client.server = self
        self.clients.append(client)
        return client

    async def kill(self) -> None:
        """Close every client this test opened, then kill the server if it still runs."""
        for client in self.clients:
            client.kill()
            await client.close()
        await super().kill()

    async def stop(self, within: float = 15.0) -> int:
        """SIGTERM, as a service manager stops it; returns the exit code."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await self.wait_exit(within)


class IdleClient:
    """A client that really stops reading: a plain socket with a small receive buffer.

    (An asyncio StreamReader keeps reading into its own buffer whether or not
    anyone calls it, so it cannot play a client that does not read.)
    """

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(10)
        self.sock.connect(address)
        self._rest = b""

    def send(self, *messages: dict[str, Any]) -> None:
        self.sock.sendall(b"".join(orjson.dumps(m) + b"\n" for m in messages))

    def read_line(self) -> dict[str, Any]:
        while b"\n" not in self._rest:
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError(f"connection closed; unread: {self._rest[:200]!r}")
            self._rest += data
        line, _, self._rest = self._rest.partition(b"\n")
        message: dict[str, Any] = orjson.loads(line)
        return message

    def read_to_end(self) -> tuple[list[dict[str, Any]], bool]:
        """Every whole line left, and whether the server reset the connection."""
        # Reading again, with a normal buffer: with the 4 KB one, the kernel can fall
        # into sending one ~2 KB segment per 200 ms (seen with `ss -ti`: a 1,983-byte
        # window, 9.5 KB/s), and the megabytes the server's kernel holds for this
        # client take minutes.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        chunks, reset = [self._rest], False
        try:
            while data := self.sock.recv(1 << 20):
                chunks.append(data)
        except ConnectionResetError:
            reset = True
        lines = b"".join(chunks).split(b"\n")
        return [orjson.loads(line) for line in lines[:-1]], reset

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def private_dir() -> Iterator[Path]:
    """A short path (Unix socket paths are limited to 107 bytes) only we can enter."""
    path = Path(tempfile.mkdtemp(prefix="cx-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
