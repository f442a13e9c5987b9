"""Seed 000's ``run.diagnostics`` (section 5.7.1): per model request and per run.

Opt-in (``codexcore serve --diagnostics``, ``CODEXCORE_DIAGNOSTICS=1`` or Codelia's
``CODELIA_DIAGNOSTICS=1``): one
``llm_call`` per model request, built when the request's ``turn_complete``
arrives (the engine stamps it with the request's model, ``request_ts`` and
``latency_ms``; the ``token_count`` just before it gives the usage), and one
``run_summary`` just before the run's terminal ``run.status``, as Codelia
sends them. They are notifications for the UI only: nothing of them enters the
session's history, so the model never sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.protocol import TokenCount, TurnComplete

from ._models import PROVIDER

if TYPE_CHECKING:
    from codexcore.engine._models import ModelDetails

Prices = Callable[[str], "ModelDetails"]
"""The catalogue's details of a model (``model.list``'s prices come from the same place)."""

STOP_REASON = "completed"
"""A Turn ends on ``response.completed`` only, and Codelia's OpenAI provider reports
the Responses status (``incomplete_details.reason ?? status``) as the stop reason."""


@attrs.define
class _Totals:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = 0.0  # None once a request's cost is unknown

    def add(self, usage: TokenCount | None, cost: float | None) -> None:
        self.calls += 1
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cached_input_tokens += usage.cached_input_tokens
            self.total_tokens += usage.total_tokens


@attrs.define
class RunDiagnostics:
    """One run's model requests so far; it builds the run's ``run.diagnostics`` params."""

    run_id: str
    usage: TokenCount | None = None  # the latest request's, until its turn_complete
    seq: int = 0
    totals: _Totals = attrs.field(factory=_Totals)
    by_model: dict[str, _Totals] = attrs.field(factory=dict)

    def token_count(self, usage: TokenCount) -> None:
        self.usage = usage

    def llm_call(self, done: TurnComplete, fallback_model: str, prices: Prices) -> dict[str, Any]:
        """The ``llm_call`` of the request ``done`` completes (its usage is taken)."""
        usage, self.usage = self.usage, None
        model = done.model or fallback_model
        cost = cost_usd(usage, prices(model))
        self.seq += 1
        self.totals.add(usage, cost)
        self.by_model.setdefault(model, _Totals()).add(usage, cost)
        latency = done.latency_ms or 0
        call: dict[str, Any] = {
            "run_id": self.run_id,
            "seq": self.seq,
            "provider": PROVIDER,
            "model": model,
            "request_ts": done.request_ts,
            "response_ts": _after(done.request_ts, latency),
            "latency_ms": latency,
            "stop_reason": STOP_REASON,
            "usage": _usage(usage),
            "cache": _cache(usage),
            "cost_usd": cost,
            "provider_meta_summary": None,
        }
        return {"run_id": self.run_id, "kind": "llm_call", "call": call}

    def run_summary(self) -> dict[str, Any]:
        totals = self.totals
        summary = {
            "total_calls": totals.calls,
            "total_tokens": totals.total_tokens,
            "total_input_tokens": totals.input_tokens,
            "total_output_tokens": totals.output_tokens,
            "total_cached_input_tokens": totals.cached_input_tokens,
            "total_cache_creation_tokens": 0,  # the Responses API reports no cache writes
            "total_cost_usd": totals.cost_usd,
            "by_model": {
                model: {
                    "calls": each.calls,
                    "input_tokens": each.input_tokens,
                    "output_tokens": each.output_tokens,
                    "cached_input_tokens": each.cached_input_tokens,
                    "cache_creation_tokens": 0,
                    "total_tokens": each.total_tokens,
                    "cost_usd": each.cost_usd,
                }
                for model, each in self.by_model.items()
            },
        }
        return {"run_id": self.run_id, "kind": "run_summary", "summary": summary}


def cost_usd(usage: TokenCount | None, details: ModelDetails) -> float | None:
    """What one request cost at the catalogue's list prices (USD per million tokens):
    uncached input, cached input (at the input price where no cached price is
    published) and output. None without usage or without a published price."""
    price_in = details.cost_per_1m_input_tokens_usd
    price_out = details.cost_per_1m_output_tokens_usd
    if usage is None or price_in is None or price_out is None:
        return None
    price_cached = details.cost_per_1m_cached_input_tokens_usd
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    dollars = (
        (usage.input_tokens - cached) * price_in
        + cached * (price_cached if price_cached is not None else price_in)
        + usage.output_tokens * price_out
    )
    return dollars / 1_000_000


def _usage(usage: TokenCount | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "input_cached_tokens": usage.cached_input_tokens,
        "input_cache_creation_tokens": None,
        "input_image_tokens": None,
    }


def _cache(usage: TokenCount | None) -> dict[str, Any]:
    """Codelia's rule: a hit when any input was read from the cache; unknown without usage."""
    if usage is None:
        return {
            "hit_state": "unknown",
            "cache_read_tokens": 0,
            "cache_creation_tokens": 0,
            "cache_read_ratio": None,
        }
    read = usage.cached_input_tokens
    return {
        "hit_state": "hit" if read > 0 else "miss",
        "cache_read_tokens": read,
        "cache_creation_tokens": 0,
        "cache_read_ratio": read / max(usage.input_tokens, 1),
    }


def _after(request_ts: str | None, latency_ms: int) -> str | None:
    if request_ts is None:
        return None
    start = datetime.fromisoformat(request_ts)
    end = start + timedelta(milliseconds=latency_ms)
    return end.isoformat(timespec="milliseconds").replace("+00:00", "Z")
