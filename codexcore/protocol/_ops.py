"""Ops: the payloads a UI puts on the submission queue.

Like Codex's ``Op`` enum this union is open: variants are added over time, and
a wire name, once published, is never renamed.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from ._ask_user import UserInputAnswer
from ._compaction import Compact
from ._dynamic_tools import DynamicToolResponse, DynamicToolSpec
from ._mcp import JsonValue, ListMcpTools
from ._skills import ListSkills
from ._types import (
    ApprovalPolicy,
    HistoryMode,
    InputItem,
    ReasoningEffort,
    ReasoningSummary,
    ReviewDecision,
    SandboxPolicy,
)
from ._wire import OPS, Tagged


@OPS.register("configure_session")
@attrs.frozen(repr=False, eq=False)
class ConfigureSession(Tagged):
    """Create the Session, or reconfigure it (aborting a running Task).

    A field left out (``None``) keeps the Session's current value, or the
    engine's default for a new Session. ``model_supports_reasoning_summaries``
    overrides the model catalogue's word on whether the model takes reasoning
    options. ``ask_user`` true says the UI can answer the model's questions:
    the model is offered the ``request_user_input`` tool (see
    ``request_user_input``); a UI that cannot answer leaves it out (false).
    ``dynamic_tools`` are the client's own tools, offered to the model beside
    the others and answered by the client (see ``dynamic_tool_call_request``);
    a name another tool has is answered by ``error`` (code ``tool_name_taken``)
    and nothing changes. ``dynamic_tool_timeout_ms`` is how long a call of one
    waits for its answer (default 300000, five minutes) before it is closed with
    an error output and the Task goes on. Answered by ``session_configured``.
    """

    model: str | None = None
    instructions: str | None = None
    cwd: str | None = None
    approval_policy: ApprovalPolicy | None = None
    sandbox_policy: SandboxPolicy | None = None
    history_mode: HistoryMode | None = None
    reasoning_effort: ReasoningEffort | None = None
    base_url: str | None = None
    model_supports_reasoning_summaries: bool | None = None
    reasoning_summary: ReasoningSummary | None = None
    ask_user: bool | None = None
    dynamic_tools: tuple[DynamicToolSpec, ...] | None = None
    dynamic_tool_timeout_ms: int | None = None


@OPS.register("user_input")
@attrs.frozen(repr=False, eq=False)
class UserInput(Tagged):
    """Start a Task (replacing a running one).

    ``last_response_id`` forks the conversation from that ``turn_complete``
    bookmark instead of continuing from the latest response. ``output_schema``
    (Codex's ``final_output_json_schema``), a JSON Schema whose root is an
    object, constrains the Task's final answer: every request of the Task asks
    the model for structured output under it, and ``task_complete``'s
    ``last_agent_message`` is that JSON. One that is no object schema is
    answered by ``error`` (code ``bad_output_schema``) and no Task starts.
    """

    items: tuple[InputItem, ...]
    last_response_id: str | None = None
    output_schema: JsonValue = None


@OPS.register("user_turn")
@attrs.frozen(repr=False, eq=False)
class UserTurn(Tagged):
    """Start a Task, as ``user_input``, under per-turn settings (Codex's ``UserTurn``).

    The settings are those of ``override_turn_context`` (each optional; one left
    out keeps its value), applied first and kept for later Tasks. A bad one is
    answered by ``error`` naming the field, and then nothing changes and no
    Task starts. ``output_schema`` constrains the Task's final answer, as
    ``user_input``'s does.
    """

    items: tuple[InputItem, ...]
    cwd: str | None = None
    approval_policy: ApprovalPolicy | None = None
    sandbox_policy: SandboxPolicy | None = None
    model: str | None = None
    effort: ReasoningEffort | None = None
    summary: ReasoningSummary | None = None
    output_schema: JsonValue = None


@OPS.register("override_turn_context")
@attrs.frozen(repr=False, eq=False)
class OverrideTurnContext(Tagged):
    """Change the per-turn settings from the next model request on (Codex's
    ``OverrideTurnContext``); starts no Turn and aborts nothing.

    Every field is optional: one left out keeps its value. A running Task picks
    the new settings up at its next request; otherwise the next Task starts
    with them. A relative ``cwd`` is taken from the current one and must be a
    directory; ``model`` must not be blank (a model the catalogue does not know
    works with conservative limits and one ``warning``). A bad value is answered
    by ``error`` (code ``bad_turn_context``) whose message names the field, and
    nothing changes. A change of ``cwd`` or a policy reaches the model as a short
    ``<environment_context>`` update with its next request. Success sends no
    event (as in Codex); with no Session yet, one is created with these
    settings and announced by ``session_configured``. ``dynamic_tools`` replaces
    the client's tools (see ``configure_session``; ``[]`` withdraws them all).
    """

    cwd: str | None = None
    approval_policy: ApprovalPolicy | None = None
    sandbox_policy: SandboxPolicy | None = None
    model: str | None = None
    effort: ReasoningEffort | None = None
    summary: ReasoningSummary | None = None
    dynamic_tools: tuple[DynamicToolSpec, ...] | None = None


@OPS.register("inject_input")
@attrs.frozen(repr=False, eq=False)
class InjectInput(Tagged):
    """Add input to the running Task's next model request, before any other input.

    When no Task runs, ``start`` says what happens: true (the default) starts a
    Task with it; false keeps it for the next Task, whose first request carries
    it before that Task's own input.
    """

    items: tuple[InputItem, ...]
    start: bool = True


@OPS.register("interrupt")
@attrs.frozen(repr=False, eq=False)
class Interrupt(Tagged):
    """Stop the running Task now: the stream is cancelled and commands are killed.

    The Task ends with ``turn_aborted {reason: interrupted}``. Commands the user runs
    with ``run_user_shell_command`` are killed too, Task or not. Otherwise, idle:
    nothing happens.
    For an end that lets the current Turn finish, see ``stop``.
    """


@OPS.register("run_user_shell_command")
@attrs.frozen(repr=False, eq=False)
class RunUserShellCommand(Tagged):
    """Run ``command`` in the user's shell (``$SHELL -lc``), as the user: no approval.

    It runs under the Session's sandbox policy, beside a running Task without
    disturbing it, and streams ``exec_command_begin``, ``exec_command_output_delta``
    and ``exec_command_end`` with ``source: "user_shell"`` under this submission's
    id. ``interrupt`` kills it (and ``exec_command_end`` says exit code -1). The
    command and its output are recorded for the model: with the running Task's
    next request, else with the next Task's first.

    Beyond Codex's op: ``timeout_ms`` (default one hour, Codex's own bound) kills
    it after that long (``timed_out``); ``cwd`` (default the Session's cwd; a
    relative one is taken from there) must be a directory inside the Session's
    cwd, symlinks resolved, else the op is answered by ``error`` with code
    ``bad_cwd`` and nothing runs. ``record`` false keeps the command and its
    output out of what the model is sent, for a UI that hands the result to
    the model itself (the Codelia TUI adds its own ``<shell_result>`` block).
    ``pty`` true runs it in a terminal of its own (a PTY, its controlling
    terminal; stdout and stderr merged into ``stdout`` deltas), to which
    ``write_pty`` writes while it runs; ``exec_command_begin`` says ``pty: true``.
    """

    command: str
    timeout_ms: int | None = None
    cwd: str | None = None
    record: bool = True
    pty: bool = False


@OPS.register("write_pty")
@attrs.frozen(repr=False, eq=False)
class WritePty(Tagged):
    """Write ``data`` to the terminal of a command running in a PTY (what a user would
    type): the one whose ``exec_command_begin`` has this ``call_id``, or the latest
    such command when it is null. None runs: ``error`` with code ``no_terminal``."""

    data: str
    call_id: str | None = None


@OPS.register("stop")
@attrs.frozen(repr=False, eq=False)
class Stop(Tagged):
    """End the running Task gracefully, after its current Turn.

    The Turn finishes: the model's response streams to its end and every call it
    made runs (or, if it needs an approval, is answered as not run) and is
    recorded. Then no further request goes to the model, and the Task ends with
    ``task_complete {stopped_by: "stop"}``. Input injected after a ``stop`` waits
    for the next Task's first request (a ``warning`` under the input's id says so).
    ``interrupt`` still ends the Task at once. Idle: nothing happens (no event).
    """


@OPS.register("checkpoint")
@attrs.frozen(repr=False, eq=False)
class Checkpoint(Tagged):
    """Pause the running Task after its current Turn, until the next input.

    As ``stop``, but the Task ends with ``task_complete {stopped_by: "checkpoint"}``,
    and input injected before the Turn ends lifts the pause (the Task goes on with
    it). The rollout is written as the session goes, so once that ``task_complete``
    is read the file holds everything up to and including it. Idle: nothing
    happens (no event).
    """


@OPS.register("exec_approval")
@attrs.frozen(repr=False, eq=False)
class ExecApproval(Tagged):
    """Answer an ``exec_approval_request``; ``id`` is the request's ``call_id``.

    ``reason`` is the user's own words. With ``denied`` it is what the model is
    told about the call (its output); with ``abort`` it is the aborted call's
    output, which the model sees with the next Task's first request. With an
    approval it is only recorded in the rollout.
    """

    id: str
    decision: ReviewDecision
    reason: str | None = None


@OPS.register("patch_approval")
@attrs.frozen(repr=False, eq=False)
class PatchApproval(Tagged):
    """Answer an ``apply_patch_approval_request``; ``id`` is its ``call_id``.

    ``reason`` works as in ``exec_approval``.
    """

    id: str
    decision: ReviewDecision
    reason: str | None = None


@OPS.register("list_sessions")
@attrs.frozen(repr=False, eq=False)
class ListSessions(Tagged):
    """List recorded sessions, most recently written first (only those started in ``cwd``).

    Answered by ``session_list``.
    """

    cwd: str | None = None
    limit: int = 50


@OPS.register("resume_session")
@attrs.frozen(repr=False, eq=False)
class ResumeSession(Tagged):
    """Make a recorded session the current one: new Turns continue its history.

    A running Task is aborted (``reconfigured``). Answered by ``session_configured``.
    """

    session_id: str


@OPS.register("fork_session")
@attrs.frozen(repr=False, eq=False)
class ForkSession(Tagged):
    """Start a new session whose history is a recorded session's up to ``response_id``.

    A running Task is aborted (``reconfigured``). Answered by ``session_configured``.
    """

    session_id: str
    response_id: str


@OPS.register("get_history")
@attrs.frozen(repr=False, eq=False)
class GetHistory(Tagged):
    """The recorded events of a session (the current one when ``session_id`` is null),
    a page at a time. Answered by ``session_history``."""

    session_id: str | None = None
    offset: int = 0
    limit: int = 1000


@OPS.register("shutdown")
@attrs.frozen(repr=False, eq=False)
class Shutdown(Tagged):
    """Abort any Task, release everything, answer ``shutdown_complete`` and end the stream."""


Op = Annotated[
    ConfigureSession
    | UserInput
    | InjectInput
    | Interrupt
    | Stop
    | Checkpoint
    | ExecApproval
    | PatchApproval
    | ListSessions
    | ResumeSession
    | ForkSession
    | GetHistory
    | RunUserShellCommand
    | Shutdown
    | UserTurn
    | OverrideTurnContext
    | Compact
    | ListMcpTools
    | ListSkills
    | UserInputAnswer
    | DynamicToolResponse
    | WritePty,
    OPS,
]
