"""Seed 000's ``model.list`` and ``model.set``, in the Codelia TUI's shapes.

The models come from the engine's catalogue (``EngineConfig.models``: the
built-in table, newest first, with ``config.toml``'s ``[models.NAME]``
overrides and additions). The TUI holds its first prompt back until
``model.list`` answers, and shows ``model: provider/current [reasoning]`` from
the answer. ``model.set`` is the engine's ``override_turn_context``: it
applies from the next model request, a running run's included, and aborts
nothing.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.protocol import OverrideTurnContext

if TYPE_CHECKING:
    from ._runs import Codelia

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
    """The model the connection's next request uses."""
    return state.model or state.ctx.host.engine_config.session.model


API_DEFAULT_EFFORT = "medium"
"""The effort a reasoning model uses when a request names none (the Responses API's
default, what codexcore then sends): shown as Codelia's runtime shows its own default."""


def _effort(state: Codelia) -> str | None:
    """The effort the next request sends: chosen with ``model.set``, else configured."""
    if state.model is not None:
        return state.effort
    effort = state.ctx.host.engine_config.session.reasoning_effort
    return str(effort) if effort is not None else None


def _current_effort(state: Codelia) -> str | None:
    """The next request's effort as shown: chosen or configured (shown as Codelia shows
    its configured one), else the model's default; None for a model that does not
    reason and was given none (the engine sends it no effort; the status bar shows
    ``[-]``)."""
    if (effort := _effort(state)) is not None:
        return effort
    config = state.ctx.host.engine_config
    override = config.session.model_supports_reasoning_summaries
    reasons = config.models.supports_reasoning(current_model(state), override)
    return API_DEFAULT_EFFORT if reasons else None


def _shown(result: dict[str, Any], state: Codelia) -> dict[str, Any]:
    effort = _current_effort(state)
    if effort in CODELIA_LEVELS:
        result["reasoning"] = effort
    return result


def model_list(state: Codelia, params: ModelList) -> dict[str, Any]:
    _check_provider(params.provider)
    current = current_model(state)
    catalog = state.ctx.host.engine_config.models.models()
    models = list(catalog)
    if current not in models:
        models.append(current)  # a model of the configuration the table does not know
    result: dict[str, Any] = {
        "provider": PROVIDER,
        "models": models,
        "current": current,
        "source": "session" if state.chosen else "config",
    }
    if params.include_details:
        result["details"] = {
            name: attrs.asdict(d, filter=lambda _, value: value is not None)
            for name, d in catalog.items()
        }
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


async def model_set(state: Codelia, params: ModelSet) -> dict[str, Any]:
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
    model, effort = changes.get("model"), changes.get("reasoning_effort")
    before = (current_model(state), _effort(state))
    await state.submit(OverrideTurnContext(model=model, effort=effort))
    # The engine says nothing on success (as Codex): what the next request uses is known.
    state.model = model or before[0]
    state.effort = effort if effort is not None else before[1]
    state.chosen = True
    result = {"provider": PROVIDER, "name": current_model(state), "source": "session"}
    return _shown(result, state)
