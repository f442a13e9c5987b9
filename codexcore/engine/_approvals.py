"""When to ask the user, and what the Session remembers of their answers."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..protocol import (
    ApprovalPolicy,
    DynamicToolResponse,
    RequestUserInput,
    RequestUserInputResponse,
    ReviewDecision,
)
from ..protocol._value import Value


class ExecPlan(enum.Enum):
    """What happens to a command before it runs."""

    RUN_CONFINED = "run confined"
    RUN = "run unconfined"
    ASK_THEN_CONFINED = "ask, then run confined"
    ASK_THEN_RUN = "ask, then run unconfined"
    REFUSE = "refuse"


def plan_exec(
    policy: ApprovalPolicy,
    *,
    confine: bool,
    can_confine: bool,
    known_safe: bool,
    escalation_requested: bool,
) -> ExecPlan:
    """Decide whether a command asks first and whether it runs in the sandbox.

    ``confine``: the sandbox policy wants confinement (not danger-full-access).
    ``can_confine``: bubblewrap works here. The rules, in order:

    - Escalation (the model asks to leave the sandbox) needs a person; under
      ``never`` there is none, so the command is refused.
    - Where confinement is wanted but impossible, nothing that is not known
      safe runs unasked; under ``never`` it is refused rather than run
      unconfined, so no confinement is ever claimed that is not there.
    - Otherwise ``untrusted`` asks for anything not known safe; ``on-request``,
      ``on-failure`` and ``never`` run confined without asking (``on-failure``
      asks afterwards if the sandbox made the command fail).
    - With no confinement wanted, ``untrusted`` and ``on-failure`` ask for
      anything not known safe; ``on-request`` and ``never`` do not ask.
    """
    if escalation_requested:
        return ExecPlan.REFUSE if policy == "never" else ExecPlan.ASK_THEN_RUN
    if confine and not can_confine:
        if known_safe:
            return ExecPlan.RUN
        return ExecPlan.REFUSE if policy == "never" else ExecPlan.ASK_THEN_RUN
    if confine:
        if policy == "untrusted" and not known_safe:
            return ExecPlan.ASK_THEN_CONFINED
        return ExecPlan.RUN_CONFINED
    if policy in ("untrusted", "on-failure") and not known_safe:
        return ExecPlan.ASK_THEN_RUN
    return ExecPlan.RUN


def mcp_call_needs_approval(policy: ApprovalPolicy, annotations: Mapping[str, Any]) -> bool:
    """Whether the model's call of an MCP tool asks the user first.

    ``never`` never asks and ``untrusted`` always does. Otherwise (``on-request``,
    ``on-failure``) it follows Codex from the tool's MCP annotations, missing hints
    taking MCP's defaults (destructive, open-world): a destructive tool asks; a
    read-only one runs unasked; any other asks unless it says it is neither
    destructive nor open-world.
    """
    if policy in ("never", "untrusted"):
        return policy == "untrusted"
    if annotations.get("destructiveHint") is True:
        return True
    if annotations.get("readOnlyHint") is True:
        return False
    return annotations.get("destructiveHint") is not False or (
        annotations.get("openWorldHint") is not False
    )


@attrs.frozen(repr=False, eq=False)
class Answer(Value):
    """The user's answer to an approval request, with their reason if they gave one."""

    decision: ReviewDecision
    reason: str | None = None


DENIED = "error: the user denied this; do not try it again the same way"


def denial(what: str, answer: Answer) -> str:
    """What the model is told of a denied call: the user's own words when they gave any."""
    if answer.reason and answer.reason.strip():
        return f"error: the user denied this {what}: {answer.reason.strip()}"
    return DENIED


class CallInterrupted(asyncio.CancelledError):
    """The Task was cancelled while a call ran: ``output`` is what the model is told
    of it (what the command printed, that it was stopped, how it ended), instead of
    saying it never ran."""

    def __init__(self, output: str) -> None:
        super().__init__("the call was interrupted")
        self.output = output


class TaskAborted(Exception):
    """Raised inside a Task when the user answers an approval with ``abort``."""

    def __init__(self, call_id: str, reason: str | None = None) -> None:
        super().__init__(call_id)
        self.call_id, self.reason = call_id, reason


class ApprovalWithdrawn(Exception):
    """The Task is stopping: a call that needs approval is not asked about, or no
    longer waits for an answer, and does not run."""


Reply = RequestUserInputResponse | None
"""The user's answer to the model's question; None when they declined to answer."""


class Approvals:
    """Pending approval requests of the running Task, and the Session's grants.

    A request is a future keyed by its call_id; ``interrupt`` drops them all,
    ``stop`` and ``checkpoint`` withdraw them. The model's questions to the user
    (``request_user_input``) wait here the same way, beside the approvals, and so
    do the calls of the client's own tools (``dynamic_tool_call_request``), which
    ``interrupt`` drops but ``stop`` leaves running (a call, not a question).
    """

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[Answer]] = {}
        self._questions: dict[str, tuple[asyncio.Future[Reply], RequestUserInput]] = {}
        self._tool_calls: dict[str, asyncio.Future[DynamicToolResponse]] = {}
        self._approved_commands: set[tuple[tuple[str, ...], str]] = set()
        self._approved_files: set[str] = set()
        self._approved_mcp_tools: set[tuple[str, str]] = set()

    def is_mcp_tool_approved(self, server: str, tool: str) -> bool:
        return (server, tool) in self._approved_mcp_tools

    def approve_mcp_tool_for_session(self, server: str, tool: str) -> None:
        self._approved_mcp_tools.add((server, tool))

    def is_patch_approved(self, targets: Iterable[str]) -> bool:
        """Whether every resolved target was in a patch approved for the session.

        Targets are real paths (``FileEdit.target``): a grant is for the file a write
        lands on, so a new symlink, or an old one re-pointed, leads to a file not
        granted. No directory is ever granted.
        """
        return all(target in self._approved_files for target in targets)

    def approve_patch_for_session(self, targets: Iterable[str]) -> None:
        self._approved_files.update(targets)

    def is_command_approved(self, argv: Sequence[str], cwd: str) -> bool:
        return (tuple(argv), cwd) in self._approved_commands

    def approve_command_for_session(self, argv: Sequence[str], cwd: str) -> None:
        self._approved_commands.add((tuple(argv), cwd))

    async def wait(self, call_id: str) -> Answer:
        """Wait for the user's answer on ``call_id`` (cancellable); raises
        :class:`ApprovalWithdrawn` if the request is withdrawn meanwhile."""
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            return await future
        finally:
            self._pending.pop(call_id, None)

    def resolve(self, call_id: str, answer: Answer) -> bool:
        """Deliver an answer; False when no request with that call_id is waiting."""
        future = self._pending.get(call_id)
        if future is None or future.done():
            return False
        future.set_result(answer)
        return True

    async def wait_for_reply(self, request: RequestUserInput) -> Reply:
        """Wait for the user's reply to the model's question (cancellable); raises
        :class:`ApprovalWithdrawn` if the question is withdrawn meanwhile."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._questions[request.call_id] = (future, request)
        try:
            return await future
        finally:
            self._questions.pop(request.call_id, None)

    def question(self, call_id: str) -> RequestUserInput | None:
        """The question waiting under ``call_id``, if one is."""
        waiting = self._questions.get(call_id)
        return None if waiting is None or waiting[0].done() else waiting[1]

    def reply(self, call_id: str, reply: Reply) -> bool:
        """Deliver a reply; False when no question with that call_id is waiting."""
        waiting = self._questions.get(call_id)
        if waiting is None or waiting[0].done():
            return False
        waiting[0].set_result(reply)
        return True

    def expect_tool_answer(self, call_id: str) -> asyncio.Future[DynamicToolResponse]:
        """The future a client's answer to ``call_id`` settles; made before the request
        is sent, so an answer that comes at once finds it. :meth:`forget_tool_call`
        once done with it."""
        future: asyncio.Future[DynamicToolResponse] = asyncio.get_running_loop().create_future()
        self._tool_calls[call_id] = future
        return future

    def forget_tool_call(self, call_id: str) -> None:
        self._tool_calls.pop(call_id, None)

    def answer_tool(self, response: DynamicToolResponse) -> bool:
        """Deliver a client's answer; False when no call with its call_id is waiting."""
        future = self._tool_calls.get(response.call_id)
        if future is None or future.done():
            return False
        future.set_result(response)
        return True

    def _waiting(self) -> list[tuple[str, asyncio.Future[Any]]]:
        questions = [(call_id, future) for call_id, (future, _) in self._questions.items()]
        return [*self._pending.items(), *questions]

    def withdraw_pending(self) -> None:
        """Answer every waiting request with :class:`ApprovalWithdrawn`: the Task
        goes on to the end of its Turn without them."""
        for call_id, future in self._waiting():
            if not future.done():
                future.set_exception(ApprovalWithdrawn(call_id))
                # Marked as seen: a waiter cancelled before it reads it (an interrupt
                # right after the stop) must not leave asyncio to log it as lost.
                future.exception()

    def drop_pending(self) -> None:
        for _, future in [*self._waiting(), *self._tool_calls.items()]:
            future.cancel()
        self._pending.clear()
        self._questions.clear()
        self._tool_calls.clear()
