"""A Session's life in the engine: made, announced, reconfigured, closed.

A new Session is recorded in a new rollout (or appended to a resumed one's)
unless the engine is ephemeral, and replaces the engine's previous Session,
whose shell commands and MCP servers end with it. ``session_configured``
announces it, saying what really confines commands (the sandbox is probed,
off the loop, only when a policy wants confinement); a new Session's MCP
servers start then. ``shutdown`` ends the last one with the engine.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from .._logging import get_logger
from ..protocol import (
    ConfigureSession,
    SessionConfigured,
    ShutdownComplete,
    Submission,
    TokenUsage,
    WarningEvent,
)
from ..tools._sandbox_status import SandboxStatus
from ._rollout import RolloutWriter, config_record, meta_record
from ._session import Session, new_agent_id

log = get_logger(__name__)

if TYPE_CHECKING:
    from ._codex import Codex
    from ._config import SessionConfig
    from ._history import History
    from ._rollout_lock import RolloutLock

UNCONFINED = SandboxStatus("none", "the sandbox policy is danger-full-access")


def _probe_sandbox() -> SandboxStatus:
    """:func:`~codexcore.tools.sandbox.probe_sandbox`: the sandbox helpers load only when
    a policy wants confinement (a ``danger-full-access`` session never loads them)."""
    from ..tools.sandbox import probe_sandbox

    return probe_sandbox()


async def probed_sandbox(session: Session) -> SandboxStatus:
    """The Session's sandbox, probed the first time it is asked for."""
    if session.sandbox is None:
        # Starts bwrap once per process (then cached): off the loop.
        session.sandbox = await asyncio.to_thread(_probe_sandbox)
    return session.sandbox


def unconfined_warning(reason: str | None) -> WarningEvent:
    """What a UI is told when a policy wants confinement and no sandbox is available."""
    return WarningEvent(
        f"commands cannot be confined ({reason}); every command that is not "
        "known to be safe will need approval"
    )


async def configure(codex: Codex, sub: Submission, _: object) -> None:
    """``configure_session``: its settings over the Session's (or the defaults)."""
    op = sub.op
    assert isinstance(op, ConfigureSession)
    config = codex._session_config().overlay(op)
    if codex._session is None:
        await open_session(codex, sub.id, config)
    else:
        codex._session.reconfigure(config)
        await announce_session(codex, sub.id)


async def open_session(codex: Codex, sub_id: str, config: SessionConfig) -> None:
    """A new Session with ``config`` becomes the engine's, announced under ``sub_id``."""
    codex._session = await new_session(codex, config)
    await announce_session(codex, sub_id)


async def new_session(
    codex: Codex,
    config: SessionConfig,
    *,
    session_id: str | None = None,
    history: History | None = None,
    forked_from: str | None = None,
    append_to: Path | None = None,
    lock: RolloutLock | None = None,
    token_total: TokenUsage | None = None,
    agent_id: str | None = None,
) -> Session:
    """A Session, recorded in a new rollout (or appended to ``append_to``, through
    ``lock`` when given, which it takes) unless the engine is ephemeral. A new
    rollout's file is created with the Session's first content: the forked
    branch, else its first Turn."""
    reserved, codex._first_session_id = codex._first_session_id, None
    session_id = session_id or reserved or str(uuid.uuid4())
    if agent_id is None:  # the first new Session's agent is the one announced
        agent_id = new_agent_id() if codex._session is not None else codex._first_agent_id
    rollout = None
    if not codex.config.ephemeral:
        rollout = _rollout(
            codex, config, session_id, agent_id, history, forked_from, append_to, lock
        )
    if codex._session is not None:
        await codex._session.stop_shells()
        await codex._session.stop_mcp()
        codex._session.close()
    return Session(
        config,
        codex._clients,
        session_id=session_id,
        history=history,
        rollout=rollout,
        home=str(codex._home()),
        project_doc_max_bytes=codex.config.project_doc_max_bytes,
        token_total=token_total,
        agent_id=agent_id,
    )


def _rollout(
    codex: Codex,
    config: SessionConfig,
    session_id: str,
    agent_id: str,
    history: History | None,
    forked_from: str | None,
    append_to: Path | None,
    lock: RolloutLock | None = None,
) -> RolloutWriter:
    """The new Session's rollout: ``append_to`` (a resumed one's) takes its settings;
    a new file takes its meta, its settings and the forked branch."""
    if append_to is not None:
        rollout = RolloutWriter(append_to, lock=lock)
        rollout.record(config_record(config))
        return rollout
    now = datetime.datetime.now(datetime.UTC)
    rollout = RolloutWriter.create(codex._home(), session_id, now)
    rollout.record(meta_record(session_id, now, config.cwd, forked_from, agent_id))
    rollout.record(config_record(config))
    if history is not None:
        for change in history.branch():
            rollout.record_change(*change)
    return rollout


async def announce_session(codex: Codex, sub_id: str) -> None:
    """``session_configured``, saying what really confines commands."""
    session = codex._require_session()
    c = session.config
    confining = c.sandbox_policy.type != "danger-full-access"
    sandbox = await probed_sandbox(session) if confining else UNCONFINED
    await codex._emit(
        sub_id,
        SessionConfigured(
            session.id,
            c.model,
            c.cwd,
            c.approval_policy,
            c.sandbox_policy,
            c.history_mode,
            c.reasoning_effort,
            sandbox.kind,
            sandbox.reason,
        ),
    )
    if confining and sandbox.kind == "none":
        await codex._emit(sub_id, unconfined_warning(sandbox.reason))
    if session.mcp is None and codex.config.mcp_servers:
        # A new Session's servers start now, in parallel, reporting under this id
        # (the manager loads only where servers are configured).
        from ._mcp import McpManager

        session.mcp = McpManager(codex.config.mcp_servers, codex._emitter(sub_id), c.cwd)
        session.mcp.start()
    await warn_if_unknown(codex, sub_id, c.model)


_WARNED_MODELS: set[str] = set()
"""Models this process has warned about: the note is the operator's, said once."""


async def warn_if_unknown(codex: Codex, sub_id: str, model: str) -> None:
    """Once per process for each model the catalogue does not know: a note for the
    operator, logged (stderr) and sent as a ``warning`` event (for the UIs that show
    warnings); never part of an answer."""
    if model in _WARNED_MODELS or codex.config.models.lookup(model) is not None:
        return
    _WARNED_MODELS.add(model)
    assumed = codex.config.models.details(model)
    note = (
        f"model {model!r} is not in the model catalogue: assuming a "
        f"{assumed.context_window}-token context window and "
        f"{assumed.max_output_tokens} output tokens (describe it under "
        f"[models.{json.dumps(model)}] in config.toml)"
    )
    log.warning(note, model=model)
    await codex._emit(sub_id, WarningEvent(note))


async def shutdown(codex: Codex, sub: Submission, _: object) -> None:
    """``shutdown`` (or ``request_close``): end the Session's shell commands and MCP
    servers, release the model clients the engine owns, say ``shutdown_complete``
    (recorded before the rollout closes), and stop taking Submissions."""
    session = codex._session
    if session is not None:
        await session.stop_shells()
        await session.stop_mcp()
    if codex._owns_clients:
        await codex._clients.aclose()
    codex._closed = True
    await codex._emit(sub.id, ShutdownComplete())
    if session is not None:
        session.close()
