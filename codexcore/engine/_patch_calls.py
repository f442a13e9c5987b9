"""The ``apply_patch`` half of the tool router: plan a patch, decide whether it asks,
ask, apply it, and tell the model what happened.

The one decision to ask the user about a patch is :meth:`PatchCalls.needs_approval`
(commands have theirs in :func:`~._approvals.plan_exec`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

from ..protocol import (
    AddChange,
    ApplyPatchApprovalRequest,
    DeleteChange,
    EventMsg,
    FileChange,
    PatchApplyBegin,
    PatchApplyEnd,
    UpdateChange,
)
from ..tools import apply_patch as patches
from ..tools._patch_fs import MAX_PATCH_FILE_BYTES
from ..tools._read_only_subpaths import protected_part
from ..tools._safe_read import read_regular
from ..tools.sandbox import SandboxSpec
from ._approvals import Answer, Approvals, denial
from ._config import SessionConfig
from ._turn_diff import TurnDiffTracker

Emit = Callable[[EventMsg], Awaitable[None]]
Ask = Callable[[str, EventMsg], Awaitable[Answer]]


class PatchCalls:
    """The Task's patches: the router hands each ``apply_patch`` call to :meth:`run`."""

    def __init__(
        self,
        config: SessionConfig,
        spec: SandboxSpec,
        approvals: Approvals,
        emit: Emit,
        ask: Ask,
    ) -> None:
        """``ask`` sends an approval request and waits for the answer (the router's,
        which knows about stops and aborts)."""
        self._config = config
        self._spec = spec
        self._approvals = approvals
        self._emit = emit
        self._ask = ask

    async def run(self, call_id: str, text: str, cwd: str, diff: TurnDiffTracker) -> str:
        """Plan the patch, ask where the policy says so, apply it; the model's output."""
        try:
            edits = await asyncio.to_thread(_plan_patch, text, cwd)
        except patches.PatchError as exc:
            return f"error: patch not applied, nothing changed: {exc}"
        targets = patches.write_targets(edits)
        changes = _changes(edits)
        auto = not self.needs_approval(targets)
        if not auto:
            if self._config.approval_policy == "never":
                return self._never_asks(targets)
            answer = await self._ask_patch(call_id, changes, targets)
            if answer.decision == "denied":
                return denial("patch", answer)
        await self._emit(PatchApplyBegin(call_id, auto, changes))
        diff.before_patch(_baselines(edits))
        try:
            await asyncio.to_thread(patches.commit_edits, edits)
        except (patches.PatchError, OSError) as exc:
            await self._emit(PatchApplyEnd(call_id, "", str(exc), False))
            return f"error: patch not applied: {exc}"
        summary = patches.summarize(edits, self._config.cwd)
        await self._emit(PatchApplyEnd(call_id, summary, "", True))
        return summary

    def needs_approval(self, targets: list[tuple[str, str]]) -> bool:
        """``untrusted`` always asks; otherwise a patch goes ahead when every file it
        really writes or removes (the targets, symlinks resolved) is inside the
        writable roots, and not in one of their read-only subpaths (``.git``,
        ``.codexcore``), or was approved for the session. ``danger-full-access``
        protects nothing: its commands could write the same files unasked."""
        if self._config.approval_policy == "untrusted":
            return True
        if self._spec.mode == "danger-full-access":
            return False
        asking = self._outside(targets) + self._protected(targets)
        return bool(asking) and not self._approvals.is_patch_approved(t for _, t in asking)

    def _outside(self, targets: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (path, target) pairs whose target lies outside the writable roots."""
        roots = self.writable_roots()
        return [(path, t) for path, t in targets if not patches.is_target_writable(t, roots)]

    def _protected(self, targets: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (path, target) pairs that would change a read-only subpath of a writable
        root: the resolved target is judged, and the path as the patch spells it."""
        roots = self.writable_roots()
        return [
            (path, target)
            for path, target in targets
            if protected_part(target, roots) is not None or protected_part(path, roots) is not None
        ]

    def _never_asks(self, targets: list[tuple[str, str]]) -> str:
        """What the model is told when a patch needs the user and this session never asks."""
        protected = self._protected(targets)
        if protected:
            return (
                f"error: the patch changes {self._shown(protected)}: .git and .codexcore stay "
                "read-only inside the writable roots (git and codexcore run commands their "
                "config and hooks name), and this session never asks; nothing was changed"
            )
        return "error: the patch writes outside the writable roots and this session never asks"

    async def _ask_patch(
        self, call_id: str, changes: dict[str, FileChange], targets: list[tuple[str, str]]
    ) -> Answer:
        outside = self._outside(targets)
        # A path with two targets (written, then removed) shows the one outside.
        resolved = dict(targets) | dict(outside)
        reasons = [self._outside_reason(outside), self._protected_reason(targets)]
        reason = "; ".join(r for r in reasons if r) or None
        request = ApplyPatchApprovalRequest(call_id, changes, reason, None, resolved)
        answer = await self._ask(call_id, request)
        if answer.decision == "approved_for_session":
            self._approvals.approve_patch_for_session(t for _, t in targets)
        return answer

    def _outside_reason(self, outside: list[tuple[str, str]]) -> str | None:
        """Which paths lead outside the writable roots, and where: ``link -> /etc/x``."""
        if not outside:
            return None
        return "writes outside the writable roots: " + self._shown(outside)

    def _protected_reason(self, targets: list[tuple[str, str]]) -> str | None:
        protected = self._protected(targets)
        if not protected:
            return None
        return (
            f"changes {self._shown(protected)}, read-only inside the writable roots: "
            "git and codexcore run commands that their config and hooks name"
        )

    def _shown(self, pairs: list[tuple[str, str]]) -> str:
        """The paths as the user reads them, and where they lead: ``link -> /etc/x``."""
        cwd = self._config.cwd
        shown = {
            patches.display_path(path, cwd)
            if path == target
            else f"{patches.display_path(path, cwd)} -> {target}": None
            for path, target in pairs
        }
        return ", ".join(shown)

    def writable_roots(self) -> list[str]:
        """Where the session may write: the cwd and the writable roots (none when read-only)."""
        if self._spec.mode == "read-only":
            return []
        extra = [os.path.join(self._config.cwd, root) for root in self._spec.writable_roots]
        return [self._config.cwd, *extra]


def _plan_patch(text: str, cwd: str) -> list[patches.FileEdit]:
    return patches.plan_patch(patches.parse_patch(text), cwd)


def _changes(edits: list[patches.FileEdit]) -> dict[str, FileChange]:
    changes: dict[str, FileChange] = {}
    for edit in edits:
        if edit.kind == "add":
            changes[edit.path] = AddChange(edit.new_content or "")
        elif edit.kind == "delete":
            changes[edit.path] = DeleteChange(edit.old_content or "")
        else:
            changes[edit.path] = UpdateChange(edit.unified_diff, edit.move_path)
    return changes


def _baselines(edits: list[patches.FileEdit]) -> list[tuple[str, str | None]]:
    baselines: list[tuple[str, str | None]] = []
    for edit in edits:
        baselines.append((edit.path, edit.old_content))
        if edit.move_path is not None:
            baselines.append((edit.move_path, _read_or_none(edit.move_path)))
    return baselines


def _read_or_none(path: str) -> str | None:
    """A move target's text before the patch; None when absent, unreadable or not a
    regular file of at most the patch tool's limit."""
    try:
        return read_regular(path, MAX_PATCH_FILE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
