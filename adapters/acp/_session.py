"""One ACP session (:class:`AcpSession`): its engine, the pump that maps its events, the
prompt turn in flight.

Each ACP session is one :class:`~codexcore.Codex` engine on the agent's loop. The
pump reads the engine's events: the answers to the session's own calls
(``configure_session``, ``get_history``, ...) go to their waiters; the events of
the prompt in flight become ``session/update`` notifications (through
:class:`~._map.ToolCallMapper`), its approval requests permission requests
(:mod:`._permission`), and its terminal event the prompt's answer:
``task_complete`` -> end_turn (refusal when the model refused), ``turn_aborted`` ->
cancelled, ``error`` ``incomplete`` (max_output_tokens) -> max_tokens, any other
``error`` -> a JSON-RPC error naming it. Events outside a prompt are notices.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import TYPE_CHECKING, Any

import attrs
from acp import RequestError
from acp.schema import CurrentModeUpdate, PromptResponse, SessionModeState, Usage

from codexcore._logging import get_logger
from codexcore.engine import Codex, EngineClosed, McpServerConfig, context_window
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ApplyPatchApprovalRequest,
    ConfigureSession,
    DeleteChange,
    ErrorEvent,
    Event,
    EventMsg,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    FileChange,
    GetHistory,
    InputItem,
    Interrupt,
    McpStartupUpdate,
    OverrideTurnContext,
    PatchApplyBegin,
    PatchApplyEnd,
    RequestUserInput,
    ResumeSession,
    SandboxPolicy,
    SessionConfigured,
    SessionHistory,
    Shutdown,
    TokenCount,
    UserInput,
    WarningEvent,
)
from codexcore.tools._safe_read import read_head

from ._ask import Questions
from ._map import ToolCallMapper, Update, message_chunk, terminal, thought_chunk
from ._modes import CUSTOM_MODE, MODES_BY_ID, mode_of, mode_state, policies_of
from ._permission import Permissions
from ._terminal import ClientTerminals

if TYPE_CHECKING:
    from ._agent import CodexAgent

log = get_logger(__name__)

READ_LIMIT = 1024 * 1024
"""The most of one file read from disk (a resource link in a prompt, a patched file's
text for a diff or for the editor's buffer), in bytes."""

HISTORY_PAGE = 1000


@attrs.define
class _Waiter:
    types: frozenset[str]
    future: asyncio.Future[EventMsg]


@attrs.define
class _Prompt:
    sub_id: str
    future: asyncio.Future[EventMsg]
    cancelled: bool = False
    usage: Usage | None = None

    def add_usage(self, count: TokenCount) -> None:
        used = self.usage
        self.usage = Usage(
            total_tokens=count.total_tokens + (used.total_tokens if used else 0),
            input_tokens=count.input_tokens + (used.input_tokens if used else 0),
            output_tokens=count.output_tokens + (used.output_tokens if used else 0),
            thought_tokens=count.reasoning_output_tokens
            + (used.thought_tokens or 0 if used else 0),
            cached_read_tokens=count.cached_input_tokens
            + (used.cached_read_tokens or 0 if used else 0),
        )


class AcpSession:
    """One ACP session: an engine, the pump that maps its events, the prompt in flight."""

    def __init__(
        self, agent: CodexAgent, cwd: str, mcp_servers: dict[str, McpServerConfig]
    ) -> None:
        self.agent = agent
        config = agent.config
        clashes = sorted(set(mcp_servers) & set(config.mcp_servers))
        if clashes:
            log.info("editor mcp servers replace configured ones", servers=clashes)
        servers = {**config.mcp_servers, **mcp_servers}
        config = attrs.evolve(config, mcp_servers=servers)
        self.mcp_names = frozenset(servers)
        if agent.client_capabilities.terminal:
            config = attrs.evolve(config, command_runner=ClientTerminals(self).run)
        # The model may ask the user only through a client that takes forms (:mod:`._ask`).
        config = attrs.evolve(config, session=attrs.evolve(config.session, ask_user=agent.can_ask))
        self.codex = Codex(config, clients=agent.clients, threadsafe=False)
        self.id = ""
        self.cwd = cwd
        self.mapper = self._mapper()
        self.waiters: dict[str, _Waiter] = {}
        self.prompt: _Prompt | None = None
        self.permissions = Permissions(self)
        self.questions = Questions(self)
        self.patches: dict[str, dict[str, FileChange]] = {}
        self.notices: list[str] = []
        self.asides: list[Update] = []  # warnings for the next prompt, beside its answer
        self.mode = CUSTOM_MODE
        self.configured: SessionConfigured | None = None
        self.announced: dict[str, asyncio.Event] = {}
        self._ids = itertools.count(1)
        self._pump: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the engine and the pump that maps its events."""
        await self.codex.start()
        self._pump = asyncio.create_task(self._pump_forever(), name="codexcore-acp-pump")

    def _mapper(self) -> ToolCallMapper:
        window = context_window(self.agent.config.session.model)
        return ToolCallMapper(self.cwd, read_disk, window, self.mcp_names)

    # --- engine calls ---------------------------------------------------------

    async def call(self, op: Any, *answers: str) -> EventMsg:
        """Submit ``op`` and wait for its answer (an event of one of ``answers`` types
        under its id); an ``error`` instead raises a JSON-RPC invalid-params error."""
        sub_id = f"acp-{next(self._ids)}"
        future: asyncio.Future[EventMsg] = asyncio.get_running_loop().create_future()
        self.waiters[sub_id] = _Waiter(frozenset(answers), future)
        await self.codex.submit(op, id=sub_id)
        msg = await future
        if isinstance(msg, ErrorEvent):
            raise RequestError(-32602, msg.message, {"code": msg.code})
        return msg

    async def configure(self, op: ConfigureSession | ResumeSession) -> SessionConfigured:
        configured = await self.call(op, "session_configured")
        assert isinstance(configured, SessionConfigured)
        self.configured, self.id, self.cwd = configured, configured.session_id, configured.cwd
        self.mapper.cwd = configured.cwd
        self.mode = mode_of(configured.approval_policy, configured.sandbox_policy)
        return configured

    async def history(self, session_id: str) -> list[Event]:
        """Every recorded event of ``session_id``, a page at a time."""
        events: list[Event] = []
        while True:
            page = await self.call(
                GetHistory(session_id, len(events), HISTORY_PAGE), "session_history"
            )
            assert isinstance(page, SessionHistory)
            events += page.events
            if not page.events or len(events) >= page.total:
                return events

    async def switch_policies(self, approval: Any, sandbox: SandboxPolicy) -> None:
        """Make ``approval`` and ``sandbox`` the policies from the next model request
        on, a running prompt's included: ``override_turn_context`` aborts nothing.
        It answers nothing on success, and the presets are valid policies, so there
        is nothing to wait for."""
        await self.submit(OverrideTurnContext(approval_policy=approval, sandbox_policy=sandbox))

    async def submit(self, op: Any) -> None:
        """Submit ``op`` expecting no answer (``interrupt``, an approval, ...)."""
        await self.codex.submit(op, id=f"acp-{next(self._ids)}")

    # --- modes ------------------------------------------------------------------

    def modes(self) -> SessionModeState:
        base = self.agent.config.session
        return mode_state(self.mode, base.approval_policy, base.sandbox_policy)

    async def set_mode(self, mode_id: str) -> None:
        if mode_id not in MODES_BY_ID and not (
            mode_id == CUSTOM_MODE
            and any(m.id == CUSTOM_MODE for m in self.modes().available_modes)
        ):
            raise RequestError(-32602, f"unknown mode {mode_id!r}", {"modeId": mode_id})
        await self._apply_mode(mode_id)
        await self.send(
            CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id)
        )

    async def _apply_mode(self, mode_id: str) -> None:
        base = self.agent.config.session
        if mode_id == CUSTOM_MODE:
            await self.switch_policies(base.approval_policy, base.sandbox_policy)
        else:
            await self.switch_policies(*policies_of(MODES_BY_ID[mode_id], base.sandbox_policy))
        self.mode = mode_id

    # --- prompts ------------------------------------------------------------------

    async def run_prompt(self, items: list[InputItem]) -> PromptResponse:
        if self.prompt is not None:
            raise RequestError(-32600, "a prompt is already running in this session", None)
        loop = asyncio.get_running_loop()
        prompt = _Prompt(f"prompt-{next(self._ids)}", loop.create_future())
        self.prompt = prompt
        self.mapper.refused = False
        try:
            for notice in self.notices:
                await self.send(message_chunk(notice + "\n\n"))
            self.notices.clear()
            for aside in self.asides:
                await self.send(aside)
            self.asides.clear()
            await self.codex.submit(UserInput(tuple(items)), id=prompt.sub_id)
            terminal = await prompt.future
        finally:
            self.prompt = None
        return self._answer(prompt, terminal)

    def _answer(self, prompt: _Prompt, terminal: EventMsg) -> PromptResponse:
        if terminal.TYPE == "task_complete":
            reason = "refusal" if self.mapper.refused else "end_turn"
        elif terminal.TYPE == "turn_aborted" or prompt.cancelled:
            reason = "cancelled"
        else:
            assert isinstance(terminal, ErrorEvent)
            if terminal.code == "incomplete" and "max_output_tokens" in terminal.message:
                reason = "max_tokens"
            elif terminal.code == "incomplete" and "content_filter" in terminal.message:
                reason = "refusal"
            else:
                raise RequestError(-32603, terminal.message, {"code": terminal.code})
        return PromptResponse(stop_reason=reason, usage=prompt.usage)  # type: ignore[arg-type]

    async def cancel(self) -> None:
        """``session/cancel``: withdraw waiting permission requests and interrupt the Task."""
        prompt = self.prompt
        if prompt is None:
            return
        prompt.cancelled = True
        self.permissions.withdraw()
        self.questions.withdraw()
        await self.submit(Interrupt())

    # --- the pump ---------------------------------------------------------------

    async def _pump_forever(self) -> None:
        while True:
            try:
                event = await self.codex.next_event()
            except EngineClosed:
                break
            try:
                await self._handle(event)
            except (ConnectionError, RequestError) as exc:
                log.warning("could not tell the editor", error=str(exc), type=event.msg.TYPE)
            except Exception:  # one event must not end the session
                log.exception("event not mapped", type=event.msg.TYPE)
        for waiter in self.waiters.values():
            if not waiter.future.done():
                waiter.future.set_result(ErrorEvent("the session has shut down", "shutdown"))

    async def _handle(self, event: Event) -> None:
        msg = event.msg
        waiter = self.waiters.get(event.id)
        if waiter is not None and (msg.TYPE in waiter.types or msg.TYPE == "error"):
            del self.waiters[event.id]
            if not waiter.future.done():  # its request may have been cancelled (stdin closed)
                waiter.future.set_result(msg)
            return
        prompt = self.prompt
        if prompt is None or event.id != prompt.sub_id:
            await self._aside(event)
            return
        if isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
            await self.permissions.request(msg)
            return
        if isinstance(msg, RequestUserInput):
            self.questions.request(msg)
            return
        if isinstance(msg, PatchApplyBegin):
            self.patches[msg.call_id] = msg.changes
        if isinstance(msg, PatchApplyEnd):
            changes = self.patches.pop(msg.call_id, {})
            if msg.success:
                await self._write_through(changes)
        if isinstance(msg, TokenCount):
            prompt.add_usage(msg)
        for update in self.mapper.updates(msg):
            await self.send(update)
        if isinstance(msg, ExecCommandBegin) and self.agent.client_capabilities.terminal:
            self.announced.setdefault(msg.call_id, asyncio.Event()).set()
        if isinstance(msg, ExecCommandEnd):  # a confined command: no terminal waited for it
            self.announced.pop(msg.call_id, None)
        if msg.TYPE in TERMINAL_EVENT_TYPES:
            for update in self.mapper.finish_task(msg.TYPE):
                await self.send(update)
            if not prompt.future.done():
                prompt.future.set_result(msg)

    async def show_terminal(self, call_id: str, terminal_id: str) -> None:
        """Embed an editor terminal in the call's tool call, once the editor knows the call."""
        await self.announced.setdefault(call_id, asyncio.Event()).wait()
        self.announced.pop(call_id, None)
        self.mapper.calls[call_id].terminal_id = terminal_id
        await self.send(self.mapper.progress(call_id, content=[terminal(terminal_id)]))

    async def _aside(self, event: Event) -> None:
        """An event outside a prompt (under a configure, say): a warning, or an MCP
        server that failed to start, is shown at once if a prompt runs, else kept
        for the next prompt, so the user still reads it; errors here answer our own
        late approvals (after a cancel) and are only logged. A warning is a note
        beside the answer (a thought chunk, as in a prompt), never its text."""
        msg = event.msg
        if isinstance(msg, WarningEvent):
            aside = thought_chunk(f"[warning] {msg.message}\n")
            if self.prompt is not None:
                await self.send(aside)
            else:
                self.asides.append(aside)
            return
        if not (isinstance(msg, McpStartupUpdate) and msg.status.state == "failed"):
            log.debug("event outside a prompt", type=msg.TYPE, id=event.id)
            return
        notice = f"MCP server {msg.server!r} failed to start: {msg.status.error}"
        if self.prompt is not None:
            await self.send(message_chunk(notice + "\n\n"))
        else:
            self.notices.append(notice)

    async def send(self, update: Update | CurrentModeUpdate) -> None:
        await self.agent.conn.session_update(session_id=self.id, update=update)

    # --- files --------------------------------------------------------------------

    async def _write_through(self, changes: dict[str, FileChange]) -> None:
        """Hand each written file's new text to the editor (``fs/write_text_file``) so it
        updates its buffer and records the edit; only when the client offers it."""
        if not self.agent.can_write:
            return
        for path, change in changes.items():
            if isinstance(change, DeleteChange):
                continue
            target = self.mapper.absolute(getattr(change, "move_path", None) or path)
            content = await asyncio.to_thread(read_disk, target)
            if content is not None:
                await self.agent.conn.write_text_file(
                    session_id=self.id, path=target, content=content
                )

    # --- end ------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Shut the engine down (killing its commands) and end the pump."""
        self.permissions.withdraw()
        self.questions.withdraw()
        with contextlib.suppress(EngineClosed):
            await self.submit(Shutdown())
        if self._pump is not None:
            await asyncio.wait({self._pump})
        await self.codex.aclose()


def read_disk(path: str) -> str | None:
    """Up to :data:`READ_LIMIT` bytes of the file at ``path`` as text, or None when
    it cannot be read."""
    try:  # a path from the client: a FIFO or a device is refused, never waited on
        return read_head(path, READ_LIMIT)[0].decode("utf-8", "replace")
    except OSError:
        return None
