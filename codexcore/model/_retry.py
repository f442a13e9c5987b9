"""Retry policy: exponential backoff with jitter, and the server's own hints."""

from __future__ import annotations

import math
import random
import re
from datetime import UTC, datetime

import attrs

from ..protocol._value import Value

__all__ = ["RetryPolicy", "parse_retry_after", "retry_after_from_message"]


@attrs.frozen(repr=False, eq=False)
class RetryPolicy(Value):
    """How often and how patiently a request is retried.

    The request is sent at most ``max_attempts`` times (1 means never retry).
    Before retry ``n`` (from 1) the client waits
    ``min(max_delay, base_delay * 2 ** (n - 1))`` seconds, scaled by a random
    factor in ``[1 - jitter, 1 + jitter]`` and capped at ``max_delay`` again;
    when the server asked for a wait (``Retry-After``) that wait is used
    instead, capped at ``max_retry_after``.
    """

    max_attempts: int = attrs.field(default=5, validator=attrs.validators.ge(1))
    base_delay: float = attrs.field(default=0.2, validator=attrs.validators.ge(0.0))
    max_delay: float = attrs.field(default=10.0, validator=attrs.validators.ge(0.0))
    max_retry_after: float = attrs.field(default=60.0, validator=attrs.validators.ge(0.0))
    jitter: float = attrs.field(
        default=0.25, validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)]
    )

    def delay(self, retry: int, *, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (counted from 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        backoff = min(self.max_delay, self.base_delay * 2.0 ** min(retry - 1, 64))
        spread = 1.0 + self.jitter * (2.0 * random.random() - 1.0)
        return min(self.max_delay, backoff * spread)


def parse_retry_after(value: str, *, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks for: a number of seconds or an HTTP date.

    A date in the past means 0; anything unparsable means None.
    """
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        return _seconds_until_http_date(value, now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _seconds_until_http_date(value: str, now: datetime | None) -> float | None:
    # The email package costs ~3 ms to import; few servers ever send a date.
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


_TRY_AGAIN = re.compile(r"try again in\s*(\d+(?:\.\d+)?)\s*(ms|s|seconds?)\b", re.IGNORECASE)


def retry_after_from_message(message: str) -> float | None:
    """The wait suggested by a rate-limit message ("... Please try again in 1.5s.")."""
    match = _TRY_AGAIN.search(message)
    if match is None:
        return None
    amount = float(match.group(1))
    return amount / 1000.0 if match.group(2).lower() == "ms" else amount
