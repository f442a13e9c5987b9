"""Seed 003's control messages in tests: envelopes, a host configured to receive them."""

from __future__ import annotations

import datetime
import os
import uuid
from typing import Any

from codexcore.adapters.control._wire import ControlConfig, ControlSender, Credential, rfc3339

TEAM = "atm-dev"
SENDER = "arch-ctm"
SENDER_TOKEN = "sender-token-8c1e5f2a9d"
ME = Credential("unix", uid=os.getuid())

SEED_EXAMPLES: dict[str, str] = {
    "8.1": """{
  "type": "control.stdin.request",
  "v": 1,
  "request_id": "req_01HZY8QJ8R7G6K2YJ7V2M9A1P3",
  "session_id": "claude-session-uuid",
  "agent_id": "codex:abc123",
  "thread_id": "thread-xyz789",
  "team": "atm-dev",
  "sender": "arch-ctm",
  "sent_at": "2026-02-20T21:15:00Z",
  "content": "single payload text",
  "content_encoding": "utf-8",
  "interrupt": false,
  "meta": {
    "ui_source": "tui",
    "retry_count": 0
  }
}""",
    "8.2": """{
  "type": "control.stdin.ack",
  "v": 1,
  "request_id": "req_01HZY8QJ8R7G6K2YJ7V2M9A1P3",
  "session_id": "claude-session-uuid",
  "agent_id": "codex:abc123",
  "team": "atm-dev",
  "acked_at": "2026-02-20T21:15:00Z",
  "result": "ok",
  "detail": "accepted",
  "duplicate": false
}""",
    "8.3": """{
  "type": "control.interrupt.request",
  "v": 1,
  "request_id": "req_01HZY8R2N2S5CXK3Y8E1B4M7T0",
  "session_id": "claude-session-uuid",
  "agent_id": "codex:abc123",
  "team": "atm-dev",
  "sender": "arch-ctm",
  "sent_at": "2026-02-20T21:16:12Z",
  "signal": "interrupt",
  "meta": {
    "ui_source": "tui",
    "retry_count": 0
  }
}""",
    "8.4": """{
  "type": "control.stdin.request",
  "v": 1,
  "request_id": "req_01HZY8S9Q6P4W8F2M1K7R3D5N9",
  "session_id": "claude-session-uuid",
  "agent_id": "codex:abc123",
  "team": "atm-dev",
  "sender": "arch-ctm",
  "sent_at": "2026-02-20T21:17:30Z",
  "content_ref": {
    "path": "/Users/randlee/.config/atm/share/atm-dev/input/req_01HZY8S9Q6P4W8F2M1K7R3D5N9.txt",
    "size_bytes": 143201,
    "sha256": "e3b0c44298fc1c149afbf4c8996fb924...",
    "mime": "text/plain; charset=utf-8"
  },
  "content_preview": "first 240 chars for diagnostics...",
  "interrupt": false,
  "meta": {
    "ui_source": "tui",
    "retry_count": 0,
    "oversize_strategy": "content_ref"
  }
}""",
}
"""Seed 003's example payloads (section 8), exactly as the seed writes them."""


def control_config(**changes: Any) -> ControlConfig:
    """This user as the team's one sender (by uid, and by token over TCP)."""
    sender = ControlSender(SENDER, TEAM, uid=os.getuid(), token=SENDER_TOKEN)
    return ControlConfig(**{"team": TEAM, "senders": (sender,), **changes})


def sent_at(offset: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=offset)
    return rfc3339(moment)


def stdin_request(
    session_id: str, agent_id: str, content: str | None, **fields: Any
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "type": "control.stdin.request",
        "v": 1,
        "request_id": f"req_{uuid.uuid4().hex}",
        "session_id": session_id,
        "agent_id": agent_id,
        "team": TEAM,
        "sender": SENDER,
        "sent_at": sent_at(),
        "meta": {"ui_source": "tests", "retry_count": 0},
    }
    if content is not None:
        request["content"] = content
    return {**request, **fields}


def interrupt_request(session_id: str, agent_id: str, **fields: Any) -> dict[str, Any]:
    request = stdin_request(session_id, agent_id, None)
    return {**request, "type": "control.interrupt.request", "signal": "interrupt", **fields}
