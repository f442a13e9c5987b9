"""The engine: Codex, its Session, and the Tasks and Turns it runs."""

from ._clients import ModelClientPool
from ._codex import Codex, EngineClosed, Rejected, State, parse_submission
from ._config import EngineConfig, SessionConfig
from ._models import (
    DEFAULT_CONTEXT_WINDOW,
    MODEL_DETAILS,
    ModelDetails,
    context_window,
    model_details,
    supports_reasoning,
)
from ._rollout import BadRollout, default_home, list_sessions, prune_sessions

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "MODEL_DETAILS",
    "BadRollout",
    "Codex",
    "EngineClosed",
    "EngineConfig",
    "ModelClientPool",
    "ModelDetails",
    "Rejected",
    "SessionConfig",
    "State",
    "context_window",
    "default_home",
    "list_sessions",
    "model_details",
    "parse_submission",
    "prune_sessions",
    "supports_reasoning",
]
