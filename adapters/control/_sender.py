"""The sending side of seed 003's control messages: envelopes, retries, oversize input.

:func:`send_control` sends one logical request through any ``send`` (a native
line on :class:`~codexcore.adapters.client.RemoteCodex`'s connection, a JSON-RPC call from
``codexcore control``): a fresh ``request_id`` per logical send, reused on
every retry with ``meta.retry_count`` counting up, so the receiver runs it at
most once. It retries (``retries`` times, 1 by default) when no ack comes
within ``ack_timeout`` (2 s), the connection fails, or the ack says ``busy``,
``timeout`` or ``internal_error``; any other ack is final. Content over the
soft limit is sent with a warning; over the hard limit it is written to a
file of its own under ``share_dir`` and sent as ``content_ref`` with its
size and sha256. Every step is audited (``side="sender"``), without the text.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

from codexcore._logging import get_logger
from codexcore.protocol import ControlMessages

from ._store import Audit
from ._wire import (
    INTERRUPT_REQUEST,
    STDIN_REQUEST,
    VERSION,
    KiB,
    MiB,
    now_utc,
    rfc3339,
)

log = get_logger("codexcore.control")

RETRIED_RESULTS = ("busy", "timeout", "internal_error")
PREVIEW_CHARS = 240

Send = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one request envelope; returns its ack (raises on a lost connection)."""


class ControlError(Exception):
    """A control request could not be sent, or the receiver does not take it."""


class NoAck(ControlError):
    """No ack arrived for any attempt (``attempts`` made)."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


@attrs.frozen
class SenderOptions:
    """Who sends, and how: ``team`` and ``sender`` go in every envelope;
    ``share_dir`` is where oversize input is written (``<share_dir>/<team>/input/``;
    None: oversize input is refused here); ``ref_ttl`` its ``expires_at``."""

    team: str
    sender: str
    share_dir: str | None = None
    soft_limit_bytes: int = 64 * KiB
    hard_limit_bytes: int = 1 * MiB
    retries: int = 1
    ack_timeout: float = 2.0
    backoff: float = 0.2
    ref_ttl: float = 600.0
    ui_source: str = "codexcore"
    audit_file: str | None = None
    verbose_messages: bool = False


def _envelope(
    kind: str, options: SenderOptions, session_id: str, agent_id: str, thread_id: str | None
) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "type": kind,
        "v": VERSION,
        "request_id": f"req_{uuid.uuid4().hex}",
        "session_id": session_id,
        "agent_id": agent_id,
        "team": options.team,
        "sender": options.sender,
        "sent_at": rfc3339(now_utc()),
        "meta": {"ui_source": options.ui_source, "retry_count": 0},
    }
    if thread_id is not None:
        envelope["thread_id"] = thread_id
    return envelope


def stdin_envelope(
    options: SenderOptions,
    session_id: str,
    agent_id: str,
    text: str,
    *,
    interrupt: bool = False,
    thread_id: str | None = None,
    capabilities: ControlMessages | None = None,
) -> dict[str, Any]:
    """A ``control.stdin.request``: inline, or by ``content_ref`` over the hard limit
    (the smaller of ours and the receiver's ``max_inline_bytes``)."""
    if not text:
        raise ControlError("an empty payload is not sent (the receiver rejects it)")
    envelope = _envelope(STDIN_REQUEST, options, session_id, agent_id, thread_id)
    envelope["interrupt"] = interrupt
    data = text.encode("utf-8")
    hard = options.hard_limit_bytes
    if capabilities is not None:
        hard = min(hard, capabilities.max_inline_bytes)
    if len(data) > options.soft_limit_bytes:
        log.warning("control input over the soft limit", bytes=len(data))
    if len(data) <= hard:
        envelope.update(content=text, content_encoding="utf-8")
        return envelope
    if capabilities is not None and not capabilities.content_ref:
        raise ControlError(
            f"{len(data)} bytes is over the receiver's inline limit of {hard} and it "
            "takes no content_ref"
        )
    envelope["content_ref"] = _write_share(options, envelope["request_id"], data)
    envelope["content_preview"] = text[:PREVIEW_CHARS]
    envelope["meta"]["oversize_strategy"] = "content_ref"
    return envelope


def _write_share(options: SenderOptions, request_id: str, data: bytes) -> dict[str, Any]:
    if options.share_dir is None:
        raise ControlError("the input is over the hard limit and no share directory is set")
    directory = Path(options.share_dir) / options.team / "input"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{request_id}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    expires = now_utc() + datetime.timedelta(seconds=options.ref_ttl)
    return {
        "path": str(path),
        "size_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "mime": "text/plain; charset=utf-8",
        "expires_at": rfc3339(expires),
    }


def interrupt_envelope(
    options: SenderOptions, session_id: str, agent_id: str, *, thread_id: str | None = None
) -> dict[str, Any]:
    """A ``control.interrupt.request``."""
    envelope = _envelope(INTERRUPT_REQUEST, options, session_id, agent_id, thread_id)
    envelope["signal"] = "interrupt"
    return envelope


async def send_control(
    send: Send, envelope: dict[str, Any], options: SenderOptions
) -> dict[str, Any]:
    """Send ``envelope`` until an ack that is final, or the retries are spent; the last ack.

    Raises :class:`NoAck` when no attempt got an ack at all.
    """
    audit = Audit(options.audit_file, verbose=options.verbose_messages, side="sender")
    try:
        return await _attempts(send, envelope, options, audit)
    finally:
        audit.close()


async def _attempts(
    send: Send, envelope: dict[str, Any], options: SenderOptions, audit: Audit
) -> dict[str, Any]:
    fields = {k: envelope.get(k) for k in ("type", "request_id", "team", "session_id", "agent_id")}
    fields["sender"] = envelope.get("sender")
    last: dict[str, Any] | None = None
    problem = ""
    for attempt in range(options.retries + 1):
        if attempt:
            await asyncio.sleep(options.backoff * attempt)
            envelope["meta"] = {**envelope.get("meta", {}), "retry_count": attempt}
            envelope["sent_at"] = rfc3339(now_utc())  # a retry is a new send of the same id
            audit.record("retry", {**fields, "retry_count": attempt, "why": problem})
        audit.record("request", {**fields, "retry_count": attempt}, text=envelope.get("content"))
        try:
            async with asyncio.timeout(options.ack_timeout):
                last = await send(envelope)
        except TimeoutError:
            problem = f"no ack within {options.ack_timeout:g} s"
            audit.record("timeout", {**fields, "retry_count": attempt})
            continue
        except (ConnectionError, OSError) as exc:
            problem = f"the connection failed: {exc}"
            audit.record("failed", {**fields, "retry_count": attempt, "why": str(exc)})
            continue
        audit.record("ack", {**fields, **_ack_fields(last)})
        if last.get("result") not in RETRIED_RESULTS:
            return last
        problem = f"the ack said {last.get('result')}"
    if last is None:
        raise NoAck(f"no ack for {envelope['request_id']}: {problem}", options.retries + 1)
    return last


def _ack_fields(ack: dict[str, Any]) -> dict[str, Any]:
    return {
        "result": ack.get("result"),
        "duplicate": ack.get("duplicate"),
        "detail": ack.get("detail"),
    }
