"""The client's transports: one connection (a :class:`Link`), how to open one, and the
``codexcore serve --stdio`` child process.

A Link reads the server's lines through a bounded :class:`~codexcore.adapters.transports.LineReader`
only when the client asks for the next one, so a client that stops reading
stops reading the socket: the server sees the backpressure.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import ssl as _ssl
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
import orjson

from codexcore._logging import get_logger
from codexcore.adapters.transports._framing import LineReader, LineTooLong
from codexcore.adapters.transports._streams import keepalive
from codexcore.protocol import ConnectionMsg, Event, ProtocolError, decode_connection_msg
from codexcore.protocol import decode_event as _decode_event

from ._types import RemoteError, ServerExited

log = get_logger(__name__)

READ_CHUNK = 64 * 1024
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line the client accepts from a server (an event with a whole command's
output, a page of session history); longer is a broken server."""

STDERR_TAIL = 40


class Link:
    """One connection to a server: lines in, bytes out."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._lines: collections.deque[bytes] = collections.deque()
        self._splitter = LineReader(max_line_bytes)
        self._eof = False
        self.reason = "the server closed the connection"

    async def read_line(self) -> bytes | None:
        """The next non-blank line; None at end of input or when the connection is gone."""
        while not self._lines:
            if self._eof:
                return None
            try:
                data = await self._reader.read(READ_CHUNK)
            except (ConnectionError, OSError) as exc:
                if not self.closing:
                    self.reason = f"the connection failed: {exc!r}"
                data = b""
            if data:
                items = self._splitter.feed(data)
            else:
                # A server ends every line it means; a last line without its newline
                # is what a connection cut mid-write leaves: not a message.
                self._eof = True
                items = []
            for item in items:
                if isinstance(item, LineTooLong):
                    raise RemoteError(f"the server sent a line longer than {item.limit} bytes")
                if item.strip():
                    self._lines.append(item)
        return self._lines.popleft()

    @property
    def closing(self) -> bool:
        return self._writer.transport.is_closing()

    def write(self, data: bytes) -> None:
        if not self.closing:
            self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        """Close in good order: what was written is sent first."""
        if not self.closing:
            self._writer.close()

    def abort(self, reason: str | None = None) -> None:
        """Drop the connection at once (as a dead network would)."""
        transport = self._writer.transport
        if transport.is_closing():
            return  # closing already: lost, aborted, or closed in good order
        if reason is not None:
            self.reason = reason
        transport.abort()


# --- what a server's line is -------------------------------------------------------------


@attrs.frozen
class Skipped:
    """An event of a type this client does not know: not shown, but its ``seq`` counts."""

    seq: int


def parse_line(line: bytes) -> Event | ConnectionMsg | Skipped | None:
    """A server's line: an Event, a connection message, a :class:`Skipped` event, or None
    for a connection message of a type this client does not know (ignored)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        log.warning("ignoring a line that is not JSON", line=line[:200])
        return None
    if not isinstance(value, dict):
        log.warning("ignoring a line that is not a JSON object", line=line[:200])
        return None
    if "seq" in value and "type" not in value:
        try:
            return _decode_event(value)
        except ProtocolError as exc:
            seq = value.get("seq")
            if isinstance(seq, int) and not isinstance(seq, bool):
                log.info("skipping an event this client cannot decode", seq=seq, error=exc.message)
                return Skipped(seq)
            raise RemoteError(
                f"the server sent an event without a valid seq: {line[:200]!r}"
            ) from None
    try:
        return decode_connection_msg(value)
    except ProtocolError as exc:
        log.info("ignoring a connection message", type=value.get("type"), error=exc.message)
        return None


# --- opening connections -----------------------------------------------------------------


async def open_tcp(host: str, port: int, ssl: _ssl.SSLContext | None, max_line_bytes: int) -> Link:
    reader, writer = await asyncio.open_connection(host, port, ssl=ssl, limit=READ_CHUNK)
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            keepalive(sock)  # a server that vanished without closing is noticed
    return Link(reader, writer, max_line_bytes)


async def open_unix(path: str | os.PathLike[str] | None, max_line_bytes: int) -> Link:
    """Our own server's socket (``None``: the default one), checked before a byte is sent."""
    from codexcore.adapters.transports._unix_trust import default_socket_path, open_unix_checked

    where = default_socket_path() if path is None else path
    reader, writer = await open_unix_checked(where, limit=READ_CHUNK)
    return Link(reader, writer, max_line_bytes)


def default_stdio_argv() -> list[str]:
    """``codexcore serve --stdio`` with this Python."""
    return [sys.executable, "-m", "codexcore", "serve", "--stdio"]


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class Child:
    """A ``codexcore serve --stdio`` process: its stdin and stdout are the protocol, its
    stderr goes line by line to ``on_stderr`` (default: this process's stderr), and
    the last lines are kept to explain an early exit."""

    def __init__(self, process: asyncio.subprocess.Process, on_stderr: Callable[[str], None]):
        self.process = process
        self._on_stderr = on_stderr
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._stderr = asyncio.create_task(self._pass_stderr(), name="codexcore-child-stderr")

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str] | None,
        *,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        on_stderr: Callable[[str], None] | None,
        max_line_bytes: int,
    ) -> tuple[Child, Link]:
        command = list(argv) if argv is not None else default_stdio_argv()
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=Path(cwd) if cwd is not None else None,
            limit=READ_CHUNK,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        child = cls(process, on_stderr or _to_stderr)
        return child, Link(process.stdout, process.stdin, max_line_bytes)

    async def _pass_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        rest = b""
        while data := await stream.read(READ_CHUNK):
            *lines, rest = (rest + data).split(b"\n")
            if len(rest) > READ_CHUNK:  # an endless line: pass it on in pieces
                lines.append(rest)
                rest = b""
            for line in lines:
                self._line(line)
        if rest:
            self._line(rest)

    def _line(self, raw: bytes) -> None:
        line = raw.decode(errors="replace").rstrip("\r")
        self.tail.append(line)
        try:
            self._on_stderr(line)
        except Exception:  # a broken sink must not stop the draining of the pipe
            log.exception("on_stderr failed")

    async def exited(self, within: float = 5.0) -> ServerExited:
        """Wait for the process to end (killing it after ``within`` s); the error to raise."""
        await self.wait(within)
        return ServerExited(self.process.returncode, tuple(self.tail))

    async def wait(self, within: float) -> int:
        """Wait for the process to exit (kill it after ``within`` seconds) and for its stderr."""
        try:
            async with asyncio.timeout(within):
                await self.process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._stderr
        return self.process.returncode if self.process.returncode is not None else -1

    async def close(self, within: float) -> int:
        """End of input: the server shuts its session down in order and exits."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(ConnectionError, OSError):
                await stdin.wait_closed()
        return await self.wait(within)
