"""``config.toml``'s ``[models.NAME]`` tables: per-model overrides of the model catalogue.

Loaded by :func:`codexcore.config.load_settings` only for a file that has such
tables, with the catalogue's list of what a table may override.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Protocol

from ._config_settings import ConfigError, _show
from .engine._models import OVERRIDABLE


class Unknown(Protocol):
    """How the file's reader reports an unknown key (a warning, with a close key if any)."""

    def __call__(
        self, shown: str, key: str, *, here: tuple[str, ...], elsewhere: str | None
    ) -> None: ...


def read_models(value: Any, where: str, unknown: Unknown) -> dict[str, dict[str, Any]]:
    """``[models.NAME]`` tables: overrides of the model catalogue, checked."""
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'{where}: models = {_show(value)}: expected tables such as [models."gpt-5"]'
        )
    models: dict[str, dict[str, Any]] = {}
    for name, table in value.items():
        shown = f"models.{json.dumps(name)}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: {shown} = {_show(table)}: expected a table")
        models[name] = {}
        for key, item in table.items():
            kind = OVERRIDABLE.get(key)
            if kind is None:
                unknown(f"{shown}.{key}", key, here=tuple(OVERRIDABLE), elsewhere=None)
                continue
            models[name][key] = _model_value(kind, item, f"{where}: {shown}.{key}")
    return models


def _model_value(kind: str, value: Any, shown: str) -> Any:
    """A ``[models.NAME]`` value of ``kind`` (``int``: a token count >= 1; ``float``: a
    price >= 0; ``bool``; ``str``), or a ConfigError naming it."""
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "float" and number and math.isfinite(value) and value >= 0:
        return float(value)
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "str" and isinstance(value, str):
        return value
    expected = {
        "int": "an integer >= 1 (tokens)",
        "float": "a number >= 0 (US dollars per million tokens)",
        "bool": "true or false",
        "str": "a string",
    }[kind]
    raise ConfigError(f"{shown} = {_show(value)}: expected {expected}")
