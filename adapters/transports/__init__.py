"""Bytes in, lines out: the transports every dialect runs over, knowing none of them.

The :class:`Conduit` (a connection's bytes; over asyncio streams for TCP, TLS and Unix
sockets: :class:`StreamConduit`) and its :class:`Lines`, NDJSON framing with a bounded
line reader, what a connection proves about its peer (:class:`Credential`), Unix
sockets' trust checks, WebSocket connections as conduits and their listener
(:func:`open_websocket`), taking fds 0 and 1 for stdio, and an event loop on a thread for
the blocking faces. Imports nothing of the adapters above it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._conduit import READ_CHUNK, Conduit, Lines, send_and_close
    from ._credential import Credential, peer_uid_of_fd
    from ._framing import DEFAULT_MAX_LINE_BYTES, LineReader, LineTooLong
    from ._loop_thread import LoopThread
    from ._stdio_claim import claim_stdio
    from ._streams import StreamConduit, keepalive, parse_address
    from ._unix_trust import UnsafeSocket, default_socket_path, open_unix_checked, peer_uid
    from ._websocket import (
        WebSocketConduit,
        WebSocketDoor,
        WebSocketListener,
        open_websocket,
        serve_websocket,
    )

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "Conduit": "codexcore.adapters.transports._conduit",
    "Lines": "codexcore.adapters.transports._conduit",
    "READ_CHUNK": "codexcore.adapters.transports._conduit",
    "send_and_close": "codexcore.adapters.transports._conduit",
    "Credential": "codexcore.adapters.transports._credential",
    "peer_uid_of_fd": "codexcore.adapters.transports._credential",
    "LineReader": "codexcore.adapters.transports._framing",
    "LineTooLong": "codexcore.adapters.transports._framing",
    "DEFAULT_MAX_LINE_BYTES": "codexcore.adapters.transports._framing",
    "StreamConduit": "codexcore.adapters.transports._streams",
    "keepalive": "codexcore.adapters.transports._streams",
    "parse_address": "codexcore.adapters.transports._streams",
    "UnsafeSocket": "codexcore.adapters.transports._unix_trust",
    "default_socket_path": "codexcore.adapters.transports._unix_trust",
    "open_unix_checked": "codexcore.adapters.transports._unix_trust",
    "peer_uid": "codexcore.adapters.transports._unix_trust",
    "claim_stdio": "codexcore.adapters.transports._stdio_claim",
    "LoopThread": "codexcore.adapters.transports._loop_thread",
    "WebSocketConduit": "codexcore.adapters.transports._websocket",
    "WebSocketDoor": "codexcore.adapters.transports._websocket",
    "WebSocketListener": "codexcore.adapters.transports._websocket",
    "open_websocket": "codexcore.adapters.transports._websocket",
    "serve_websocket": "codexcore.adapters.transports._websocket",
}

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "READ_CHUNK",
    "Conduit",
    "Credential",
    "LineReader",
    "LineTooLong",
    "Lines",
    "LoopThread",
    "StreamConduit",
    "UnsafeSocket",
    "WebSocketConduit",
    "WebSocketDoor",
    "WebSocketListener",
    "claim_stdio",
    "default_socket_path",
    "keepalive",
    "open_unix_checked",
    "open_websocket",
    "parse_address",
    "peer_uid",
    "peer_uid_of_fd",
    "send_and_close",
    "serve_websocket",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
