"""The model catalogue: which models take ``reasoning`` options.

A request to a model that does not reason must carry neither ``reasoning`` nor
``include: ["reasoning.encrypted_content"]``: the API rejects both. The table
follows the model families of the Codex CLI (``find_family_for_model`` in
codex-rs): the families whose ``supports_reasoning_summaries`` is true. A slug
matches a family when it starts with the family's prefix, so dated snapshots
(``o3-2025-04-16``) and variants (``gpt-5-codex``, ``gpt-5.1-mini``) follow
their family. ``SessionConfig.model_supports_reasoning_summaries`` overrides
the table for models it does not know (a local server's, a new family).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "MODEL_DETAILS",
    "REASONING_MODEL_PREFIXES",
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
    if override is not None:
        return override
    return model.startswith(REASONING_MODEL_PREFIXES)


# --- limits and prices, for UIs (model pickers, context meters) -----------------------------


@attrs.frozen
class ModelDetails:
    """What a UI shows of a model: its limits in tokens, its list prices, its release.

    Costs are US dollars per million tokens, as OpenAI lists them; the
    figures are OpenAI's published ones and may drift from its price page.
    """

    release_date: str
    context_window: int
    max_input_tokens: int
    max_output_tokens: int
    cost_per_1m_input_tokens_usd: float
    cost_per_1m_output_tokens_usd: float


def _gpt5(release: str, cost_in: float, cost_out: float) -> ModelDetails:
    return ModelDetails(release, 400_000, 272_000, 128_000, cost_in, cost_out)


MODEL_DETAILS: Final[Mapping[str, ModelDetails]] = {
    "gpt-5.1-codex": _gpt5("2025-11-13", 1.25, 10.0),
    "gpt-5.1": _gpt5("2025-11-13", 1.25, 10.0),
    "gpt-5-codex": _gpt5("2025-09-15", 1.25, 10.0),
    "gpt-5": _gpt5("2025-08-07", 1.25, 10.0),
    "gpt-5-mini": _gpt5("2025-08-07", 0.25, 2.0),
    "gpt-5-nano": _gpt5("2025-08-07", 0.05, 0.40),
    "o3": ModelDetails("2025-04-16", 200_000, 200_000, 100_000, 2.0, 8.0),
    "o4-mini": ModelDetails("2025-04-16", 200_000, 200_000, 100_000, 1.10, 4.40),
    "gpt-4.1": ModelDetails("2025-04-14", 1_047_576, 1_047_576, 32_768, 2.0, 8.0),
    "gpt-4.1-mini": ModelDetails("2025-04-14", 1_047_576, 1_047_576, 32_768, 0.40, 1.60),
    "gpt-4o-mini": ModelDetails("2024-07-18", 128_000, 128_000, 16_384, 0.15, 0.60),
    "gpt-4o": ModelDetails("2024-05-13", 128_000, 128_000, 16_384, 2.50, 10.0),
}
"""The models this project knows the limits of, newest first (the order UIs list them in)."""

DEFAULT_CONTEXT_WINDOW: Final = 128_000
"""The context window assumed for a model not in :data:`MODEL_DETAILS`: the smallest of
the table's, so a context meter errs toward "fuller than it is", never the other way."""


def model_details(model: str) -> ModelDetails | None:
    """``model``'s details: its own entry, else its family's (the longest name it starts
    with, so ``gpt-5-codex-2025-09-15`` is ``gpt-5-codex``), else None."""
    if model in MODEL_DETAILS:
        return MODEL_DETAILS[model]
    family = max((name for name in MODEL_DETAILS if model.startswith(name)), key=len, default=None)
    return MODEL_DETAILS[family] if family is not None else None


def context_window(model: str) -> int:
    """``model``'s context window in tokens (:data:`DEFAULT_CONTEXT_WINDOW` when unknown)."""
    details = model_details(model)
    return details.context_window if details is not None else DEFAULT_CONTEXT_WINDOW
