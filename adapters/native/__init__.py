"""The native dialect: codexcore's own NDJSON, one submission or event a line.

A connection says ``hello`` and is attached to a session of the
:class:`~codexcore.adapters.host.SessionHost`; every later line is a submission (or a
control message, answered by :mod:`codexcore.adapters.control`'s receiver), every
event a line back. ``docs/adapters.md`` describes the wire.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._native import (
        MAX_CONTROL_IN_FLIGHT,
        refuse,
        run_attachment,
        serve_connection,
        serve_stdio_session,
    )

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "serve_connection": "codexcore.adapters.native._native",
    "serve_stdio_session": "codexcore.adapters.native._native",
    "run_attachment": "codexcore.adapters.native._native",
    "refuse": "codexcore.adapters.native._native",
    "MAX_CONTROL_IN_FLIGHT": "codexcore.adapters.native._native",
}

__all__ = [
    "MAX_CONTROL_IN_FLIGHT",
    "refuse",
    "run_attachment",
    "serve_connection",
    "serve_stdio_session",
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
