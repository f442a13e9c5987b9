"""codexcore: a Codex-style agent core, embedded in-process.

A UI puts :class:`~codexcore.protocol.Submission`\\ s on the submission queue
of a :class:`Codex` engine and reads :class:`~codexcore.protocol.Event`\\ s from
its event queue. The wire types live in :mod:`codexcore.protocol`; other
processes reach the same queues through :mod:`codexcore.adapters`.

Importing this package is cheap: the engine (and with it asyncio, httpx and
janus) loads on first use of one of its names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._api_key import MissingApiKey

if TYPE_CHECKING:
    from .engine import (
        Codex,
        EngineClosed,
        EngineConfig,
        McpServerConfig,
        ModelClientPool,
        Rejected,
        SessionConfig,
        TaskResult,
        parse_submission,
    )
    from .tools.functions import CallbackExecutor, FunctionTool, ToolImage, function_tool

__version__ = "0.1.0"

_LAZY = {
    "CallbackExecutor": "codexcore.tools.functions",
    "Codex": "codexcore.engine",
    "EngineClosed": "codexcore.engine",
    "EngineConfig": "codexcore.engine",
    "FunctionTool": "codexcore.tools.functions",
    "McpServerConfig": "codexcore.engine",
    "ModelClientPool": "codexcore.engine",
    "Rejected": "codexcore.engine",
    "SessionConfig": "codexcore.engine",
    "TaskResult": "codexcore.engine",
    "ToolImage": "codexcore.tools.functions",
    "function_tool": "codexcore.tools.functions",
    "parse_submission": "codexcore.engine",
}

__all__ = [
    "CallbackExecutor",
    "Codex",
    "EngineClosed",
    "EngineConfig",
    "FunctionTool",
    "McpServerConfig",
    "MissingApiKey",
    "ModelClientPool",
    "Rejected",
    "SessionConfig",
    "TaskResult",
    "ToolImage",
    "__version__",
    "function_tool",
    "parse_submission",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codexcore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
