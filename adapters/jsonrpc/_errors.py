"""Every error code of the JSON-RPC dialect, with its meaning: one table.

The table is built from the constants the machine and the methods raise, so
the OpenRPC document (``codexcore schema --openrpc``) lists what a client can
really get. Seed 000's codes for its run and session methods are defined here
too, so their methods raise these constants. Two meanings share -32004: seed
001's "too many requests" and seed 000's "session not found" (each seed
defined its own; a client only meets the one of the methods it calls).
"""

from __future__ import annotations

import attrs

from ._machine import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
    TOO_MANY_REQUESTS,
    UNAUTHORIZED,
)

SERVER_ERROR = -32000
RUNTIME_BUSY = -32001
RUN_NOT_FOUND = -32002
USER_CANCELLED = -32003
SESSION_NOT_FOUND = -32004
SESSION_LOAD_FAILED = -32005
SESSION_LIST_FAILED = -32006


@attrs.frozen
class ErrorCode:
    name: str
    code: int
    meaning: str


ERRORS: tuple[ErrorCode, ...] = (
    ErrorCode(
        "ParseError", PARSE_ERROR, "the line is not JSON (or not UTF-8, or too long); id null"
    ),
    ErrorCode(
        "InvalidRequest",
        INVALID_REQUEST,
        "not a JSON-RPC 2.0 request object, an empty batch, or a request not allowed now "
        "(initialize twice, chat sent as a notification)",
    ),
    ErrorCode("MethodNotFound", METHOD_NOT_FOUND, "no such method here; the message names it"),
    ErrorCode("InvalidParams", INVALID_PARAMS, "a params field is missing or mistyped; named"),
    ErrorCode("InternalError", INTERNAL_ERROR, "a fault in codexcore, logged on stderr"),
    ErrorCode(
        "ServerError",
        SERVER_ERROR,
        "runtime internal error: the runtime failed inside (a fault in a method of the Codelia "
        "runtime protocol, no session could be made or attached, the session ended under the "
        "call), or a chat's Task failed or was aborted; data.code says which where known",
    ),
    ErrorCode(
        "RuntimeBusy",
        RUNTIME_BUSY,
        "runtime busy: a run is already active on this session, or another client controls it",
    ),
    ErrorCode("RunNotFound", RUN_NOT_FOUND, "no run with this run_id"),
    ErrorCode(
        "UserCancelled",
        USER_CANCELLED,
        "user cancelled: a tool.call apply_patch the user declined; also what a UI may answer "
        "a ui.pick/ui.prompt/ui.confirm request with, taken as the user's cancel",
    ),
    ErrorCode(
        "TooManyRequests",
        TOO_MANY_REQUESTS,
        "too many requests pending on this connection (the Copilot-CLI-style chat protocol's "
        "bound); the connection goes on",
    ),
    ErrorCode(
        "SessionNotFound",
        SESSION_NOT_FOUND,
        "no session with this session_id (the Codelia runtime protocol)",
    ),
    ErrorCode("SessionLoadFailed", SESSION_LOAD_FAILED, "the session's rollout could not be read"),
    ErrorCode("SessionListFailed", SESSION_LIST_FAILED, "the sessions could not be listed"),
    ErrorCode("NotInitialized", NOT_INITIALIZED, "TCP: initialize must come first"),
    ErrorCode(
        "Unauthorized",
        UNAUTHORIZED,
        "initialize without the server's token, or a wrong one; the connection closes",
    ),
)
"""Every code, in numeric order of the specification's, then the server's."""

BOUND_ERROR = "TooManyRequests"
"""The error of seed 001's bound on requests pending: any method but those exempt from it."""

COMMON_ERRORS = (INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR, NOT_INITIALIZED)
"""The codes any method can answer: listed on every method of the document."""
