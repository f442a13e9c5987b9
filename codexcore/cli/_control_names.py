"""``--agent-id`` and ``--session-alias``: the names ATM-style control messages may know a
session by (``docs/control.md``), on ``exec`` and ``serve``. Light: every command's parser
is built with them."""

from __future__ import annotations

import argparse
from typing import Any


def add_name_arguments(group: Any, which: str) -> None:
    """``--agent-id`` and ``--session-alias``: the names ATM-style control messages may
    know a session by (``which`` says which session they name)."""
    group.add_argument(
        "--agent-id",
        action="append",
        metavar="NAME",
        help=f"a name of the agent ({which}) that control messages' agent_id may give "
        "(the worker's view; repeatable; docs/control.md)",
    )
    group.add_argument(
        "--session-alias",
        action="append",
        metavar="NAME",
        help=f"a name of {which} that control messages' session_id may give (the sender's "
        "view; repeatable)",
    )


def session_names(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """The host's ``session_names`` from ``--agent-id`` and ``--session-alias``."""
    if not (args.agent_id or args.session_alias):
        return {}  # the common case loads nothing
    from ..adapters.control._names import AGENT_NAME, SESSION_NAME

    names = {AGENT_NAME: args.agent_id or [], SESSION_NAME: args.session_alias or []}
    for flag, given in (
        ("--agent-id", names[AGENT_NAME]),
        ("--session-alias", names[SESSION_NAME]),
    ):
        for name in given:
            if not name or len(name) > 256:
                raise ValueError(f"{flag}: a name is 1 to 256 characters")
    return {kind: tuple(given) for kind, given in names.items() if given}
