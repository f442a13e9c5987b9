"""One app-server connection: read messages, answer requests, send notifications, ask
the client (approvals) and wait for its answers. Transport-free: any
:class:`~codexcore.adapters.transports.Conduit` (stdio, a WebSocket) carries it.

Requests are handled in order as they arrive, each answered before the next is
read, except ``turn/interrupt``, which waits for the turn to end and so runs beside
the rest. Responses to our own requests are read all the while. At end of input
the requests still running are answered, then the threads are ended
(``end_threads``: stdio, where the client is gone for good) or left running for a
later ``thread/resume`` (detached), and the conduit is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from codexcore._logging import get_logger
from codexcore.adapters.host import HostRefusal, SessionHost
from codexcore.adapters.transports._conduit import Conduit, Lines
from codexcore.adapters.transports._framing import LineTooLong

from ._items import Note
from ._methods import HANDLERS, IN_TASK
from ._thread import AppThread
from ._wire import (
    ANSWERED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    AppError,
    Notification,
    Request,
    RequestId,
    Response,
    error_response,
    invalid_params,
    notification,
    parse,
    request,
    response,
)

log = get_logger(__name__)

Handler = Callable[["Connection", Request], Awaitable[Any]]


class Connection:
    """One client of the app-server protocol (see the module)."""

    def __init__(self, conduit: Conduit, host: SessionHost, *, end_threads: bool) -> None:
        self.conduit = conduit
        self.host = host
        self.end_threads = end_threads
        self.handlers: dict[str, Handler] = HANDLERS
        self.in_task = IN_TASK
        self.initialized = False
        self.client_info: dict[str, Any] = {}
        self.opt_out: frozenset[str] = frozenset()
        self.threads: dict[str, AppThread] = {}
        self._ids = itertools.count(1)
        self._waiting: dict[RequestId, asyncio.Future[Response]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- writing ----------------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        if self._closed:
            raise ConnectionError("the connection is closed")
        self.conduit.write(data)
        await self.conduit.drain()

    async def notify(self, notes: list[Note]) -> None:
        """Send notifications; once the client is gone they are dropped, so a thread's
        follower goes on taking its session's events (the session must not wait on us)."""
        await self.send(self.encode(notes))

    def encode(self, notes: list[Note]) -> bytes:
        """The lines of ``notes``, but for the methods the client opted out of."""
        opt_out = self.opt_out
        return b"".join([notification(m, p) for m, p in notes if m not in opt_out])

    async def send(self, lines: bytes) -> None:
        """Write notification lines (:meth:`encode`); dropped once the client is gone."""
        if lines:
            self.send_now(lines)
            await self.drain()

    def send_now(self, lines: bytes) -> bool:
        """:meth:`send` without waiting (the pump's step writes): whether the transport
        took everything (False: drain before writing more this way)."""
        if lines and not self._closed:
            with self._unless_gone():
                self.conduit.write(lines)
        return self._closed or self.conduit.pending() == 0

    async def drain(self) -> None:
        if not self._closed:
            with self._unless_gone():
                await self.conduit.drain()

    @contextlib.contextmanager
    def _unless_gone(self) -> Iterator[None]:
        """A client gone: the notifications after it are dropped, not raised (a thread's
        follower must go on taking its session's events)."""
        try:
            yield
        except (ConnectionError, OSError) as exc:
            log.info("client gone: notifications dropped", error=str(exc))
            self._closed = True

    async def answer(self, rid: RequestId, result: Any) -> None:
        await self.write(response(rid, result))

    async def request(
        self, method: str, params: dict[str, Any], sent: Callable[[Any], None] | None = None
    ) -> tuple[Any, Response]:
        """Ask the client; its id and its answer (raises ConnectionError when it goes).
        ``sent`` is told the request's id once it is asked."""
        rid = next(self._ids)
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        try:
            await self.write(request(rid, method, params))
            if sent is not None:
                sent(rid)
            return rid, await future
        finally:
            self._waiting.pop(rid, None)

    # --- threads ----------------------------------------------------------------------------

    def thread(self, thread_id: str) -> AppThread:
        for thread in self.threads.values():
            if thread.id == thread_id:
                return thread
        raise invalid_params("params.threadId", f"no loaded thread {thread_id!r}")

    def adopt(self, thread: AppThread) -> None:
        self.threads[thread.id] = thread

    # --- reading ----------------------------------------------------------------------------

    async def run(self) -> None:
        lines = Lines(self.conduit, self.host.config.max_line_bytes)
        try:
            while (item := await lines.next_nonblank()) is not None:
                if isinstance(item, LineTooLong):
                    log.warning("line too long: dropped", dialect="app-server")
                    continue
                await self._receive(item)
        except (ConnectionError, OSError) as exc:
            log.info("connection lost", error=str(exc))
        finally:
            await self._finish()

    async def _receive(self, line: bytes) -> None:
        message = parse(line)
        if isinstance(message, str):
            log.warning("not a message: dropped", problem=message, dialect="app-server")
        elif isinstance(message, Response):
            future = self._waiting.get(message.id)
            if future is not None and not future.done():
                future.set_result(message)
        elif isinstance(message, Notification):
            if message.method == "initialized":
                return
            log.info("notification ignored", method=message.method)
        elif message.method in self.in_task:
            task = asyncio.create_task(self._call(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            await self._call(message)

    async def _call(self, call: Request) -> None:
        try:
            result = await self._run(call)
        except AppError as exc:
            await self.write(error_response(call.id, exc))
            return
        except ConnectionError:
            return
        except Exception:
            log.exception("method failed", method=call.method)
            error = AppError(INTERNAL_ERROR, f"internal error in {call.method}")
            await self.write(error_response(call.id, error))
            return
        if result is not ANSWERED:
            await self.write(response(call.id, result))

    async def _run(self, call: Request) -> Any:
        handler = self.handlers.get(call.method)
        if handler is None:
            raise AppError(METHOD_NOT_FOUND, f"method not found: {call.method}")
        if call.method == "initialize":
            if self.initialized:
                raise AppError(INVALID_REQUEST, "Already initialized")
        elif not self.initialized:
            raise AppError(INVALID_REQUEST, "Not initialized")
        return await handler(self, call)

    async def _finish(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("the client is gone"))
        threads = list(self.threads.values())
        await asyncio.gather(
            *(t.aclose(end=self.end_threads) for t in threads), return_exceptions=True
        )
        self._closed = True


async def serve_app_server(
    conduit: Conduit, host: SessionHost, *, end_threads: bool = True
) -> None:
    """Serve one app-server connection on ``conduit`` until its input ends.

    ``end_threads``: at end of input, end the connection's threads (stdio: the client
    is gone for good), or, False, leave them running for a later ``thread/resume`` on
    another connection (they end after the host's idle timeout).
    """
    try:
        host.open_connection()
    except HostRefusal as exc:
        log.warning("connection refused", code=exc.code, reason=exc.message)
        await conduit.close(host.config.stuck_timeout)
        return
    try:
        await Connection(conduit, host, end_threads=end_threads).run()
    finally:
        host.close_connection()
        await conduit.close(host.config.stuck_timeout)
