"""The names a sender knows a session by, for ATM-style control messages (``docs/control.md``).

A sender does not know codexcore's ids: its ``session_id`` is its own view of
the target (in ATM, the lead's session) and its ``agent_id`` the worker's name.
A session is given such names by its UI (``control.register``, on both
dialects), or by ``--agent-id``/``--session-alias`` on ``exec`` and ``serve
--stdio``; they are kept by the host as names of two kinds (:data:`SESSION_NAME`,
:data:`AGENT_NAME`). The receiver finds a request's target by its ``session_id``
(the session's id, an id it had before a resume, or one of its session names;
several sessions may share a session name, as the workers of one lead do) and
then its ``agent_id`` (the session's agent, or one of its agent names; an agent
name is one session's only). Light: the command line reads the kinds at start-up;
the envelopes' module is loaded only when names are checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codexcore.adapters.host._host import HostedSession, SessionHost

SESSION_NAME = "control.session_id"
AGENT_NAME = "control.agent_id"
KINDS = {"session_id": SESSION_NAME, "agent_id": AGENT_NAME}
"""``control.register``'s fields and the host's kinds of name they set."""


def candidates(host: SessionHost, session_id: str) -> list[HostedSession]:
    """The live sessions a request's ``session_id`` can mean: the one with that id (or
    an id it had), else those with that session name."""
    hosted = host.session(session_id)
    if hosted is not None:
        return [hosted]
    return host.named(SESSION_NAME, session_id)


def is_agent(hosted: HostedSession, agent_id: str) -> bool:
    """Whether ``agent_id`` is the session's agent, or one of its agent names."""
    return agent_id == hosted.agent_id or agent_id in hosted.names.get(AGENT_NAME, ())


def register(host: SessionHost, hosted: HostedSession, params: Any) -> dict[str, Any]:
    """Give ``hosted`` the names in ``params`` (``session_id``, ``agent_id``: a string or
    a list of them; a field left out keeps its names, ``[]`` removes them, none at all
    changes nothing); the session's ids and names. Raises :class:`Invalid` naming the
    problem."""
    from ._wire import Invalid

    if not isinstance(params, dict):
        raise Invalid("params: expected an object {session_id, agent_id}")
    given = {field: _names(params, field) for field in KINDS if field in params}
    for name in given.get("agent_id", ()):
        others = [other for other in host.named(AGENT_NAME, name) if other is not hosted]
        if others:
            raise Invalid(f"agent_id: {name!r} is already another live session's name")
    for field, names in given.items():
        host.name_session(hosted, KINDS[field], names)
    return described(hosted)


def described(hosted: HostedSession) -> dict[str, Any]:
    """A session's ids and the names it is known by (``control.register``'s answer)."""
    return {
        "session_id": hosted.id,
        "agent_id": hosted.agent_id,
        "names": {field: list(hosted.names.get(kind, ())) for field, kind in KINDS.items()},
    }


def _names(params: dict[str, Any], field: str) -> tuple[str, ...]:
    from ._wire import MAX_ID_LENGTH, Invalid

    value = params[field]
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise Invalid(f"{field}: expected a string or a list of strings")
    for name in names:
        if not name or len(name) > MAX_ID_LENGTH:
            raise Invalid(f"{field}: each name must be 1 to {MAX_ID_LENGTH} characters")
    if len(names) > 16:
        raise Invalid(f"{field}: at most 16 names")
    return tuple(names)
