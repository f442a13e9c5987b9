"""The engine: Codex, its Session, and the Tasks and Turns it runs."""

from ._clients import ModelClientPool
from ._codex import Codex, EngineClosed, Rejected, State, parse_submission
from ._config import EngineConfig, SessionConfig
from ._rollout import BadRollout, default_home, list_sessions, prune_sessions

__all__ = [
    "BadRollout",
    "Codex",
    "EngineClosed",
    "EngineConfig",
    "ModelClientPool",
    "Rejected",
    "SessionConfig",
    "State",
    "default_home",
    "list_sessions",
    "parse_submission",
    "prune_sessions",
]
