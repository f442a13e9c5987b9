"""The prompt file of ``generate`` and ``customize``: the instructions, kept out of code.

The default is ``prompts.toml`` beside this module (package data); the
``chat_prompts`` setting (``config.toml``, or ``$CODEXCORE_CHAT_PROMPTS``) names
another. The file is read at each request, so an edit applies to the next one
without a restart. Each table's ``prompt`` is a :class:`string.Template`: ``$name``
is replaced by the request's value (:data:`PLACEHOLDERS`); any other placeholder
is an error that names it, as is a missing table or an unreadable file.
"""

from __future__ import annotations

import string
import tomllib
from importlib import resources
from typing import Final

from codexcore.tools._safe_read import read_regular

DEFAULT_FILE: Final = "prompts.toml"
MAX_BYTES: Final = 256 * 1024

PLACEHOLDERS: Final = {
    "generate": ("format", "theme", "options", "spec"),
    "customize": ("prompt", "current_code", "spec", "history"),
}
"""What each method's prompt may name."""


class PromptError(ValueError):
    """The prompt file cannot be used; the message names the file and the problem."""


def _read(path: str | None) -> tuple[str, bytes]:
    if path is None:
        source = resources.files(__package__).joinpath(DEFAULT_FILE)
        return f"the packaged {DEFAULT_FILE}", source.read_bytes()
    try:
        return path, read_regular(path, MAX_BYTES)
    except (OSError, ValueError) as exc:
        raise PromptError(f"the prompt file {path} cannot be read: {exc}") from None


def render(path: str | None, method: str, values: dict[str, str]) -> str:
    """``method``'s prompt from the file at ``path`` (None: the packaged one), filled in."""
    where, data = _read(path)
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PromptError(f"the prompt file {where} is no TOML: {exc}") from None
    table = document.get(method)
    text = table.get("prompt") if isinstance(table, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise PromptError(f'the prompt file {where} has no [{method}] prompt = "..."')
    template = string.Template(text)
    allowed = PLACEHOLDERS[method]
    for named in template.get_identifiers():
        if named not in allowed:
            raise PromptError(
                f"the prompt file {where}: [{method}] names ${named}; "
                f"it may name {', '.join('$' + a for a in allowed)}"
            )
    try:
        return template.substitute(values).strip()
    except ValueError as exc:  # a lone $ (write $$ for one)
        raise PromptError(f"the prompt file {where}: [{method}]: {exc}") from None
