"""Per-turn settings: ``override_turn_context`` and ``user_turn``.

Either Op brings settings for the Turns to come (model, reasoning effort, cwd,
approval and sandbox policies), laid over the Session's and checked before
anything changes (:func:`turn_settings`). They apply from the next model
request on, a running Task's included: ``override_turn_context`` never aborts.
``user_turn`` then starts a Task, as ``user_input`` does. Before any Session,
either makes one with those settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import OverrideTurnContext, Submission, UserTurn
from ._config import BadTurnContext, SessionConfig
from ._session_lifecycle import (
    open_session,
    probed_sandbox,
    unconfined_warning,
    warn_if_unknown,
)
from ._submissions import SubmissionRejected
from ._task_lifecycle import start_task, task_input

if TYPE_CHECKING:
    from ._codex import Codex
    from ._history import Item


def turn_settings(codex: Codex, op: OverrideTurnContext | UserTurn) -> SessionConfig:
    """The Session's settings (or the defaults) with ``op``'s over them; a bad one is
    refused whole."""
    try:
        return codex._session_config().with_turn_settings(op)
    except BadTurnContext as exc:
        raise SubmissionRejected(
            f"{op.TYPE}: {exc} (nothing was changed)", "bad_turn_context"
        ) from None


async def settings_and_input(codex: Codex, op: UserTurn) -> tuple[SessionConfig, list[Item]]:
    """``user_turn``'s settings, and its model input (skills looked up in its cwd)."""
    config = turn_settings(codex, op)
    return config, await task_input(codex, op, config.cwd)


async def override_turn_context(codex: Codex, sub: Submission, config: SessionConfig) -> None:
    """New per-turn settings: the running Task, if any, takes them up at its next request."""
    session = codex._require_session()
    confining = config.sandbox_policy.type != "danger-full-access"
    if confining:
        await probed_sandbox(session)
    was_confining = session.config.sandbox_policy.type != "danger-full-access"
    if config != session.config:
        session.reconfigure(config)
    sandbox = session.sandbox
    if confining and not was_confining and sandbox and sandbox.kind == "none":
        await codex._emit(sub.id, unconfined_warning(sandbox.reason))
    await warn_if_unknown(codex, sub.id, config.model)


async def configure_with_turn_context(codex: Codex, sub: Submission, config: SessionConfig) -> None:
    await open_session(codex, sub.id, config)


async def user_turn(
    codex: Codex, sub: Submission, prepared: tuple[SessionConfig, list[Item]]
) -> None:
    config, first_input = prepared
    await override_turn_context(codex, sub, config)
    await start_task(codex, sub, first_input)


async def configure_and_turn(
    codex: Codex, sub: Submission, prepared: tuple[SessionConfig, list[Item]]
) -> None:
    config, first_input = prepared
    await open_session(codex, sub.id, config)
    await start_task(codex, sub, first_input)
