"""Loading the ACP SDK (``acp``) in about half the time its plain import takes.

``import acp`` defines about 280 pydantic models in ``acp.schema`` and took
about 480 ms on its own (more than three times the whole native start of
``serve --stdio``), for an editor that starts ``codexcore acp`` every time it
opens a window. Two thirds of that are work no start needs:

- **Attribute docstrings.** The SDK's base model sets
  ``use_attribute_docstrings``: pydantic finds each class's source with
  ``inspect``, tokenizes it and parses it to copy each field's docstring into
  its ``description``, which only a JSON schema shows. Neither the SDK nor
  codexcore asks a model for its JSON schema, so it is skipped.
- **Validators and serializers.** pydantic builds each model's core schema as
  the class is defined; with ``defer_build`` it builds it when the model is
  first validated or dumped. The few models a session uses are built then,
  the rest never. Validation and output stay the same (pydantic's contract
  for ``defer_build``).

Both settings apply only while ``acp`` is imported: models defined before or
after (``mcp``'s, a user's) are untouched. If a pydantic release moves the
private function this skips, the SDK loads as it would plainly, only slower.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["load_acp_sdk"]


def load_acp_sdk() -> None:
    """Import ``acp`` (raises ``ImportError`` when the extra is missing) with its models'
    docstring scan skipped and their schemas built on first use. Idempotent; a no-op
    once ``acp`` is imported (its models already exist)."""
    if "acp" in sys.modules:
        return
    with _quick_models():
        import acp
        import acp.schema  # noqa: F401


def _no_docstrings(cls: type[Any], use_inspect: bool = False) -> dict[str, str]:
    return {}


@contextlib.contextmanager
def _quick_models() -> Iterator[None]:
    import pydantic

    fields: Any
    try:
        from pydantic._internal import _fields as fields
    except ImportError:  # pragma: no cover - a pydantic without that module
        fields = None
    scan = getattr(fields, "extract_docstrings_from_cls", None)
    config: dict[str, Any] = pydantic.BaseModel.model_config  # type: ignore[assignment]
    had_defer, defer = "defer_build" in config, config.get("defer_build")
    config["defer_build"] = True  # subclasses copy their bases' config when defined
    if scan is not None:
        fields.extract_docstrings_from_cls = _no_docstrings
    try:
        yield
    finally:
        if scan is not None:
            fields.extract_docstrings_from_cls = scan
        if had_defer:
            config["defer_build"] = defer
        else:
            config.pop("defer_build", None)
