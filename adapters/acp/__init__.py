"""codexcore as an Agent Client Protocol (ACP) agent: ``codexcore acp``.

Editors spawn the agent and speak ACP to it over stdio, through the
``agent-client-protocol`` SDK (``pip install codexcore[acp]``); :func:`serve_acp` runs
it and :class:`CodexAgent` maps its methods onto the engine (``docs/editors.md``). Names
load on first use, so ``codexcore acp`` can report a missing SDK before importing it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._agent import CodexAgent, NotAPipe, editor_mcp_servers, serve_acp

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "CodexAgent": "codexcore.adapters.acp._agent",
    "NotAPipe": "codexcore.adapters.acp._agent",
    "editor_mcp_servers": "codexcore.adapters.acp._agent",
    "serve_acp": "codexcore.adapters.acp._agent",
}

__all__ = [
    "CodexAgent",
    "NotAPipe",
    "editor_mcp_servers",
    "serve_acp",
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
