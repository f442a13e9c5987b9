"""When to ask the user, and what the Session remembers of their answers."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Sequence

from ..protocol import ApprovalPolicy, ReviewDecision


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


class TaskAborted(Exception):
    """Raised inside a Task when the user answers an approval with ``abort``."""


class Approvals:
    """Pending approval requests of the running Task, and the Session's grants.

    A request is a future keyed by its call_id; ``interrupt`` drops them all.
    """

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[ReviewDecision]] = {}
        self._approved_commands: set[tuple[tuple[str, ...], str]] = set()
        self._approved_files: set[str] = set()

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

    async def wait(self, call_id: str) -> ReviewDecision:
        """Wait for the user's decision on ``call_id`` (cancellable)."""
        future: asyncio.Future[ReviewDecision] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            return await future
        finally:
            self._pending.pop(call_id, None)

    def resolve(self, call_id: str, decision: ReviewDecision) -> bool:
        """Deliver a decision; False when no request with that call_id is waiting."""
        future = self._pending.get(call_id)
        if future is None or future.done():
            return False
        future.set_result(decision)
        return True

    def drop_pending(self) -> None:
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
