"""Seed 000's results, notifications and UI requests, described for the OpenRPC document
(``codexcore schema --openrpc``); ``tests/test_openrpc.py`` checks real answers against them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._events import AGENT_EVENT_TYPES
from ._models import CODELIA_LEVELS, PROVIDER

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable

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

NOTIFICATIONS = ("agent.event", "run.status", "run.context", "run.diagnostics")
"""What a run sends while it runs."""


_COUNT = {"type": "integer", "minimum": 0}
_NULLABLE_COUNT = {"type": ["integer", "null"]}
_NULLABLE_NUMBER = {"type": ["number", "null"]}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_USAGE = _object(
    {"input_tokens": _COUNT, "output_tokens": _COUNT, "total_tokens": _COUNT},
    {
        "input_cached_tokens": _NULLABLE_COUNT,
        "input_cache_creation_tokens": _NULLABLE_COUNT,
        "input_image_tokens": _NULLABLE_COUNT,
    },
)
_CALL = _object(
    {
        "run_id": _TEXT,
        "seq": _COUNT,
        "model": _TEXT,
        "request_ts": _TEXT,
        "response_ts": _TEXT,
        "latency_ms": _COUNT,
        "cache": _object(
            {
                "hit_state": {"enum": ["hit", "miss", "unknown"]},
                "cache_read_tokens": _COUNT,
                "cache_creation_tokens": _COUNT,
            },
            {"cache_read_ratio": _NULLABLE_NUMBER},
        ),
    },
    {
        "provider": _TEXT,
        "stop_reason": _NULLABLE_TEXT,
        "usage": {"oneOf": [_USAGE, {"type": "null"}]},
        "cost_usd": _NULLABLE_NUMBER,
        "provider_meta_summary": _NULLABLE_TEXT,
    },
)
_BY_MODEL = _object(
    {
        "calls": _COUNT,
        "input_tokens": _COUNT,
        "output_tokens": _COUNT,
        "cached_input_tokens": _COUNT,
        "cache_creation_tokens": _COUNT,
        "total_tokens": _COUNT,
    },
    {"cost_usd": _NULLABLE_NUMBER},
)
_SUMMARY = _object(
    {
        "total_calls": _COUNT,
        "total_tokens": _COUNT,
        "total_input_tokens": _COUNT,
        "total_output_tokens": _COUNT,
        "total_cached_input_tokens": _COUNT,
        "total_cache_creation_tokens": _COUNT,
        "by_model": {"type": "object", "additionalProperties": _BY_MODEL},
    },
    {"total_cost_usd": _NULLABLE_NUMBER},
)
_DIAGNOSTICS = _object(
    {"run_id": _TEXT, "kind": {"enum": ["llm_call", "run_summary"]}},
    {"call": _CALL, "summary": _SUMMARY},
)
"""``run.diagnostics``' params (seed 000, section 5.7.1): ``call`` with ``kind: llm_call``,
``summary`` with ``kind: run_summary`` (by-name params: OpenRPC lists them one by one)."""


def declare(table: MethodTable) -> None:
    """Declare seed 000's notifications and its requests to the UI (confirm, pick, prompt)
    in ``table``."""
    event = _object({"type": {"enum": sorted(AGENT_EVENT_TYPES)}})
    table.sends(
        "agent.event",
        "Codelia runtime protocol: one of Codelia's AgentEvents of a run; meta carries the "
        "engine's EventMsg",
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
        "Codelia runtime protocol: a run's status; exactly one terminal status per run",
        _object({"run_id": _TEXT, "status": _STATUS}, {"message": _TEXT}),
    )
    table.sends(
        "run.context",
        "Codelia runtime protocol: how much of the model's context window is left, after "
        "each token count",
        _object(
            {
                "run_id": _TEXT,
                "context_left_percent": {"type": "integer", "minimum": 0, "maximum": 100},
            }
        ),
    )
    table.sends(
        "run.diagnostics",
        "Codelia runtime protocol (opt-in, serve --diagnostics): one llm_call per model "
        "request, then a run_summary just before the run's terminal status",
        _DIAGNOSTICS,
    )
    table.sends(
        "ui.confirm.request",
        "Codelia runtime protocol: ask the UI to approve a command or a patch",
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
    item = _object({"id": _TEXT, "label": _TEXT}, {"detail": _TEXT})
    table.sends(
        "ui.pick.request",
        "Codelia runtime protocol: the model asks the user to pick among options (ids: [] cancels)",
        _object(
            {"run_id": _TEXT, "title": _TEXT, "items": {"type": "array", "items": item}},
            {"multi": {"type": "boolean"}},
        ),
        result=_object({"ids": {"type": "array", "items": _TEXT}}),
    )
    table.sends(
        "ui.prompt.request",
        "Codelia runtime protocol: the model asks the user for text (value: null cancels)",
        _object(
            {"run_id": _TEXT, "title": _TEXT, "message": _TEXT},
            {
                "default_value": _TEXT,
                "multiline": {"type": "boolean"},
                "secret": {"type": "boolean"},
            },
        ),
        result=_object({"value": {"type": ["string", "null"]}}),
    )
