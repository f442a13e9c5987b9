"""The client library: a codexcore server in another process, with the faces of the engine.

Connect to ``codexcore serve --tcp`` or ``--unix``, or spawn ``codexcore serve
--stdio``, and drive the session exactly as an in-process
:class:`~codexcore.Codex`: ``await submit(op)``, ``await next_event()``,
``async for event in client.events()``. No protocol code is needed::

    async with RemoteCodex.connect_tcp("127.0.0.1", 8765, token=token) as codex:
        await codex.submit(UserInput((TextInput("list the files"),)))
        async for event in codex.events():
            ...

The client survives a dropped connection: it reconnects with backoff,
reattaches to its session with the highest ``seq`` it has seen (the server
replays what it missed), resends every submission not yet answered under
the same id (the server runs each id once), and drops anything it has
already delivered, so the UI sees each event once, in order.

What happens to the connection (dropped, reattached, events lost for good,
control taken by another client, a submission refused) is not an event of
the session: it is a :class:`Notice`, handed to ``on_notice`` by
``next_event`` in order with the events. :class:`RemoteCodexThread` is the
same client with blocking methods, for programs without an event loop.

The wire this speaks is described in ``docs/adapters.md``.

This module is the public face; the implementation is in private modules
behind it (``client._async``: :class:`RemoteCodex`; ``client._thread``:
:class:`RemoteCodexThread`; ``client._types``: notices, errors, options;
``client._link``, ``client._handshake``, ``client._outbox``, ``client._inbox``,
``client._control``: its parts). Import from here.
"""

from __future__ import annotations

from codexcore.adapters.control._sender import ControlError, SenderOptions
from codexcore.adapters.transports._unix_trust import UnsafeSocket
from codexcore.engine import EngineClosed

# typing.get_type_hints resolves a class's annotations in its __module__, this module for
# the classes re-exported here (below): Reconnected.welcome needs Welcome in it.
from codexcore.protocol import Welcome  # noqa: F401

from ._async import CLIENT_NAME as CLIENT_NAME
from ._async import Dial as Dial
from ._async import RemoteCodex
from ._handshake import LOST_SESSION_REFUSALS as LOST_SESSION_REFUSALS
from ._handshake import RETRIABLE_REFUSALS as RETRIABLE_REFUSALS
from ._link import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES
from ._link import default_stdio_argv
from ._outbox import MAX_RESENT_TRACKED as MAX_RESENT_TRACKED
from ._thread import RemoteCodexThread
from ._types import (
    ClientOptions,
    ConnectionLost,
    ControlChange,
    Disconnected,
    EventsLost,
    HandshakeRefused,
    Notice,
    NoticeCallback,
    NotInControl,
    Reconnected,
    ReconnectPolicy,
    RemoteError,
    ServerExited,
    SessionLost,
    StdioOptions,
    SubmissionRefused,
)

# The ``X as X`` imports above are names of the implementation that this module defined
# or imported before its split: still importable from here, not part of the API.
__all__ = [
    "ClientOptions",
    "ConnectionLost",
    "ControlChange",
    "ControlError",
    "Disconnected",
    "EngineClosed",
    "EventsLost",
    "HandshakeRefused",
    "NotInControl",
    "Notice",
    "NoticeCallback",
    "ReconnectPolicy",
    "Reconnected",
    "RemoteCodex",
    "RemoteCodexThread",
    "RemoteError",
    "SenderOptions",
    "ServerExited",
    "SessionLost",
    "StdioOptions",
    "SubmissionRefused",
    "UnsafeSocket",
    "default_stdio_argv",
]

for _public in (
    ClientOptions,
    ConnectionLost,
    ControlChange,
    Disconnected,
    EventsLost,
    HandshakeRefused,
    NotInControl,
    Notice,
    ReconnectPolicy,
    Reconnected,
    RemoteCodex,
    RemoteCodexThread,
    RemoteError,
    ServerExited,
    SessionLost,
    StdioOptions,
    SubmissionRefused,
    UnsafeSocket,
):
    _public.__module__ = __name__  # shown, documented and pickled as this module's
