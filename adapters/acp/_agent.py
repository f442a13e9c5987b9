"""codexcore as an Agent Client Protocol (ACP) agent: ``codexcore acp``.

Editors (Zed, JetBrains, Neovim's CodeCompanion, Emacs's agent-shell) spawn
the agent and speak JSON-RPC to it over stdio; the ``agent-client-protocol``
package (``pip install codexcore[acp]``) carries the wire, and this module
(the ``Agent``: :class:`CodexAgent`, and :func:`serve_acp`) maps its methods onto
the engine's Ops. Each ACP session is one :class:`~codexcore.Codex` engine on
this loop (:class:`~._session.AcpSession`); all share one model client pool.

Method -> engine, one row each:

=======================  ==========================================================
``initialize``           protocol version (ours is 1), capabilities; the client's
                         kept (``fs`` read/write; ``terminal``: unconfined commands
                         run in editor terminals, :mod:`._terminal`)
``session/new``          a new engine, ``configure_session {cwd}``; the editor's
                         MCP servers (:func:`editor_mcp_servers`) are that engine's,
                         beside config.toml's (the editor's win a name clash);
                         a server that fails to start is reported as a message
``session/load``         ``get_history`` replayed as updates (the user's prompts
                         too; each tool call ended in its place, saying what
                         became of it), ``resume_session``
``session/list``         the recorded sessions (``list_sessions``), 50 a page
``session/prompt``       ``user_input`` (text, images, resource links, embedded
                         resources: :mod:`._prompt`); answered when the
                         Task's terminal event comes (:mod:`._session`):
                         ``task_complete`` -> end_turn (refusal when the model
                         refused), ``turn_aborted`` -> cancelled, ``error``
                         ``incomplete`` (max_output_tokens) -> max_tokens, any
                         other ``error`` -> a JSON-RPC error naming it
``session/cancel``       ``interrupt``; waiting permission requests are withdrawn
``session/set_mode``     approval presets (:data:`~._modes.MODES`) through
                         :meth:`AcpSession.switch_policies`; ``current_mode_update``
questions                the model's ``request_user_input`` -> ``elicitation/create``
                         (form mode) when the client advertises
                         ``elicitation.form``; else the tool is not offered
                         (:mod:`._ask`)
approvals                ``session/request_permission`` (:mod:`._permission`):
                         allow once / always, reject once / always -> approved,
                         approved_for_session, denied (remembered for that
                         command), denied; cancelled -> denied.
                         An MCP call's (command ``["mcp", server, tool, args]``)
                         is asked as the tool call ``server.tool``: allow always
                         allows that tool, reject always rejects it, for the session
=======================  ==========================================================

Events -> ``session/update``: see :mod:`._map`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.interfaces import Agent, Client
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SetSessionModeResponse,
)

from codexcore import __version__
from codexcore._logging import get_logger
from codexcore.engine import (
    EngineConfig,
    McpServerConfig,
    ModelClientPool,
    default_home,
    list_sessions,
    model_details,
)
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ConfigureSession,
    Event,
    ResumeSession,
    SessionSummary,
)

from ._map import ToolCallMapper
from ._prompt import prompt_input
from ._session import AcpSession, read_disk
from ._stdio import InputAwareClient, StdioTransport

log = get_logger(__name__)

__all__ = ["CodexAgent", "NotAPipe", "editor_mcp_servers", "serve_acp"]

LIST_PAGE = 50
TITLE_LENGTH = 80


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


class CodexAgent:
    """The ACP ``Agent``: sessions by id, each an :class:`~._session.AcpSession`.

    ``config`` is what every session starts from (config.toml's settings, as
    the CLI resolved them); ``clients`` is shared by all sessions and closed
    by :meth:`aclose`; ``input_ended`` is set when the client's input has ended
    (:mod:`._stdio`).
    """

    def __init__(
        self,
        config: EngineConfig,
        *,
        clients: ModelClientPool | None = None,
        input_ended: asyncio.Event | None = None,
    ) -> None:
        self.config = config
        self.input_ended = input_ended
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
    def can_ask(self) -> bool:
        """Whether the client takes form elicitations: the model's questions to the user
        (``request_user_input``, :mod:`._ask`) go there; without, it is never offered."""
        elicitation = self.client_capabilities.elicitation
        return bool(elicitation and elicitation.form is not None)

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
        # Over stdio, requests to a client whose input has ended fail at once.
        ended = self.input_ended
        self._conn = conn if ended is None else cast(Client, InputAwareClient(conn, ended))

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
            session.cwd, read_disk, session.mapper.context_window, session.mcp_names, replaying=True
        )
        for event in events:
            for update in mapper.updates(event.msg):
                await session.send(update)
            if event.msg.TYPE in TERMINAL_EVENT_TYPES:  # each call ends in its place
                for update in mapper.finish_task(event.msg.TYPE):
                    await session.send(update)
        for update in mapper.finish_task(None):  # a recording cut short (a crash)
            await session.send(update)

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
        items = [item for block in prompt for item in await prompt_input(session, block)]
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


class NotAPipe(Exception):
    """stdin or stdout of ``codexcore acp`` is something the event loop cannot watch."""


async def serve_acp(config: EngineConfig, in_fd: int, out_fd: int) -> int:
    """Serve one editor over the pipes ``in_fd`` / ``out_fd`` until it closes its end
    and the requests it sent before are answered (:mod:`._stdio`), it stops
    reading our output, or SIGTERM; then every session is shut down (its commands
    killed). Returns the exit code."""
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
    stdio = StdioTransport(reader, writer)
    agent = CodexAgent(config, input_ended=stdio.input_ended)
    # The router answers -32601 for the methods of the Agent protocol not served here.
    # It returns at end of input, once the requests read before it are answered.
    serving = asyncio.ensure_future(run_agent(cast(Agent, agent), stdio))
    gone = asyncio.ensure_future(stdio.output_broken.wait())
    loop.add_signal_handler(signal.SIGTERM, serving.cancel)
    try:
        await asyncio.wait({serving, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not serving.done():
            log.warning("the client stopped reading our output: shutting down")
            serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        gone.cancel()
        await agent.aclose()
        transport.close()
    return 0
