"""The engine: Codex, its Session, and the Tasks and Turns it runs."""

from ._codex import Codex, EngineClosed, Rejected, State, parse_submission
from ._config import EngineConfig, SessionConfig

__all__ = [
    "Codex",
    "EngineClosed",
    "EngineConfig",
    "Rejected",
    "SessionConfig",
    "State",
    "parse_submission",
]
