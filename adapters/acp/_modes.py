"""The ACP session modes: codexcore's approval presets, and what each one asks before.

Each mode is an approval policy and a sandbox mode (writable roots and network
access stay as configured); its description says what it asks before, as the
engine's rules (:func:`~codexcore.engine._approvals.plan_exec`, the patch and
MCP checks) make it. A configuration that matches no preset is a mode of its
own (:data:`CUSTOM_MODE`).
"""

from __future__ import annotations

import attrs
from acp.schema import SessionMode, SessionModeState

from codexcore.protocol import ApprovalPolicy, SandboxMode, SandboxPolicy


@attrs.frozen
class Mode:
    """An approval preset: a session mode the editor offers."""

    id: str
    name: str
    description: str
    approval_policy: ApprovalPolicy
    sandbox: SandboxMode


MODES = (
    Mode(
        "read-only",
        "Read only",
        "Commands run confined read-only without asking. Asks before every edit, "
        "before a command that would leave the sandbox, and before MCP tools that may "
        "change something.",
        "on-request",
        "read-only",
    ),
    Mode(
        "ask",
        "Ask",
        "Asks before every edit, every MCP tool call and every command not known to "
        "be read-only (ls, cat, grep... run without asking); what runs is confined to "
        "the workspace.",
        "untrusted",
        "workspace-write",
    ),
    Mode(
        "auto",
        "Auto",
        "Commands and edits in the workspace run without asking, commands confined to "
        "it. Asks before edits outside the workspace, before a command that would "
        "leave the sandbox, and before MCP tools that may change something.",
        "on-request",
        "workspace-write",
    ),
    Mode(
        "full-access",
        "Full access",
        "Never asks: commands, edits and MCP tools run unconfined, anywhere. Use with care.",
        "never",
        "danger-full-access",
    ),
)
MODES_BY_ID = {mode.id: mode for mode in MODES}
CUSTOM_MODE = "config"
"""The mode of a session whose configured policies match no preset."""


def mode_of(approval: ApprovalPolicy, sandbox: SandboxPolicy) -> str:
    """The preset id these policies are, else :data:`CUSTOM_MODE`."""
    for mode in MODES:
        if mode.approval_policy == approval and mode.sandbox == sandbox.type:
            return mode.id
    return CUSTOM_MODE


def mode_state(current: str, approval: ApprovalPolicy, sandbox: SandboxPolicy) -> SessionModeState:
    """The modes an editor shows; the configuration's own policies are a mode of their
    own when they match no preset (so switching away and back is possible)."""
    modes = [SessionMode(id=m.id, name=m.name, description=m.description) for m in MODES]
    if mode_of(approval, sandbox) == CUSTOM_MODE:
        what = f"approval {approval}, sandbox {sandbox.type}"
        modes.append(SessionMode(id=CUSTOM_MODE, name="config.toml", description=what))
    return SessionModeState(current_mode_id=current, available_modes=modes)


def policies_of(mode: Mode, base: SandboxPolicy) -> tuple[ApprovalPolicy, SandboxPolicy]:
    """The approval and sandbox policies of ``mode``; writable roots and network access
    stay as configured."""
    sandbox = attrs.evolve(base, type=mode.sandbox)
    return mode.approval_policy, sandbox
