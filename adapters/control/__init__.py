"""ATM-style control messages to live sessions, both ends (``docs/control.md``).

The receiver (:class:`ControlReceiver`, a host extension found by :func:`receiver`)
with its envelopes, acks and durable dedupe store, answering on native connections and
as the JSON-RPC methods ``control.stdin``/``control.interrupt``; and the sending side
(:func:`send_control`, the ``codexcore control`` connection). Loaded with the first
control request: a server that never gets one does not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._receiver import ControlReceiver, receiver
    from ._sender import ControlError, SenderOptions, send_control
    from ._wire import ack, parse_request

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "ControlReceiver": "codexcore.adapters.control._receiver",
    "receiver": "codexcore.adapters.control._receiver",
    "send_control": "codexcore.adapters.control._sender",
    "ControlError": "codexcore.adapters.control._sender",
    "SenderOptions": "codexcore.adapters.control._sender",
    "parse_request": "codexcore.adapters.control._wire",
    "ack": "codexcore.adapters.control._wire",
}

__all__ = [
    "ControlError",
    "ControlReceiver",
    "SenderOptions",
    "ack",
    "parse_request",
    "receiver",
    "send_control",
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
