"""The model key: which servers need one, and what to say when it is missing.

The command line (``codexcore exec``, ``acp``, ``doctor``) and the library
(``Codex(...)``, ``CodexThread(...)``) refuse to start without a key for a
server that needs one, with one message built here. Importing this module
costs nothing: the configuration loads it on every command.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"  # the model client's default
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
_OPENAI_HOST: Final = "api.openai.com"  # and its regional hosts, e.g. eu.api.openai.com


class MissingApiKey(ValueError):
    """No API key, for a ``base_url`` that needs one: raised before any request is sent."""


def needs_key(base_url: str) -> bool:
    """Whether requests to ``base_url`` are pointless without a key: OpenAI's own API
    refuses every request that has none. Any other server (a local one, a proxy) may
    work without one, and is sent no ``Authorization`` header."""
    host = urlsplit(base_url).hostname or ""
    return host == _OPENAI_HOST or host.endswith("." + _OPENAI_HOST)


def missing_key_message(variable: str, base_url: str, *, url_from: str, fix: str) -> str:
    """The one message for a missing key: the variable, the URL and where it came from
    (``url_from``), then how to fix it where the user is (``fix``)."""
    return f"no API key: ${variable} is not set, and {base_url} needs one ({url_from}). {fix}"
