"""Loading the ACP SDK (``acp``) with its models built on first use.

``import acp`` defines about 280 pydantic models in ``acp.schema``; building
each one's validator and serializer as the class is defined was about a
quarter of the ``codexcore acp`` start, for an editor that starts it every
time it opens a window. With pydantic's ``defer_build`` a model is built when
it is first validated or dumped: the few a session uses are built then, the
rest never, and validation and output stay the same (pydantic's contract for
``defer_build``).

The setting applies only while ``acp`` is imported: models defined before or
after (``mcp``'s, a user's) are untouched. (Skipping the SDK's attribute
docstring scan would save more, but only by replacing a private pydantic
function; not done.)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["load_acp_sdk"]


def load_acp_sdk() -> None:
    """Import ``acp`` (raises ``ImportError`` when the extra is missing) with its models'
    schemas built on first use. Idempotent; a no-op
    once ``acp`` is imported (its models already exist)."""
    if "acp" in sys.modules:
        return
    with _quick_models():
        import acp
        import acp.schema  # noqa: F401


@contextlib.contextmanager
def _quick_models() -> Iterator[None]:
    import pydantic

    config: dict[str, Any] = pydantic.BaseModel.model_config  # type: ignore[assignment]
    had_defer, defer = "defer_build" in config, config.get("defer_build")
    config["defer_build"] = True  # subclasses copy their bases' config when defined
    try:
        yield
    finally:
        if had_defer:
            config["defer_build"] = defer
        else:
            config.pop("defer_build", None)
