"""The ACP agent's stdio: newline-delimited JSON-RPC on our pipes, and what end of input means.

End of input (the client closed our stdin) is not the end of the requests
already read: a client that pipes a script (``initialize``, ``session/new``,
``session/prompt``, then EOF) is a client too, and gets every answer. So
:class:`StdioTransport` (the SDK's ``Transport`` seam, which its ``Connection``
reads messages from) reports EOF to the connection only once every request it
has read is answered; a prompt already read runs to its end. From EOF on, the
client can answer nothing, so :class:`InputAwareClient` fails the agent's own
requests to it at once (a permission request is then refused, as a cancelled
one is; a file is read from disk) instead of waiting forever. Notifications
(``session/update``) still go out: stdout is still open.

An editor that wants the agent gone at once ends it (SIGTERM: every prompt is
cancelled, every session shut down, its commands killed, exit 0; the SDK's
client sends it when the agent has not exited a moment after stdin closed).
A client that has gone altogether (a write to stdout fails: no one reads it)
is treated the same way: nothing is left running for no one.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from codexcore._logging import get_logger

log = get_logger(__name__)

__all__ = ["InputAwareClient", "InputEnded", "StdioTransport"]


class InputEnded(ConnectionError):
    """The client closed its input: it cannot answer a request any more."""


class StdioTransport:
    """JSON-RPC messages, one a line, over an asyncio reader and writer; EOF is held
    back until the requests read before it are answered."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._unanswered: set[int | str] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.input_ended = asyncio.Event()
        self.output_broken = asyncio.Event()
        """Set when a write fails: the client no longer reads, it has gone."""

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                self.input_ended.set()
                if self._unanswered:
                    log.info(
                        "end of input: answering the requests read", open=len(self._unanswered)
                    )
                await self._idle.wait()
                return None
            message = _parse(line)
            if message is None:
                continue
            request_id = message.get("id")
            if "method" in message and isinstance(request_id, int | str):
                self._unanswered.add(request_id)
                self._idle.clear()
            return message

    async def send(self, message: dict[str, Any]) -> None:
        data = orjson.dumps(message) + b"\n"
        try:
            async with self._write_lock:
                self._writer.write(data)
                await self._writer.drain()
        except ConnectionError:
            self.output_broken.set()
            raise
        finally:
            # A response (even one that could not be written) closes its request.
            if "method" not in message:
                self._unanswered.discard(message.get("id"))
                if not self._unanswered:
                    self._idle.set()

    async def close(self) -> None:
        """Nothing of its own to close: the caller owns the pipes."""

    async def _read_line(self) -> bytes:
        """One line, however long (past the reader's limit it is read in pieces);
        at EOF whatever is left, empty when nothing is."""
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(await self._reader.readuntil(b"\n"))
                return b"".join(chunks)
            except asyncio.LimitOverrunError as exc:
                chunks.append(await self._reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:
                chunks.append(exc.partial)
                return b"".join(chunks)


def _parse(line: bytes) -> dict[str, Any] | None:
    line = line.strip()
    if not line:
        return None
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        log.warning("a line of input is not JSON and was skipped", error=str(exc))
        return None
    if not isinstance(message, dict):
        log.warning("a line of input is not a JSON-RPC message and was skipped")
        return None
    return message


class InputAwareClient:
    """The client connection as the agent uses it: once input has ended, a request to
    the client fails at once with :class:`InputEnded` (one waiting already fails
    then too); notifications go on."""

    def __init__(self, conn: Any, input_ended: asyncio.Event) -> None:
        self._conn = conn
        self._ended = input_ended

    async def session_update(self, **fields: Any) -> Any:
        return await self._conn.session_update(**fields)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._conn, name)
        if not asyncio.iscoroutinefunction(method):
            return method
        return _unless_ended(method, self._ended)


def _unless_ended(
    method: Callable[..., Awaitable[Any]], ended: asyncio.Event
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        if ended.is_set():
            raise InputEnded("the client closed its input, so it cannot answer")
        request = asyncio.ensure_future(method(*args, **kwargs))
        waiter = asyncio.ensure_future(ended.wait())
        try:
            await asyncio.wait({request, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not request.done():
                request.cancel()
        if request.cancelled():
            raise InputEnded("the client closed its input before it answered")
        return request.result()

    return call
