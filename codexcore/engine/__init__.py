"""The engine: Codex, its Session, and the Tasks and Turns it runs."""

from ._clients import ModelClientPool
from ._codex import Codex, EngineClosed, Rejected, State, parse_submission
from ._config import EngineConfig, SessionConfig

__all__ = [
    "Codex",
    "EngineClosed",
    "EngineConfig",
    "ModelClientPool",
    "Rejected",
    "SessionConfig",
    "State",
    "parse_submission",
]
