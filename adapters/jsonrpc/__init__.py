"""The JSON-RPC 2.0 machinery every JSON-RPC protocol of codexcore runs on.

A pure state machine (:class:`RpcMachine`), the per-connection server
(:class:`RpcConnection`), the method table with typed params (:class:`MethodTable`,
:func:`standard_methods`), the error codes (:data:`ERRORS`), result schemas and the
OpenRPC document (:func:`openrpc_document`), and how a server serves it
(:class:`RpcOptions`). One subpackage per protocol on it, each loaded at its first call:
``codelia`` (the Codelia runtime protocol), ``chat`` (a desktop app's chat child) and
``session_socket`` (a session's control socket). A new JSON-RPC protocol is a new
subpackage with a ``register(table)`` and a ``MethodGroup`` in ``_methods.py``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._errors import ERRORS
    from ._machine import RpcError, RpcMachine
    from ._methods import MethodGroup, MethodTable, decode_params, standard_methods
    from ._openrpc import openrpc_document
    from ._options import RpcOptions
    from ._outbox import ConnectionClosed
    from ._server import RpcConnection, RpcContext

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "RpcMachine": "codexcore.adapters.jsonrpc._machine",
    "RpcError": "codexcore.adapters.jsonrpc._machine",
    "RpcConnection": "codexcore.adapters.jsonrpc._server",
    "RpcContext": "codexcore.adapters.jsonrpc._server",
    "ConnectionClosed": "codexcore.adapters.jsonrpc._outbox",
    "MethodTable": "codexcore.adapters.jsonrpc._methods",
    "MethodGroup": "codexcore.adapters.jsonrpc._methods",
    "standard_methods": "codexcore.adapters.jsonrpc._methods",
    "decode_params": "codexcore.adapters.jsonrpc._methods",
    "ERRORS": "codexcore.adapters.jsonrpc._errors",
    "openrpc_document": "codexcore.adapters.jsonrpc._openrpc",
    "RpcOptions": "codexcore.adapters.jsonrpc._options",
}

__all__ = [
    "ERRORS",
    "ConnectionClosed",
    "MethodGroup",
    "MethodTable",
    "RpcConnection",
    "RpcContext",
    "RpcError",
    "RpcMachine",
    "RpcOptions",
    "decode_params",
    "openrpc_document",
    "standard_methods",
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
