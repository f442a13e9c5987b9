"""Seed 000's results, notifications and UI requests, described for the OpenRPC document
(``codexcore schema --openrpc``); ``tests/test_openrpc.py`` checks real answers against them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._codelia_events import AGENT_EVENT_TYPES
from ._codelia_models import CODELIA_LEVELS, PROVIDER

if TYPE_CHECKING:
    from ._jsonrpc_methods import MethodTable

_TEXT = {"type": "string"}
_STATUS = {"enum": ["running", "awaiting_ui", "completed", "error", "cancelled"]}


def _object(
    required: Mapping[str, Any], optional: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
    }


_MODEL = {"provider": {"const": PROVIDER}}
_REASONING = {"reasoning": {"enum": list(CODELIA_LEVELS)}}
RESULTS: Mapping[str, Mapping[str, Any]] = {
    "run.start": _object({"run_id": _TEXT}),
    "run.cancel": _object({"ok": {"type": "boolean"}, "status": _STATUS}),
    "model.list": _object(
        {
            **_MODEL,
            "models": {"type": "array", "items": _TEXT},
            "current": _TEXT,
            "source": {"enum": ["session", "config"]},
        },
        {"details": {"type": "object"}, **_REASONING},
    ),
    "model.set": _object({**_MODEL, "name": _TEXT, "source": {"const": "session"}}, _REASONING),
}
"""Each method's result schema, by method name."""

NOTIFICATIONS = ("agent.event", "run.status", "run.context")
"""What a run sends while it runs."""


def declare(table: MethodTable) -> None:
    """Declare seed 000's notifications and its confirm request in ``table``."""
    event = _object({"type": {"enum": sorted(AGENT_EVENT_TYPES)}})
    table.sends(
        "agent.event",
        "Seed 000: one of Codelia's AgentEvents of a run; meta carries the engine's EventMsg",
        _object(
            {
                "run_id": _TEXT,
                "seq": {"type": "integer", "minimum": 0},
                "event": event,
                "meta": {"type": "object"},
            }
        ),
    )
    table.sends(
        "run.status",
        "Seed 000: a run's status; exactly one terminal status per run",
        _object({"run_id": _TEXT, "status": _STATUS}, {"message": _TEXT}),
    )
    table.sends(
        "run.context",
        "Seed 000: how much of the model's context window is left, after each token count",
        _object(
            {
                "run_id": _TEXT,
                "context_left_percent": {"type": "integer", "minimum": 0, "maximum": 100},
            }
        ),
    )
    table.sends(
        "ui.confirm.request",
        "Seed 000: ask the UI to approve a command or a patch",
        _object(
            {
                "run_id": _TEXT,
                "title": _TEXT,
                "message": _TEXT,
                "danger_level": {"enum": ["normal", "danger"]},
                "allow_remember": {"type": "boolean"},
                "allow_reason": {"type": "boolean"},
            },
            {"confirm_label": _TEXT, "cancel_label": _TEXT},
        ),
        result=_object(
            {"ok": {"type": "boolean"}},
            {"remember": {"type": "boolean"}, "reason": {"type": ["string", "null"]}},
        ),
    )
