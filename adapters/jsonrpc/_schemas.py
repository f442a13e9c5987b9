"""JSON Schemas of the dialect's results and notifications, for the OpenRPC document.

They sit here, apart from the handlers that build those values, to keep each
module short; tests check the server's real answers against them
(``tests/test_openrpc.py``), so they cannot drift unnoticed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codexcore.adapters.host._control_config import CONTROL_MESSAGES_SCHEMA

PROTOCOL_VERSION = "0"
"""Seed 000's protocol version, the one this dialect speaks."""

_BOOLS = {"type": "object", "additionalProperties": {"type": "boolean"}}
INITIALIZE_RESULT: Mapping[str, Any] = {
    "oneOf": [
        {
            "title": "the Codelia runtime protocol",
            "type": "object",
            "properties": {
                "protocol_version": {"const": PROTOCOL_VERSION},
                "server": {
                    "type": "object",
                    "properties": {"name": {"const": "codexcore"}, "version": {"type": "string"}},
                    "required": ["name", "version"],
                },
                "server_capabilities": {
                    **_BOOLS,
                    "properties": {"control_messages": CONTROL_MESSAGES_SCHEMA},
                },
                "tui": {"type": "object", "properties": {"theme": {"type": "string"}}},
            },
            "required": ["protocol_version", "server", "server_capabilities"],
        },
        {
            "title": "the Copilot-CLI-style chat protocol",
            "type": "object",
            "properties": {
                "serverName": {"const": "codexcore"},
                "serverVersion": {"type": "string"},
                "capabilities": _BOOLS,
            },
            "required": ["serverName", "serverVersion", "capabilities"],
        },
    ]
}


CHAT_RESULT = {
    "type": "object",
    "properties": {
        "message": {"type": "string"},
        "suggestions": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["message", "suggestions"],
}
CHUNK = {
    "type": "object",
    "properties": {
        "requestId": {"type": ["integer", "number", "string"]},
        "chunk": {"type": "string"},
        "done": {"type": "boolean"},
        "index": {"type": "integer", "minimum": 0},
    },
    "required": ["requestId", "chunk", "done", "index"],
}
