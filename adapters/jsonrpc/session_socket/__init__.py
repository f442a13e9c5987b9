"""A session's control socket on the JSON-RPC dialect: ``get_status``, ``stop``,
``checkpoint``, ``inject_prompt``, ``subscribe`` and their ``event`` notifications, over
the per-session sockets of :mod:`codexcore.adapters.session_sockets`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._methods import add_control_methods
    from ._status import SessionStatus, statuses

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "add_control_methods": "codexcore.adapters.jsonrpc.session_socket._methods",
    "SessionStatus": "codexcore.adapters.jsonrpc.session_socket._status",
    "statuses": "codexcore.adapters.jsonrpc.session_socket._status",
}

__all__ = [
    "SessionStatus",
    "add_control_methods",
    "statuses",
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
