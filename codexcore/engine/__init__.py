"""The engine: Codex, its Session, and the Tasks and Turns it runs."""

from typing import TYPE_CHECKING, Any

from ._clients import ModelClientPool
from ._codex import Codex, EngineClosed, Rejected, parse_submission
from ._config import CommandRunner, EngineConfig, SessionConfig
from ._instructions import ProjectDoc, ProjectDocs, project_root, read_project_docs
from ._mcp_config import McpServerConfig
from ._models import (
    DEFAULT_CONTEXT_WINDOW,
    MODEL_DETAILS,
    ModelCatalog,
    ModelDetails,
    context_window,
    model_details,
    supports_reasoning,
)
from ._rollout import BadRollout, UnknownSession, default_home
from ._run import ApprovalRequest, Approver, TaskInput, TaskResult
from ._session import new_agent_id
from ._submissions import State

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "MODEL_DETAILS",
    "AnswerError",
    "ApprovalRequest",
    "Approver",
    "BadRollout",
    "Codex",
    "CommandInterrupted",
    "CommandRunner",
    "EngineClosed",
    "EngineConfig",
    "ExecResult",
    "McpServerConfig",
    "ModelCatalog",
    "ModelClientPool",
    "ModelDetails",
    "ProjectDoc",
    "ProjectDocs",
    "Rejected",
    "SessionConfig",
    "State",
    "TaskInput",
    "TaskResult",
    "UnknownSession",
    "check_answer",
    "context_window",
    "default_home",
    "find_rollout",
    "list_sessions",
    "model_details",
    "new_agent_id",
    "parse_submission",
    "project_root",
    "prune_sessions",
    "read_project_docs",
    "read_session_events",
    "recorded_agent_id",
    "supports_reasoning",
]

if TYPE_CHECKING:
    from ..tools.exec import CommandInterrupted, ExecResult
    from ._ask_user import AnswerError, check_answer
    from ._rollout_reader import (
        find_rollout,
        list_sessions,
        prune_sessions,
        read_session_events,
        recorded_agent_id,
    )

_READERS = (
    "find_rollout",
    "list_sessions",
    "prune_sessions",
    "read_session_events",
    "recorded_agent_id",
)
_ANSWERS = ("AnswerError", "check_answer")


def __getattr__(name: str) -> Any:
    # On first use, not with the engine (tests/test_import_guard.py): ExecResult with
    # the tool stack (commands, the reaper), which loads when a command runs; the
    # rollout reader when sessions are listed, pruned or looked up.
    if name in ("ExecResult", "CommandInterrupted"):
        from ..tools import exec as tool_exec

        return getattr(tool_exec, name)
    if name in _READERS:
        from . import _rollout_reader

        return getattr(_rollout_reader, name)
    if name in _ANSWERS:  # a dialect checking a user's answers before it hands them on
        from . import _ask_user

        return getattr(_ask_user, name)
    raise AttributeError(f"module 'codexcore.engine' has no attribute {name!r}")
