"""The rules of a session host: :class:`HostConfig`, its limits and their defaults.

Every server builds one before it serves (``codexcore serve`` from its flags and
``config.toml``), so this module holds the configuration alone: the host that
applies it is :mod:`._host`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from codexcore import __version__
from codexcore.adapters.transports._framing import DEFAULT_MAX_LINE_BYTES
from codexcore.engine import EngineConfig
from codexcore.protocol import Peer
from codexcore.protocol._value import Value

from ._control_config import ControlConfig

KiB = 1024
MiB = 1024 * KiB

ENGINE_EVENT_QUEUE = 256
"""Engine event queue slots per hosted session. The pump drains the queue whole each
time it runs, so the size sets how many events go out in one write when the engine
is fast (64 slots: about 0.6 of a bare writer's rate; 256: 0.8 to 1.0). The replay
buffer and send queues do the buffering: the queue only fills while a lossless
(stdio) client holds the pump, at most 2.8 MiB of 11 kB output deltas."""


def host_engine_config(**fields: Any) -> EngineConfig:
    """An :class:`~codexcore.EngineConfig` sized for a host of many sessions."""
    return EngineConfig(**{"event_queue_size": ENGINE_EVENT_QUEUE, **fields})


@attrs.frozen(repr=False, eq=False)
class HostConfig(Value):
    """The rules of a :class:`SessionHost`; every limit bounds memory or time.

    ``engine`` configures each session's engine (``acknowledge_submissions``
    is always turned on; the default has a small event queue, see
    :func:`host_engine_config`). ``token``, when set, must be presented by every
    client (compared in constant time). ``max_connections`` counts every
    open connection, handshaking or not. ``replay_events``/``replay_bytes``
    bound each session's replay buffer; ``send_buffer_bytes`` each
    connection's send queue. A connection whose transport does not drain for
    ``stuck_timeout`` seconds is dropped. A session with no connection and
    no new event for ``idle_timeout`` seconds is shut down. A client has
    ``handshake_timeout`` seconds to send its ``hello``. ``control``: the rules
    for seed 003's control messages (``docs/control.md``); a control sender's
    token admits a connection as the host's token does, and names its sender.
    ``tui_theme`` is the theme a Codelia UI is told (``initialize``'s ``tui.theme``)
    and ``config_file`` the ``config.toml`` its ``theme.set`` writes (None: it is not
    written).
    ``session_names``: names (by kind) every session this host makes is given
    at once (:meth:`SessionHost.name_session`): a one-session host's names, from
    ``--agent-id`` and ``--session-alias``.
    """

    engine: EngineConfig = attrs.field(factory=host_engine_config)
    token: str | None = attrs.field(default=None, repr=False)
    max_sessions: int = 10_000
    max_connections: int = 2_048
    max_connections_per_session: int = 32
    replay_events: int = 4_096
    replay_bytes: int = 2 * MiB
    send_buffer_bytes: int = 512 * KiB
    stuck_timeout: float = 30.0
    idle_timeout: float = 600.0
    handshake_timeout: float = 10.0
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    server: Peer = attrs.field(factory=lambda: Peer("codexcore", __version__))
    control: ControlConfig = attrs.field(factory=ControlConfig)
    chat_prompts: str | None = None
    """The prompt file of the Copilot-CLI-style chat protocol's ``generate`` and
    ``customize`` (None: the one shipped in the package; the ``chat_prompts`` setting)."""
    tui_theme: str | None = None
    config_file: str | None = None
    session_names: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
