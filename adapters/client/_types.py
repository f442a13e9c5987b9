"""The client library's vocabulary besides Events: notices, errors, the reconnect policy,
and the options of its constructors.

Kept apart from :mod:`codexcore.adapters.client` so that the transport helpers
can raise these errors without importing the client itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypedDict

import attrs

from codexcore.protocol import Welcome

if TYPE_CHECKING:
    from codexcore.tools.functions import FunctionTool

# --- notices: what happened to the connection, in order with the events ---------------


@attrs.frozen
class Notice:
    """Something about the connection (not the session) that a UI may want to show.

    Notices travel in the event stream, in order with the events, and are
    handed to the client's ``on_notice`` callback by ``next_event`` (in the
    task or thread that calls it) instead of being returned.
    """


@attrs.frozen
class Disconnected(Notice):
    """The connection was lost (``reason``); the client is reconnecting."""

    reason: str


@attrs.frozen
class Reconnected(Notice):
    """The client reattached to its session; ``resent`` are the ids of the
    submissions it sent again (unanswered when the connection was lost)."""

    welcome: Welcome
    resent: tuple[str, ...]


@attrs.frozen
class EventsLost(Notice):
    """Events ``first_seq`` to ``last_seq`` (inclusive) will never arrive: the server
    no longer retained them when the client reattached. Rebuild what the UI shows
    from the events that follow (a whole ``agent_message`` replaces its deltas,
    ``exec_command_end`` carries a command's output)."""

    first_seq: int
    last_seq: int


@attrs.frozen
class ControlChange(Notice):
    """This client gained or lost control of its session (``reason``, e.g. ``taken_over``:
    another client attached asking for control). Without control, ``submit`` raises
    :class:`NotInControl`; ``reconnect(take_control=True)`` takes control back."""

    control: bool
    reason: str


@attrs.frozen
class SubmissionRefused(Notice):
    """The server did not accept submission ``id`` (``code``: ``not_controller``,
    ``session_ended``); it never reached the engine and will not be resent."""

    id: str
    code: str
    message: str


# --- errors ------------------------------------------------------------------------------


class RemoteError(Exception):
    """A problem of the client library: the base of its exceptions."""


class HandshakeRefused(RemoteError):
    """The server refused the connection; ``code`` is the wire's ``refused.code``
    (``unauthorized``, ``unsupported_version``, ``too_many_sessions`` …)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"the server refused the connection ({code}): {message}")
        self.code, self.message = code, message


class SessionLost(HandshakeRefused):
    """The session cannot be attached to (``unknown_session``: it ended, expired, or
    the server restarted; ``bad_seq``): start a new one."""


class ConnectionLost(RemoteError):
    """The connection was lost and could not be re-established (``attempts`` tries)."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class ServerExited(RemoteError):
    """The ``codexcore serve --stdio`` child exited before its session ended."""

    def __init__(self, returncode: int | None, stderr_tail: tuple[str, ...]) -> None:
        tail = "\n  ".join(stderr_tail) if stderr_tail else "(nothing)"
        super().__init__(
            f"the server process exited with code {returncode} before its session ended; "
            f"its last stderr lines:\n  {tail}"
        )
        self.returncode, self.stderr_tail = returncode, stderr_tail


class NotInControl(RemoteError):
    """``submit`` on a client that does not control its session (it attached with
    ``control=False``, or another client took control)."""


# --- reconnecting ------------------------------------------------------------------------


@attrs.frozen
class ReconnectPolicy:
    """How hard the client tries to get a lost connection back.

    The first attempt is made at once, then with exponential backoff from
    ``initial_delay`` up to ``max_delay`` seconds (with jitter), for at most
    ``attempts`` attempts and ``deadline`` seconds; then :class:`ConnectionLost`.
    """

    attempts: int = 10
    initial_delay: float = 0.05
    max_delay: float = 2.0
    deadline: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt`` (from 1)."""
        if attempt <= 1:
            return 0.0
        base = min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 2))
        return base * random.uniform(0.5, 1.0)


# --- the constructors' options -----------------------------------------------------------

NoticeCallback = Callable[[Notice], None]


class StdioOptions(TypedDict, total=False):
    """Options of every constructor (see :class:`~codexcore.adapters.client.RemoteCodex`)."""

    client_name: str
    client_version: str
    on_notice: NoticeCallback | None
    event_buffer: int
    max_unanswered: int
    handshake_timeout: float
    close_timeout: float
    tools: Iterable[FunctionTool | Callable[..., Any]]


class ClientOptions(StdioOptions, total=False):
    """Options of the socket constructors: the session to attach to, control, reconnecting."""

    session_id: str | None
    last_seq: int | None
    control: bool
    reconnect: ReconnectPolicy | None
