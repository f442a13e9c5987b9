"""The model catalogue: limits, prices and which models take ``reasoning`` options.

A request to a model that does not reason must carry neither ``reasoning`` nor
``include: ["reasoning.encrypted_content"]``: the API rejects both. The table
follows the model families of the Codex CLI (``find_family_for_model`` in
codex-rs): the families whose ``supports_reasoning_summaries`` is true. A slug
matches a family when it starts with the family's prefix, so dated snapshots
(``o3-2025-04-16``) and variants (``gpt-5-codex``, ``gpt-5.1-mini``) follow
their family. ``SessionConfig.model_supports_reasoning_summaries`` overrides
the table for models it does not know (a local server's, a new family).

:class:`ModelCatalog` is the table an engine uses: :data:`MODEL_DETAILS` with
the overrides of ``config.toml``'s ``[models.NAME]`` tables laid over it (a
name the table lacks adds a model, starting from :data:`DEFAULT_DETAILS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from ..protocol._value import Value

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_DETAILS",
    "MODEL_DETAILS",
    "OVERRIDABLE",
    "REASONING_MODEL_PREFIXES",
    "ModelCatalog",
    "ModelDetails",
    "context_window",
    "model_details",
    "supports_reasoning",
]

REASONING_MODEL_PREFIXES: Final = ("o3", "o4-mini", "codex-", "gpt-5", "swiftfox")
"""Slug prefixes of the model families that reason and stream reasoning summaries."""


def supports_reasoning(model: str, override: bool | None = None) -> bool:
    """Whether ``model`` takes ``reasoning`` options (effort and summary).

    ``override`` (from the configuration), when not None, wins over the table.
    """
    return BUILTIN_CATALOG.supports_reasoning(model, override)


# --- limits and prices ---------------------------------------------------------------------


@attrs.frozen(repr=False, eq=False)
class ModelDetails(Value):
    """What the engine and a UI know of a model: limits in tokens, list prices, release.

    Costs are US dollars per million tokens, as OpenAI lists them (None where
    none is published); the figures may drift from its price page.
    ``supports_reasoning_summaries`` says whether the model takes ``reasoning``
    options (effort and summary).
    """

    release_date: str | None
    context_window: int
    max_input_tokens: int
    max_output_tokens: int
    cost_per_1m_input_tokens_usd: float | None
    cost_per_1m_output_tokens_usd: float | None
    cost_per_1m_cached_input_tokens_usd: float | None = None
    supports_reasoning_summaries: bool = False


def _gpt5(release: str, cost_in: float, cost_cached: float, cost_out: float) -> ModelDetails:
    return ModelDetails(release, 400_000, 272_000, 128_000, cost_in, cost_out, cost_cached, True)


def _older(
    release: str, window: int, out: int, prices: tuple[float, float, float], reasons: bool
) -> ModelDetails:
    cost_in, cost_cached, cost_out = prices
    return ModelDetails(release, window, window, out, cost_in, cost_out, cost_cached, reasons)


MODEL_DETAILS: Final[Mapping[str, ModelDetails]] = {
    "gpt-5.1-codex": _gpt5("2025-11-13", 1.25, 0.125, 10.0),
    "gpt-5.1": _gpt5("2025-11-13", 1.25, 0.125, 10.0),
    "gpt-5-codex": _gpt5("2025-09-15", 1.25, 0.125, 10.0),
    "gpt-5": _gpt5("2025-08-07", 1.25, 0.125, 10.0),
    "gpt-5-mini": _gpt5("2025-08-07", 0.25, 0.025, 2.0),
    "gpt-5-nano": _gpt5("2025-08-07", 0.05, 0.005, 0.40),
    "o3": _older("2025-04-16", 200_000, 100_000, (2.0, 0.50, 8.0), True),
    "o4-mini": _older("2025-04-16", 200_000, 100_000, (1.10, 0.275, 4.40), True),
    "gpt-4.1": _older("2025-04-14", 1_047_576, 32_768, (2.0, 0.50, 8.0), False),
    "gpt-4.1-mini": _older("2025-04-14", 1_047_576, 32_768, (0.40, 0.10, 1.60), False),
    "gpt-4o-mini": _older("2024-07-18", 128_000, 16_384, (0.15, 0.075, 0.60), False),
    "gpt-4o": _older("2024-05-13", 128_000, 16_384, (2.50, 1.25, 10.0), False),
}
"""The models this project knows the limits of, newest first (the order UIs list them in)."""

DEFAULT_CONTEXT_WINDOW: Final = 128_000
"""The context window assumed for a model not in :data:`MODEL_DETAILS`: the smallest of
the table's, so a context meter errs toward "fuller than it is", never the other way."""

DEFAULT_DETAILS: Final = ModelDetails(
    None, DEFAULT_CONTEXT_WINDOW, DEFAULT_CONTEXT_WINDOW, 16_384, None, None, None, False
)
"""What is assumed of a model nobody described: the table's smallest limits, no prices.
Whether it reasons is left to :data:`REASONING_MODEL_PREFIXES`."""

OVERRIDABLE: Final[Mapping[str, str]] = {
    "release_date": "str",
    "context_window": "int",
    "max_input_tokens": "int",
    "max_output_tokens": "int",
    "cost_per_1m_input_tokens_usd": "float",
    "cost_per_1m_output_tokens_usd": "float",
    "cost_per_1m_cached_input_tokens_usd": "float",
    "supports_reasoning_summaries": "bool",
}
"""The keys a ``[models.NAME]`` table may set (every :class:`ModelDetails` field), and
the kind of value each takes."""


def _family(table: Mapping[str, ModelDetails], model: str) -> str | None:
    """``model``'s own name in ``table``, else the longest name there it starts with
    (``gpt-5-codex-2025-09-15`` is ``gpt-5-codex``), else None."""
    if model in table:
        return model
    return max((name for name in table if model.startswith(name)), key=len, default=None)


class ModelCatalog:
    """The models an engine knows: :data:`MODEL_DETAILS` with per-model overrides.

    ``overrides`` maps a model name to the :class:`ModelDetails` fields to change
    (values already checked, e.g. by :mod:`codexcore.config`). A name the table
    does not have is a new model, described from :data:`DEFAULT_DETAILS` (and
    the reasoning prefixes) up.
    """

    def __init__(self, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.overrides: Mapping[str, Mapping[str, Any]] = dict(overrides or {})
        table = dict(MODEL_DETAILS)
        for name, changes in self.overrides.items():
            base = table.get(name) or attrs.evolve(
                DEFAULT_DETAILS, supports_reasoning_summaries=_by_prefix(name)
            )
            table[name] = attrs.evolve(base, **changes)
        self._table: Mapping[str, ModelDetails] = table

    def models(self) -> Mapping[str, ModelDetails]:
        """Every model described, the built-in ones first (newest first), then the added."""
        return self._table

    def lookup(self, model: str) -> ModelDetails | None:
        """``model``'s details (its own entry, else its family's), None when unknown."""
        name = _family(self._table, model)
        return self._table[name] if name is not None else None

    def details(self, model: str) -> ModelDetails:
        """``model``'s details, or the conservative default for a model nobody described."""
        found = self.lookup(model)
        if found is not None:
            return found
        return attrs.evolve(DEFAULT_DETAILS, supports_reasoning_summaries=_by_prefix(model))

    def supports_reasoning(self, model: str, override: bool | None = None) -> bool:
        """Whether ``model`` takes ``reasoning`` options; ``override`` (the session's
        ``model_supports_reasoning_summaries``), when not None, wins."""
        if override is not None:
            return override
        return self.details(model).supports_reasoning_summaries

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelCatalog) and self.overrides == other.overrides

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.overrides)))

    def __repr__(self) -> str:
        return f"ModelCatalog(overrides={dict(self.overrides)!r})"


BUILTIN_CATALOG: Final = ModelCatalog()


def _by_prefix(model: str) -> bool:
    return model.startswith(REASONING_MODEL_PREFIXES)


def model_details(model: str) -> ModelDetails | None:
    """``model``'s details in the built-in table: its own entry, else its family's (the
    longest name it starts with, so ``gpt-5-codex-2025-09-15`` is ``gpt-5-codex``), else None."""
    return BUILTIN_CATALOG.lookup(model)


def context_window(model: str) -> int:
    """``model``'s context window in tokens (:data:`DEFAULT_CONTEXT_WINDOW` when unknown)."""
    return BUILTIN_CATALOG.details(model).context_window
