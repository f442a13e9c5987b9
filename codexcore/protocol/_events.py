"""EventMsgs: what the engine puts on the event queue.

Every ``task_started`` is followed, under the same event id, by exactly one
terminal event: ``task_complete``, ``turn_aborted`` or ``error``. ``error`` under
another id answers a submission that was rejected. Recoverable trouble is
``warning`` or ``stream_error``. The union is open: UIs ignore types they do
not know.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from ._ask_user import RequestUserInput
from ._compaction import ContextCompacted, ContextCompactionStarted
from ._dynamic_tools import DynamicToolCallRequest
from ._mcp import (
    McpListToolsResponse,
    McpStartupComplete,
    McpStartupUpdate,
    McpToolCallBegin,
    McpToolCallEnd,
)
from ._plan import PlanUpdate, ViewImageToolCall
from ._skills import ListSkillsResponse
from ._types import (
    AbortReason,
    ApprovalPolicy,
    ExecCommandSource,
    ExecStatus,
    FileChange,
    HistoryMode,
    OutputStream,
    ReasoningEffort,
    SandboxKind,
    SandboxPolicy,
    StopKind,
)
from ._value import Value
from ._wire import EVENT_MSGS, Tagged


@EVENT_MSGS.register("session_configured")
@attrs.frozen(repr=False, eq=False)
class SessionConfigured(Tagged):
    """The Session exists with this configuration.

    ``sandbox`` says what really confines commands (``bwrap`` or ``none``) and
    ``sandbox_reason`` why there is none, so a UI never shows a confinement
    that is not there.
    """

    session_id: str
    model: str
    cwd: str
    approval_policy: ApprovalPolicy
    sandbox_policy: SandboxPolicy
    history_mode: HistoryMode
    reasoning_effort: ReasoningEffort | None = None
    sandbox: SandboxKind = "none"
    sandbox_reason: str | None = None


@EVENT_MSGS.register("task_started")
@attrs.frozen(repr=False, eq=False)
class TaskStarted(Tagged):
    """A Task began; its id is the id of the submission that started it.

    ``model_context_window`` is the context window, in tokens, of the model the
    Task starts with (from the model catalogue, config overrides included).
    """

    model_context_window: int | None = None


@EVENT_MSGS.register("user_message")
@attrs.frozen(repr=False, eq=False)
class UserMessage(Tagged):
    """The user's input entered the conversation (Codex's ``UserMessageEvent``).

    Emitted under the Task's id when its input is taken into a request: the
    ``user_input`` that started it right after ``task_started``, input injected
    into it (``inject_input``) before the request that carries it. Recorded, so
    a resumed session's history shows what the user asked. ``message`` is the
    input's text parts joined; ``images`` the URLs of its images (a local
    image's as a data URL), null when there are none.
    """

    message: str
    images: tuple[str, ...] | None = None


@EVENT_MSGS.register("agent_message")
@attrs.frozen(repr=False, eq=False)
class AgentMessage(Tagged):
    """A complete message from the model (authoritative over the deltas).

    ``refusal`` is true when the model declined to answer: ``message`` is then
    its refusal (streamed as ``agent_message_delta`` like any answer), to be
    shown as the answer, marked as a refusal. Older peers omit it (false).
    """

    message: str
    refusal: bool = False


@EVENT_MSGS.register("agent_message_delta")
@attrs.frozen(repr=False, eq=False)
class AgentMessageDelta(Tagged):
    """A piece of a message while the model streams it."""

    delta: str


@EVENT_MSGS.register("agent_reasoning")
@attrs.frozen(repr=False, eq=False)
class AgentReasoning(Tagged):
    """The model's reasoning summary, complete."""

    text: str


@EVENT_MSGS.register("agent_reasoning_delta")
@attrs.frozen(repr=False, eq=False)
class AgentReasoningDelta(Tagged):
    """A piece of the reasoning summary while it streams."""

    delta: str


@EVENT_MSGS.register("exec_approval_request")
@attrs.frozen(repr=False, eq=False)
class ExecApprovalRequest(Tagged):
    """The Task waits for an ``exec_approval`` whose ``id`` is this ``call_id``."""

    call_id: str
    command: tuple[str, ...]
    cwd: str
    reason: str | None = None


@EVENT_MSGS.register("exec_command_begin")
@attrs.frozen(repr=False, eq=False)
class ExecCommandBegin(Tagged):
    """A command started; ``source`` says whether the model or the user ran it, ``pty``
    whether it runs in a terminal of its own (``write_pty`` writes to it)."""

    call_id: str
    command: tuple[str, ...]
    cwd: str
    source: ExecCommandSource = "agent"
    pty: bool = False


@EVENT_MSGS.register("exec_command_output_delta")
@attrs.frozen(repr=False, eq=False)
class ExecCommandOutputDelta(Tagged):
    """Up to 8 KiB of a running command's output (base64 on the wire)."""

    call_id: str
    stream: OutputStream
    chunk: bytes
    source: ExecCommandSource = "agent"


@EVENT_MSGS.register("exec_command_end")
@attrs.frozen(repr=False, eq=False)
class ExecCommandEnd(Tagged):
    """A command ended. The output fields are bounded: head and tail are kept."""

    call_id: str
    stdout: str
    stderr: str
    aggregated_output: str
    exit_code: int
    duration_ms: int
    status: ExecStatus
    source: ExecCommandSource = "agent"


@EVENT_MSGS.register("apply_patch_approval_request")
@attrs.frozen(repr=False, eq=False)
class ApplyPatchApprovalRequest(Tagged):
    """The Task waits for a ``patch_approval`` whose ``id`` is this ``call_id``.

    ``changes`` maps each absolute path, as the patch names it, to its change.
    ``resolved_paths`` maps every path the patch writes or removes (move
    destinations too) to where that really lands, symlinks resolved: ``/w/link``
    to ``/etc/x`` when ``/w/link`` is a symlink to ``/etc/x``. Show these, as that
    is what is approved. ``approved_for_session`` covers exactly those resolved
    files from then on, never their directory. ``reason`` says why it asks (for a
    write outside the writable roots, which paths lead where). ``grant_root`` is
    kept for older clients and not set: no answer makes a directory writable.
    """

    call_id: str
    changes: dict[str, FileChange]
    reason: str | None = None
    grant_root: str | None = None
    resolved_paths: dict[str, str] = attrs.field(factory=dict)


@EVENT_MSGS.register("patch_apply_begin")
@attrs.frozen(repr=False, eq=False)
class PatchApplyBegin(Tagged):
    """A patch is being applied."""

    call_id: str
    auto_approved: bool
    changes: dict[str, FileChange]


@EVENT_MSGS.register("patch_apply_end")
@attrs.frozen(repr=False, eq=False)
class PatchApplyEnd(Tagged):
    """A patch was applied (``success``) or refused, all or nothing."""

    call_id: str
    stdout: str
    stderr: str
    success: bool


@EVENT_MSGS.register("turn_diff")
@attrs.frozen(repr=False, eq=False)
class TurnDiff(Tagged):
    """Everything the Turn changed on disk, as one git-style unified diff."""

    unified_diff: str


@EVENT_MSGS.register("turn_complete")
@attrs.frozen(repr=False, eq=False)
class TurnComplete(Tagged):
    """A model response completed; ``response_id`` is a bookmark to fork from.

    ``model`` is the model the Turn's request named; ``request_ts`` (ISO 8601,
    UTC) when it was sent; ``latency_ms`` from then until the response
    completed (retries included; the Turn's tool calls are not). Null when
    unknown (older producers).
    """

    response_id: str | None = None
    model: str | None = None
    request_ts: str | None = None
    latency_ms: int | None = None


@EVENT_MSGS.register("task_complete")
@attrs.frozen(repr=False, eq=False)
class TaskComplete(Tagged):
    """Terminal: the model finished with no further tool calls, or a ``stop`` or
    ``checkpoint`` ended the Task after its Turn.

    ``last_agent_message`` is the Task's last complete agent message (from an
    earlier Turn when the last one had none; null when there was none).
    ``response_id`` is the last Turn's bookmark. ``stopped_by`` is null when the
    model finished; ``stop`` or ``checkpoint`` when that request was pending as
    the last Turn ended (even if the model had nothing more to do):
    ``checkpoint`` means the session is paused awaiting input.
    """

    last_agent_message: str | None = None
    response_id: str | None = None
    stopped_by: StopKind | None = None


@attrs.frozen(repr=False, eq=False)
class TokenUsage(Value):
    """Token counts, as Codex's ``TokenUsage``."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0


@attrs.frozen(repr=False, eq=False)
class TokenUsageInfo(Value):
    """Codex's ``TokenUsageInfo``: the session's running total, the last response's
    usage (its ``total_tokens`` is how full the context window is now), and the
    context window of the model that answered."""

    total_token_usage: TokenUsage
    last_token_usage: TokenUsage
    model_context_window: int | None = None


@EVENT_MSGS.register("token_count")
@attrs.frozen(repr=False, eq=False)
class TokenCount(Tagged):
    """Token usage of the response that just completed.

    The flat fields are that response's usage (older consumers read them);
    ``info`` is Codex's shape: the session's totals, the last usage and the
    model's context window. Null from older producers.
    """

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0
    info: TokenUsageInfo | None = None


@EVENT_MSGS.register("warning")
@attrs.frozen(repr=False, eq=False)
class WarningEvent(Tagged):
    """Something the user should know; work goes on."""

    message: str


@EVENT_MSGS.register("stream_error")
@attrs.frozen(repr=False, eq=False)
class StreamError(Tagged):
    """The model stream failed and is being retried (``attempt`` of ``max_attempts``)."""

    message: str
    attempt: int
    max_attempts: int


@EVENT_MSGS.register("error")
@attrs.frozen(repr=False, eq=False)
class ErrorEvent(Tagged):
    """Under a Task's id: the Task ended. Under another id: that submission was rejected.

    ``codex_error_info`` classifies the error as Codex's ``CodexErrorInfo`` does, where
    codexcore knows the class: ``context_window_exceeded`` when the conversation no
    longer fits the model's context window, even after compacting it.
    """

    message: str
    code: str
    codex_error_info: str | None = None


@EVENT_MSGS.register("turn_aborted")
@attrs.frozen(repr=False, eq=False)
class TurnAborted(Tagged):
    """Terminal: the Task was stopped before it finished."""

    reason: AbortReason


@EVENT_MSGS.register("submission_ack")
@attrs.frozen(repr=False, eq=False)
class SubmissionAck(Tagged):
    """The submission ``id`` was accepted; ``duplicate`` when it had been before.

    Sent only by engines that acknowledge submissions (the socket and stdio
    servers turn this on): a client may resend anything not acknowledged,
    under the same id, and it will not run twice.
    """

    id: str
    duplicate: bool


@attrs.frozen(repr=False, eq=False)
class SessionSummary(Value):
    """One recorded session, as ``session_list`` shows it."""

    session_id: str
    created_at: str
    updated_at: str
    cwd: str
    first_user_message: str | None
    last_user_message: str | None
    message_count: int
    path: str
    forked_from: str | None = None
    agent_id: str | None = None
    """The session's agent (stable across restarts and resumes); None in rollouts
    written before agent ids were recorded."""


@EVENT_MSGS.register("session_list")
@attrs.frozen(repr=False, eq=False)
class SessionList(Tagged):
    """The answer to ``list_sessions``, newest first."""

    sessions: tuple[SessionSummary, ...]


@EVENT_MSGS.register("session_history")
@attrs.frozen(repr=False, eq=False)
class SessionHistory(Tagged):
    """The answer to ``get_history``: recorded events ``offset`` to ``offset + len(events)``
    of ``total``, each with the id and seq it had when it was sent."""

    session_id: str
    offset: int
    total: int
    events: tuple[Event, ...]


@EVENT_MSGS.register("shutdown_complete")
@attrs.frozen(repr=False, eq=False)
class ShutdownComplete(Tagged):
    """The engine released everything; this is the last event of the stream."""


EventMsg = Annotated[
    SessionConfigured
    | TaskStarted
    | UserMessage
    | AgentMessage
    | AgentMessageDelta
    | AgentReasoning
    | AgentReasoningDelta
    | ExecApprovalRequest
    | ExecCommandBegin
    | ExecCommandOutputDelta
    | ExecCommandEnd
    | ApplyPatchApprovalRequest
    | PatchApplyBegin
    | PatchApplyEnd
    | TurnDiff
    | TurnComplete
    | TaskComplete
    | TokenCount
    | WarningEvent
    | StreamError
    | ErrorEvent
    | TurnAborted
    | SubmissionAck
    | SessionList
    | SessionHistory
    | ContextCompactionStarted
    | ContextCompacted
    | McpStartupUpdate
    | McpStartupComplete
    | McpToolCallBegin
    | McpToolCallEnd
    | McpListToolsResponse
    | PlanUpdate
    | ViewImageToolCall
    | ListSkillsResponse
    | RequestUserInput
    | DynamicToolCallRequest
    | ShutdownComplete,
    EVENT_MSGS,
]

TERMINAL_EVENT_TYPES = frozenset({"task_complete", "turn_aborted", "error"})


@attrs.frozen(repr=False, eq=False)
class Event(Value):
    """What the engine reports (the envelope of every EventMsg).

    ``id`` is the id of the submission the event belongs to (for a Task's
    events, the submission that started it). ``seq`` counts the Session's
    events from 0 with no gaps, so a UI can order, deduplicate and resume.
    It lives here rather than beside Submission because ``session_history``
    carries Events.
    """

    id: str
    seq: int
    msg: EventMsg
