"""The chat protocol on the JSON-RPC dialect: ``chat`` with its ``stream/chunk``
notifications, and ``exit``, for a desktop app driving a CLI child over stdio
(``docs/jsonrpc.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._chat import register

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "register": "codexcore.adapters.jsonrpc.chat._chat",
}

__all__ = [
    "register",
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
