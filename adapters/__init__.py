"""Adapters that carry the Submission/Event queue pair across a boundary.

- ``codexcore.adapters.threads``: an engine on a background thread, blocking calls.
- ``codexcore.adapters.client``: the client library of a codexcore server.
- ``codexcore.adapters.stdio``, ``.tcp``, ``.unix``, ``.session_sockets``: the servers,
  over a :class:`SessionHost`, the transport- and dialect-agnostic home of many sessions.
- ``codexcore.adapters.acp``: the Agent Client Protocol agent; ``.redis_pool``: sessions
  on workers behind Redis.

Inside, one package per job (``docs/architecture.md`` draws them and their allowed
imports): ``transports``, ``host``, the ``jsonrpc`` machinery, ``control``, the dialects
(``native``, ``jsonrpc.codelia``, ``jsonrpc.chat``, ``jsonrpc.session_socket``, ``acp``,
``redis_pool``) and ``servers``. The wire is described in ``docs/adapters.md``; control
messages to live sessions (:class:`ControlConfig`, ``HostConfig.control``) in
``docs/control.md``. Names load on first use, so importing one adapter does not import
the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .host._control_config import ControlConfig, ControlSender
    from .host._host import (
        Attachment,
        HostConfig,
        HostRefusal,
        NotAccepted,
        SessionHost,
        host_engine_config,
    )
    from .servers._listener import shutdown

_LAZY = {
    "Attachment": "codexcore.adapters.host._host",
    "ControlConfig": "codexcore.adapters.host._control_config",
    "ControlSender": "codexcore.adapters.host._control_config",
    "HostConfig": "codexcore.adapters.host._host",
    "HostRefusal": "codexcore.adapters.host._host",
    "NotAccepted": "codexcore.adapters.host._host",
    "SessionHost": "codexcore.adapters.host._host",
    "host_engine_config": "codexcore.adapters.host._host",
    "shutdown": "codexcore.adapters.servers._listener",
}

__all__ = [
    "Attachment",
    "ControlConfig",
    "ControlSender",
    "HostConfig",
    "HostRefusal",
    "NotAccepted",
    "SessionHost",
    "host_engine_config",
    "shutdown",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codexcore.adapters' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
