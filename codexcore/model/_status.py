"""An HTTP error status: worth another attempt or not, and one short line saying why.

Only what can succeed when asked again is retried: 408, 409, 429 and the 5xx
statuses that mean "busy" or "broken for now". 501 (the server does not do
this), 505, 506, 508, 510 and 511 say the same thing every time, so they end
the request at once. Whatever the server sent, the message carries one line
of it: the JSON error's message, an HTML page's title, or a plain body's
first line, cut short. A request refused for good names where it went.
"""

from __future__ import annotations

import re

import httpx
import orjson

from ._errors import ModelError, RetryableError, credentials, redact
from ._retry import parse_retry_after

__all__ = ["check_status"]

_FATAL_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found"}
_RETRYABLE_CLIENT_STATUSES = frozenset({408, 409, 429})
_PERMANENT_SERVER_STATUSES = frozenset({501, 505, 506, 508, 510, 511})
_RETRY_AFTER_STATUSES = frozenset({429, 503})
_BODY_READ_LIMIT = 64 * 1024  # an error page's first bytes say what it is; the rest is noise
_MESSAGE_LIMIT = 300  # the server's own error message: its words matter
_LINE_LIMIT = 120  # one line of anything else (an HTML page, a plain body)
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def is_retryable(status: int) -> bool:
    """Whether asking again may get another answer than ``status``."""
    if status >= 500:
        return status not in _PERMANENT_SERVER_STATUSES
    return status in _RETRYABLE_CLIENT_STATUSES


async def check_status(response: httpx.Response, where: str) -> None:
    """Raise for an error status: ``RetryableError`` if worth retrying, else ``ModelError``.

    ``where`` ("POST <url>", and where the URL came from) is named in a
    ``ModelError``: a 404 most often means a wrong base URL, a 401 a key
    meant for another server.
    """
    status = response.status_code
    if 200 <= status < 300:
        return
    body = await _head_of_body(response)
    # A proxy's error page may echo the key it was sent, in any shape: the
    # exact credential of this request is known here, and only here. It is
    # taken out before the text is cut short, which could leave half a key.
    secrets = credentials(response.request.headers)
    message, server_code = _error_details(response, body, secrets)
    if is_retryable(status):
        text = f"HTTP {status}: {message}"
        retry_after = _retry_after(response.headers) if status in _RETRY_AFTER_STATUSES else None
        raise RetryableError(text, status=status, retry_after=retry_after, server_code=server_code)
    text = f"HTTP {status}: {message} ({where})"
    code = _FATAL_STATUS_CODES.get(status, "http_error")
    raise ModelError(text, code=code, status=status, server_code=server_code)


async def _head_of_body(response: httpx.Response) -> bytes:
    """Up to ``_BODY_READ_LIMIT`` bytes of the body: a proxy's error page may be megabytes."""
    if response.is_stream_consumed:
        return response.content[:_BODY_READ_LIMIT]
    head = bytearray()
    async for chunk in response.aiter_bytes():
        head += chunk
        if len(head) >= _BODY_READ_LIMIT:
            break
    return bytes(head[:_BODY_READ_LIMIT])


def _error_details(
    response: httpx.Response, body: bytes, secrets: tuple[str, ...]
) -> tuple[str, str | None]:
    """The server's error message and code, from ``{"error": {...}}``, else one line of the
    body; redacted, then cut short."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, str):
            return _one_line(redact(error, secrets), _MESSAGE_LIMIT), None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            code = error.get("code")
            message = _one_line(redact(error["message"], secrets), _MESSAGE_LIMIT)
            return message, code if isinstance(code, str) else None
    line = _html_title(body) if b"<" in body[:1024] else None
    if line is None:
        line = _first_line(body.decode(response.encoding or "utf-8", "replace"))
    line = _one_line(redact(line, secrets), _LINE_LIMIT)
    return line or response.reason_phrase or "no details", None


def _html_title(body: bytes) -> str | None:
    """An HTML page's title, or its first line of text; None for a body that is no page."""
    from html import unescape  # error pages are rare: not loaded with the client

    match = _TITLE.search(body)
    if match is not None:
        return unescape(match.group(1).decode("utf-8", "replace"))
    text = body.decode("utf-8", "replace")
    if not _TAG.search(text):
        return None
    return _first_line(unescape(_TAG.sub("\n", text)))


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _retry_after(headers: httpx.Headers) -> float | None:
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        seconds = parse_retry_after(milliseconds)
        if seconds is not None:
            return seconds / 1000.0
    value = headers.get("retry-after")
    return None if value is None else parse_retry_after(value)
