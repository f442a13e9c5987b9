"""codexcore as an Agent Client Protocol (ACP) agent: ``codexcore acp``.

Editors (Zed, JetBrains, Neovim's CodeCompanion, Emacs's agent-shell) spawn
the agent and speak JSON-RPC to it over stdio; the ``agent-client-protocol``
package (``pip install codexcore[acp]``) carries the wire, and this module
maps it onto the engine's Ops and Events. Each ACP session is one
:class:`~codexcore.Codex` engine on this loop; all share one model client pool.

Method -> engine, one row each:

=======================  ==========================================================
``initialize``           protocol version (ours is 1), capabilities; the client's
                         kept (``fs`` read/write; ``terminal``: unconfined commands
                         run in editor terminals, :mod:`._acp_terminal`)
``session/new``          a new engine, ``configure_session {cwd}``; the editor's
                         MCP servers (:func:`editor_mcp_servers`) are that engine's,
                         beside config.toml's (the editor's win a name clash);
                         a server that fails to start is reported as a message
``session/load``         ``get_history`` replayed as updates, ``resume_session``
``session/list``         the recorded sessions (``list_sessions``), 50 a page
``session/prompt``       ``user_input`` (text, images, resource links, embedded
                         resources); answered when the Task's terminal event comes:
                         ``task_complete`` -> end_turn (refusal when the model
                         refused), ``turn_aborted`` -> cancelled, ``error``
                         ``incomplete`` (max_output_tokens) -> max_tokens, any
                         other ``error`` -> a JSON-RPC error naming it
``session/cancel``       ``interrupt``; waiting permission requests are withdrawn
``session/set_mode``     approval presets (:data:`~._acp_map.MODES`) through
                         :meth:`AcpSession.switch_policies`; ``current_mode_update``
approvals                ``session/request_permission``: allow once / always, reject
                         once / always -> approved, approved_for_session, denied
                         (remembered for that command), denied; cancelled -> denied.
                         An MCP call's (command ``["mcp", server, tool, args]``)
                         is asked as the tool call ``server.tool``: allow always
                         allows that tool, reject always rejects it, for the session
=======================  ==========================================================

Events -> ``session/update``: see :mod:`codexcore.adapters._acp_map`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import attrs
from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.interfaces import Agent, Client
from acp.schema import (
    AgentCapabilities,
    AudioContentBlock,
    BlobResourceContents,
    ClientCapabilities,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionModeState,
    SetSessionModeResponse,
    TextContentBlock,
    TextResourceContents,
    Usage,
)

from codexcore import __version__
from codexcore._logging import get_logger
from codexcore.engine import (
    Codex,
    EngineClosed,
    EngineConfig,
    McpServerConfig,
    ModelClientPool,
    context_window,
    default_home,
    list_sessions,
    model_details,
)
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ApplyPatchApprovalRequest,
    ConfigureSession,
    DeleteChange,
    ErrorEvent,
    Event,
    EventMsg,
    ExecApproval,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    FileChange,
    GetHistory,
    ImageInput,
    InputItem,
    Interrupt,
    McpStartupUpdate,
    OverrideTurnContext,
    PatchApplyBegin,
    PatchApplyEnd,
    PatchApproval,
    ResumeSession,
    ReviewDecision,
    SandboxPolicy,
    SessionConfigured,
    SessionHistory,
    SessionSummary,
    Shutdown,
    TextInput,
    TokenCount,
    UserInput,
    WarningEvent,
)

from ._acp_map import (
    CUSTOM_MODE,
    MODES_BY_ID,
    ToolCallMapper,
    Update,
    message_chunk,
    mode_of,
    mode_state,
    policies_of,
    terminal,
)
from ._acp_terminal import ClientTerminals

log = get_logger(__name__)

__all__ = ["CodexAgent", "NotAPipe", "editor_mcp_servers", "serve_acp"]

READ_LIMIT = 1024 * 1024
"""The most of one linked file (a resource link in a prompt) read from disk, in bytes."""

HISTORY_PAGE = 1000
LIST_PAGE = 50
TITLE_LENGTH = 80

PERMISSION_OPTIONS = (
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Allow for this session", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(
        option_id="reject_always", name="Reject for this session", kind="reject_always"
    ),
)
DECISIONS: dict[str | None, tuple[ReviewDecision, str | None]] = {
    "allow_once": ("approved", None),
    "allow_always": ("approved_for_session", None),
    "reject_once": ("denied", "the user rejected it in the editor"),
    "reject_always": ("denied", "the user rejected it in the editor, for the rest of the session"),
    None: ("denied", "the permission request was cancelled, so it was not allowed"),
}
"""Permission option (None: cancelled) -> the approval decision and what the model is told."""


MCP_PERMISSION_OPTIONS = (
    PERMISSION_OPTIONS[0],
    PermissionOption(
        option_id="allow_always", name="Allow this tool for this session", kind="allow_always"
    ),
    PERMISSION_OPTIONS[2],
    PermissionOption(
        option_id="reject_always", name="Reject this tool for this session", kind="reject_always"
    ),
)
"""The options of an MCP call's permission request: "always" covers the tool, whatever
its arguments (the engine approves that tool for the session)."""


def editor_mcp_servers(servers: Sequence[Any]) -> tuple[dict[str, McpServerConfig], list[str]]:
    """The MCP servers an editor lists in ``session/new`` or ``session/load``, as the
    engine's server configurations by name, and a notice for each one not started.

    stdio servers (``command``, ``args``, ``env``) and streamable-HTTP ones (``url``,
    ``headers``) run as the session's own; SSE servers (the protocol's older HTTP
    transport, which the engine does not speak, and which ``initialize`` does not
    offer) are reported back, never silently dropped. A later server of the same
    name replaces an earlier one.
    """
    configs: dict[str, McpServerConfig] = {}
    notices: list[str] = []
    for server in servers:
        if isinstance(server, McpServerStdio):
            env = {variable.name: variable.value for variable in server.env}
            configs[server.name] = McpServerConfig(
                command=server.command, args=tuple(server.args), env=env
            )
        elif isinstance(server, HttpMcpServer):
            headers = {header.name: header.value for header in server.headers}
            configs[server.name] = McpServerConfig(url=server.url, http_headers=headers)
        else:
            name = getattr(server, "name", "?")
            kind = getattr(server, "type", type(server).__name__)
            notices.append(
                f"MCP server {name!r} was not started: codexcore does not speak its "
                f"transport ({kind}); use stdio or streamable HTTP."
            )
    return configs, notices


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
        self.codex = Codex(config, clients=agent.clients, threadsafe=False)
        self.id = ""
        self.cwd = cwd
        self.mapper = self._mapper()
        self.waiters: dict[str, _Waiter] = {}
        self.prompt: _Prompt | None = None
        self.asking: set[asyncio.Task[None]] = set()
        self.rejected: set[tuple[str, ...]] = set()
        self.patches: dict[str, dict[str, FileChange]] = {}
        self.notices: list[str] = []
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
        return ToolCallMapper(self.cwd, _read_disk, window, self.mcp_names)

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
        op = OverrideTurnContext(approval_policy=approval, sandbox_policy=sandbox)
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
        for task in list(self.asking):
            task.cancel()
        await self.codex.submit(Interrupt(), id=f"acp-{next(self._ids)}")

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
            await self._approval(msg)
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
            for call_id in self.mapper.unfinished():
                await self.send(self.mapper.refused_call(call_id, "cancelled: the task ended"))
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
        late approvals (after a cancel) and are only logged."""
        msg = event.msg
        if isinstance(msg, WarningEvent):
            notice = f"warning: {msg.message}"
        elif isinstance(msg, McpStartupUpdate) and msg.status.state == "failed":
            notice = f"MCP server {msg.server!r} failed to start: {msg.status.error}"
        else:
            log.debug("event outside a prompt", type=msg.TYPE, id=event.id)
            return
        if self.prompt is not None:
            await self.send(message_chunk(notice + "\n\n"))
        else:
            self.notices.append(notice)

    async def send(self, update: Update | CurrentModeUpdate) -> None:
        await self.agent.conn.session_update(session_id=self.id, update=update)

    # --- approvals --------------------------------------------------------------

    async def _approval(self, msg: ExecApprovalRequest | ApplyPatchApprovalRequest) -> None:
        for update in self.mapper.updates(msg):
            await self.send(update)
        command = self._rejection_key(msg)
        if command is not None and command in self.rejected:
            why = "rejected earlier in this session (reject always)"
            await self.send(self.mapper.refused_call(msg.call_id, why))
            await self._decide(
                msg, "denied", f"the user rejected this command for the session: {why}"
            )
            return
        task = asyncio.create_task(self._ask(msg, command))
        self.asking.add(task)
        task.add_done_callback(self.asking.discard)

    def _rejection_key(
        self, msg: ExecApprovalRequest | ApplyPatchApprovalRequest
    ) -> tuple[str, ...] | None:
        """What "reject always" remembers: the command, or an MCP call's tool."""
        if not isinstance(msg, ExecApprovalRequest):
            return None
        called = self.mapper.mcp_call_of(msg.command)
        return ("mcp", called[0], called[1]) if called else tuple(msg.command)

    async def _ask(
        self, msg: ExecApprovalRequest | ApplyPatchApprovalRequest, command: Any
    ) -> None:
        tool_call = self.mapper.permission_view(msg.call_id)
        is_mcp = isinstance(msg, ExecApprovalRequest) and self.mapper.mcp_call_of(msg.command)
        options = MCP_PERMISSION_OPTIONS if is_mcp else PERMISSION_OPTIONS
        choice: str | None = None
        try:
            response = await self.agent.conn.request_permission(
                session_id=self.id, tool_call=tool_call, options=list(options)
            )
            outcome = response.outcome
            choice = outcome.option_id if outcome.outcome == "selected" else None
        except asyncio.CancelledError:
            # session/cancel: the interrupt that follows answers the engine.
            await self._send_quietly(self.mapper.refused_call(msg.call_id, "cancelled"))
            return
        except (RequestError, ConnectionError) as exc:
            log.warning("permission request failed", error=str(exc))
        decision, reason = DECISIONS.get(choice, DECISIONS[None])
        if choice == "reject_always" and command is not None:
            self.rejected.add(command)
        if decision == "denied":
            await self._send_quietly(self.mapper.refused_call(msg.call_id, f"not run: {reason}"))
        await self._decide(msg, decision, reason)

    async def _decide(
        self,
        msg: ExecApprovalRequest | ApplyPatchApprovalRequest,
        decision: ReviewDecision,
        reason: str | None,
    ) -> None:
        answer = ExecApproval if isinstance(msg, ExecApprovalRequest) else PatchApproval
        await self.codex.submit(answer(msg.call_id, decision, reason), id=f"acp-{next(self._ids)}")

    async def _send_quietly(self, update: Update) -> None:
        try:
            await self.send(update)
        except (ConnectionError, RequestError) as exc:
            log.warning("could not tell the editor", error=str(exc))

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
            content = await asyncio.to_thread(_read_disk, target)
            if content is not None:
                await self.agent.conn.write_text_file(
                    session_id=self.id, path=target, content=content
                )

    # --- end ------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Shut the engine down (killing its commands) and end the pump."""
        for task in list(self.asking):
            task.cancel()
        with contextlib.suppress(EngineClosed):
            await self.codex.submit(Shutdown(), id=f"acp-{next(self._ids)}")
        if self._pump is not None:
            await asyncio.wait({self._pump})
        await self.codex.aclose()


def _read_disk(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return file.read(READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None


class CodexAgent:
    """The ACP ``Agent``: sessions by id, each an :class:`AcpSession`.

    ``config`` is what every session starts from (config.toml's settings, as
    the CLI resolved them); ``clients`` is shared by all sessions and closed
    by :meth:`aclose`.
    """

    def __init__(self, config: EngineConfig, *, clients: ModelClientPool | None = None) -> None:
        self.config = config
        self.clients = clients or ModelClientPool(config)
        self.sessions: dict[str, AcpSession] = {}
        self.client_capabilities = ClientCapabilities()
        self._conn: Client | None = None

    @property
    def conn(self) -> Client:
        assert self._conn is not None, "the connection calls on_connect first"
        return self._conn

    @property
    def can_read(self) -> bool:
        fs = self.client_capabilities.fs
        return bool(fs and fs.read_text_file)

    @property
    def can_write(self) -> bool:
        fs = self.client_capabilities.fs
        return bool(fs and fs.write_text_file)

    @property
    def takes_images(self) -> bool:
        """Whether the configured model takes images: every model of the engine's
        catalogue does; of a model it does not know (a local server's), nothing is
        promised."""
        return model_details(self.config.session.model) is not None

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **_: Any,
    ) -> InitializeResponse:
        self.client_capabilities = client_capabilities or ClientCapabilities()
        log.info("acp client", client=client_info.name if client_info else None)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
                prompt_capabilities=PromptCapabilities(
                    image=self.takes_images, audio=False, embedded_context=True
                ),
                # Streamable HTTP is the engine's own transport; SSE it does not speak.
                mcp_capabilities=McpCapabilities(http=True, sse=False),
            ),
            agent_info=Implementation(name="codexcore", title="codexcore", version=__version__),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[Any] | None = None, **_: Any
    ) -> NewSessionResponse:
        session = await self._open(cwd, mcp_servers)
        try:
            await session.configure(ConfigureSession(cwd=cwd))
        except BaseException:
            await session.aclose()
            raise
        self._register(session, mcp_servers)
        return NewSessionResponse(
            session_id=session.id, modes=session.modes(), field_meta=_meta(session.notices)
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Sequence[Any] | None = None, **_: Any
    ) -> LoadSessionResponse:
        session = self.sessions.get(session_id)
        fresh = session is None
        if session is None:
            session = await self._open(cwd, mcp_servers)
        try:
            events = await session.history(session_id)
            if fresh:
                configured = await session.configure(ResumeSession(session_id))
                if os.path.normpath(cwd) != configured.cwd:  # noqa: ASYNC240 (no I/O)
                    await session.configure(ConfigureSession(cwd=cwd))
        except BaseException:
            if fresh:
                await session.aclose()
            raise
        self._register(session, mcp_servers)
        await self._replay(session, events)
        return LoadSessionResponse(modes=session.modes(), field_meta=_meta(session.notices))

    async def _open(self, cwd: str, mcp_servers: Sequence[Any] | None) -> AcpSession:
        """A new session's engine; the editor's MCP servers start with its Session."""
        if not os.path.isabs(cwd) or not await asyncio.to_thread(os.path.isdir, cwd):
            raise RequestError(
                -32602, f"cwd must be an absolute path to a directory: {cwd!r}", None
            )
        servers, notices = editor_mcp_servers(mcp_servers or ())
        session = AcpSession(self, cwd, servers)
        session.notices += notices
        await session.start()
        return session

    def _register(self, session: AcpSession, mcp_servers: Sequence[Any] | None) -> None:
        """Keep ``session``. A session loaded again keeps the MCP servers it runs: the
        editor's servers it does not run are reported, not started."""
        known = self.sessions.get(session.id) is session
        self.sessions[session.id] = session
        if known:
            missing = [s.name for s in mcp_servers or () if s.name not in session.mcp_names]
            session.notices += [
                f"MCP server {name!r} was not started: the session was already running "
                "and keeps the servers it started with."
                for name in missing
            ]

    async def _replay(self, session: AcpSession, events: list[Event]) -> None:
        """A recorded session as updates: messages, and tool calls in their final state."""
        mapper = ToolCallMapper(
            session.cwd, _read_disk, session.mapper.context_window, session.mcp_names
        )
        for event in events:
            for update in mapper.updates(event.msg):
                await session.send(update)
        for call_id in mapper.unfinished():
            await session.send(mapper.refused_call(call_id, "not run"))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> ListSessionsResponse:
        """Recorded sessions, newest first, a page at a time (``cursor``: where the
        previous page ended); only those started in ``cwd`` when given."""
        start = _offset(cursor)
        home = Path(self.config.home) if self.config.home else default_home()
        found = await asyncio.to_thread(list_sessions, home, cwd, start + LIST_PAGE + 1)
        page = found[start : start + LIST_PAGE]
        more = len(found) > start + LIST_PAGE
        return ListSessionsResponse(
            sessions=[_session_info(summary) for summary in page],
            next_cursor=str(start + LIST_PAGE) if more else None,
        )

    async def set_session_mode(
        self, session_id: str, mode_id: str, **_: Any
    ) -> SetSessionModeResponse:
        await self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        session = self._session(session_id)
        items = [item for block in prompt for item in await self._input_of(session, block)]
        return await session.run_prompt(items)

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            await session.cancel()

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError(-32602, f"unknown session {session_id!r}", {"sessionId": session_id})
        return session

    # --- prompt content ------------------------------------------------------------

    async def _input_of(self, session: AcpSession, block: Any) -> list[InputItem]:
        """One prompt content block as input items (``<context ref>`` wraps file text,
        as Codex's own ACP agent does)."""
        if isinstance(block, TextContentBlock):
            return [TextInput(block.text)]
        if isinstance(block, ImageContentBlock) and not self.takes_images:
            model = self.config.session.model
            raise RequestError(-32602, f"the model {model!r} is not known to take images", None)
        if isinstance(block, ImageContentBlock):
            web = block.uri if block.uri and _is_web(block.uri) else None
            return [ImageInput(web or _data_url(block.mime_type, block.data))]
        if isinstance(block, ResourceContentBlock):
            return [TextInput(await self._linked(session, block.uri, block.name))]
        if isinstance(block, EmbeddedResourceContentBlock):
            return [_embedded(block.resource)]
        if isinstance(block, AudioContentBlock):
            raise RequestError(
                -32602, "audio prompts are not supported (promptCapabilities.audio is false)", None
            )
        raise RequestError(-32602, f"unsupported prompt content: {type(block).__name__}", None)

    async def _linked(self, session: AcpSession, uri: str, name: str) -> str:
        """A resource link: a file's text (the editor's buffer when it offers
        ``fs/read_text_file``, else the disk), or the link itself."""
        parts = urlsplit(uri)
        if parts.scheme != "file":
            return f"[@{name}]({uri})"
        path = unquote(parts.path)
        if self.can_read:
            try:
                content: str | None = (
                    await self.conn.read_text_file(session_id=session.id, path=path)
                ).content
            except RequestError as exc:
                log.warning("editor could not read a linked file", path=path, error=str(exc))
                content = None
        else:
            content = await asyncio.to_thread(_read_disk, path)
        if content is None:
            return f"[@{name}]({uri}) (could not be read)"
        return _context(uri, content)

    # --- end -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Shut every session down, then close the shared model clients."""
        sessions, self.sessions = list(self.sessions.values()), {}
        await asyncio.gather(*(session.aclose() for session in sessions))
        await self.clients.aclose()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise RequestError(-32602, f"not a cursor of session/list: {cursor!r}", None)
    return int(cursor)


def _session_info(summary: SessionSummary) -> SessionInfo:
    title = summary.first_user_message
    if title is not None and len(title) > TITLE_LENGTH:
        title = title[: TITLE_LENGTH - 1] + "…"
    return SessionInfo(
        session_id=summary.session_id, cwd=summary.cwd, title=title, updated_at=summary.updated_at
    )


def _meta(notices: list[str]) -> dict[str, Any] | None:
    return {"codexcore": {"notices": list(notices)}} if notices else None


def _is_web(uri: str) -> bool:
    return urlsplit(uri).scheme in ("http", "https")


def _data_url(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


def _context(uri: str, content: str) -> str:
    return f'<context ref="{uri}">\n{content}\n</context>'


def _embedded(resource: TextResourceContents | BlobResourceContents) -> InputItem:
    if isinstance(resource, TextResourceContents):
        return TextInput(_context(resource.uri, resource.text))
    mime = resource.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return ImageInput(_data_url(mime, resource.blob))
    return TextInput(f"[binary resource {resource.uri} ({mime}), not shown]")


class NotAPipe(Exception):
    """stdin or stdout of ``codexcore acp`` is something the event loop cannot watch."""


async def serve_acp(config: EngineConfig, in_fd: int, out_fd: int) -> int:
    """Serve one editor over the pipes ``in_fd`` / ``out_fd`` until it closes its end;
    then every session is shut down (its commands killed). Returns the exit code."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
    try:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", buffering=0)
        )
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(), os.fdopen(out_fd, "wb", buffering=0)
        )
    except ValueError as exc:  # a regular file, say: the event loop cannot watch it
        raise NotAPipe(
            f"stdin and stdout must be pipes or sockets, as an editor gives: {exc}"
        ) from None
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    agent = CodexAgent(config)
    try:
        # The router answers -32601 for the methods of the Agent protocol not served here.
        await run_agent(cast(Agent, agent), writer, reader)
    finally:
        await agent.aclose()
        transport.close()
    return 0
