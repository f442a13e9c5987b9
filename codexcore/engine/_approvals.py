"""When to ask the user, and what the Session remembers of their answers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..protocol import ApprovalPolicy, ReviewDecision


def exec_needs_approval(
    policy: ApprovalPolicy, *, known_safe: bool, escalation_requested: bool, sandboxed: bool
) -> bool:
    """Whether a command must wait for ``exec_approval`` before it runs.

    Under ``on-failure`` a confined command runs without asking (the user is
    asked only if the sandbox makes it fail); with no confinement to lean on,
    ``on-failure`` asks like ``untrusted`` rather than claim a safety that is
    not there.
    """
    if policy == "never":
        return False
    if policy == "on-request":
        return escalation_requested
    if policy == "on-failure" and sandboxed:
        return False
    return not known_safe


class TaskAborted(Exception):
    """Raised inside a Task when the user answers an approval with ``abort``."""


class Approvals:
    """Pending approval requests of the running Task, and the Session's grants.

    A request is a future keyed by its call_id; ``interrupt`` drops them all.
    """

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[ReviewDecision]] = {}
        self._approved_commands: set[tuple[tuple[str, ...], str]] = set()
        self.approved_paths: set[str] = set()

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
