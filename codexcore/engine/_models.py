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

from typing import Final

__all__ = ["REASONING_MODEL_PREFIXES", "supports_reasoning"]

REASONING_MODEL_PREFIXES: Final = ("o3", "o4-mini", "codex-", "gpt-5", "swiftfox")
"""Slug prefixes of the model families that reason and stream reasoning summaries."""


def supports_reasoning(model: str, override: bool | None = None) -> bool:
    """Whether ``model`` takes ``reasoning`` options (effort and summary).

    ``override`` (from the configuration), when not None, wins over the table.
    """
    if override is not None:
        return override
    return model.startswith(REASONING_MODEL_PREFIXES)
