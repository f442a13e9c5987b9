"""The app-server protocol's JSON-RPC, as Codex writes it: JSON-RPC 2.0 without the
``"jsonrpc"`` member, one message a line.

Codex's ``JSONRPCMessage`` has no ``jsonrpc`` field: its messages leave it out and it
ignores one a client sends. Error codes are JSON-RPC's own. A line that is not a
message at all is logged and dropped, as Codex drops it (there is no id to answer).
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = int | str

ANSWERED = object()
"""What a handler returns when it sent its answer itself (before what follows it)."""


class AppError(Exception):
    """An error answer: raise it from a handler to answer with ``code``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def invalid_params(field: str, problem: str) -> AppError:
    """-32602 naming the field (``params.input[0].type``) and what is wrong with it."""
    return AppError(INVALID_PARAMS, f"{field}: {problem}", {"field": field})


@attrs.frozen
class Request:
    id: RequestId
    method: str
    params: Any


@attrs.frozen
class Notification:
    method: str
    params: Any


@attrs.frozen
class Response:
    """The client's answer to one of our requests."""

    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


Message = Request | Notification | Response


def parse(line: bytes) -> Message | str:
    """The message on ``line``, or why it is not one."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return f"not JSON: {exc}"
    if not isinstance(value, dict):
        return "a message is a JSON object"
    rid = value.get("id")
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, int | str)):
        return "id must be a string or an integer"
    method = value.get("method")
    if method is not None:
        if not isinstance(method, str):
            return "method must be a string"
        params = value.get("params")
        return Notification(method, params) if rid is None else Request(rid, method, params)
    if rid is None:
        return "a message has a method or answers an id"
    error = value.get("error")
    if error is not None and not isinstance(error, dict):
        return "error must be an object"
    return Response(rid, value.get("result"), error)


def response(rid: RequestId, result: Any) -> bytes:
    return orjson.dumps({"id": rid, "result": result}) + b"\n"


def error_response(rid: RequestId, error: AppError) -> bytes:
    return orjson.dumps({"id": rid, "error": error.to_wire()}) + b"\n"


def notification(method: str, params: Any) -> bytes:
    return orjson.dumps({"method": method, "params": params}) + b"\n"


def request(rid: RequestId, method: str, params: Any) -> bytes:
    return orjson.dumps({"id": rid, "method": method, "params": params}) + b"\n"
