"""What the engine does with each Submission: ``PLAN``, keyed by State and Op type.

The dispatcher (:class:`~._codex.Codex`) first checks the Submission's Op
(:func:`prepare`), before anything is aborted, so a bad Submission costs the
running Task nothing. Then it takes the Step for the engine's State and the
Op's type: an optional abort of the running Task, then an action. The State is
never stored; it is read off the Session (:func:`state_of`).

The actions live with what they act on:

- :mod:`._session_lifecycle`: ``configure_session`` and ``shutdown``;
- :mod:`._task_lifecycle`: starting a Task, feeding, stopping and compacting,
  answering its approvals;
- :mod:`._turn_context`: the per-turn settings, ``override_turn_context`` and
  ``user_turn``;
- :mod:`._user_shell`: ``run_user_shell_command``;
- :mod:`._recorded_sessions`: ``list_sessions``, ``get_history``,
  ``resume_session``, ``fork_session``;
- :mod:`._listings`: ``list_skills`` and ``list_mcp_tools``.

Only the first loads with the engine. A server's first answer (to
``configure_session``) needs none of the others, so each loads when a
Submission first needs it (start-up, issue 20; ``tests/test_import_guard.py``).
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from .._logging import get_logger
from ..protocol import (
    AbortReason,
    Checkpoint,
    Compact,
    ConfigureSession,
    DynamicToolResponse,
    ExecApproval,
    ForkSession,
    GetHistory,
    InjectInput,
    Interrupt,
    ListMcpTools,
    ListSessions,
    ListSkills,
    Op,
    OverrideTurnContext,
    PatchApproval,
    ResumeSession,
    RunUserShellCommand,
    Shutdown,
    Stop,
    Submission,
    UserInput,
    UserInputAnswer,
    UserTurn,
    WritePty,
)
from ..protocol._value import Value
from ._session_lifecycle import configure, open_session, shutdown

if TYPE_CHECKING:
    from . import _dynamic_tools as dynamic
    from . import _listings as listings
    from . import _recorded_sessions as recorded
    from . import _task_lifecycle as tasks
    from . import _terminals as terminals
    from . import _turn_context as turns
    from . import _user_shell as shell
    from ._codex import Codex
    from ._config import SessionConfig
    from ._history import Item
    from ._recorded_sessions import Resuming
    from ._rollout_reader import LoadedSession
    from ._session import Session

    Prepared: TypeAlias = (
        list[Item]
        | LoadedSession
        | Resuming
        | str
        | SessionConfig
        | tuple[SessionConfig, list[Item]]
        | None
    )

log = get_logger(__name__)


class SubmissionRejected(Exception):
    """A Submission the engine refuses: answered by an ``error`` event with ``code``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message, self.code = message, code


class State(enum.Enum):
    """The engine's state, read off the Session. ``STOPPING`` and ``PAUSING`` are
    ``RUNNING`` with a ``stop`` or a ``checkpoint`` pending: the Task ends after
    its current Turn."""

    UNCONFIGURED = "unconfigured"
    IDLE = "idle"
    RUNNING = "running"
    STOPPING = "stopping"
    PAUSING = "pausing"


Action = Callable[["Codex", Submission, Any], Awaitable[None]]
"""An action gets the Submission and what :func:`prepare` made of its Op, checked
before anything was aborted: model input for user_input and inject_input, a
loaded rollout for resume_session and fork_session, the directory to run in for
run_user_shell_command, the new settings for override_turn_context (with the
model input for user_turn), None for the rest."""


@attrs.frozen(repr=False, eq=False)
class Step(Value):
    abort: AbortReason | None
    action: Action


class _Later:
    """A module of actions imported when one of them is first called, not with the engine.

    ``_Later("._listings").list_skills`` is a function that imports
    ``._listings`` and calls its ``list_skills`` with the same arguments. Type
    checkers see the modules themselves (the ``TYPE_CHECKING`` imports above),
    so each name and signature in :data:`PLAN` is checked as if imported.
    """

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Callable[..., Any]:
        module = self._module

        def call(*args: Any) -> Any:
            # After the first call this is a lookup in sys.modules.
            return getattr(importlib.import_module(module, __package__), name)(*args)

        call.__name__ = call.__qualname__ = name
        return call


if not TYPE_CHECKING:  # at run time, each loads with its first call
    dynamic = _Later("._dynamic_tools")
    listings = _Later("._listings")
    recorded = _Later("._recorded_sessions")
    shell = _Later("._user_shell")
    tasks = _Later("._task_lifecycle")
    terminals = _Later("._terminals")
    turns = _Later("._turn_context")


async def prepare(codex: Codex, op: Op) -> Prepared:
    """What the action needs of ``op`` (see :data:`Action`); raises SubmissionRejected
    for a bad one, before anything is aborted."""
    if isinstance(op, UserInput | InjectInput):
        return await tasks.task_input(codex, op, codex._session_config().cwd)
    if isinstance(op, ConfigureSession | OverrideTurnContext) and (
        op.dynamic_tools is not None or getattr(op, "dynamic_tool_timeout_ms", None) is not None
    ):
        dynamic.check_declaration(codex, op)
    if isinstance(op, OverrideTurnContext):
        return turns.turn_settings(codex, op)
    if isinstance(op, UserTurn):
        return await turns.settings_and_input(codex, op)
    if isinstance(op, RunUserShellCommand):
        return shell.command_cwd(codex, op)
    if isinstance(op, ResumeSession | ForkSession):
        return await recorded.load(codex, op)
    return None


def with_default_session(action: Action) -> Action:
    """``action`` once a Session with the engine's defaults is made and announced:
    what an op that needs a Session does when there is none yet."""

    async def act(codex: Codex, sub: Submission, prepared: Any) -> None:
        await open_session(codex, sub.id, codex.config.session)
        await action(codex, sub, prepared)

    return act


async def ignore(codex: Codex, sub: Submission, _: object) -> None:
    log.debug("nothing to do", sub_id=sub.id, op=type(sub.op).__name__)


async def interrupt_shells(codex: Codex, sub: Submission, _: object) -> None:
    """Kill the user's shell commands (the dispatcher aborts a running Task first)."""
    if codex._session is not None:
        await codex._session.stop_shells()


_U, _I, _R = State.UNCONFIGURED, State.IDLE, State.RUNNING
_S, _P = State.STOPPING, State.PAUSING
_RUNNING = (_R, _S, _P)  # a Task runs (and may have a stop or checkpoint pending)
_STOP_STATES = {None: _R, "stop": _S, "checkpoint": _P}


def state_of(session: Session | None) -> State:
    """The State of an engine with ``session`` (None: not configured yet)."""
    if session is None:
        return State.UNCONFIGURED
    running = session.running
    if running is None:
        return State.IDLE
    return _STOP_STATES[running.stop.kind]


PLAN: dict[tuple[State, type[Any]], Step] = {
    # configure_session: create or reconfigure; a running Task is aborted.
    (_U, ConfigureSession): Step(None, configure),
    (_I, ConfigureSession): Step(None, configure),
    **{(s, ConfigureSession): Step("reconfigured", configure) for s in _RUNNING},
    # user_input: start a Task, replacing a running one; no Session yet means defaults.
    (_U, UserInput): Step(None, with_default_session(tasks.start_task)),
    (_I, UserInput): Step(None, tasks.start_task),
    **{(s, UserInput): Step("replaced", tasks.start_task) for s in _RUNNING},
    # inject_input: feeds the running Task's next request (lifting a checkpoint),
    # or starts one (start: false keeps it for the next); a stop stands, and the
    # input waits for the next Task.
    (_U, InjectInput): Step(None, with_default_session(tasks.inject_when_idle)),
    (_I, InjectInput): Step(None, tasks.inject_when_idle),
    (_R, InjectInput): Step(None, tasks.inject),
    (_P, InjectInput): Step(None, tasks.inject),
    (_S, InjectInput): Step(None, tasks.inject_when_stopping),
    # interrupt: stops the running Task now, and the user's shell commands.
    (_U, Interrupt): Step(None, ignore),
    (_I, Interrupt): Step(None, interrupt_shells),
    **{(s, Interrupt): Step("interrupted", interrupt_shells) for s in _RUNNING},
    # override_turn_context: new per-turn settings, from the next model request on;
    # never aborts. user_turn: those settings, then a Task, as user_input.
    (_U, OverrideTurnContext): Step(None, turns.configure_with_turn_context),
    **{(s, OverrideTurnContext): Step(None, turns.override_turn_context) for s in (_I, *_RUNNING)},
    (_U, UserTurn): Step(None, turns.configure_and_turn),
    (_I, UserTurn): Step(None, turns.user_turn),
    **{(s, UserTurn): Step("replaced", turns.user_turn) for s in _RUNNING},
    # run_user_shell_command: runs beside a Task, never disturbing it.
    (_U, RunUserShellCommand): Step(None, with_default_session(shell.user_shell)),
    **{(s, RunUserShellCommand): Step(None, shell.user_shell) for s in (_I, *_RUNNING)},
    # write_pty: to a command running in a terminal, Task or not.
    **{(s, WritePty): Step(None, terminals.write_pty) for s in State},
    # stop, checkpoint: the running Task ends after its current Turn (the latest
    # of the two names the end); otherwise nothing to stop.
    **{(s, op): Step(None, ignore) for s in (_U, _I) for op in (Stop, Checkpoint)},
    **{(s, op): Step(None, tasks.request_stop) for s in _RUNNING for op in (Stop, Checkpoint)},
    # approvals answer a waiting request by call_id; anything else is rejected.
    **{
        (s, op): Step(None, tasks.resolve_approval)
        for s in State
        for op in (ExecApproval, PatchApproval)
    },
    # user_input_answer answers the model's waiting question by call_id, as approvals do.
    **{(s, UserInputAnswer): Step(None, tasks.answer_question) for s in State},
    # dynamic_tool_response answers a waiting call of a client's tool, by call_id.
    **{(s, DynamicToolResponse): Step(None, dynamic.answer) for s in State},
    # recorded sessions: listing and reading never disturb a Task; switching
    # to a resumed or forked session aborts it, as reconfiguring does.
    **{(s, ListSessions): Step(None, recorded.list_sessions) for s in State},
    **{(s, GetHistory): Step(None, recorded.get_history) for s in State},
    # list_skills: reads the skills folders (or the kept catalogue); never disturbs a Task.
    **{(s, ListSkills): Step(None, listings.list_skills) for s in State},
    **{(s, ResumeSession): Step(None, recorded.resume_session) for s in (_U, _I)},
    **{(s, ResumeSession): Step("reconfigured", recorded.resume_session) for s in _RUNNING},
    **{(s, ForkSession): Step(None, recorded.fork_session) for s in (_U, _I)},
    **{(s, ForkSession): Step("reconfigured", recorded.fork_session) for s in _RUNNING},
    # compact: a compaction Task, replacing a running one (as Codex's Op::Compact does).
    (_U, Compact): Step(None, with_default_session(tasks.start_compaction)),
    (_I, Compact): Step(None, tasks.start_compaction),
    **{(s, Compact): Step("replaced", tasks.start_compaction) for s in _RUNNING},
    # list_mcp_tools: answered at once, beside a Task; the first starts the Session's servers.
    (_U, ListMcpTools): Step(None, with_default_session(listings.list_mcp_tools)),
    **{(s, ListMcpTools): Step(None, listings.list_mcp_tools) for s in (_I, *_RUNNING)},
    # shutdown: abort, release, say goodbye.
    **{(s, Shutdown): Step("shutdown", shutdown) for s in State},
}
