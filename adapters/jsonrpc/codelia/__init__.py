"""The Codelia runtime protocol on the JSON-RPC dialect: what the Codelia TUI drives.

Runs (``run.start``/``run.cancel`` and their ``agent.event`` stream), models, sessions
and history, the UI context, skills, MCP servers and the ``!command`` shell, each
module registering its methods on a :class:`~codexcore.adapters.jsonrpc.MethodTable`
(``docs/jsonrpc.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._events import MAPPING, AgentEvent
    from ._methods import register
    from ._runs import state_of

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "register": "codexcore.adapters.jsonrpc.codelia._methods",
    "state_of": "codexcore.adapters.jsonrpc.codelia._runs",
    "MAPPING": "codexcore.adapters.jsonrpc.codelia._events",
    "AgentEvent": "codexcore.adapters.jsonrpc.codelia._events",
}

__all__ = [
    "MAPPING",
    "AgentEvent",
    "register",
    "state_of",
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
