"""Seed 000's ``model.list`` and ``model.set``, in the Codelia TUI's shapes.

The models come from the engine's table (``codexcore.engine.MODEL_DETAILS``,
newest first). The TUI holds its first prompt back until ``model.list``
answers, and shows ``model: provider/current [reasoning]`` from the answer.
``model.set`` applies from the connection's next run: its ``configure_session``
is submitted just before that run's input (a ``configure_session`` while a
Task runs would abort it).
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.engine import MODEL_DETAILS, supports_reasoning

from ._jsonrpc import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from ._codelia_runs import Codelia

PROVIDER = "openai"
CODELIA_LEVELS = ("low", "medium", "high", "xhigh", "max")
"""Codelia's reasoning levels (``MODEL_REASONING_LEVELS``); ours are minimal, low, medium, high."""
EFFORT_OF_LEVEL = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}


@attrs.frozen
class ModelList:
    provider: str | None = None
    include_details: bool | None = None


@attrs.frozen
class ModelSet:
    name: str | None = None
    provider: str | None = None
    reasoning: str | None = None
    fast: bool | None = None
    scope: str | None = None
    reset: bool | None = None


def _check_provider(provider: str | None) -> None:
    if provider not in (None, PROVIDER):
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: params.provider: codexcore serves {PROVIDER!r} models only, "
            f"not {provider!r}",
        )


def current_model(state: Codelia) -> str:
    """The model the connection's next run uses."""
    pending = state.pending.get("model")
    if isinstance(pending, str):
        return pending
    return state.model or state.ctx.host.engine_config.session.model


API_DEFAULT_EFFORT = "medium"
"""The effort a reasoning model uses when a request names none (the Responses API's
default, what codexcore then sends): shown as Codelia's runtime shows its own default."""


def _current_effort(state: Codelia) -> str | None:
    """The next run's effort: chosen or configured (shown as Codelia shows its configured
    one), else the model's default; None for a model that does not reason and was
    given none (the engine sends it no effort; the status bar shows ``[-]``)."""
    defaults = state.ctx.host.engine_config.session
    if "reasoning_effort" in state.pending:
        effort = state.pending["reasoning_effort"]
    else:
        effort = state.effort if state.model is not None else defaults.reasoning_effort
    if effort is not None:
        return str(effort)
    reasons = supports_reasoning(current_model(state), defaults.model_supports_reasoning_summaries)
    return API_DEFAULT_EFFORT if reasons else None


def _shown(result: dict[str, Any], state: Codelia) -> dict[str, Any]:
    effort = _current_effort(state)
    if effort in CODELIA_LEVELS:
        result["reasoning"] = effort
    return result


def model_list(state: Codelia, params: ModelList) -> dict[str, Any]:
    _check_provider(params.provider)
    current = current_model(state)
    models = list(MODEL_DETAILS)
    if current not in models:
        models.append(current)  # a model of the configuration the table does not know
    result: dict[str, Any] = {
        "provider": PROVIDER,
        "models": models,
        "current": current,
        "source": "session" if state.chosen else "config",
    }
    if params.include_details:
        result["details"] = {name: attrs.asdict(d) for name, d in MODEL_DETAILS.items()}
    return _shown(result, state)


@attrs.frozen
class ModelByName:
    """``model.set`` choosing a model (and, optionally, its reasoning)."""

    name: str
    provider: str | None = None
    reasoning: str | None = None


@attrs.frozen
class ModelReset:
    """``model.set`` going back to the configuration's model."""

    reset: typing.Literal[True]
    provider: str | None = None


def model_set(state: Codelia, params: ModelSet) -> dict[str, Any]:
    _check_provider(params.provider)
    changes: dict[str, Any] = {}
    if params.reset:
        defaults = state.ctx.host.engine_config.session
        changes = {"model": defaults.model}
        if defaults.reasoning_effort is not None:
            changes["reasoning_effort"] = defaults.reasoning_effort
    if params.name is not None:
        if not params.name.strip():
            raise RpcError(INVALID_PARAMS, "Invalid params: params.name: empty")
        changes["model"] = params.name.strip()
    if params.reasoning is not None:
        effort = EFFORT_OF_LEVEL.get(params.reasoning)
        if effort is None:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: params.reasoning: expected one of {list(CODELIA_LEVELS)}",
            )
        changes["reasoning_effort"] = effort
    if not changes:
        raise RpcError(INVALID_PARAMS, "Invalid params: params.name: missing required field")
    state.pending.update(changes)
    state.chosen = True
    result = {"provider": PROVIDER, "name": current_model(state), "source": "session"}
    return _shown(result, state)
