"""Opening a session on a connection: the hello and the server's answer, and redialling
with backoff after a drop.

Both are for :class:`~codexcore.adapters.client.RemoteCodex`, which builds the ``hello``
(it knows its session, ``seq`` and token) and owns the connection once it is welcomed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from codexcore.protocol import Hello, Refused, Welcome, encode_connection_msg

from ._link import Link, parse_line
from ._types import (
    ConnectionLost,
    HandshakeRefused,
    ReconnectPolicy,
    RemoteError,
    SessionLost,
)

RETRIABLE_REFUSALS = frozenset({"too_many_connections", "session_full", "handshake_timeout"})
"""Refusals worth another attempt: the server is busy, not saying no."""
LOST_SESSION_REFUSALS = frozenset({"unknown_session", "bad_seq"})


class Retry(Exception):
    """A connection attempt failed in a way worth trying again."""


async def handshake(link: Link, hello: Hello, handshake_timeout: float) -> Welcome:
    """Say ``hello`` on a new connection; the ``welcome``, or raise.

    Raises :class:`Retry` for what may go better on another attempt (no
    answer, a dropped connection, a busy server), :class:`SessionLost` or
    :class:`HandshakeRefused` for a refusal.
    """
    try:
        async with asyncio.timeout(handshake_timeout):
            link.write(encode_connection_msg(hello) + b"\n")
            await link.drain()
            while True:
                line = await link.read_line()
                if line is None:
                    raise Retry(f"{link.reason} before answering the hello")
                answer = parse_line(line)
                if isinstance(answer, Welcome):
                    return answer
                if isinstance(answer, Refused):
                    if answer.code in RETRIABLE_REFUSALS:
                        raise Retry(f"refused ({answer.code}): {answer.message}")
                    if answer.code in LOST_SESSION_REFUSALS:
                        raise SessionLost(answer.code, answer.message)
                    raise HandshakeRefused(answer.code, answer.message)
                if answer is not None:
                    raise RemoteError(f"expected a welcome, got {line[:200]!r}")
    except TimeoutError:
        raise Retry(f"no answer to the hello within {handshake_timeout} s") from None
    except (ConnectionError, OSError) as exc:
        raise Retry(f"the connection failed during the hello: {exc!r}") from None


async def redial(
    dial: Callable[[], Awaitable[Link]],
    attach: Callable[[Link], Awaitable[Welcome]],
    policy: ReconnectPolicy | None,
    dial_timeout: float,
    reason: str,
) -> tuple[Link, Welcome]:
    """After a drop (``reason``): ``dial`` and ``attach`` (the handshake) again, with the
    backoff of ``policy``, until a connection is welcomed.

    ``dial_timeout`` bounds each dial. Raises :class:`ConnectionLost` when ``policy`` is None
    or its attempts or deadline run out, and what ``attach`` raises that is not a
    :class:`Retry` (a refusal).
    """
    if policy is None:
        raise ConnectionLost(f"the connection was lost ({reason}); reconnecting is off", 0)
    started = time.monotonic()
    problem, attempt = reason, 0
    while attempt < policy.attempts:
        delay = policy.delay(attempt + 1)
        if time.monotonic() + delay - started > policy.deadline:
            break
        attempt += 1
        if delay:
            await asyncio.sleep(delay)  # backoff
        try:
            async with asyncio.timeout(dial_timeout):
                link = await dial()
        except (OSError, TimeoutError) as exc:
            problem = f"connecting failed: {exc!r}"
            continue
        try:
            return link, await attach(link)
        except Retry as exc:
            link.abort()
            problem = str(exc)
        except BaseException:
            link.abort()
            raise
    raise ConnectionLost(
        f"the connection was lost ({reason}) and {attempt} attempts to reconnect "
        f"failed; the last: {problem}",
        attempt,
    )
