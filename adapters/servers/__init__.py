"""What a server puts together: the dialect chooser and the socket listener.

A connection's first frame picks its dialect (:class:`Dialects`: native or JSON-RPC);
a :class:`Listener` accepts socket connections for a host and hands each to it. The
public servers built on them are :mod:`codexcore.adapters.stdio`,
:mod:`~codexcore.adapters.tcp`, :mod:`~codexcore.adapters.unix` and
:mod:`~codexcore.adapters.session_sockets`. A new dialect is chosen here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._dialect import Dialects, serve_socket, serve_stdio_conduit
    from ._listener import Listener, shutdown

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "Dialects": "codexcore.adapters.servers._dialect",
    "serve_socket": "codexcore.adapters.servers._dialect",
    "serve_stdio_conduit": "codexcore.adapters.servers._dialect",
    "Listener": "codexcore.adapters.servers._listener",
    "shutdown": "codexcore.adapters.servers._listener",
}

__all__ = [
    "Dialects",
    "Listener",
    "serve_socket",
    "serve_stdio_conduit",
    "shutdown",
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
