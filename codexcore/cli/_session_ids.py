"""A session id as a person types it: the whole id, or a prefix that only one has.

Every command that takes a recorded session's id (``exec --resume``/``--fork``,
``sessions show``, ``control --session``) resolves it here, by the rollout
files' names under ``HOME/sessions`` (``YYYY/MM/DD/rollout-<time>-<id>.jsonl``,
see :mod:`codexcore.engine._rollout`): no file is opened.
"""

from __future__ import annotations

import glob
from pathlib import Path

_HEAD = len("rollout-2026-01-01T00-00-00-")
_TAIL = len(".jsonl")
_SHOWN = 5
"""How many of an ambiguous prefix's sessions the error names."""


def recorded_ids(home: str | None, prefix: str = "") -> set[str]:
    """The ids of the sessions recorded under ``home`` that start with ``prefix``."""
    from ..engine import default_home

    root = (Path(home) if home else default_home()) / "sessions"
    pattern = f"*/*/*/rollout-*-{glob.escape(prefix)}*.jsonl"
    ids = {path.name[_HEAD:-_TAIL] for path in root.glob(pattern) if len(path.name) > _HEAD + _TAIL}
    return {session_id for session_id in ids if session_id.startswith(prefix)}


def resolve_session_id(home: str | None, given: str, *, unrecorded_ok: bool = False) -> str:
    """The recorded session id ``given`` is, or starts. Raises ValueError naming the
    candidates when several sessions start with it, or saying none does (unless
    ``unrecorded_ok``: then ``given`` is returned as it is, for a server to judge)."""
    if not given or "/" in given or "\0" in given:
        raise ValueError(f"{given!r} is no session id")
    matches = recorded_ids(home, given)
    if given in matches or len(matches) == 1:
        return given if given in matches else matches.pop()
    if not matches:
        if unrecorded_ok:
            return given
        raise ValueError(
            f"no recorded session id starts with {given!r} (codexcore sessions list shows them)"
        )
    shown = sorted(matches)[:_SHOWN]
    more = f" and {len(matches) - _SHOWN} more" if len(matches) > _SHOWN else ""
    raise ValueError(
        f"{given!r} starts {len(matches)} session ids: {', '.join(shown)}{more}; "
        "give more of the id"
    )
