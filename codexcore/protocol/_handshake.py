"""Connection messages: the handshake and the notices a server sends one connection.

Over a socket, a client's first line is a ``hello``; the server answers with
``welcome`` (and then the session's Events) or with one ``refused`` line and
closes the connection. Later, the server may tell one connection that it lost
control of its session (``control_changed``), that a submission it sent was
not accepted (``submission_rejected``), or why it is being closed
(``closing``). These messages belong to a connection, not to the session: they
carry a top-level ``type`` and no ``seq``, while Events carry ``seq`` and no
top-level ``type``, so a client tells the two apart by their keys.

Codes (in ``refused``, ``submission_rejected`` and ``closing``) are plain
strings so that a client keeps working when a newer server adds one; the
known codes are listed in ``docs/adapters.md``.
"""

from __future__ import annotations

from typing import Annotated, Any

import attrs
import orjson

from ._codec import ProtocolError, _load_object, decode_event, decode_variant, to_wire
from ._envelope import Event
from ._value import Value
from ._wire import CONNECTION_MSGS, Tagged

PROTOCOL_VERSION = 1
"""The version of the socket protocol this package speaks (``hello.protocol_version``)."""


@attrs.frozen(repr=False, eq=False)
class Peer(Value):
    """A program at one end of a connection: its name and version."""

    name: str
    version: str


@attrs.frozen(repr=False, eq=False)
class Limits(Value):
    """What a client needs to know about the server's rules.

    ``max_line_bytes``: the longest line the server reads (without the
    newline). ``duplicate_ttl``: seconds during which a resent submission id
    is recognised and not run again. ``idle_timeout``: seconds a session
    with no connection and no new events lives on before it is shut down.
    """

    max_line_bytes: int
    duplicate_ttl: float
    idle_timeout: float


@CONNECTION_MSGS.register("hello")
@attrs.frozen(repr=False, eq=False)
class Hello(Tagged):
    """The client's first line.

    Without ``session_id`` the server creates a session. With it, the
    connection attaches to that session and the server replays every event
    retained after ``last_seq`` (``null`` means from the oldest retained
    event) before going on live. ``control`` asks to be the connection that
    submits; the latest connection to ask gets control.
    """

    protocol_version: int
    client: Peer
    token: str | None = None
    session_id: str | None = None
    last_seq: int | None = None
    control: bool = True


@attrs.frozen(repr=False, eq=False)
class ControlMessages(Value):
    """What the server accepts of ATM-style control messages (``docs/control.md``).

    ``v``: the envelope version. ``stdin`` / ``interrupt``: the requests it
    answers. ``content_ref``: whether oversize input by file reference is
    accepted (some base directory is configured). ``max_inline_bytes``: the
    hard limit of inline ``content``.
    """

    v: int
    stdin: bool
    interrupt: bool
    content_ref: bool
    max_inline_bytes: int


@CONNECTION_MSGS.register("welcome")
@attrs.frozen(repr=False, eq=False)
class Welcome(Tagged):
    """The handshake succeeded; the session's Events follow.

    ``replay_from`` is the ``seq`` of the first event this connection will
    receive. ``replay_complete`` is false when events the client asked for
    (those after its ``last_seq``) are no longer retained and will never
    arrive. ``resumed`` tells an attach from a new session; ``control``
    whether this connection controls the session. ``agent_id`` names the
    session's agent (stable across restarts and resumes) and
    ``control_messages`` what the server accepts of the ATM-style control
    messages, for a sender to gate on.
    """

    protocol_version: int
    server: Peer
    capabilities: tuple[str, ...]
    session_id: str
    resumed: bool
    control: bool
    replay_from: int
    replay_complete: bool
    limits: Limits
    agent_id: str | None = None
    control_messages: ControlMessages | None = None


@CONNECTION_MSGS.register("refused")
@attrs.frozen(repr=False, eq=False)
class Refused(Tagged):
    """The handshake failed (``code`` says why); the server closes the connection.

    ``protocol_versions`` lists the versions the server speaks.
    """

    code: str
    message: str
    protocol_versions: tuple[int, ...] = (PROTOCOL_VERSION,)


@CONNECTION_MSGS.register("control_changed")
@attrs.frozen(repr=False, eq=False)
class ControlChanged(Tagged):
    """This connection gained or lost control of its session (``reason`` says how)."""

    control: bool
    reason: str


@CONNECTION_MSGS.register("submission_rejected")
@attrs.frozen(repr=False, eq=False)
class SubmissionRejected(Tagged):
    """A submission from this connection was not accepted and never reached the session.

    ``id`` is the submission's id, or ``""`` when none could be read.
    """

    id: str
    code: str
    message: str


@CONNECTION_MSGS.register("closing")
@attrs.frozen(repr=False, eq=False)
class Closing(Tagged):
    """The server is closing this connection (the session goes on); reattach to resume."""

    code: str
    message: str


ConnectionMsg = Annotated[
    Hello | Welcome | Refused | ControlChanged | SubmissionRejected | Closing,
    CONNECTION_MSGS,
]


def encode_connection_msg(msg: ConnectionMsg) -> bytes:
    """One connection message as compact JSON (no trailing newline)."""
    return orjson.dumps(to_wire(msg))


def decode_connection_msg(data: bytes | str | dict[str, Any]) -> ConnectionMsg:
    """Decode any connection message; raises :class:`ProtocolError` naming the problem."""
    value = _load_object(data, "connection message")
    msg: ConnectionMsg = decode_variant(CONNECTION_MSGS, value, "message")
    return msg


def decode_hello(data: bytes | str | dict[str, Any]) -> Hello:
    """Decode a client's first line, which must be a ``hello``."""
    value = _load_object(data, "hello")
    if value.get("type") != "hello":
        raise ProtocolError(f"type: expected 'hello', got {value.get('type')!r}")
    msg = decode_variant(CONNECTION_MSGS, value, "hello")
    assert isinstance(msg, Hello)
    return msg


def decode_server_message(data: bytes | str | dict[str, Any]) -> Event | ConnectionMsg:
    """Decode one line a server sends: an Event (it has ``seq``) or a connection message."""
    value = _load_object(data, "server message")
    if "seq" in value and "type" not in value:
        return decode_event(value)
    return decode_connection_msg(value)
