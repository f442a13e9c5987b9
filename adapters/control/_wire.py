"""Seed 003's control messages as data: the receiver's rules, the envelopes, the acks.

Nothing here does I/O. :class:`ControlConfig` is the plain object the command
line builds from ``config.toml``'s ``[control]`` table (adapters never read the
configuration themselves); :func:`parse_request` turns a received JSON object
into a :class:`StdinRequest` or :class:`InterruptRequest`, or raises
:class:`Invalid` with the rule it broke; :func:`ack` builds the answer. The
envelopes are kept as the seed writes them: fields the seed marks optional
may be absent, and fields it does not know are ignored ("allow future
expansion"), so the seed's four example payloads parse unchanged.
"""

from __future__ import annotations

import codecs
import datetime
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from codexcore.adapters.host._control_config import (
    CONTROL_MESSAGES_SCHEMA as CONTROL_MESSAGES_SCHEMA,
)
from codexcore.adapters.host._control_config import VERSION as VERSION
from codexcore.adapters.host._control_config import ControlConfig as ControlConfig
from codexcore.adapters.host._control_config import ControlSender as ControlSender
from codexcore.adapters.host._control_config import KiB as KiB
from codexcore.adapters.host._control_config import MiB as MiB
from codexcore.adapters.transports._credential import Credential as Credential

STDIN_REQUEST, STDIN_ACK = "control.stdin.request", "control.stdin.ack"
INTERRUPT_REQUEST, INTERRUPT_ACK = "control.interrupt.request", "control.interrupt.ack"
ACK_OF = {STDIN_REQUEST: STDIN_ACK, INTERRUPT_REQUEST: INTERRUPT_ACK}

Result = Literal["ok", "not_live", "not_found", "busy", "timeout", "rejected", "internal_error"]
RESULTS: tuple[Result, ...] = (
    "ok",
    "not_live",
    "not_found",
    "busy",
    "timeout",
    "rejected",
    "internal_error",
)
"""Seed 003's result codes, exactly (``idle`` is a state, said in ``detail``)."""

MAX_ID_LENGTH = 256
"""The longest request_id, team, session_id, agent_id or sender accepted."""


class Invalid(Exception):
    """A request broke a rule; ``detail`` names it (the ack's ``detail``), ``code`` is the
    ack's ``error``."""

    def __init__(self, detail: str, code: str = "invalid_request") -> None:
        super().__init__(detail)
        self.detail, self.code = detail, code


# --- the envelopes ---------------------------------------------------------------------------


@attrs.frozen
class ContentRef:
    """Oversize input by file reference (seed 003 section 6)."""

    path: str
    size_bytes: int
    sha256: str
    mime: str
    expires_at: datetime.datetime | None = None


@attrs.frozen
class Envelope:
    """What every request carries (seed 003 section 2)."""

    type: str
    v: int
    request_id: str
    team: str
    session_id: str
    agent_id: str
    sender: str
    sent_at: datetime.datetime
    thread_id: str | None = None
    meta: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class StdinRequest:
    """``control.stdin.request``: ``content`` inline, or ``content_ref``."""

    envelope: Envelope
    content: str | None
    content_ref: ContentRef | None
    content_encoding: str = "utf-8"
    content_preview: str | None = None
    interrupt: bool = False


@attrs.frozen
class InterruptRequest:
    """``control.interrupt.request``: ``signal`` is always ``interrupt``."""

    envelope: Envelope
    signal: str = "interrupt"


Request = StdinRequest | InterruptRequest


def parse_time(value: str, where: str) -> datetime.datetime:
    """An RFC 3339 time with an offset or ``Z``, as an aware datetime."""
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"{where}: not an RFC 3339 time: {value[:64]!r}") from None
    if parsed.tzinfo is None:
        raise Invalid(f"{where}: an RFC 3339 time needs an offset or Z: {value[:64]!r}")
    return parsed


def rfc3339(moment: datetime.datetime) -> str:
    """``moment`` in UTC as the seed writes times: ``2026-02-20T21:15:00Z`` (ms if any)."""
    moment = moment.astimezone(datetime.UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return text + "Z"


def now_utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _field(value: Mapping[str, Any], name: str, kind: type, *, required: bool = True) -> Any:
    found = value.get(name)
    if found is None:
        if required:
            raise Invalid(f"{name}: missing required field")
        return None
    if not isinstance(found, kind) or (kind is int and isinstance(found, bool)):
        raise Invalid(f"{name}: expected {kind.__name__}, got {type(found).__name__}")
    return found


def _name(value: Mapping[str, Any], name: str) -> str:
    text: str = _field(value, name, str)
    if not text or len(text) > MAX_ID_LENGTH:
        raise Invalid(f"{name}: must be 1 to {MAX_ID_LENGTH} characters")
    return text


def _envelope(value: Mapping[str, Any]) -> Envelope:
    kind = _field(value, "type", str)
    if kind not in ACK_OF:
        raise Invalid(f"type: expected one of {sorted(ACK_OF)}, got {kind[:64]!r}")
    version = _field(value, "v", int)
    if version != VERSION:
        raise Invalid(f"v: version {version} is not supported (this receiver speaks {VERSION})")
    meta = _field(value, "meta", dict, required=False)
    thread_id = _field(value, "thread_id", str, required=False)
    return Envelope(
        kind,
        version,
        _name(value, "request_id"),
        _name(value, "team"),
        _name(value, "session_id"),
        _name(value, "agent_id"),
        _name(value, "sender"),
        parse_time(_field(value, "sent_at", str), "sent_at"),
        thread_id,
        meta or {},
    )


def _content_ref(value: Any) -> ContentRef:
    if not isinstance(value, dict):
        raise Invalid("content_ref: expected an object {path, size_bytes, sha256, mime}")
    expires = _field(value, "expires_at", str, required=False)
    size = _field(value, "size_bytes", int)
    if size < 0:
        raise Invalid("content_ref.size_bytes: must not be negative")
    return ContentRef(
        _field(value, "path", str),
        size,
        _field(value, "sha256", str),
        _field(value, "mime", str),
        parse_time(expires, "content_ref.expires_at") if expires is not None else None,
    )


def text_encoding(name: str) -> str:
    """The codec of a text encoding this receiver decodes; raises :class:`Invalid`."""
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise Invalid(f"content_encoding: unknown encoding {name[:64]!r}") from None
    if not getattr(info, "_is_text_encoding", True):
        raise Invalid(f"content_encoding: {name[:64]!r} is not a text encoding")
    return info.name


def parse_request(value: Any, config: ControlConfig) -> Request:
    """A received object as a request; raises :class:`Invalid` naming the broken rule.

    Inline content is checked against the limits here (empty, over the hard
    limit, an encoding other than UTF-8: inline content is JSON text, so only
    ``utf-8`` describes it); a ``content_ref`` is checked when it is read.
    """
    if not isinstance(value, dict):
        raise Invalid("a control request must be a JSON object")
    envelope = _envelope(value)
    if envelope.type == INTERRUPT_REQUEST:
        signal = _field(value, "signal", str)
        if signal != "interrupt":
            raise Invalid(f"signal: expected 'interrupt', got {signal[:64]!r}")
        return InterruptRequest(envelope)
    content = _field(value, "content", str, required=False)
    ref = value.get("content_ref")
    if (content is None) == (ref is None):
        raise Invalid("exactly one of content and content_ref is required")
    encoding = _field(value, "content_encoding", str, required=False) or "utf-8"
    codec = text_encoding(encoding)
    if content is not None:
        _check_inline(content, codec, config)
    interrupt = _field(value, "interrupt", bool, required=False)
    return StdinRequest(
        envelope,
        content,
        _content_ref(ref) if ref is not None else None,
        encoding,
        _field(value, "content_preview", str, required=False),
        bool(interrupt),
    )


def _check_inline(content: str, codec: str, config: ControlConfig) -> None:
    if codec != "utf-8":
        raise Invalid(
            f"content_encoding: inline content is JSON text, so utf-8; {codec!r} "
            "applies to content_ref only"
        )
    if not content:
        raise Invalid("content: empty payload")
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > config.hard_limit_bytes:
        raise Invalid(
            f"content: {size} bytes is over the hard limit of {config.hard_limit_bytes} "
            "bytes; send it as content_ref",
            "content_too_large",
        )


def partial_envelope(value: Any) -> dict[str, Any]:
    """What an ack can echo of a request that did not parse: its string identity fields."""
    if not isinstance(value, dict):
        return {}
    return {
        name: value[name]
        for name in ("type", "request_id", "team", "session_id", "agent_id")
        if isinstance(value.get(name), str) and len(value[name]) <= MAX_ID_LENGTH
    }


def ack(
    fields: Mapping[str, Any],
    result: Result,
    detail: str | None,
    *,
    duplicate: bool = False,
    error: str | None = None,
) -> dict[str, Any]:
    """The ack envelope for a request (``fields``: its identity, as far as it is known)."""
    kind = ACK_OF.get(str(fields.get("type")), STDIN_ACK)
    answer: dict[str, Any] = {
        "type": kind,
        "v": VERSION,
        "request_id": fields.get("request_id", ""),
        "session_id": fields.get("session_id", ""),
        "agent_id": fields.get("agent_id", ""),
        "team": fields.get("team", ""),
        "acked_at": rfc3339(now_utc()),
        "result": result,
        "duplicate": duplicate,
    }
    if detail is not None:
        answer["detail"] = detail
    if error is not None:
        answer["error"] = error
    return answer


def identity(envelope: Envelope) -> dict[str, Any]:
    return {
        "type": envelope.type,
        "request_id": envelope.request_id,
        "team": envelope.team,
        "session_id": envelope.session_id,
        "agent_id": envelope.agent_id,
    }


# --- the JSON Schemas, for the OpenRPC document -----------------------------------------------

_TEXT: dict[str, Any] = {"type": "string"}
_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH}
_ENVELOPE: dict[str, Any] = {
    "v": {"const": VERSION},
    "request_id": _ID,
    "team": _ID,
    "session_id": _ID,
    "agent_id": _ID,
    "sender": _ID,
    "sent_at": {"type": "string", "format": "date-time"},
    "thread_id": _TEXT,
    "meta": {"type": "object"},
}
CONTENT_REF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": _TEXT,
        "size_bytes": {"type": "integer", "minimum": 0},
        "sha256": _TEXT,
        "mime": _TEXT,
        "expires_at": {"type": "string", "format": "date-time"},
    },
    "required": ["path", "size_bytes", "sha256", "mime"],
}
_REQUIRED = ["type", "v", "request_id", "team", "session_id", "agent_id", "sender", "sent_at"]
STDIN_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"const": STDIN_REQUEST},
        **_ENVELOPE,
        "content": _TEXT,
        "content_ref": CONTENT_REF_SCHEMA,
        "content_encoding": _TEXT,
        "content_preview": _TEXT,
        "interrupt": {"type": "boolean"},
    },
    "required": _REQUIRED,
    "oneOf": [{"required": ["content"]}, {"required": ["content_ref"]}],
}
INTERRUPT_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"const": INTERRUPT_REQUEST},
        **_ENVELOPE,
        "signal": {"const": "interrupt"},
    },
    "required": [*_REQUIRED, "signal"],
}


def ack_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of an ack envelope of ``kind``."""
    properties = {
        "type": {"const": kind},
        "v": {"const": VERSION},
        "request_id": _TEXT,
        "team": _TEXT,
        "session_id": _TEXT,
        "agent_id": _TEXT,
        "acked_at": {"type": "string", "format": "date-time"},
        "result": {"enum": list(RESULTS)},
        "duplicate": {"type": "boolean"},
        "detail": _TEXT,
        "error": _TEXT,
    }
    required = ["type", "v", "request_id", "team", "session_id", "agent_id", "acked_at"]
    return {
        "type": "object",
        "properties": properties,
        "required": [*required, "result", "duplicate"],
    }
