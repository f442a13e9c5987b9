"""Every error code of the JSON-RPC dialect, with its meaning: one table.

The table is built from the constants the machine and the methods raise, so
the OpenRPC document (``codexcore schema --openrpc``) lists what a client can
really get. Seed 000's codes for its run and session methods are defined here
too, so their methods raise these constants. Some codes mean two things, because
each protocol defined its own: -32004 is the Copilot-CLI-style chat protocol's
"too many requests" and the Codelia runtime protocol's "session not found";
-32001 and -32002 are the chat protocol's "customization failed" and "spec
invalid" on its ``generate`` and ``customize``, and the Codelia protocol's
"runtime busy" and "run not found" on its run methods. A client only meets the
meaning of the methods it calls.
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
CUSTOMIZATION_FAILED = -32001
SPEC_INVALID = -32002
CONTEXT_TOO_LARGE = -32003
REQUEST_CANCELLED = -32800


@attrs.frozen
class ErrorCode:
    """One meaning of a code. ``methods``: the only methods that answer it with this
    meaning, for a code two protocols gave different meanings (empty: any method)."""

    name: str
    code: int
    meaning: str
    methods: tuple[str, ...] = ()


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
        "call), or a chat's or generate's Task failed or was aborted (the chat protocol's "
        "'generation failed'); data.code says which where known",
    ),
    ErrorCode(
        "RuntimeBusy",
        RUNTIME_BUSY,
        "runtime busy: a run is already active on this session, or another client controls it",
        ("run.start", "run.cancel", "shell.exec"),
    ),
    ErrorCode(
        "CustomizationFailed",
        CUSTOMIZATION_FAILED,
        "customize: the change could not be applied (its Task failed, or the model's answer "
        "has no code and asks nothing); data.code says why",
        ("customize",),
    ),
    ErrorCode("RunNotFound", RUN_NOT_FOUND, "no run with this run_id", ("run.cancel",)),
    ErrorCode(
        "SpecInvalid",
        SPEC_INVALID,
        "generate, customize: params.spec is no usable API spec; the message names the field",
        ("generate", "customize"),
    ),
    ErrorCode(
        "ContextTooLarge",
        CONTEXT_TOO_LARGE,
        "chat, generate, customize: the input exceeds the model's context window, even "
        "after compacting the conversation",
        ("chat", "generate", "customize"),
    ),
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
    ErrorCode(
        "RequestCancelled",
        REQUEST_CANCELLED,
        "the request was cancelled by $/cancelRequest before it was answered",
    ),
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

COMMON_ERRORS = (
    INVALID_REQUEST,
    INVALID_PARAMS,
    INTERNAL_ERROR,
    NOT_INITIALIZED,
    REQUEST_CANCELLED,
)
"""The codes any method can answer (-32800 once the client cancels it): listed on every
method of the document."""
