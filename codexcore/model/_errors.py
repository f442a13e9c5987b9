"""The client's error: one exception type with a stable ``code``."""

from __future__ import annotations

__all__ = ["ModelError", "RetryableError"]


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
    (e.g. ``"context_length_exceeded"``), if any.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        server_code: str | None = None,
    ) -> None:
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
    """

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        server_code: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after
        self.server_code = server_code
