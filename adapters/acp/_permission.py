"""A session's permission requests: the engine's approval requests asked of the editor.

An ``exec_approval_request`` or ``apply_patch_approval_request`` of the prompt
in flight becomes ``session/request_permission``: allow once / always, reject
once / always -> approved, approved_for_session, denied (remembered for that
command), denied; cancelled -> denied. An MCP call's (command ``["mcp",
server, tool, args]``) is asked as the tool call ``server.tool``: allow always
allows that tool, reject always rejects it, for the session. ``session/cancel``
withdraws the requests still waiting (:meth:`Permissions.withdraw`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import PermissionOption

from codexcore._logging import get_logger
from codexcore.protocol import (
    ApplyPatchApprovalRequest,
    ExecApproval,
    ExecApprovalRequest,
    PatchApproval,
    ReviewDecision,
)

from ._map import Update

if TYPE_CHECKING:
    from ._session import AcpSession

log = get_logger(__name__)

PERMISSION_OPTIONS = (
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Allow for this session", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(
        option_id="reject_always", name="Reject for this session", kind="reject_always"
    ),
)
DECISIONS: dict[str | None, tuple[ReviewDecision, str | None]] = {
    "allow_once": ("approved", None),
    "allow_always": ("approved_for_session", None),
    "reject_once": ("denied", "the user rejected it in the editor"),
    "reject_always": ("denied", "the user rejected it in the editor, for the rest of the session"),
    None: ("denied", "the permission request was cancelled, so it was not allowed"),
}
"""Permission option (None: cancelled) -> the approval decision and what the model is told."""


MCP_PERMISSION_OPTIONS = (
    PERMISSION_OPTIONS[0],
    PermissionOption(
        option_id="allow_always", name="Allow this tool for this session", kind="allow_always"
    ),
    PERMISSION_OPTIONS[2],
    PermissionOption(
        option_id="reject_always", name="Reject this tool for this session", kind="reject_always"
    ),
)
"""The options of an MCP call's permission request: "always" covers the tool, whatever
its arguments (the engine approves that tool for the session)."""

ApprovalRequest = ExecApprovalRequest | ApplyPatchApprovalRequest


class Permissions:
    """One session's permission requests: those waiting on the editor, and what the
    user rejected for the rest of the session."""

    def __init__(self, session: AcpSession) -> None:
        self.session = session
        self.asking: set[asyncio.Task[None]] = set()
        self.rejected: set[tuple[str, ...]] = set()

    async def request(self, msg: ApprovalRequest) -> None:
        """Show the call, then refuse it at once if rejected always, else ask the
        editor in a task of its own (the pump goes on meanwhile)."""
        session = self.session
        for update in session.mapper.updates(msg):
            await session.send(update)
        command = self._rejection_key(msg)
        if command is not None and command in self.rejected:
            why = "rejected earlier in this session (reject always)"
            await session.send(session.mapper.refused_call(msg.call_id, why))
            await self._decide(
                msg, "denied", f"the user rejected this command for the session: {why}"
            )
            return
        task = asyncio.create_task(self._ask(msg, command))
        self.asking.add(task)
        task.add_done_callback(self.asking.discard)

    def withdraw(self) -> None:
        """Cancel every request still waiting on the editor."""
        for task in list(self.asking):
            task.cancel()

    def _rejection_key(self, msg: ApprovalRequest) -> tuple[str, ...] | None:
        """What "reject always" remembers: the command, or an MCP call's tool."""
        if not isinstance(msg, ExecApprovalRequest):
            return None
        called = self.session.mapper.mcp_call_of(msg.command)
        return ("mcp", called[0], called[1]) if called else tuple(msg.command)

    async def _ask(self, msg: ApprovalRequest, command: Any) -> None:
        session = self.session
        mapper = session.mapper
        tool_call = mapper.permission_view(msg.call_id)
        is_mcp = isinstance(msg, ExecApprovalRequest) and mapper.mcp_call_of(msg.command)
        options = MCP_PERMISSION_OPTIONS if is_mcp else PERMISSION_OPTIONS
        choice: str | None = None
        try:
            response = await session.agent.conn.request_permission(
                session_id=session.id, tool_call=tool_call, options=list(options)
            )
            outcome = response.outcome
            choice = outcome.option_id if outcome.outcome == "selected" else None
        except asyncio.CancelledError:
            # session/cancel: the interrupt that follows answers the engine.
            await self._send_quietly(mapper.refused_call(msg.call_id, "cancelled"))
            return
        except (RequestError, ConnectionError) as exc:
            log.warning("permission request failed", error=str(exc))
        decision, reason = DECISIONS.get(choice, DECISIONS[None])
        if choice == "reject_always" and command is not None:
            self.rejected.add(command)
        if decision == "denied":
            await self._send_quietly(mapper.refused_call(msg.call_id, f"not run: {reason}"))
        await self._decide(msg, decision, reason)

    async def _decide(
        self, msg: ApprovalRequest, decision: ReviewDecision, reason: str | None
    ) -> None:
        answer = ExecApproval if isinstance(msg, ExecApprovalRequest) else PatchApproval
        await self.session.submit(answer(msg.call_id, decision, reason))

    async def _send_quietly(self, update: Update) -> None:
        try:
            await self.session.send(update)
        except (ConnectionError, RequestError) as exc:
            log.warning("could not tell the editor", error=str(exc))
