"""The Session: configuration and state that outlive each Task."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import attrs

from ..protocol import AbortReason, StopKind, TaskComplete, TokenUsage, TokenUsageInfo
from ..tools._sandbox_status import SandboxStatus
from ._approvals import Approvals
from ._clients import ModelClientPool
from ._config import SessionConfig
from ._history import History, Item
from ._instructions import ContextTracker, told_in
from ._rollout import RolloutWriter, config_record, journal

if TYPE_CHECKING:
    from ..model import ModelClient
    from ..tools._standby import ShellStandby
    from ..tools.pty import PtyCommand
    from ._mcp import McpManager


@attrs.define
class StopRequest:
    """A ``stop`` or ``checkpoint`` asked of a running Task (the latest wins; None: none).

    Made before the Task's asyncio tasks, so the Task and its tools read the same one
    the dispatcher writes.
    """

    kind: StopKind | None = None

    def pending(self) -> bool:
        return self.kind is not None


@attrs.define
class RunningTask:
    """The Session's one running Task.

    ``runner`` does the work and is what an abort cancels; ``supervisor``
    waits for the runner's outcome and sends the terminal event. Splitting
    them means a Task cancelled even before its first step still gets its
    terminal event.
    """

    sub_id: str
    runner: asyncio.Task[TaskComplete]
    supervisor: asyncio.Task[None]
    abort_reason: AbortReason = "interrupted"
    stop: StopRequest = attrs.field(factory=StopRequest)


class TokenTotals:
    """A Session's token usage so far: what ``token_count.info`` reports.

    Kept with the Session, not with the Task that counts into it, so that making
    a Session does not load the Task machinery (start-up, issue 20).
    """

    def __init__(self, total: TokenUsage | None = None) -> None:
        self.total = total or TokenUsage()

    def add(self, last: TokenUsage, window: int | None) -> TokenUsageInfo:
        """Count one response's usage; the info to report after it."""
        names = [field.name for field in attrs.fields(TokenUsage)]
        self.total = TokenUsage(
            **{name: getattr(self.total, name) + getattr(last, name) for name in names}
        )
        return TokenUsageInfo(self.total, last, window)


def new_agent_id() -> str:
    """A fresh agent id: ``codexcore:`` and 12 hex digits (seed 003's ``agent_id``)."""
    return f"codexcore:{uuid.uuid4().hex[:12]}"


class Session:
    """Codex's current configuration and conversation.

    Holds the History (with its response bookmarks), what the user approved
    for the session, input injected for the running Task, and the model
    model client for its ``base_url`` (from a pool the engine or its host owns).
    """

    def __init__(
        self,
        config: SessionConfig,
        clients: ModelClientPool,
        *,
        session_id: str | None = None,
        history: History | None = None,
        rollout: RolloutWriter | None = None,
        home: str | None = None,
        project_doc_max_bytes: int = 32 * 1024,
        token_total: TokenUsage | None = None,
        agent_id: str | None = None,
    ) -> None:
        """``home`` holds the global AGENTS.md; ``project_doc_max_bytes`` caps the
        AGENTS.md text. A ``history`` (resumed, forked) says what its model was
        already told, so the initial context is not sent again; ``token_total``
        (a resumed session's) is where its token count goes on from."""
        self.id = session_id or str(uuid.uuid4())
        self.agent_id = agent_id or new_agent_id()
        self.config = config
        self.history = history or History()
        self.context = ContextTracker(home, project_doc_max_bytes, told_in(self.history.items()))
        self.totals = TokenTotals(token_total)
        self.rollout = rollout
        if rollout is not None:
            self.history.journal = journal(rollout)
        self.approvals = Approvals()
        self.running: RunningTask | None = None
        self._injected: list[Item] = []
        self._context: list[Item] = []
        # The user's shell commands now running (run_user_shell_command).
        self.shells: set[asyncio.Task[None]] = set()
        # Those of them running in a terminal, by call id (write_pty writes to them).
        self.terminals: dict[str, PtyCommand] = {}
        self._standby: ShellStandby | None = None  # made with the first Task's tools
        self._clients = clients
        self.sandbox: SandboxStatus | None = None  # probed when a policy wants confinement
        self.mcp: McpManager | None = None  # started with the Session when servers are configured

    def client(self) -> ModelClient:
        return self._clients.get(self.config.base_url, self.id)

    def reconfigure(self, config: SessionConfig) -> None:
        self.config = config
        if self.rollout is not None:
            self.rollout.record(config_record(config))

    def rebranched(self) -> None:
        """The History moved to another branch: what its model was told is that branch's."""
        self.context.told = told_in(self.history.items())

    def close(self) -> None:
        if self.rollout is not None:
            self.rollout.close()

    def inject(self, item: Item) -> None:
        self._injected.append(item)

    def take_injected(self) -> list[Item]:
        taken, self._injected = self._injected, []
        return taken

    def add_context(self, item: Item) -> None:
        """Something the model should see with the running Task's next request
        (a user shell command's record) that is no reason for another request."""
        self._context.append(item)

    def take_context(self) -> list[Item]:
        taken, self._context = self._context, []
        return taken

    async def stop_mcp(self) -> None:
        """End the MCP servers (a stdio server's whole process group is killed)."""
        if self.mcp is not None:
            await self.mcp.aclose()

    async def stop_shells(self) -> None:
        """Kill the user's running shell commands and wait until each has ended
        (its process group reaped, its ``exec_command_end`` sent)."""
        shells = list(self.shells)
        for shell in shells:
            shell.cancel()
        if shells:
            await asyncio.wait(shells)
        if self._standby is not None:
            await self._standby.aclose()

    @property
    def standby(self) -> ShellStandby:
        """The shell already in the next unconfined command's cgroup (moving a process
        into a cgroup waits ~20 ms once commands come apart: ``tools._standby``)."""
        if self._standby is None:
            from ..tools._standby import ShellStandby  # with the tools, not the Session

            self._standby = ShellStandby()
        return self._standby
