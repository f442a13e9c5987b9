"""The JSON-RPC dialect over a :class:`~codexcore.adapters.transports.Conduit`:
a reader, a writer, and the handlers.

The reader feeds lines to the :class:`~._machine.RpcMachine` and starts a
task per call, so a long request (a run) never blocks the next frame (the
answer to a confirm it waits for). The machine bounds the calls in flight.
Everything written goes through an :class:`Outbox` bounded in bytes: a
handler, or the reader answering bad frames, waits while it is full, so a
client that floods without reading is slowed down, not buffered. The writer
drains the conduit; a client that reads nothing for ``stuck_timeout``
seconds is cut off.

A connection's session is created on first use (:meth:`RpcContext.session`)
and its engine events go to the listeners handlers register
(:meth:`RpcContext.on_event`). It is lossless: a listener that waits (on a
full outbox) holds the session's engine, as on the native dialect's stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import Any

from codexcore._logging import get_logger
from codexcore.adapters.host._host import Attachment, Frame, HostRefusal, Out, SessionHost
from codexcore.adapters.transports._conduit import Conduit, Lines, send_and_close
from codexcore.adapters.transports._credential import Credential
from codexcore.adapters.transports._framing import Item
from codexcore.protocol import Event, decode_event

from ._errors import REQUEST_CANCELLED, SERVER_ERROR
from ._machine import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    Answered,
    Call,
    Close,
    Ignored,
    RpcError,
    RpcMachine,
    Send,
    notification,
)
from ._methods import SEED_METHODS, MethodTable, decode_params, standard_methods
from ._options import RpcOptions
from ._outbox import ConnectionClosed, Outbox

log = get_logger(__name__)

Listener = Callable[[Event], Awaitable[None]]
RawListener = Callable[[list[bytes]], Awaitable[None]]

_CURRENT_CALL: contextvars.ContextVar[Call] = contextvars.ContextVar("codexcore_rpc_call")
_AFTER_ANSWER: contextvars.ContextVar[list[Callable[[], Awaitable[None]]]] = contextvars.ContextVar(
    "codexcore_rpc_after_answer"
)


def current_call() -> Call:
    """The call whose handler is running (its ``id`` as the peer wrote it, or
    ``notification`` True); for a handler that must name its request, as seed
    001's ``stream/chunk`` names the ``chat`` it streams. Only inside a handler."""
    return _CURRENT_CALL.get()


@functools.cache
def _standard_table() -> MethodTable:
    """The table of :class:`RpcOptions` without ``methods``: built once, on first use."""
    return standard_methods()


class RpcContext:
    """What a method handler sees of its connection (``ctx`` in every handler)."""

    def __init__(
        self,
        host: SessionHost,
        machine: RpcMachine,
        outbox: Outbox,
        methods: MethodTable,
        *,
        require_token: bool,
        lossless: bool,
        bound_session: str | None = None,
        diagnostics: bool = False,
        credential: Credential | None = None,
    ) -> None:
        self.host = host
        self.credential = credential or Credential("local")
        """What the connection proved of its peer (its uid, its handshake's token): a
        control request's sender must be the one it names."""
        self.diagnostics = diagnostics
        """The server was asked for opt-in diagnostics notifications (``serve --diagnostics``)."""
        self.bound_session = bound_session
        """The one session this connection acts on (a per-session socket's), else None."""
        self.methods = methods
        self.require_token = require_token
        self.initialized = False
        self.client: tuple[str, str] | None = None
        self.client_capabilities: Mapping[str, Any] = {}
        self._machine = machine
        self._outbox = outbox
        self._lossless = lossless
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._listeners: list[Listener] = []
        self._raw_listeners: list[RawListener] = []
        self._lock = asyncio.Lock()
        self._ended = False
        self.over = asyncio.Event()  # set when the connection must end
        self.attachment: Attachment | None = None
        self.follower: asyncio.Task[None] | None = None
        self._finishing: asyncio.Future[None] | None = None  # see _deliver_now
        self._running: dict[Any, asyncio.Task[None]] = {}  # requests in a task, by id
        self._cancelled: set[Any] = set()  # ids $/cancelRequest named while they ran

    def cancel(self, request_id: Any) -> bool:
        """``$/cancelRequest``: cancel the handler of request ``request_id`` if it still
        runs (it is answered -32800); False when no such request is running."""
        task = self._running.get(request_id)
        if task is None or task.done() or isinstance(request_id, bool):
            return False
        self._cancelled.add(request_id)
        task.cancel()
        return True

    def set_client(self, name: str, version: str, capabilities: Mapping[str, Any]) -> None:
        """Record what ``initialize`` said (later handlers read ``client_capabilities``)."""
        self.client = (name, version)
        self.client_capabilities = dict(capabilities)
        self.initialized = True

    async def session(self, session_id: str | None = None) -> Attachment:
        """The connection's session, created on first use from the host's configuration.

        On a bound connection (:attr:`bound_session`) it is that session, attached
        with control (the connection that had control is told it lost it, as when
        a native client takes control); naming another session there is -32602.
        Elsewhere, with ``session_id``, a connection that has no session yet
        attaches to that live session instead (taking control; no past event is
        replayed); one that has a session keeps it. Raises :class:`RpcError`
        (-32000) when the host cannot create or attach one.
        """
        bound = self.bound_session
        if bound is not None and session_id not in (None, bound):
            raise RpcError(
                INVALID_PARAMS, f"params.session_id: this socket serves session {bound!r} only"
            )
        async with self._lock:
            if self.attachment is None:
                live = self.host.session(session_id) if session_id and bound is None else None
                target = bound if bound is not None else (session_id if live is not None else None)
                try:
                    # The transport already admitted this client: its token was checked in
                    # initialize (TCP), or its peer by uid (Unix), or it is our parent (stdio).
                    attachment = await self.host.attach(
                        token=self.host.config.token,
                        session_id=target,
                        last_seq=live.next_seq - 1 if live is not None else None,
                        lossless=self._lossless,
                    )
                except HostRefusal as exc:
                    raise RpcError(SERVER_ERROR, exc.message, {"code": exc.code}) from None
                self.attachment = attachment
                self.follower = asyncio.create_task(self._follow(attachment))
                log.info("session created", session=attachment.session_id, dialect="jsonrpc")
            return self.attachment

    def on_event(self, listener: Listener) -> None:
        """Call ``listener`` with each of the session's events, in order (it may wait)."""
        self._listeners.append(listener)

    def on_raw_events(self, listener: RawListener) -> None:
        """Call ``listener`` with the session's events as their JSON encoding (the native
        wire's lines, without the newline), a batch at a time, in order (it may wait).

        For a listener on the hot path (every delta): it skips building each
        typed :class:`~codexcore.protocol.Event` (``decode_event`` of the bytes
        gives it), which costs several times the JSON parse, and can answer a
        batch with one :meth:`notify_many` or :meth:`send_lines`. Raw listeners
        see a batch before the typed ones see its events.
        """
        self._raw_listeners.append(listener)

    def hold_answer(self, longest: float) -> Callable[[], None]:
        """Keep the running handler's answer, and all sent after it, off the wire until
        the returned function is called, or ``longest`` seconds have passed: for an
        answer whose first consequence follows at once (seed 000's ``run.start`` and
        its run's first ``agent.event``), so both leave in one write and wake the
        client once. Only inside a handler."""
        release = self._outbox.hold()
        timer = asyncio.get_running_loop().call_later(longest, release)

        def done() -> None:
            timer.cancel()
            release()

        return done

    def after_answer(self, then: Callable[[], Awaitable[None]]) -> None:
        """Run ``then()`` once the running handler's answer is queued, in the same step
        (no task of its own): for what must follow the answer on the wire, as seed
        000's ``run.status running`` follows ``run.start``'s answer. Only inside a
        handler; it runs whatever the answer is."""
        _AFTER_ANSWER.get().append(then)

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification (waits while the outbox is full)."""
        await self._outbox.put(notification(method, params))

    async def send_lines(self, lines: list[bytes]) -> None:
        """Send already encoded messages (each a JSON object and its newline), in order,
        as one write (waits while the outbox is full)."""
        if lines:
            await self._outbox.put(b"".join(lines))

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the peer and wait for its result.

        Raises :class:`RpcError` when the peer answers with an error and
        :class:`ConnectionClosed` when the connection ends first.
        """
        if self._ended:
            raise ConnectionClosed(f"the connection is closing: {method} cannot be answered")
        rid, data = self._machine.request(method, params)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        try:
            await self._outbox.put(data)
            if self._outbox.closed:
                raise ConnectionClosed(f"the connection closed before {method} was sent")
            return await future
        finally:
            self._waiting.pop(rid, None)
            self._machine.forget(rid)

    def answered(self, answer: Answered) -> None:
        future = self._waiting.get(answer.id)
        if future is None or future.done():
            return
        if answer.error is not None:
            future.set_exception(answer.error)
        else:
            future.set_result(answer.result)

    def closed(self) -> None:
        """Nothing more will be read: our requests still waiting fail, and new ones at once."""
        self._ended = True
        self._machine.close()
        for rid, future in list(self._waiting.items()):
            if not future.done():
                future.set_exception(ConnectionClosed(f"no answer to request {rid}: closed"))

    async def _follow(self, attachment: Attachment) -> None:
        try:
            while True:
                if self._finishing is not None:  # a delivery the pump began that waited
                    finishing, self._finishing = self._finishing, None
                    await finishing
                frames = attachment.poll()
                if frames is None:
                    await attachment.wait(self._deliver_now)
                elif frames:
                    await self._deliver(frames)
                else:
                    return
        finally:
            self.over.set()  # the session is over, and with it this connection

    def _deliver_now(self, frames: list[Frame]) -> bool:
        """Deliver ``frames`` in the session pump's step, while the follower waits idle:
        one task switch less between the engine and the client (as the native dialect's
        writer is handed its frames). Listeners that must wait (a full outbox, a run's
        lock) go on in a task the follower awaits before anything else; True when all
        was delivered here, so the follower need not wake."""
        delivery = self._deliver(frames)
        try:
            waiting_on = delivery.send(None)
        except StopIteration:
            return True
        except Exception as exc:  # the follower raises it, as if it had delivered
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            self._finishing = failed
            return False
        self._finishing = asyncio.ensure_future(_finish_started(delivery, waiting_on))
        return False

    async def _deliver(self, frames: list[Frame]) -> None:
        events = [frame.data for frame in frames if isinstance(frame, Out)]
        if len(events) < len(frames):
            for frame in frames:
                if not isinstance(frame, Out):
                    log.info("session notice", notice=type(frame).__name__)
        # All a batch of events brings leaves in one write, as the native dialect
        # writes a batch: a write (and the client's wake-up) a line costs more
        # than the line.
        with self._outbox.held():
            for raw_listener in self._raw_listeners:
                await raw_listener(events)
            if self._listeners:
                for data in events:
                    event = decode_event(data)
                    for listener in self._listeners:
                        await listener(event)


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, None], waiting_on: Any) -> Generator[Any, Any, None]:
    """Go on with ``coro``, stepped once by hand and suspended on ``waiting_on``: hand
    that to the task running this (as ``await`` does), then relay each wake-up and
    each exception (a cancel) into ``coro``, until it returns."""
    while True:
        try:
            sent = yield waiting_on
        except BaseException as exc:  # a cancel: passed on, as await would
            step = functools.partial(coro.throw, exc)
        else:
            step = functools.partial(coro.send, sent)
        try:
            waiting_on = step()
        except StopIteration:
            return


async def _finish_started(coro: Coroutine[Any, Any, None], waiting_on: Any) -> None:
    await _resumed(coro, waiting_on)


async def run_call(ctx: RpcContext, machine: RpcMachine, call: Call) -> bytes:
    """Run one call's handler; the bytes that answer it (empty for a notification)."""
    method = ctx.methods.get(call.method)
    result: Any = None
    error: RpcError | None = None
    token = _CURRENT_CALL.set(call)
    try:
        if method is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
        result = await method.handler(ctx, decode_params(method.params, call.params))
    except asyncio.CancelledError:
        if call.notification or call.id not in ctx._cancelled:
            raise  # the connection is ending
        ctx._cancelled.discard(call.id)
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        log.info("request cancelled", method=call.method)
        error = RpcError(REQUEST_CANCELLED, f"Request cancelled: {call.method}")
    except RpcError as exc:
        error = exc
        if call.notification:
            log.info("notification failed", method=call.method, code=exc.code, error=exc.message)
    except Exception:
        log.exception("method failed", method=call.method)
        error = _internal(call)
    finally:
        _CURRENT_CALL.reset(token)
    try:
        return machine.reply(call, result, error)
    except TypeError:
        log.exception("method result is not JSON", method=call.method)
        return machine.reply(call, None, _internal(call))


def _hashable(request_id: Any) -> bool:
    return isinstance(request_id, int | float | str)


def _internal(call: Call) -> RpcError:
    """What the peer learns of a failure: the method's name, never the traceback. A
    method of the Codelia runtime protocol answers that protocol's code for it (-32000,
    "runtime internal error"); every other JSON-RPC's own (-32603)."""
    if call.method in SEED_METHODS["000"]:
        return RpcError(SERVER_ERROR, f"runtime internal error in {call.method}")
    return RpcError(INTERNAL_ERROR, f"Internal error in {call.method}")


class RpcConnection:
    """One JSON-RPC connection: :meth:`run` serves it until it is over."""

    def __init__(
        self,
        host: SessionHost,
        conduit: Conduit,
        lines: Lines,
        options: RpcOptions,
        *,
        require_initialize: bool,
        stdio: bool,
        stuck_timeout: float | None,
        credential: Credential | None = None,
    ) -> None:
        """``stdio``: the session ends with the connection (a socket client's is detached).
        ``credential``: what the transport proved of the peer (see :class:`RpcContext`)."""
        self.host = host
        self.conduit = conduit
        self.lines = lines
        methods = _standard_table() if options.methods is None else options.methods
        self.machine = RpcMachine(
            max_pending=options.max_pending,
            require_initialize=require_initialize,
            exempt=methods.unbounded,
        )
        self.outbox = Outbox(host.config.send_buffer_bytes, direct=self._write_through)
        self.ctx = RpcContext(
            host,
            self.machine,
            self.outbox,
            methods,
            require_token=require_initialize,
            lossless=True,
            bound_session=options.session_id,
            diagnostics=options.diagnostics,
            credential=credential,
        )
        self.stuck_timeout = stuck_timeout
        self.stdio = stdio
        self.handlers: set[asyncio.Task[None]] = set()
        self.unstarted: set[asyncio.Task[None]] = set()  # handler tasks not begun yet
        self.refused = False
        self.over = self.ctx.over
        self.on_ready: Callable[[], None] | None = None

    async def run(self, first: Item | None) -> bool:
        """Serve until input ends (and its calls are answered), a refusal, the session's
        end, the host's close or lost output; False when output was lost."""
        if self.machine.ready and self.on_ready is not None:
            self.on_ready()
        writer = asyncio.create_task(self._write())
        tasks = [
            writer,
            asyncio.create_task(self._read(first)),
            asyncio.create_task(self._host_closing()),
        ]
        try:
            await self.over.wait()
            self.ctx.closed()
            await self._finish(writer)
        finally:
            follower = self.ctx.follower
            rest = [*tasks, *self.handlers, *([follower] if follower else [])]
            for task in rest:
                task.cancel()
            results = await asyncio.gather(*rest, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                log.warning("connection task failed", exc_info=result)
        return writer.done() and not writer.cancelled() and writer.result()

    async def _read(self, first: Item | None) -> None:
        try:
            item = first if first is not None else await self.lines.next()
            while item is not None:
                for received in self.machine.receive(item):
                    if not await self._act(received):
                        self.refused = True
                        return
                item = await self.lines.next()
            # End of input: nothing can answer our requests now; let the calls finish.
            self.ctx.closed()
            while self.handlers:
                await asyncio.wait(set(self.handlers))
        finally:
            self.over.set()

    async def _host_closing(self) -> None:
        await self.host.wait_closing()
        if self.ctx.attachment is None:
            self.over.set()  # with a session, its end (which the host brings) ends us

    async def _finish(self, writer: asyncio.Task[bool]) -> None:
        for task in self.handlers:
            task.cancel()
        attachment = self.ctx.attachment
        if attachment is not None and not writer.done():
            if self.stdio:
                self.host.end_session(attachment.session_id)  # stdio: the UI is gone for good
            else:
                attachment.detach()
            if self.ctx.follower is not None:
                with contextlib.suppress(Exception):
                    await self.ctx.follower  # the session's last events, to the listeners
        self.outbox.close()
        ok = await writer
        if not ok:
            self.conduit.abort()
        elif self.refused:
            await send_and_close(self.conduit, b"", self.stuck_timeout)
        else:
            await self.conduit.close(self.stuck_timeout)

    async def _act(self, received: Send | Close | Call | Answered | Ignored) -> bool:
        """Do what one input asks; False when the connection must close."""
        if isinstance(received, Send):
            await self.outbox.put(received.data)
        elif isinstance(received, Close):
            await self.outbox.put(received.data)
            return False
        elif isinstance(received, Answered):
            self.ctx.answered(received)
        elif isinstance(received, Ignored):
            log.info("ignored", why=received.why)
        elif received.method == "initialize" and not received.notification:
            return await self._handshake(received)  # in order: it governs what follows
        elif received.method not in self.ctx.methods:
            await self._call(received)  # answered at once, in order: no task to wait for
        elif self.ctx.methods.runs_inline(received.method) and not self.unstarted:
            await self._call(received)  # no call before it still waits to begin
        else:
            # Tasks begin in the order they are made: an inline call behind one that
            # has not begun yet takes a task too, so it never overtakes it.
            task = asyncio.create_task(self._call(received, in_task=True))
            self.handlers.add(task)
            self.unstarted.add(task)
            task.add_done_callback(self.handlers.discard)
            task.add_done_callback(self.unstarted.discard)
        return True

    async def _handshake(self, call: Call) -> bool:
        await self._call(call)
        if self.machine.ready:
            return True  # initialize is optional here: a failed one changes nothing
        if not self.ctx.initialized:
            return False
        self.machine.initialized()
        if self.on_ready is not None:
            self.on_ready()
        return True

    async def _call(self, call: Call, *, in_task: bool = False) -> None:
        if in_task:
            self.unstarted.discard(asyncio.current_task())
        after: list[Callable[[], Awaitable[None]]] = []
        token = _AFTER_ANSWER.set(after)
        running = self.ctx._running
        task = asyncio.current_task() if in_task and not call.notification else None
        if task is not None and _hashable(call.id):
            running[call.id] = task
        try:
            data = await run_call(self.ctx, self.machine, call)
        finally:
            _AFTER_ANSWER.reset(token)
            if task is not None and running.get(call.id) is task:
                del running[call.id]
        with self.outbox.held() if after else contextlib.nullcontext():
            if data:
                await self.outbox.put(data)
            for then in after:
                await then()

    def _write_through(self, data: bytes) -> bool:
        """Write ``data`` now if the transport holds nothing unsent (the writer task then
        drains what piles up, and notices a stuck client, as before); else False."""
        if self.conduit.pending():
            return False
        try:
            self.conduit.write(data)
        except (ConnectionError, OSError):
            return False  # the writer writes it, fails the same way, and ends the connection
        return True

    async def _write(self) -> bool:
        """Write until the outbox closes; True when everything was handed to the transport."""
        conduit = self.conduit
        try:
            while lines := await self.outbox.take():
                conduit.write(b"".join(lines))
                async with asyncio.timeout(self.stuck_timeout):
                    await conduit.drain()
        except TimeoutError:
            log.info("client stuck: disconnecting", dialect="jsonrpc")
            return self._lost()
        except (ConnectionError, OSError):
            return self._lost()
        finally:
            self.over.set()
        return True

    def _lost(self) -> bool:
        self.outbox.close()
        attachment = self.ctx.attachment
        if attachment is not None:
            attachment.drop()
        return False
