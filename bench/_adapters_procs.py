"""Processes and clients for ``bench_adapters.py``: servers that are surely stopped, and
NDJSON clients (blocking and asyncio) written as a UI would write them.

Every process started here is registered in a :class:`Procs`, which stops each
(SIGTERM, then SIGKILL after a timeout) when the benchmark leaves it, whatever
happened. Every wait has a timeout.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
SERVER_SCRIPT = str(HERE / "_adapters_server.py")
PY = sys.executable
TOKEN = "bench-token-6f0c2d9e"
LINE_LIMIT = 64 * 1024 * 1024


def raise_fd_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to the hard limit; returns the new soft one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def server_env(home: str, base_url: str | None = None) -> dict[str, str]:
    """A clean environment: sessions recorded under ``home``, the bench token, no key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))}
    env["CODEXCORE_HOME"] = home
    env["CODEXCORE_TOKEN"] = TOKEN
    env["PYTHONUNBUFFERED"] = "1"
    if base_url is not None:
        env["OPENAI_BASE_URL"] = base_url
    return env


# --- processes --------------------------------------------------------------------------


class Proc:
    """A server process; its stderr goes to a file (read to find ``listening on``)."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], *, stdio: bool):
        self.name = name
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by release)
        self.popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd="/tmp",
        )
        self.tcp: tuple[str, int] | None = None
        self.unix: str | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stderr_text(self) -> str:
        # pread: the file offset is shared with the child, which appends through it
        fd = self._stderr.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def wait_stderr(self, pattern: str, within: float = 30.0) -> re.Match[str]:
        regex = re.compile(pattern)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            match = regex.search(self.stderr_text())
            if match:
                return match
            if self.popen.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"{self.name}: no {pattern!r}; stderr:\n{self.stderr_text()[-3000:]}")

    def wait_listening(self, *, tcp: bool = True, unix: bool = True) -> None:
        if tcp:
            match = self.wait_stderr(r"listening on tcp ([\d.]+):(\d+)")
            self.tcp = (match[1], int(match[2]))
        if unix:
            self.unix = self.wait_stderr(r"listening on unix (\S+)")[1]

    def address(self) -> tuple[str, int]:
        if self.tcp is None:
            raise RuntimeError(f"{self.name} does not listen on TCP")
        return self.tcp

    def path(self) -> str:
        if self.unix is None:
            raise RuntimeError(f"{self.name} does not listen on a Unix socket")
        return self.unix

    def cpu(self) -> float:
        """CPU seconds used so far by all the process's threads (nanosecond schedstat)."""
        total = 0
        for task in os.listdir(f"/proc/{self.pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{self.pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9

    def status(self, field: str) -> int:
        """A ``/proc/PID/status`` figure in bytes (``VmRSS``, ``VmHWM``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field} for {self.name}")

    def rss(self) -> int:
        return self.status("VmRSS")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def stop(self, within: float = 60.0) -> int:
        """SIGTERM (a server's good-order stop), wait; SIGKILL after ``within`` seconds."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(within)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            code = self.popen.wait()
        self._close_pipes()
        return code

    def end_of_input(self, within: float = 60.0) -> int:
        """A stdio server: close its input, read its output to the end, wait for its exit."""
        assert self.popen.stdin is not None
        assert self.popen.stdout is not None
        self.popen.stdin.close()
        fd = self.popen.stdout.fileno()
        while os.read(fd, 1 << 16):
            pass
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(within)
        return self.stop(within)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def release(self) -> None:
        """Stop the process if it runs, and close its stderr file."""
        self.kill()
        self._stderr.close()


class Procs:
    """Every process the benchmark starts; all are stopped on leaving."""

    def __init__(self, home: str, rundir: str) -> None:
        self.home, self.rundir = home, rundir
        self._all: list[Proc] = []
        self._sockets = 0

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for proc in self._all:
            if proc.popen.poll() is None:
                with contextlib.suppress(Exception):
                    proc.stop(within=15.0)
            proc.release()

    def socket_path(self) -> str:
        self._sockets += 1
        return os.path.join(self.rundir, f"s{self._sockets}.sock")

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str], *, stdio: bool) -> Proc:
        proc = Proc(name, argv, env, stdio=stdio)
        self._all.append(proc)
        return proc

    def helper(self, name: str, mode: str, *args: str, stdio: bool = False) -> Proc:
        """``_adapters_server.py MODE``; a socket server is returned once it listens."""
        argv = [PY, SERVER_SCRIPT, mode, *args]
        sockets = mode in ("host", "bare", "bare-asyncio") and not stdio
        if stdio:
            argv.append("--stdio")
        elif sockets:
            argv += ["--unix", self.socket_path()]
        proc = self.spawn(name, argv, server_env(self.home), stdio=stdio)
        if sockets:
            proc.wait_listening(unix=mode != "bare-asyncio")
        return proc

    def model(self, chunks: int, responses: int) -> tuple[Proc, str]:
        """The scripted Responses server; returns it and its base URL."""
        argv = [PY, SERVER_SCRIPT, "model", "--chunks", str(chunks), "--responses", str(responses)]
        proc = self.spawn("model server", argv, server_env(self.home), stdio=False)
        assert proc.popen.stdout is not None
        line = proc.popen.stdout.readline().decode().strip()
        if not line.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"model server: {line!r}\n{proc.stderr_text()}")
        return proc, line

    def codexcore_serve(self, base_url: str, *flags: str) -> Proc:
        """The real ``codexcore serve --tcp 127.0.0.1:0 --unix PATH`` (as deployed)."""
        argv = [PY, "-m", "codexcore", "serve", "--tcp", "127.0.0.1:0"]
        argv += ["--unix", self.socket_path(), "--cwd", "/tmp", *flags]
        proc = self.spawn("codexcore serve", argv, server_env(self.home, base_url), stdio=False)
        proc.wait_listening()
        return proc


# --- messages -----------------------------------------------------------------------------


def hello(**fields: Any) -> dict[str, Any]:
    return {
        "type": "hello",
        "protocol_version": 1,
        "client": {"name": "bench", "version": "0"},
        "token": TOKEN,
        **fields,
    }


def submission(sub_id: str, op_type: str, **fields: Any) -> bytes:
    return orjson.dumps({"id": sub_id, "op": {"type": op_type, **fields}}) + b"\n"


def user_input(sub_id: str, text: str) -> bytes:
    return submission(sub_id, "user_input", items=[{"type": "text", "text": text}])


def kind(message: dict[str, Any]) -> str:
    return str(message["msg"]["type"] if "seq" in message else message["type"])


class Received:
    """What one read of a run saw: events, seq gaps (merged or dropped deltas), the last."""

    __slots__ = ("count", "deltas", "gaps", "last", "seqs")

    def __init__(self) -> None:
        self.count = 0
        self.deltas = 0
        self.gaps = 0
        self.last: dict[str, Any] = {}
        self.seqs: list[int] = []


# --- a blocking NDJSON client -------------------------------------------------------------


class LineConn:
    """Lines over a blocking socket or a pair of pipe descriptors, read as a UI reads them:
    in large reads, split on newlines, every line decoded with orjson."""

    def __init__(self, recv: Callable[[int], bytes], send: Callable[[bytes], None]) -> None:
        self._recv, self._send = recv, send
        self._rest = b""
        self._pending: collections.deque[bytes] = collections.deque()
        self.closer: Callable[[], None] = lambda: None

    @classmethod
    def tcp(cls, address: tuple[str, int], *, rcvbuf: int | None = None) -> LineConn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls._connect(sock, address, rcvbuf)

    @classmethod
    def unix(cls, path: str, *, rcvbuf: int | None = None) -> LineConn:
        return cls._connect(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), path, rcvbuf)

    @classmethod
    def _connect(cls, sock: socket.socket, address: Any, rcvbuf: int | None) -> LineConn:
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(60)
        sock.connect(address)
        conn = cls(sock.recv, sock.sendall)
        conn.closer = sock.close
        conn.sock = sock
        return conn

    sock: socket.socket | None = None

    @classmethod
    def pipes(cls, proc: Proc) -> LineConn:
        assert proc.popen.stdin is not None
        assert proc.popen.stdout is not None
        out_fd, in_fd = proc.popen.stdout.fileno(), proc.popen.stdin.fileno()

        def send(data: bytes) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(in_fd, view) :]

        return cls(lambda n: os.read(out_fd, n), send)

    def send(self, data: bytes) -> None:
        self._send(data)

    def send_json(self, message: dict[str, Any]) -> None:
        self._send(orjson.dumps(message) + b"\n")

    def close(self) -> None:
        self.closer()

    def abort(self) -> None:
        """Drop the connection with a reset, as a crash or a dead network does."""
        if self.sock is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00" * 2)
            self.sock.close()

    def _fill(self) -> bool:
        data = self._recv(1 << 18)
        if not data:
            return False
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        self._pending.extend(lines)
        return True

    def batch(self) -> collections.deque[bytes]:
        """The lines read and not yet taken (at least one; EOFError at end of stream):
        a reader pops them itself, as :meth:`events` does, with no call per line."""
        while not self._pending:
            if not self._fill():
                raise EOFError("the stream ended")
        return self._pending

    def line(self) -> bytes | None:
        """The next line; None at end of stream."""
        while not self._pending:
            if not self._fill():
                return None
        return self._pending.popleft()

    def message(self) -> dict[str, Any]:
        line = self.line()
        if line is None:
            raise EOFError("the server closed the stream")
        value: dict[str, Any] = orjson.loads(line)
        return value

    def until(self, what: str) -> dict[str, Any]:
        while True:
            message = self.message()
            if kind(message) == what:
                return message

    def events(self, last_type: str, first_seq: int | None = None) -> Received:
        """Read and decode every line until an event of ``last_type`` (inclusive).

        Counts events, checks that each ``seq`` follows the one before (a gap
        means deltas were merged or dropped), and keeps anything after it.
        """
        got = Received()
        loads = orjson.loads
        pending = self._pending
        expected = first_seq
        while True:
            while pending:
                message = loads(pending.popleft())
                seq = message.get("seq")
                if seq is None:
                    continue  # a connection message
                got.count += 1
                if expected is not None and seq != expected:
                    got.gaps += 1
                expected = seq + 1
                msg_type = message["msg"]["type"]
                if msg_type == "agent_message_delta":
                    got.deltas += 1
                elif msg_type == last_type:
                    got.last = message
                    return got
            if not self._fill():
                raise EOFError(f"the stream ended after {got.count} events")

    def to_end(self) -> tuple[list[dict[str, Any]], bool]:
        """Every line left, decoded, and whether the stream ended with a reset."""
        messages: list[dict[str, Any]] = []
        reset = False
        while True:
            try:
                line = self.line()
            except ConnectionResetError:
                reset = True
                break
            if line is None:
                break
            messages.append(orjson.loads(line))
        return messages, reset

    def greet(self, **fields: Any) -> dict[str, Any]:
        """Send a ``hello``; the ``welcome`` (raises on anything else)."""
        self.send_json(hello(**fields))
        answer = self.message()
        if answer.get("type") != "welcome":
            raise RuntimeError(f"expected a welcome, got {answer}")
        return answer


# --- asyncio NDJSON clients -----------------------------------------------------------------


class AsyncConn:
    """An asyncio stream client of one server connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def tcp(cls, address: tuple[str, int]) -> AsyncConn:
        reader, writer = await asyncio.open_connection(*address, limit=LINE_LIMIT)
        return cls(reader, writer)

    @classmethod
    async def unix(cls, path: str) -> AsyncConn:
        reader, writer = await asyncio.open_unix_connection(path, limit=LINE_LIMIT)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def message(self, within: float = 120.0) -> dict[str, Any]:
        async with asyncio.timeout(within):
            line = await self.reader.readline()
        if not line:
            raise EOFError("the server closed the connection")
        value: dict[str, Any] = orjson.loads(line)
        return value

    async def until(self, what: str, within: float = 120.0) -> dict[str, Any]:
        async with asyncio.timeout(within):
            while True:
                message = await self.message(within)
                if kind(message) == what:
                    return message

    async def greet(self, **fields: Any) -> dict[str, Any]:
        await self.send(orjson.dumps(hello(**fields)) + b"\n")
        answer = await self.message()
        if answer.get("type") != "welcome":
            raise RuntimeError(f"expected a welcome, got {answer}")
        return answer

    async def configure(self) -> int:
        """``configure_session``; returns the ``seq`` of ``session_configured``."""
        await self.send(submission("cfg", "configure_session"))
        return int((await self.until("session_configured"))["seq"])

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


async def task_latencies(
    conn: AsyncConn, count: int, prefix: str, text: str = "Say ok."
) -> list[float]:
    """``count`` Tasks in turn on a configured session: each ``user_input`` sent to its
    ``task_started`` read (seconds); each Task is read to ``task_complete`` before the next."""
    samples = []
    for i in range(count):
        t0 = time.perf_counter()
        await conn.send(user_input(f"{prefix}{i}", text))
        await conn.until("task_started")
        samples.append(time.perf_counter() - t0)
        await conn.until("task_complete")
    return samples


class Watcher(asyncio.Protocol):
    """A watching client that counts lines (``bytes.count``, at C speed) and notes times.

    With ``greeting``, the first line (the ``welcome``) is decoded and set aside.
    """

    def __init__(self, *, greeting: bool = True) -> None:
        loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.lines = 0
        self.tail = b""
        self.target = 0
        self.first_at = 0.0
        self.done_at = 0.0
        self.done: asyncio.Future[None] | None = None
        self.first: asyncio.Future[None] | None = None
        self.welcomed: asyncio.Future[dict[str, Any]] = loop.create_future()
        if not greeting:
            self.welcomed.set_result({})

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def expect(self, lines: int) -> tuple[asyncio.Future[None], asyncio.Future[None]]:
        """Wait for ``lines`` more lines: futures for the first one and the last one."""
        loop = asyncio.get_running_loop()
        self.target = self.lines + lines
        self.first, self.done = loop.create_future(), loop.create_future()
        return self.first, self.done

    def data_received(self, data: bytes) -> None:
        if not self.welcomed.done():
            self.tail += data
            if b"\n" not in self.tail:
                return
            line, _, data = self.tail.partition(b"\n")
            self.tail = b""
            self.welcomed.set_result(orjson.loads(line))
            if not data:
                return
        self.tail = data[-8192:] if len(data) >= 8192 else (self.tail + data)[-8192:]
        new = data.count(b"\n")
        if not new:
            return
        self.lines += new
        now = time.perf_counter()
        if self.first is not None and not self.first.done():
            self.first_at = now
            self.first.set_result(None)
        if self.done is not None and not self.done.done() and self.lines >= self.target:
            self.done_at = now
            self.done.set_result(None)

    def last_message(self) -> dict[str, Any]:
        """The last whole line received, decoded."""
        value: dict[str, Any] = orjson.loads(self.tail.rstrip(b"\n").rpartition(b"\n")[2])
        return value

    def connection_lost(self, exc: Exception | None) -> None:
        for future in (self.welcomed, self.first, self.done):
            if future is not None and not future.done():
                future.set_exception(ConnectionError("the watcher's connection closed"))


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
