"""Which dialect a connection speaks: its first frame decides, on every transport.

A first line that is a JSON object with ``"jsonrpc": "2.0"`` (or a batch that
starts with one) selects the JSON-RPC dialect (``docs/jsonrpc.md``); anything
else the native one, which then reads that line as it always did (a ``hello``
on sockets, a ``hello`` or the first submission on stdio). ``--protocol native|jsonrpc`` forces one.

Before the first line, a socket connection is counted in and its peer
checked (Unix). A refusal at that point is said in the forced dialect, or
in the native one under ``auto`` (nothing has been read to tell).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import attrs
import orjson

from codexcore.adapters.control._lines import control_lines
from codexcore.adapters.host._host import HostRefusal, SessionHost
from codexcore.adapters.jsonrpc._options import RpcOptions
from codexcore.adapters.native._native import refuse, serve_connection, serve_stdio_session
from codexcore.adapters.transports._conduit import Conduit, Lines, send_and_close
from codexcore.adapters.transports._credential import Credential
from codexcore.adapters.transports._framing import Item, LineTooLong
from codexcore.protocol._value import Value

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcConnection

Protocol = Literal["auto", "native", "jsonrpc"]
PROTOCOLS: tuple[Protocol, ...] = ("auto", "native", "jsonrpc")


@attrs.frozen(repr=False, eq=False)
class Dialects(Value):
    """What a transport serves: ``protocol`` (``auto`` chooses per connection) and the
    JSON-RPC dialect's options."""

    protocol: Protocol = "auto"
    jsonrpc: RpcOptions = attrs.field(factory=RpcOptions)


def speaks_jsonrpc(first: Item | None) -> bool:
    """Is this first line JSON-RPC 2.0: an object with ``"jsonrpc": "2.0"``, or a batch
    whose first entry is one (the native dialect takes no arrays)?"""
    if first is None or isinstance(first, LineTooLong):
        return False
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    if isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, dict) and value.get("jsonrpc") == "2.0"


def _chooses_jsonrpc(protocol: Protocol, first: Item | None) -> bool:
    return protocol == "jsonrpc" or (protocol == "auto" and speaks_jsonrpc(first))


async def _refuse(
    protocol: Protocol, conduit: Conduit, refusal: HostRefusal, flush_timeout: float | None
) -> None:
    if protocol != "jsonrpc":
        await refuse(conduit, refusal, flush_timeout)
        return
    from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
    from codexcore.adapters.jsonrpc._machine import (
        NOT_INITIALIZED,
        UNAUTHORIZED,
        RpcError,
        dumps,
        error_response,
    )

    codes = {"unauthorized": UNAUTHORIZED, "handshake_timeout": NOT_INITIALIZED}
    error = RpcError(codes.get(refusal.code, SERVER_ERROR), refusal.message)
    await send_and_close(conduit, dumps(error_response(None, error)), flush_timeout)


_FOLLOWING: weakref.WeakSet[SessionHost] = weakref.WeakSet()


def follow_statuses(host: SessionHost) -> None:
    """From now on, follow each new session's status from its start, so a JSON-RPC
    ``get_status`` knows the whole session, however many events its replay buffer
    has lost (stdio keeps none). Done once per host, by its first JSON-RPC
    connection: a server only native clients use pays nothing. The status code
    loads with the first session, not the first frame."""
    if host in _FOLLOWING:
        return
    _FOLLOWING.add(host)

    def follow(session_id: str) -> None:
        from codexcore.adapters.jsonrpc.session_socket._status import statuses

        statuses(host).follow(session_id)

    host.on_new_session(follow)


def _rpc_connection(
    host: SessionHost,
    conduit: Conduit,
    lines: Lines,
    options: RpcOptions,
    *,
    require_initialize: bool,
    stdio: bool,
    stuck_timeout: float | None,
    credential: Credential | None,
) -> RpcConnection:
    """A JSON-RPC connection; the JSON-RPC stack is imported here, by the first connection
    that speaks it, so a native client never loads it."""
    from codexcore.adapters.jsonrpc._server import RpcConnection

    follow_statuses(host)
    return RpcConnection(
        host,
        conduit,
        lines,
        options,
        require_initialize=require_initialize,
        stdio=stdio,
        stuck_timeout=stuck_timeout,
        credential=credential,
    )


async def serve_socket(
    host: SessionHost,
    conduit: Conduit,
    dialects: Dialects,
    *,
    require_initialize: bool,
    peer_problem: str | None = None,
    on_attached: Callable[[], None] | None = None,
    credential: Credential | None = None,
) -> None:
    """Serve one socket connection in the dialect its first line (or ``dialects``) chooses.

    ``require_initialize``: a JSON-RPC client must open with ``initialize``
    carrying the host's token (TCP). ``peer_problem`` refuses the client at
    once, e.g. a Unix peer of another user. ``on_attached`` is called once
    the client is past its handshake. ``credential``: what the transport proved
    of the peer (a Unix peer's uid), for control messages (``docs/control.md``).
    """
    credential = credential or Credential("tcp")
    config = host.config
    protocol = dialects.protocol
    try:
        host.open_connection()
    except HostRefusal as exc:
        await _refuse(protocol, conduit, exc, config.stuck_timeout)
        return
    try:
        if peer_problem is not None:
            await _refuse(
                protocol, conduit, HostRefusal("unauthorized", peer_problem), config.stuck_timeout
            )
            return
        lines = control_lines(conduit, config)
        try:
            async with asyncio.timeout(config.handshake_timeout):
                first = await lines.next_nonblank()
        except TimeoutError:
            said = "initialize" if protocol == "jsonrpc" else "hello"
            message = f"no {said} within {config.handshake_timeout} seconds"
            timeout = HostRefusal("handshake_timeout", message)
            await _refuse(protocol, conduit, timeout, config.stuck_timeout)
            return
        if first is None:
            conduit.abort()
            return
        if not _chooses_jsonrpc(protocol, first):
            await serve_connection(
                host, conduit, lines, first, on_attached=on_attached, credential=credential
            )
            return
        connection = _rpc_connection(
            host,
            conduit,
            lines,
            dialects.jsonrpc,
            require_initialize=require_initialize,
            stdio=False,
            stuck_timeout=config.stuck_timeout,
            credential=credential,
        )
        connection.on_ready = on_attached
        await connection.run(first)
    finally:
        host.close_connection()


async def serve_stdio_conduit(
    host: SessionHost,
    conduit: Conduit,
    dialects: Dialects,
    credential: Credential | None = None,
) -> int:
    """Serve ``codexcore serve --stdio`` in the dialect its first line chooses; the exit code.

    A signal (the host begins closing) before the first line ends at once,
    with 0: no session was asked for, so there is nothing to shut down.
    """
    credential = credential or Credential("stdio")
    if dialects.protocol == "native":
        return await serve_stdio_session(host, conduit, credential=credential)
    lines = control_lines(conduit, host.config)
    reading = asyncio.create_task(lines.next_nonblank())
    closing = asyncio.create_task(host.wait_closing())
    try:
        await asyncio.wait({reading, closing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (reading, closing):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if not reading.done() or reading.cancelled():
        return 0
    first = reading.result()
    if not _chooses_jsonrpc(dialects.protocol, first):
        return await serve_stdio_session(host, conduit, lines, first, credential=credential)
    connection = _rpc_connection(
        host,
        conduit,
        lines,
        dialects.jsonrpc,
        require_initialize=False,
        stdio=True,
        stuck_timeout=None,
        credential=credential,
    )
    return 0 if await connection.run(first) else 1
