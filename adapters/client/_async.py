"""The asyncio client: :class:`RemoteCodex`, one session on a codexcore server across
connections (the public module, :mod:`codexcore.adapters.client`, describes what a UI
sees).

It opens a connection (:mod:`._link`), says hello (:mod:`._handshake`),
and reads it in a task of its own into a bounded queue the UI reads
(:mod:`._inbox`); on a drop it redials, reattaches with the highest ``seq`` seen
and resends what is unanswered (:mod:`._outbox`). The acks of control messages
go to their senders through :mod:`._control`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
import ssl as _ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import janus

from codexcore import __version__
from codexcore._logging import get_logger
from codexcore.engine import EngineClosed
from codexcore.protocol import (
    PROTOCOL_VERSION,
    Closing,
    ControlChanged,
    DynamicToolCallRequest,
    ErrorEvent,
    Event,
    Hello,
    Op,
    Peer,
    Shutdown,
    ShutdownComplete,
    Submission,
    SubmissionAck,
    SubmissionRejected,
    Welcome,
)

from ._control import AckWaiters, ControlMethods
from ._handshake import Retry, handshake, redial
from ._inbox import Inbox
from ._link import (
    DEFAULT_MAX_LINE_BYTES,
    Child,
    Link,
    Skipped,
    open_tcp,
    open_unix,
    parse_line,
)
from ._outbox import Outbox

if TYPE_CHECKING:
    from collections.abc import Iterable

    from codexcore.tools.functions import FunctionTool

    from ._tools import ClientTools
from ._types import (
    ClientOptions,
    ControlChange,
    Disconnected,
    EventsLost,
    Notice,
    NoticeCallback,
    NotInControl,
    Reconnected,
    ReconnectPolicy,
    RemoteError,
    StdioOptions,
    SubmissionRefused,
)

log = get_logger("codexcore.adapters.client")  # the public module's name, as before the split

Dial = Callable[[], Awaitable[Link]]

CLIENT_NAME = "codexcore.client"


class _Opening:
    """What the constructors return: ``await`` it, or use it as ``async with``."""

    def __init__(self, client: RemoteCodex) -> None:
        self._client = client

    def __await__(self) -> Generator[Any, None, RemoteCodex]:
        return self._client.start().__await__()

    async def __aenter__(self) -> RemoteCodex:
        return await self._client.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self._client.aclose()


class RemoteCodex(ControlMethods):
    """A session on a codexcore server, with the methods of :class:`~codexcore.Codex`.

    Make one with :meth:`connect_tcp`, :meth:`connect_unix` or
    :meth:`spawn_stdio` (each is awaitable and an async context manager).

    ``submit`` returns the submission id at once (the answer, a
    ``submission_ack`` event, comes in the stream); it waits only while
    ``max_unanswered`` submissions are unanswered. ``next_event`` waits for
    the next event and raises :class:`~codexcore.EngineClosed` once the
    session has ended (after ``shutdown_complete``), or the error that ended
    the client (:class:`~codexcore.adapters.client.SessionLost`,
    :class:`~codexcore.adapters.client.ConnectionLost`,
    :class:`~codexcore.adapters.client.ServerExited`) once the events received before it
    are read.
    At most ``event_buffer`` events wait for the UI: a UI that stops reading
    stops the client reading its connection, and the server sees it.

    Notices (see :class:`Notice`) go to ``on_notice`` from ``next_event``, in
    the task that calls it, in order with the events; without a callback they
    are logged.
    """

    def __init__(
        self,
        dial: Dial,
        *,
        token: str | None = None,
        session_id: str | None = None,
        last_seq: int | None = None,
        control: bool = True,
        client_name: str = CLIENT_NAME,
        client_version: str = __version__,
        reconnect: ReconnectPolicy | None = ReconnectPolicy(),  # noqa: B008 (frozen)
        on_notice: NoticeCallback | None = None,
        event_buffer: int = 256,
        max_unanswered: int = 1024,
        handshake_timeout: float = 10.0,
        close_timeout: float = 10.0,
        tools: Iterable[FunctionTool | Callable[..., Any]] = (),
    ) -> None:
        self._dial = dial
        self._token = token
        self._first_session_id = session_id
        self._last_seq = last_seq if session_id is not None else None
        self._want_control = control
        self._peer = Peer(client_name, client_version)
        self._policy = reconnect
        self._max_unanswered = max_unanswered
        self._handshake_timeout = handshake_timeout
        self._close_timeout = close_timeout
        self._id_prefix = secrets.token_hex(3)
        self._ids = itertools.count(1)
        self.welcome: Welcome | None = None
        """The server's latest ``welcome`` (limits, capabilities, session id)."""
        self.control = False
        """Whether this client controls its session (may submit)."""
        self._child: Child | None = None
        self._inbox = Inbox(event_buffer, on_notice)
        self._outbox = Outbox(self._check_open_stream)
        self._reader: asyncio.Task[None] | None = None
        self._started = False
        self._ended = False  # no more events will be queued
        self._closed = False  # aclose() or detach() was called
        self._control_acks = AckWaiters()
        self._tools: ClientTools | None = None
        if tools:
            self.tools.extend(tools)

    @property
    def tools(self) -> ClientTools:
        """The local functions this client offers the model and answers the calls of
        (``add``, ``remove``; see :mod:`~codexcore.adapters.client._tools`)."""
        if self._tools is None:
            from ._tools import ClientTools  # loaded by a client that offers tools

            self._tools = ClientTools()
        return self._tools

    # --- constructors -------------------------------------------------------------------

    @classmethod
    def connect_tcp(
        cls,
        host: str,
        port: int,
        *,
        token: str,
        ssl: _ssl.SSLContext | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        **options: Unpack[ClientOptions],
    ) -> _Opening:
        """Connect to ``codexcore serve --tcp`` (with TLS when ``ssl`` is given).

        Without ``session_id`` the server creates a session; with it (and
        optionally ``last_seq``, the highest ``seq`` already seen) the client
        attaches to that session. ``control=False`` watches without
        submitting. ``reconnect`` is the :class:`ReconnectPolicy` (None: a
        dropped connection ends the client with :class:`~codexcore.adapters.client.ConnectionLost`).
        Other options: ``client_name``, ``client_version``, ``on_notice``,
        ``event_buffer``, ``max_unanswered``, ``handshake_timeout``,
        ``close_timeout``. Raises :class:`~codexcore.adapters.client.HandshakeRefused` (e.g. a wrong
        token: ``code == "unauthorized"``), :class:`~codexcore.adapters.client.SessionLost`, or the
        ``OSError`` of a failed connection.
        """

        async def dial() -> Link:
            return await open_tcp(host, port, ssl, max_line_bytes)

        return _Opening(cls(dial, token=token, **options))

    @classmethod
    def connect_unix(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        token: str | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        **options: Unpack[ClientOptions],
    ) -> _Opening:
        """Connect to ``codexcore serve --unix`` at ``path`` (None: the default socket);
        options as for :meth:`connect_tcp`.

        Before anything is sent, the socket's folder must be this user's and closed to
        others, and the server must run as this user (``SO_PEERCRED``); otherwise
        :class:`~codexcore.adapters.transports.UnsafeSocket` (a ``PermissionError``).
        """

        async def dial() -> Link:
            return await open_unix(path, max_line_bytes)

        return _Opening(cls(dial, token=token, **options))

    @classmethod
    def spawn_stdio(
        cls,
        argv: Sequence[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        on_stderr: Callable[[str], None] | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        **options: Unpack[StdioOptions],
    ) -> _Opening:
        """Start ``codexcore serve --stdio`` (or ``argv``) as a child and talk to it.

        The child's stdout carries the protocol; each line of its stderr goes
        to ``on_stderr`` (default: this process's stderr). The process is the
        session, so there is no reconnecting: if it dies before
        ``shutdown_complete``, ``next_event`` raises
        :class:`~codexcore.adapters.client.ServerExited` with its exit code and last
        stderr lines. ``aclose`` closes its stdin (the server then shuts the session
        down and exits).
        """
        client: RemoteCodex

        async def dial() -> Link:
            if client._child is not None:
                raise RemoteError("a stdio server is its session: it cannot be reconnected")
            child, link = await Child.spawn(
                argv, env=env, cwd=cwd, on_stderr=on_stderr, max_line_bytes=max_line_bytes
            )
            client._child = child
            return link

        client = cls(dial, reconnect=None, **options)
        return _Opening(client)

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> RemoteCodex:
        """Connect and say hello (the constructors do this); returns the client."""
        if self._started:
            raise RuntimeError("RemoteCodex.start() called twice")
        self._started = True
        link = await self._dial()
        try:
            welcome = await self._handshake(link, self._first_session_id, self._last_seq)
        except Retry as exc:
            link.abort()
            if self._child is not None:
                raise await self._child.exited() from None
            raise RemoteError(f"could not connect: {exc}") from None
        except BaseException:
            link.abort()
            if self._child is not None:
                await self._child.close(self._close_timeout)
            raise
        self._inbox.open()
        await self._adopt(link, welcome, reconnected=False)
        self._reader = asyncio.create_task(self._run(), name="codexcore-client")
        return self

    async def __aenter__(self) -> RemoteCodex:
        return self if self._started else await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Leave, ending the session if this client controls it.

        A socket client that controls its session submits ``shutdown`` and
        reads (discarding) up to ``shutdown_complete``, for at most
        ``close_timeout`` seconds; a stdio client closes the child's stdin and
        waits for it to exit. Events nobody has read by then are discarded:
        to see ``shutdown_complete``, submit ``Shutdown`` and read to the end
        first. Idempotent.
        """
        await self._close(end_session=True)

    async def detach(self) -> None:
        """Leave without ending the session: it goes on on the server, and a
        client may attach to it later with ``session_id`` (and ``last_seq``)
        until it expires. On stdio this is :meth:`aclose`."""
        await self._close(end_session=False)

    async def reconnect(self, *, take_control: bool = False) -> None:
        """Drop the current connection now and reattach, as after a network failure
        (the UI suspects a dead connection, or a demo shows the reconnect).

        Returns at once: the client reattaches in the background (notices
        :class:`Disconnected`, then :class:`Reconnected`), and what is
        submitted meanwhile is sent once it has. ``take_control`` asks for
        control back after another client took it (``submit`` works again
        at once)."""
        self._check_usable()
        if self._child is not None:
            raise RemoteError("a stdio server is its session: it cannot be reconnected")
        if take_control:
            self._want_control = True
        link = self._outbox.link
        if link is not None:
            link.abort("reconnect requested")

    # --- the queue pair --------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session's id: give it to ``connect_*(session_id=...)`` to attach again."""
        if self.welcome is None:
            raise RuntimeError("not connected yet: await the constructor first")
        return self.welcome.session_id

    @property
    def last_seq(self) -> int | None:
        """The highest ``seq`` received (None before the first event)."""
        return self._last_seq

    @property
    def connected(self) -> bool:
        """Whether a connection is up right now (False while reconnecting)."""
        return self._outbox.link is not None

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        """The ``codexcore serve --stdio`` child of :meth:`spawn_stdio`; None on sockets."""
        return self._child.process if self._child is not None else None

    def new_id(self) -> str:
        """A fresh submission id, unique in the session (a random prefix per client)."""
        return f"{self._id_prefix}-{next(self._ids)}"

    async def submit(self, op: Op, *, id: str | None = None) -> str:
        """Send ``op`` and return its submission id.

        Sent at once when connected; while reconnecting it is kept and sent
        after the reattach. Raises :class:`NotInControl` when this client does
        not control its session, :class:`~codexcore.EngineClosed` once the
        session has ended.
        """
        self._check_usable()
        if not self._want_control:
            raise NotInControl(
                "this client does not control its session (it attached with control=False, "
                "or another client took control): reconnect(take_control=True) takes it"
            )
        sub_id = self.new_id() if id is None else id
        if self._tools is not None:
            first, op = self._tools.declare(op)
            if first is not None:
                await self.submit(first)
        while len(self._outbox) >= self._max_unanswered:
            self._outbox.room.clear()
            await self._outbox.room.wait()
            self._check_usable()
        await self._outbox.send(Submission(sub_id, op))
        return sub_id

    async def next_event(self) -> Event:
        """The next event; raises EngineClosed after the stream has ended."""
        return await self._inbox.get()

    async def events(self) -> AsyncIterator[Event]:
        """Every event, ending after ``shutdown_complete``."""
        while True:
            try:
                yield await self.next_event()
            except EngineClosed:
                return

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    def _next_blocking(self, timeout: float | None) -> Event:
        """``next_event`` for another thread (see
        :class:`~codexcore.adapters.client.RemoteCodexThread`)."""
        return self._inbox.get_blocking(timeout)

    # --- internals: state ------------------------------------------------------------------

    def _require_queue(self) -> janus.Queue[Event | Notice]:
        return self._inbox.queue()

    def _end_error(self) -> Exception:
        return self._inbox.end_error()

    def _check_usable(self) -> None:
        if self._closed:
            raise EngineClosed("the client is closed")
        if self._ended:
            raise self._end_error()

    # --- internals: connecting ---------------------------------------------------------------

    async def _handshake(self, link: Link, session_id: str | None, last_seq: int | None) -> Welcome:
        """Say hello on a new connection (see :func:`~._handshake.handshake`)."""
        hello = Hello(
            PROTOCOL_VERSION,
            self._peer,
            self._token,
            session_id,
            last_seq if session_id is not None else None,
            self._want_control,
        )
        return await handshake(link, hello, self._handshake_timeout)

    async def _adopt(self, link: Link, welcome: Welcome, *, reconnected: bool) -> None:
        """Take a connection that was welcomed into use: resend what is unanswered."""
        self.welcome = welcome
        self.control = welcome.control
        resent = await self._outbox.adopt(link)
        if reconnected:
            log.info("reconnected", session=welcome.session_id, resent=len(resent))
            await self._notice(Reconnected(welcome, resent))
        if welcome.resumed and not welcome.replay_complete:
            first = 0 if self._last_seq is None else self._last_seq + 1
            if welcome.replay_from > first:
                await self._notice(EventsLost(first, welcome.replay_from - 1))

    async def _reconnect(self, reason: str) -> tuple[Link, Welcome]:
        """Redial and reattach after a drop (see :func:`~._handshake.redial`)."""

        async def attach(link: Link) -> Welcome:
            return await self._handshake(link, self.session_id, self._last_seq)

        return await redial(self._dial, attach, self._policy, self._handshake_timeout, reason)

    async def _send_control(self, envelope: dict[str, Any]) -> dict[str, Any]:
        return await self._control_acks.send(envelope, self._outbox.write_json)

    # --- internals: the reader -----------------------------------------------------------------

    async def _run(self) -> None:
        """Read the connection; on a drop, reconnect, until the session ends."""
        failure: RemoteError | None = None
        try:
            while True:
                link = self._outbox.link
                assert link is not None
                reason = await self._serve(link)
                if self._ended or self._closed:
                    return
                if self._child is not None:  # the process is the session: no reconnecting
                    link.abort()
                    raise await self._child.exited()
                await self._lose(link, reason)
                new_link, welcome = await self._reconnect(reason)
                await self._adopt(new_link, welcome, reconnected=True)
        except RemoteError as exc:
            failure = exc
        except Exception as exc:
            log.exception("the client's reader failed")
            failure = RemoteError(f"the client failed: {exc!r}")
            failure.__cause__ = exc
        finally:
            self._finish(failure)

    async def _serve(self, link: Link) -> str:
        """Handle one connection's lines until it ends; why it ended."""
        while not self._ended:
            line = await link.read_line()
            if line is None:
                return link.reason
            if self._control_acks and b'.ack"' in line and self._control_acks.offer(line):
                continue
            message = parse_line(line)
            if isinstance(message, Event):
                await self._on_event(message)
            elif isinstance(message, Skipped):
                self._see(message.seq)
            elif isinstance(message, SubmissionRejected):
                await self._on_rejected(message)
            elif isinstance(message, ControlChanged):
                self.control = self._want_control = message.control
                await self._notice(ControlChange(message.control, message.reason))
            elif isinstance(message, Closing):
                link.abort(f"the server closed the connection ({message.code}: {message.message})")
        return "the session ended"

    def _see(self, seq: int) -> bool:
        """Count ``seq`` as received; False if it was already (a replayed event)."""
        if self._last_seq is not None and seq <= self._last_seq:
            return False
        self._last_seq = seq
        return True

    async def _on_event(self, event: Event) -> None:
        if self._tools and self.control and isinstance(event.msg, DynamicToolCallRequest):
            self._tools.offer(event.msg, self.submit)  # a resent call comes with an old seq
        if not self._see(event.seq):
            return
        msg = event.msg
        deliver = True
        if isinstance(msg, SubmissionAck):
            deliver = self._outbox.first_ack(msg.id)
        elif isinstance(msg, ErrorEvent) and event.id in self._outbox:
            self._outbox.answered(event.id)  # a line the server could not use: no ack, no resend
        elif isinstance(msg, ShutdownComplete):
            self._ended = True
        if deliver:
            await self._inbox.put(event)

    async def _on_rejected(self, message: SubmissionRejected) -> None:
        if message.id and self._outbox.answered(message.id) is None:
            log.info("a resent copy was refused", sub_id=message.id, code=message.code)
            return
        await self._notice(SubmissionRefused(message.id, message.code, message.message))

    async def _notice(self, notice: Notice) -> None:
        await self._inbox.put(notice)

    def _check_open_stream(self) -> None:
        if self._ended:
            raise self._end_error()

    async def _lose(self, link: Link, reason: str) -> None:
        link.abort()
        await self._outbox.drop(link)
        log.info("connection lost", reason=reason, last_seq=self._last_seq)
        await self._notice(Disconnected(reason))

    def _finish(self, failure: RemoteError | None) -> None:
        self._ended = True
        self._inbox.end(failure)  # what is queued is still read, then the end
        self._outbox.room.set()
        link = self._outbox.take()
        if link is not None:
            link.abort()

    # --- internals: closing --------------------------------------------------------------------

    async def _close(self, *, end_session: bool) -> None:
        if self._closed or not self._started:
            return
        self._closed = True
        self._inbox.discard()
        if self._tools is not None:
            await self._tools.aclose()
        reader = self._reader
        try:
            if self._child is not None:
                await self._child.close(self._close_timeout)
            elif end_session and not self._ended and self.control and reader is not None:
                with contextlib.suppress(RemoteError, EngineClosed):
                    await self._outbox.send(Submission(self.new_id(), Shutdown()))
                    async with asyncio.timeout(self._close_timeout):
                        await asyncio.wait({reader})  # it ends at shutdown_complete
        except TimeoutError:
            log.info("the session did not end within the close timeout; leaving it")
        finally:
            link = self._outbox.link
            if link is not None:
                link.close()  # a detach: what was submitted still goes out
            if reader is not None:
                if self._child is not None and not reader.done():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self._close_timeout):
                            await asyncio.wait({reader})
                if not reader.done():
                    reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            self._finish(None)
            await self._inbox.close()
