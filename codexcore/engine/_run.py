"""One Task, start to end: what ``Codex.run`` and ``CodexThread.run`` share.

The event stream (``events()``, iterating a ``CodexThread``) goes on for the
engine's whole life; ``run`` submits one Task, reads the stream until that
Task's terminal event, answers the approval requests it meets, and returns a
:class:`TaskResult`.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ..protocol import (
    TERMINAL_EVENT_TYPES,
    ApplyPatchApprovalRequest,
    Event,
    ExecApproval,
    ExecApprovalRequest,
    Op,
    PatchApproval,
    ReviewDecision,
    TaskComplete,
    TextInput,
    UserInput,
    UserTurn,
)

ApprovalRequest = ExecApprovalRequest | ApplyPatchApprovalRequest
Approver = Callable[[ApprovalRequest], ReviewDecision]
"""Decides an approval request (a command or a patch) met during ``run``."""
TaskInput = str | UserInput | UserTurn
"""What ``run`` takes: a prompt, or the Op that starts the Task."""


@attrs.frozen
class TaskResult:
    """One Task's outcome: ``id`` is its submission id, ``events`` every event read
    while it ran (its own, under ``id``, and any others, in order), ``terminal``
    the one that ended it (``task_complete``, ``turn_aborted`` or ``error``)."""

    id: str
    events: tuple[Event, ...]
    terminal: Event

    @property
    def completed(self) -> bool:
        """Whether the Task finished (``task_complete``) rather than aborting or failing."""
        return isinstance(self.terminal.msg, TaskComplete)

    @property
    def final_message(self) -> str | None:
        """The Task's last agent message (None if it had none or did not complete)."""
        msg = self.terminal.msg
        return msg.last_agent_message if isinstance(msg, TaskComplete) else None


def task_op(task: TaskInput) -> Op:
    """The Op that starts the Task: a prompt becomes a ``UserInput`` of its text."""
    if isinstance(task, str):
        return UserInput((TextInput(task),))
    if isinstance(task, UserInput | UserTurn):
        return task
    raise TypeError(f"run() takes a prompt, a UserInput or a UserTurn, not {type(task).__name__}")


def answer(event: Event, sub_id: str, approve: Approver | None) -> Op | None:
    """The answer to an approval request of the Task ``sub_id`` (denied without ``approve``)."""
    msg = event.msg
    if event.id != sub_id or not isinstance(msg, ApprovalRequest):
        return None
    decision: ReviewDecision = "denied" if approve is None else approve(msg)
    if isinstance(msg, ExecApprovalRequest):
        return ExecApproval(msg.call_id, decision)
    return PatchApproval(msg.call_id, decision)


def ends(event: Event, sub_id: str) -> bool:
    """Whether ``event`` is the terminal event of the Task ``sub_id``."""
    return event.id == sub_id and event.msg.TYPE in TERMINAL_EVENT_TYPES
