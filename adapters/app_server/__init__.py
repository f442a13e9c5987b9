"""Codex's app-server protocol: the JSON-RPC that ``codex app-server`` speaks to the VS Code
extension and to the app-server client libraries, on the session host.

:func:`serve_app_server` serves one connection on any
:class:`~codexcore.adapters.transports.Conduit`. A thread is a session of the host (its
id is the session's), a turn a Task; the host knows nothing of this package.
``docs/app-server.md`` lists the methods and what is not implemented.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._server import serve_app_server

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {"serve_app_server": "codexcore.adapters.app_server._server"}

__all__ = ["serve_app_server"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
