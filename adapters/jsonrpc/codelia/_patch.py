"""``tool.call {name: "apply_patch", arguments: {patch}}``: the UI's user applies a patch.

The engine's rules for a patch, outside a Task: the patch (Codex's ``*** Begin
Patch`` format) is planned against the session's cwd; it goes ahead unasked when
every file it really writes (symlinks resolved) lies inside the writable roots
and outside their read-only subpaths (``.git``, ``.codexcore``), or the sandbox
is ``danger-full-access``; under the ``untrusted`` policy, or for any other
write, the UI is asked (``ui.confirm.request``, "Apply patch?"), and a session
that never asks (``never``) refuses it. A denial is the protocol's -32003 (user
cancelled) and nothing changes. Applied, the answer is ``{ok: true, result:
{summary, files}}``. As ``shell.exec``, nothing of it reaches the model or the
session's record: the user did it, not the model (a session-wide "don't ask
again" is the engine's, for the model's patches, and is not consulted).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.jsonrpc._errors import SERVER_ERROR, USER_CANCELLED
from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.protocol import SandboxPolicy

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext
    from codexcore.tools.apply_patch import FileEdit


@attrs.frozen
class PatchArguments:
    patch: str


@attrs.frozen
class _Rules:
    cwd: str
    approval_policy: str
    sandbox_policy: SandboxPolicy

    def roots(self) -> list[str]:
        if self.sandbox_policy.type == "read-only":
            return []
        extra = [os.path.join(self.cwd, root) for root in self.sandbox_policy.writable_roots]
        return [self.cwd, *extra]

    def asking(self, targets: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The writes the user must approve (all of them under ``untrusted``)."""
        from codexcore.tools import apply_patch as patches
        from codexcore.tools._read_only_subpaths import protected_part

        if self.approval_policy == "untrusted":
            return targets
        if self.sandbox_policy.type == "danger-full-access":
            return []
        roots = self.roots()
        return [
            (path, target)
            for path, target in targets
            if not patches.is_target_writable(target, roots)
            or protected_part(target, roots) is not None
            or protected_part(path, roots) is not None
        ]


async def apply_patch(ctx: RpcContext, arguments: PatchArguments) -> dict[str, Any]:
    from codexcore.tools import apply_patch as patches

    from ._runs import state_of

    state = state_of(ctx)
    await state.attachment()
    rules = _rules(ctx)
    try:
        edits = await asyncio.to_thread(_plan, arguments.patch, rules.cwd)
    except patches.PatchError as exc:
        raise RpcError(
            INVALID_PARAMS, f"Invalid params: params.arguments.patch: not applied: {exc}"
        ) from None
    targets = patches.write_targets(edits)
    asking = rules.asking(targets)
    if asking:
        if rules.approval_policy == "never":
            raise RpcError(
                SERVER_ERROR,
                "apply_patch: it writes where this session needs approval "
                f"({_shown(asking, rules.cwd)}), and this session never asks; nothing changed",
            )
        await _confirm(ctx, asking, rules)
    try:
        await asyncio.to_thread(patches.commit_edits, edits)
    except (patches.PatchError, OSError) as exc:
        raise RpcError(SERVER_ERROR, f"apply_patch: not applied: {exc}") from None
    summary = patches.summarize(edits, rules.cwd)
    files = list(dict.fromkeys(path for path, _ in targets))
    return {"ok": True, "result": {"summary": summary, "files": files}}


def _plan(text: str, cwd: str) -> list[FileEdit]:
    from codexcore.tools import apply_patch as patches

    return patches.plan_patch(patches.parse_patch(text), cwd)


def _rules(ctx: RpcContext) -> _Rules:
    """The session's cwd and policies (its latest ``session_configured``, else the
    configuration's)."""
    from ._runs import state_of

    configured = state_of(ctx).configured
    defaults = ctx.host.engine_config.session
    if configured is not None:
        return _Rules(configured.cwd, configured.approval_policy, configured.sandbox_policy)
    return _Rules(defaults.cwd, defaults.approval_policy, defaults.sandbox_policy)


async def _confirm(ctx: RpcContext, asking: list[tuple[str, str]], rules: _Rules) -> None:
    from codexcore.adapters.jsonrpc._outbox import ConnectionClosed

    if ctx.client_capabilities.get("supports_confirm") is False:
        raise RpcError(
            SERVER_ERROR, "apply_patch needs the user's approval, and this UI cannot confirm"
        )
    params = {
        "title": "Apply patch?",
        "message": _shown(asking, rules.cwd),
        "confirm_label": "Allow",
        "cancel_label": "Deny",
        "danger_level": "normal" if rules.approval_policy == "untrusted" else "danger",
        "allow_remember": False,
        "allow_reason": False,
    }
    try:
        answer = await ctx.request("ui.confirm.request", params)
    except ConnectionClosed:
        raise RpcError(SERVER_ERROR, "the UI left before confirming") from None
    except RpcError:
        answer = None
    if not (isinstance(answer, dict) and answer.get("ok") is True):
        raise RpcError(USER_CANCELLED, "user cancelled: the patch was not applied")


def _shown(pairs: list[tuple[str, str]], cwd: str) -> str:
    from codexcore.tools import apply_patch as patches

    return "\n".join(
        dict.fromkeys(
            patches.display_path(path, cwd)
            if path == target
            else f"{patches.display_path(path, cwd)} -> {target}"
            for path, target in pairs
        )
    )
