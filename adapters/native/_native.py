"""The native dialect: NDJSON Submissions in, NDJSON Events out, over any byte conduit.

A connection reads lines with the :class:`~codexcore.adapters.transports.LineReader` and writes
what its :class:`~codexcore.adapters.host._host.Attachment` hands it. Over a socket the first line
must be a ``hello`` (:func:`serve_connection`); over stdio it may be one
(:func:`serve_stdio_session`). Which dialect a connection speaks is chosen
from its first line by ``servers._dialect``. After that, every line is a submission for
the engine: a bad one becomes a ``Rejected`` that the engine answers with an
``error`` event numbered in order with the rest, and the connection goes on.

Two tasks serve a connection: the reader (lines to the engine, waiting while
the engine's submission queue is full, so a flooding client is slowed down,
not buffered) and the writer (frames to the conduit, waiting on its drain).
Whichever ends first ends the other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import attrs
import orjson

from codexcore._logging import get_logger
from codexcore.adapters.control._lines import control_lines
from codexcore.adapters.host._host import (
    Attachment,
    Frame,
    HostRefusal,
    NotAccepted,
    Out,
    SessionHost,
)
from codexcore.adapters.transports._conduit import Conduit, Lines, send_and_close
from codexcore.adapters.transports._credential import Credential
from codexcore.adapters.transports._framing import (
    Item,
    LineTooLong,
    decode_line,
    is_blank,
)
from codexcore.engine import Rejected
from codexcore.protocol import (
    PROTOCOL_VERSION,
    Hello,
    Refused,
    Shutdown,
    Submission,
    SubmissionRejected,
    Welcome,
    encode_connection_msg,
)

log = get_logger(__name__)


def frame(batch: list[Frame]) -> bytes:
    """Frames as NDJSON: each event's bytes or connection message, one a line."""
    parts = [item.data if isinstance(item, Out) else encode_connection_msg(item) for item in batch]
    parts.append(b"")
    return b"\n".join(parts)


async def _refuse(
    conduit: Conduit, code: str, message: str, flush_timeout: float | None, *, linger: bool = True
) -> None:
    """Write one ``refused`` line and close so that the client surely reads it."""
    log.info("connection refused", code=code)
    data = encode_connection_msg(Refused(code, message)) + b"\n"
    if linger:
        await send_and_close(conduit, data, flush_timeout)
    else:
        conduit.write(data)
        await conduit.close(flush_timeout)


def _check_hello(item: Item | None, limit: int) -> Hello | HostRefusal:
    if isinstance(item, LineTooLong):
        return HostRefusal("bad_hello", f"the hello line is longer than {limit} bytes")
    decoded = decode_line(item or b"")
    if isinstance(decoded, Rejected):
        return HostRefusal("bad_hello", f"the first line must be a hello: {decoded.message}")
    if isinstance(decoded, Submission):
        return HostRefusal("bad_hello", "the first line must be a hello, not a submission")
    if decoded.protocol_version != PROTOCOL_VERSION:
        return HostRefusal(
            "unsupported_version",
            f"protocol version {decoded.protocol_version} is not supported "
            f"(this server speaks {PROTOCOL_VERSION})",
        )
    return decoded


async def refuse(conduit: Conduit, refusal: HostRefusal, flush_timeout: float | None) -> None:
    """Refuse a socket client in this dialect (one ``refused`` line), then close."""
    await _refuse(conduit, refusal.code, refusal.message, flush_timeout)


async def serve_connection(
    host: SessionHost,
    conduit: Conduit,
    lines: Lines,
    first: Item,
    *,
    on_attached: Callable[[], None] | None = None,
    credential: Credential | None = None,
) -> None:
    """Serve one socket connection whose first line, ``first``, must be a ``hello``.

    ``on_attached`` is called once the client is attached (the server stops
    treating it as a handshake in progress). The caller counted the
    connection in and checked its peer (see ``_dialect.serve_socket``).
    """
    config = host.config
    hello = _check_hello(first, config.max_line_bytes)
    try:
        if isinstance(hello, HostRefusal):
            raise hello
        attachment = await host.attach(
            # A WebSocket upgrade carried the token already (Authorization: Bearer).
            token=hello.token if credential is None or hello.token else credential.token,
            session_id=hello.session_id,
            last_seq=hello.last_seq,
            control=hello.control,
        )
    except HostRefusal as exc:
        await _refuse(conduit, exc.code, exc.message, config.stuck_timeout)
        return
    if on_attached is not None:
        on_attached()
    log.info(
        "client attached",
        session=attachment.session_id,
        client=hello.client.name,
        resumed=attachment.resumed,
    )
    credential = credential or Credential("tcp")
    if credential.transport == "tcp":  # over TCP the hello's token is the credential
        credential = attrs.evolve(credential, token=hello.token)
    resend_tool_calls(attachment)
    await run_attachment(
        conduit,
        attachment,
        lines,
        host.welcome(attachment),
        config.stuck_timeout,
        credential=credential,
    )


def resend_tool_calls(attachment: Attachment) -> None:
    """Send a client that attaches the calls of client tools that wait for an answer
    and that its replay does not bring: their ``dynamic_tool_call_request`` events
    again, as first sent (same ``seq``), before anything else. The client that was
    asked may have gone; this one can answer."""
    for out in attachment.session.waiting_tool_calls():
        if out.seq < attachment.replay_from:
            attachment.reply(out.data)


async def serve_stdio_session(
    host: SessionHost,
    conduit: Conduit,
    lines: Lines | None = None,
    first: Item | None = None,
    *,
    credential: Credential | None = None,
) -> int:
    """Serve the one session of ``codexcore serve --stdio``; returns the exit code.

    The handshake is optional: a first line that is a ``hello`` is answered
    with ``welcome`` (its token is not checked: the parent that spawned us is
    trusted), anything else is the first submission. At end of input the
    session is shut down with a ``shutdown`` submission of the server's own
    (id ``eof-…``), so every event up to ``shutdown_complete`` is written.
    ``lines`` and ``first``: the input and its first non-blank line, when
    the caller already read it (to choose the dialect).
    """
    attachment = await host.attach(token=None, lossless=True)
    if lines is None:
        lines = control_lines(conduit, host.config)
        first = await lines.next_nonblank()
    welcome: Welcome | None = None
    if first is not None and not isinstance(first, LineTooLong):
        decoded = decode_line(first)
        if isinstance(decoded, Hello) or (
            isinstance(decoded, Rejected) and decoded.code == "bad_hello"
        ):
            hello = _check_hello(first, host.config.max_line_bytes)
            if isinstance(hello, Hello) and hello.session_id is not None:
                hello = HostRefusal("unknown_session", "stdio serves one new session")
            if isinstance(hello, HostRefusal):
                attachment.detach()
                host.end_session(attachment.session_id)
                await _refuse(conduit, hello.code, hello.message, None, linger=False)
                return 2
            welcome = host.welcome(attachment)
            first = None
    ok = await run_attachment(
        conduit,
        attachment,
        lines,
        welcome,
        None,
        first=first,
        stdio=True,
        credential=credential or Credential("stdio"),
    )
    return 0 if ok else 1


async def run_attachment(
    conduit: Conduit,
    attachment: Attachment,
    lines: Lines,
    welcome: Welcome | None,
    stuck_timeout: float | None,
    *,
    first: Item | None = None,
    stdio: bool = False,
    credential: Credential | None = None,
) -> bool:
    """Run the reader and the writer of an attached connection until it is over.

    Returns False when the connection was lost or dropped rather than closed
    in good order. ``credential``: what the connection proved of its peer, to
    which its control requests' sender is bound.
    """
    controls = _Controls(attachment, credential or Credential("local"))
    if welcome is not None:
        conduit.write(encode_connection_msg(welcome) + b"\n")
    writer = asyncio.create_task(_write(conduit, attachment, stuck_timeout))
    reader = asyncio.create_task(_read(lines, attachment, first, stdio, controls))
    try:
        await asyncio.wait({writer, reader}, return_when=asyncio.FIRST_COMPLETED)
        if reader.done() and not writer.done():
            if reader.exception() is not None or not stdio:
                attachment.detach()  # a socket client that leaves detaches; the session goes on
            await writer
    finally:
        for task in (reader, writer):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if reader.done() and not reader.cancelled() and reader.exception() is not None:
        log.warning("connection reader failed", exc_info=reader.exception())
    return writer.result()


async def _read(
    lines: Lines, attachment: Attachment, first: Item | None, stdio: bool, controls: _Controls
) -> None:
    limit = lines._reader.limit
    item = first if first is not None else await lines.next()
    while item is not None:
        if not controls.take(item):
            await _handle(attachment, item, limit)
        item = await lines.next()
    if stdio:
        # End of input: shut the session down in order, behind what was submitted.
        import secrets  # once, at the end: not among a server's start-up imports

        with contextlib.suppress(NotAccepted):
            await attachment.submit(Submission(f"eof-{secrets.token_hex(4)}", Shutdown()))


MAX_CONTROL_IN_FLIGHT = 64
"""Control requests one native connection may have unanswered; more are answered busy."""


class _Controls:
    """Seed 003's control requests on a native connection: each is answered by its ack
    envelope, a line of this connection's own (``docs/control.md``), while the
    reader goes on (an ack may wait up to the ack deadline)."""

    def __init__(self, attachment: Attachment, credential: Credential) -> None:
        self.attachment = attachment
        self.credential = credential
        self.running: set[asyncio.Task[None]] = set()

    def take(self, item: Item) -> bool:
        """Start answering ``item`` if it is a control request; False if it is not one."""
        if isinstance(item, LineTooLong) or b'"control.' not in item:
            return False
        try:
            value = orjson.loads(item)
        except orjson.JSONDecodeError:
            return False
        kind = value.get("type") if isinstance(value, dict) else None
        if not (isinstance(kind, str) and kind.startswith("control.")) or "op" in value:
            return False
        if len(self.running) >= MAX_CONTROL_IN_FLIGHT:
            from codexcore.adapters.control._wire import ack, partial_envelope

            detail = f"this connection has {len(self.running)} control requests in flight"
            answer = ack(partial_envelope(value), "busy", detail, error="too_many_in_flight")
            self.attachment.reply(orjson.dumps(answer))
            return True
        task = asyncio.create_task(self._answer(value))
        self.running.add(task)
        task.add_done_callback(self.running.discard)
        return True

    async def _answer(self, value: dict[str, Any]) -> None:
        if value.get("type") == "control.register":
            self.attachment.reply(orjson.dumps(self._register(value)))
            return
        from codexcore.adapters.control._receiver import receiver

        answer = await receiver(self.attachment.session.host).handle(value, self.credential)
        self.attachment.reply(orjson.dumps(answer))

    def _register(self, value: dict[str, Any]) -> dict[str, Any]:
        """``control.register``: names for this connection's session, if it controls it."""
        from codexcore.adapters.control._names import register
        from codexcore.adapters.control._wire import Invalid

        echo = {"id": value["id"]} if isinstance(value.get("id"), str) else {}
        if not self.attachment.controller:
            problem = "only the connection in control of the session names it"
            return {"type": "control.register.refused", **echo, "error": problem}
        session = self.attachment.session
        fields = {k: v for k, v in value.items() if k in ("session_id", "agent_id")}
        try:
            names = register(session.host, session, fields)
        except Invalid as exc:
            return {"type": "control.register.refused", **echo, "error": exc.detail}
        return {"type": "control.registered", **echo, **names}


async def _handle(attachment: Attachment, item: Item, limit: int) -> None:
    if isinstance(item, LineTooLong):
        decoded: Submission | Rejected | Hello = Rejected(
            "", f"the line is longer than {limit} bytes and was discarded", "line_too_long"
        )
    elif is_blank(item):
        return
    else:
        decoded = decode_line(item)
    if isinstance(decoded, Hello):
        decoded = Rejected("", "unexpected hello: this connection is already attached", "bad_hello")
    try:
        await attachment.submit(decoded)
    except NotAccepted as exc:
        attachment.notice(SubmissionRejected(decoded.id, exc.code, exc.message))


async def _write(conduit: Conduit, attachment: Attachment, stuck_timeout: float | None) -> bool:
    """Write until the attachment is over; True when it ended in good order.

    A client is stuck when, for ``stuck_timeout`` seconds, not one byte of
    what was written to it leaves the transport's buffer: whether the writer
    is waiting on ``drain`` or, with bytes still unsent, for new frames.
    """
    try:
        while batch := await _next_batch(conduit, attachment, stuck_timeout):
            conduit.write(frame(batch))
            async with asyncio.timeout(stuck_timeout):
                await conduit.drain()
    except TimeoutError:
        log.info("client stuck: disconnecting", session=attachment.session_id)
        attachment.drop()
    except (ConnectionError, OSError):
        attachment.drop()
    if attachment.aborted:
        conduit.abort()
        return False
    await conduit.close(stuck_timeout)
    return True


async def _next_batch(
    conduit: Conduit, attachment: Attachment, stuck_timeout: float | None
) -> list[Frame]:
    def write_now(batch: list[Frame]) -> bool:
        conduit.write(frame(batch))
        return not conduit.pending()

    while (batch := attachment.poll()) is None:
        pending = conduit.pending()
        if not pending:
            # Idle: the session may write to us directly rather than wake this task.
            await attachment.wait(write_now)
            continue
        try:
            async with asyncio.timeout(stuck_timeout):
                await attachment.wait()
        except TimeoutError:
            if conduit.pending() >= pending:
                raise  # nothing left the buffer all that time
    return batch
