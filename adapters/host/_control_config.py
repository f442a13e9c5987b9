"""What a session host is told about seed 003's control messages, and nothing more.

:class:`ControlConfig` (the receiver's rules, which the command line builds
from ``config.toml``'s ``[control]`` table) is a field of every host's
configuration, so every server loads this module. The envelopes, their
parsing and the acks live in :mod:`codexcore.adapters.control._wire`, loaded with the receiver
when a control request first arrives: a server that never gets one does not
pay for them.
"""

from __future__ import annotations

from typing import Any

import attrs

from codexcore.protocol import ControlMessages
from codexcore.protocol._value import Value

KiB = 1024
MiB = 1024 * KiB

VERSION = 1
"""The control messages' ``v``."""


@attrs.frozen(repr=False, eq=False)
class ControlSender(Value):
    """A sender the host admits: ``name`` (the envelope's ``sender``), its ``team``, and
    its credential: ``uid`` for stdio and Unix peers, ``token`` for TCP connections."""

    name: str
    team: str
    uid: int | None = None
    token: str | None = attrs.field(default=None, repr=False)


@attrs.frozen(repr=False, eq=False)
class ControlConfig(Value):
    """The receiver's rules (``[control]`` in ``config.toml``; ``docs/control.md``).

    ``team`` None (no ``[control]`` table): every request is rejected and the
    capability says so. ``allowed_content_dirs`` empty: ``content_ref`` is
    refused. ``store_path`` is the durable dedupe store (None: under the
    engine's home, ``control/dedupe.sqlite3``; ``":memory:"``: in memory, lost on
    restart). ``audit_file``: the JSONL file that gets every audit record besides
    the log (None: ``control-audit.jsonl`` in the engine's home, unless the engine
    is ephemeral; ``""``: none). ``verbose_messages``: audit records carry the
    message text. :meth:`line_bytes`: how long a control request's line may be.
    """

    team: str | None = None
    senders: tuple[ControlSender, ...] = ()
    allowed_content_dirs: tuple[str, ...] = ()
    soft_limit_bytes: int = 64 * KiB
    hard_limit_bytes: int = 1 * MiB
    max_ref_bytes: int = 64 * MiB
    dedupe_ttl: float = 600.0
    max_age: float = 300.0
    max_skew: float = 30.0
    ack_timeout: float = 2.0
    max_pending: int = 16
    store_path: str | None = None
    audit_file: str | None = None
    verbose_messages: bool = False

    def capabilities(self) -> ControlMessages:
        """What ``welcome`` and ``initialize`` announce (seed 003's capability discovery)."""
        usable = self.team is not None and bool(self.senders)
        return ControlMessages(
            VERSION,
            stdin=usable,
            interrupt=usable,
            content_ref=usable and bool(self.allowed_content_dirs),
            max_inline_bytes=self.hard_limit_bytes,
        )

    def line_bytes(self, max_line_bytes: int) -> int:
        """The longest line read when it is a control request, beside ``max_line_bytes``
        for any other: room for inline content at the hard limit, JSON-escaped (twice
        its bytes) in its envelope, so that content over the limit is read and gets
        its ``rejected`` ack (with its ``request_id``) rather than a line error. Only a
        host that takes control messages (a ``team``) reads longer lines."""
        if self.team is None:
            return max_line_bytes
        return max(max_line_bytes, 2 * self.hard_limit_bytes + 64 * KiB)

    def tokens(self) -> tuple[str, ...]:
        return tuple(sender.token for sender in self.senders if sender.token)


CONTROL_MESSAGES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "v": {"const": VERSION},
        "stdin": {"type": "boolean"},
        "interrupt": {"type": "boolean"},
        "content_ref": {"type": "boolean"},
        "max_inline_bytes": {"type": "integer", "minimum": 0},
    },
    "required": ["v", "stdin", "interrupt", "content_ref", "max_inline_bytes"],
}
"""The JSON Schema of :meth:`ControlConfig.capabilities` on the wire (``welcome``,
``initialize``)."""
