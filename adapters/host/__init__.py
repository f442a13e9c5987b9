"""The session host: many sessions by id, whatever carries them and whatever they speak.

:class:`SessionHost` keeps each session's engine, its replay buffer, its attachments
(one controller, any watchers) and their merged deltas, its configuration
(:class:`HostConfig`, with who may send control messages: :class:`ControlConfig`) and
the connection limits. It knows no dialect and imports none: a dialect package that
keeps something per host plugs it in as a host extension (:meth:`SessionHost.extension`;
the control receiver is one).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._attachment import Attachment, NotAccepted
    from ._config import HostConfig, host_engine_config
    from ._control_config import ControlConfig, ControlSender
    from ._frames import Frame, Out
    from ._host import CAPABILITIES, EngineSource, HostExtension, HostRefusal, SessionHost
    from ._session import HostedEngine, HostedSession

# Loaded on first use: importing one private module of the package loads no other.
_LAZY = {
    "SessionHost": "codexcore.adapters.host._host",
    "HostExtension": "codexcore.adapters.host._host",
    "HostRefusal": "codexcore.adapters.host._host",
    "EngineSource": "codexcore.adapters.host._host",
    "CAPABILITIES": "codexcore.adapters.host._host",
    "HostConfig": "codexcore.adapters.host._config",
    "host_engine_config": "codexcore.adapters.host._config",
    "HostedSession": "codexcore.adapters.host._session",
    "HostedEngine": "codexcore.adapters.host._session",
    "Attachment": "codexcore.adapters.host._attachment",
    "NotAccepted": "codexcore.adapters.host._attachment",
    "Frame": "codexcore.adapters.host._frames",
    "Out": "codexcore.adapters.host._frames",
    "ControlConfig": "codexcore.adapters.host._control_config",
    "ControlSender": "codexcore.adapters.host._control_config",
}

__all__ = [
    "CAPABILITIES",
    "Attachment",
    "ControlConfig",
    "ControlSender",
    "EngineSource",
    "Frame",
    "HostConfig",
    "HostExtension",
    "HostRefusal",
    "HostedEngine",
    "HostedSession",
    "NotAccepted",
    "Out",
    "SessionHost",
    "host_engine_config",
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
