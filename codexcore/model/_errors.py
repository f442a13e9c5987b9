"""The client's error: one exception type with a stable ``code``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["REDACTED", "ModelError", "RetryableError", "credentials", "redact"]

REDACTED = "[redacted]"

# What a credential looks like wherever a server may echo one: the value of an
# Authorization header (its scheme kept, so the message still says what was
# sent) and an OpenAI-style secret key.
_CREDENTIAL = re.compile(
    r"(?i)(?P<header>\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic)\s+)?)[^\s\"',;]+"
    r"|(?P<scheme>\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{8,}"
)
_SHORTEST_SECRET = 4  # shorter "keys" would blank ordinary words out of the message


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every credential in it replaced by ``[redacted]``.

    Replaced: each of ``secrets`` (the configured key: a proxy's 401 page may
    echo it), any ``Bearer``/``Basic`` credential or ``Authorization:`` value,
    and anything shaped like an OpenAI key (``sk-...``). Every message a
    :class:`ModelError` or ``RetryableError`` carries has been through this,
    so the ``error`` event, the logs and the session file never hold a key.
    """
    for secret in secrets:
        if len(secret) >= _SHORTEST_SECRET:
            text = text.replace(secret, REDACTED)
    return _CREDENTIAL.sub(_replacement, text)


def credentials(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The secrets a request carried: its Authorization value and the credential in it."""
    value = headers.get("authorization")
    if not value:
        return ()
    return (value, value.split(" ", 1)[-1].strip())


def _replacement(match: re.Match[str]) -> str:
    return (match.group("scheme") or match.group("header") or "") + REDACTED


class ModelError(Exception):
    """A model request failed for good.

    ``code`` is stable and meant for programs: ``"bad_request"``,
    ``"unauthorized"``, ``"forbidden"``, ``"not_found"``, ``"http_error"``
    (another non-retryable HTTP status), ``"transport_error"`` (a request
    that cannot be sent, e.g. an unsupported URL scheme), ``"bad_response"``
    (a successful status whose body is no event stream: an HTML page, a JSON
    body, noise; the message quotes how it began), ``"response_failed"``,
    ``"incomplete"`` or ``"retries_exhausted"``. ``message`` is for people and
    carries the server's own words when there are any. ``status`` is the HTTP
    status involved, if any; ``server_code`` the error code the server gave
    (e.g. ``"context_length_exceeded"``), if any. ``message`` never holds a
    credential: it is passed through :func:`redact`.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        server_code: str | None = None,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.server_code = server_code

    def __repr__(self) -> str:
        return f"ModelError({self.message!r}, code={self.code!r}, status={self.status!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Exception pickles only ``args``; the keyword-only fields must travel too.
        return (_rebuild_model_error, (self.message, self.code, self.status, self.server_code))


def _rebuild_model_error(
    message: str, code: str, status: int | None, server_code: str | None
) -> ModelError:
    return ModelError(message, code=code, status=status, server_code=server_code)


class RetryableError(Exception):
    """Internal: this attempt failed but another may succeed.

    ``retry_after`` is the server's requested wait in seconds, if it gave one.
    ``reason`` is passed through :func:`redact`, as a ``ModelError``'s message.
    """

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        server_code: str | None = None,
    ) -> None:
        reason = redact(reason)
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after
        self.server_code = server_code
