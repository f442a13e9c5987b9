"""Threads as the app-server protocol shows them, from live threads and recorded sessions:
the ``Thread`` object, ``thread/list``, the turns of ``thread/read``, ``thread/archive``.

A recorded session is its rollout file; archiving moves it under
``$CODEXCORE_HOME/archived/sessions`` (as Codex moves it to ``archived_sessions``), so
listing and resuming no longer find it and ``thread/list {archived: true}`` does.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path
from typing import Any

import attrs

from codexcore import __version__
from codexcore.engine import (
    UnknownSession,
    default_home,
    find_rollout,
    list_sessions,
    read_session_events,
)
from codexcore.protocol import (
    Event,
    SandboxPolicy,
    SessionConfigured,
    SessionSummary,
    TurnComplete,
    UserMessage,
)

from ._items import TurnMapper
from ._wire import invalid_params

ARCHIVE = "archived"
_APPROVAL = {"on-failure": "on-request"}  # Codex's protocol no longer has on-failure
_SANDBOX = {
    "read-only": "readOnly",
    "workspace-write": "workspaceWrite",
    "danger-full-access": "dangerFullAccess",
}


def cli_version() -> str:
    return f"codexcore {__version__}"


def home_of(configured_home: str | None) -> Path:
    return Path(configured_home) if configured_home else default_home()


def thread_wire(
    thread_id: str,
    *,
    cwd: str,
    preview: str,
    created_at: int,
    updated_at: int,
    status: str = "idle",
    turns: list[dict[str, Any]] | None = None,
    model: str | None = None,
    forked_from: str | None = None,
    path: str | None = None,
) -> dict[str, Any]:
    return {
        "id": thread_id,
        "sessionId": thread_id,
        "forkedFromId": forked_from,
        "preview": preview,
        "ephemeral": False,
        "model": model,
        "modelProvider": "openai",
        "createdAt": created_at,
        "updatedAt": updated_at,
        "status": {"type": "active", "activeFlags": []} if status == "active" else {"type": status},
        "path": path,
        "cwd": cwd,
        "cliVersion": cli_version(),
        "source": "appServer",
        "projectId": None,
        "name": None,
        "turns": turns or [],
    }


def sandbox_wire(policy: SandboxPolicy) -> dict[str, Any]:
    kind = _SANDBOX[policy.type]
    if kind == "dangerFullAccess":
        return {"type": kind}
    if kind == "readOnly":
        return {"type": kind, "networkAccess": policy.network_access}
    return {
        "type": kind,
        "writableRoots": list(policy.writable_roots),
        "networkAccess": policy.network_access,
        "excludeTmpdirEnvVar": False,
        "excludeSlashTmp": False,
    }


def session_fields(configured: SessionConfigured) -> dict[str, Any]:
    """What thread/start, resume and fork answer beside the thread."""
    return {
        "model": configured.model,
        "modelProvider": "openai",
        "serviceTier": None,
        "cwd": configured.cwd,
        "approvalPolicy": _APPROVAL.get(configured.approval_policy, configured.approval_policy),
        "approvalsReviewer": "user",
        "sandbox": sandbox_wire(configured.sandbox_policy),
        "reasoningEffort": configured.reasoning_effort,
    }


def _seconds(iso: str) -> int:
    try:
        return int(datetime.datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return 0


def summary_wire(summary: SessionSummary, status: str) -> dict[str, Any]:
    return thread_wire(
        summary.session_id,
        cwd=summary.cwd,
        preview=summary.first_user_message or "",
        created_at=_seconds(summary.created_at),
        updated_at=_seconds(summary.updated_at),
        status=status,
        forked_from=summary.forked_from,
        path=summary.path,
    )


def list_threads(home: Path, *, archived: bool, limit: int, offset: int) -> list[SessionSummary]:
    root = home / ARCHIVE if archived else home
    found = list_sessions(root, limit=offset + limit + 1)
    return found[offset:]


def rollout_of(home: Path, thread_id: str) -> Path:
    """The thread's recorded session, or -32602 naming ``params.threadId``."""
    try:
        return find_rollout(home, thread_id)
    except UnknownSession:
        raise invalid_params("params.threadId", f"no thread {thread_id!r}") from None


def recorded_events(path: Path) -> list[Event]:
    return read_session_events(path)


def turns_of(thread_id: str, events: list[Event]) -> list[dict[str, Any]]:
    """A recorded session's turns, as the live mapper built them."""
    mapper = TurnMapper(thread_id, "")
    for event in events:
        mapper.feed(event)
    return [turn.wire() for turn in mapper.turns.values()]


def preview_of(events: list[Event]) -> str:
    for event in events:
        if isinstance(event.msg, UserMessage):
            return event.msg.message
    return ""


def last_response_id(events: list[Event]) -> str | None:
    for event in reversed(events):
        if isinstance(event.msg, TurnComplete) and event.msg.response_id:
            return event.msg.response_id
    return None


def archive(home: Path, path: Path) -> None:
    """Move a rollout under ``home/archived/sessions`` keeping its dated folders."""
    relative = path.relative_to(home / "sessions")
    target = home / ARCHIVE / "sessions" / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)


def platform() -> tuple[str, str]:
    """Codex's ``platformFamily`` and ``platformOs``."""
    return ("windows" if sys.platform == "win32" else "unix"), {
        "darwin": "macos",
        "win32": "windows",
    }.get(sys.platform, sys.platform)


def now_seconds() -> int:
    return int(datetime.datetime.now(datetime.UTC).timestamp())


def configured_of(events: list[Event]) -> SessionConfigured | None:
    """The session's configuration as last recorded."""
    for event in reversed(events):
        if isinstance(event.msg, SessionConfigured):
            return event.msg
    return None


def with_overrides(
    configured: SessionConfigured | None, overrides: dict[str, Any]
) -> SessionConfigured | None:
    """``configured`` as an ``override_turn_context`` of ``overrides`` leaves it."""
    if configured is None:
        return None
    fields = {
        "model": overrides.get("model", configured.model),
        "cwd": overrides.get("cwd", configured.cwd),
        "approval_policy": overrides.get("approval_policy", configured.approval_policy),
        "sandbox_policy": overrides.get("sandbox_policy", configured.sandbox_policy),
    }
    return attrs.evolve(configured, **fields)


def find_any(home: Path, thread_id: str) -> Path:
    """A thread's rollout, archived or not (-32602 naming ``params.threadId``)."""
    for root in (home, home / ARCHIVE):
        try:
            return find_rollout(root, thread_id)
        except UnknownSession:
            continue
    raise invalid_params("params.threadId", f"no thread {thread_id!r}")


def created_of(path: Path) -> int:
    try:
        return int(path.stat().st_ctime)
    except OSError:
        return 0


def updated_of(path: Path) -> int:
    try:
        return int(path.stat().st_mtime)
    except OSError:
        return 0
