"""A Session's MCP servers: their configuration, startup, tools, calls and end.

Theory of operation
-------------------
:class:`McpManager` lives as long as its Session. ``start`` makes one asyncio
task per enabled server (its keeper), so the servers start in parallel beside
whatever the Session does. A keeper spawns a stdio server's process at once
(in a process group of its own, registered with the reaper), then loads the
MCP SDK off the loop (the first load takes ~0.6 s, overlapping the servers'
own start), connects, initializes, lists the tools and reports
``mcp_startup_update`` (``starting``, then ``ready`` or ``failed``); when every
server has settled, ``mcp_startup_complete``. Each startup is bounded by its
``startup_timeout_sec``; a server that fails, hangs or exits costs its tools,
never the Session.

A ready keeper holds its connection open until ``aclose`` (or until the
server's process exits: its state becomes ``failed``). Calls go through the
connection from the Task's own asyncio task, each bounded by
``tool_timeout_sec``. ``aclose`` ends every keeper and kills each stdio
server's whole process group.

The SDK is imported only here, lazily, and only when a Session has servers
(:mod:`._mcp_client`): ``import codexcore`` never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import importlib
import os
import re
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .._logging import get_logger
from ..protocol import (
    Duration,
    EventMsg,
    McpAuthStatus,
    McpInvocation,
    McpListToolsResponse,
    McpServerState,
    McpServerStatus,
    McpStartupComplete,
    McpStartupFailure,
    McpStartupStatus,
    McpStartupUpdate,
)
from ..protocol._value import Value
from ._mcp_config import DEFAULT_STARTUP_TIMEOUT as DEFAULT_STARTUP_TIMEOUT
from ._mcp_config import DEFAULT_TOOL_TIMEOUT as DEFAULT_TOOL_TIMEOUT
from ._mcp_config import McpServerConfig as McpServerConfig

if TYPE_CHECKING:
    from ._mcp_client import Connection

log = get_logger(__name__)

Emit = Callable[[EventMsg], Awaitable[None]]

DELIMITER = "__"
"""Joins server and tool in a qualified name; the API allows no other separator."""
MAX_TOOL_NAME = 64
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")
_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LEN = 8

INHERITED_ENV = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "USER",
)
"""What a stdio server inherits of codexcore's environment (Codex's list): never the
model's key or anything else; ``env`` in its configuration adds the rest."""

STOP_GRACE = 0.5
"""Seconds a stdio server has to exit once its stdin closes, before its group is killed."""
GROUP_DEATH_WAIT = 2.0
"""Seconds to wait, after the kill, for a stdio server's group to be gone."""
STDERR_TAIL = 2048
"""Bytes of a stdio server's stderr kept, to say why it failed."""


@attrs.frozen(repr=False, eq=False)
class McpTool(Value):
    """A tool the model is offered: ``qualified`` is its name there."""

    server: str
    name: str
    qualified: str
    definition: dict[str, Any]  # as the server sent it (MCP's camelCase)

    @property
    def annotations(self) -> Mapping[str, Any]:
        annotations = self.definition.get("annotations")
        return annotations if isinstance(annotations, dict) else {}

    def spec(self) -> dict[str, Any]:
        """The tool as a Responses-API function."""
        schema = self.definition.get("inputSchema")
        parameters = dict(schema) if isinstance(schema, dict) else {}
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        description = self.definition.get("description")
        return {
            "type": "function",
            "name": self.qualified,
            "description": description if isinstance(description, str) else "",
            "strict": False,
            "parameters": parameters,
        }


def qualified_names(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Each ``(server, tool)`` under the name the model sees: ``server__tool``, with
    characters the API refuses made ``_``, and where that is over 64 characters or
    taken (two raw names made alike) cut to fit and ended by a short hash of the
    raw name, so the same tools always get the same names."""
    names: dict[tuple[str, str], str] = {}
    used: set[str] = set()
    for server, tool in pairs:
        raw = f"{server}{DELIMITER}{tool}"
        name = _ALLOWED.sub("_", raw)
        if len(name) > MAX_TOOL_NAME or name in used:
            digest = hashlib.sha1(raw.encode()).hexdigest()[:_HASH_LEN]
            name = f"{name[: MAX_TOOL_NAME - _HASH_LEN - 1]}_{digest}"
        if name in used:
            log.warning("mcp.duplicate_tool", server=server, tool=tool)
            continue
        used.add(name)
        names[server, tool] = name
    return names


class McpCallError(Exception):
    """A call that has no result: the message is what the model and the UI are told."""


@attrs.define
class _Server:
    name: str
    config: McpServerConfig
    state: McpServerState = "starting"
    error: str | None = None
    connected_at: str | None = None
    tools: list[dict[str, Any]] = attrs.field(factory=list)  # definitions, offered ones only
    connection: Connection | None = None
    settled: asyncio.Event = attrs.field(factory=asyncio.Event)
    stop: asyncio.Event = attrs.field(factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    stderr: bytearray = attrs.field(factory=bytearray)
    stderr_reader: asyncio.Task[None] | None = None

    def status(self) -> McpServerStatus:
        return McpServerStatus(
            self.name,
            self.config.transport,
            self.config.enabled,
            self.state,
            len(self.tools) if self.state == "ready" else 0,
            self.error,
            self.connected_at,
        )


class McpManager:
    """The MCP servers of one Session (see the module's theory of operation)."""

    def __init__(self, servers: Mapping[str, McpServerConfig], emit: Emit, cwd: str) -> None:
        """``emit`` sends startup events (under the id of the submission that made
        the Session); ``cwd`` is where a stdio server runs unless it names its own."""
        self._servers = {
            name: _Server(name, config, "starting" if config.enabled else "disabled")
            for name, config in sorted(servers.items())
        }
        self._emit = emit
        self._cwd = cwd
        self._tools: dict[str, McpTool] | None = None  # by qualified name; None: recompute
        self._complete: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Start every enabled server, in parallel, without waiting."""
        enabled = [s for s in self._servers.values() if s.config.enabled]
        for server in enabled:
            server.task = asyncio.create_task(
                self._keep(server), name=f"codexcore-mcp-{server.name}"
            )
        if enabled:
            self._complete = asyncio.create_task(self._report_complete(enabled))

    async def wait_started(self) -> None:
        """Wait until every enabled server is ready or failed (each bounded by its
        startup timeout)."""
        if self._complete is not None:
            await asyncio.shield(self._complete)

    # --- tools ------------------------------------------------------------------------

    def tools(self) -> dict[str, McpTool]:
        """The ready servers' tools, by the name the model sees."""
        if self._tools is None:
            ready = [s for s in self._servers.values() if s.state == "ready"]
            pairs = [(s.name, str(t.get("name"))) for s in ready for t in s.tools]
            names = qualified_names(pairs)
            self._tools = {
                names[s.name, str(t.get("name"))]: McpTool(
                    s.name, str(t.get("name")), names[s.name, str(t.get("name"))], t
                )
                for s in ready
                for t in s.tools
                if (s.name, str(t.get("name"))) in names
            }
        return self._tools

    def specs(self) -> list[dict[str, Any]]:
        """The ready servers' tools as Responses-API functions."""
        return [tool.spec() for tool in self.tools().values()]

    def lookup(self, qualified: str) -> McpTool | None:
        return self.tools().get(qualified)

    def list_response(self) -> McpListToolsResponse:
        """What ``list_mcp_tools`` answers: the tools and every server's state, now."""
        auth: dict[str, McpAuthStatus] = {}
        for server in self._servers.values():
            bearer = server.config.bearer_token_env_var is not None
            auth[server.name] = "bearer_token" if bearer else "unsupported"
        return McpListToolsResponse(
            {name: tool.definition for name, tool in self.tools().items()},
            auth,
            tuple(server.status() for server in self._servers.values()),
        )

    # --- calls -------------------------------------------------------------------------

    async def call(self, tool: McpTool, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """Call ``tool``: MCP's ``CallToolResult`` as JSON (camelCase), ``isError`` and all.

        Raises :class:`McpCallError` when there is no result: the server is gone,
        the call timed out, or the connection failed (the server's state then
        says so).
        """
        server = self._servers[tool.server]
        connection = server.connection
        if server.state != "ready" or connection is None:
            raise McpCallError(f"MCP server {server.name!r} is not running ({server.error})")
        timeout = server.config.tool_timeout_sec
        try:
            async with asyncio.timeout(timeout):
                return await connection.call_tool(tool.name, arguments)
        except TimeoutError:
            raise McpCallError(f"the tool did not answer within {timeout:g} s") from None
        except McpCallError:
            raise
        except Exception as exc:
            # Whatever broke (the process died mid-call, the protocol), the model is told
            # and the Session goes on.
            why = await self._lost(server, connection) or _describe(exc)
            server.error = why
            raise McpCallError(f"the call failed: {why}") from None

    async def _lost(self, server: _Server, connection: Connection) -> str | None:
        """Why a stdio server's call failed, if its process is exiting: then its tools
        are gone from the next request at once, not when its keeper notices."""
        process = connection.process
        if process is None or not (connection.closed() or process.returncode is not None):
            return None  # the server answered with an error, or broke the protocol: it lives
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(process.wait()), 1.0)
        why = self._exited(server, process)
        if why is not None:
            await self._fail(server, why)
        return why

    # --- lifecycle ---------------------------------------------------------------------

    async def aclose(self) -> None:
        """End every server (a stdio server's whole process group is killed) and wait."""
        self._closed = True
        tasks = [s.task for s in self._servers.values() if s.task is not None]
        for server in self._servers.values():
            server.stop.set()
        if self._complete is not None:
            self._complete.cancel()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _report_complete(self, servers: list[_Server]) -> None:
        await asyncio.gather(*(s.settled.wait() for s in servers))
        ready = tuple(s.name for s in servers if s.state == "ready")
        failed = tuple(
            McpStartupFailure(s.name, s.error or "failed")
            for s in servers
            if s.state in ("failed", "auth_required")
        )
        await self._emit(McpStartupComplete(ready, failed, ()))

    async def _keep(self, server: _Server) -> None:
        """Start ``server``, hold it open until the Session ends, then end it."""
        await self._emit(McpStartupUpdate(server.name, McpStartupStatus("starting")))
        process: asyncio.subprocess.Process | None = None
        try:
            if server.config.transport == "stdio":
                process = await self._spawned(server)
            client = await _load_client()
            await client.serve(server, process, self._ready)
        except asyncio.CancelledError:
            if not server.settled.is_set():
                server.state, server.error = "cancelled", "the session ended"
            raise
        except Exception as exc:
            await self._fail(server, self._exited(server, process) or _describe(exc))
        else:
            if not self._closed:
                await self._fail(server, self._exited(server, process) or "the connection closed")
        finally:
            server.connection = None
            self._tools = None
            server.settled.set()
            if process is not None:
                await _end_process(process)

    async def _ready(self, server: _Server, connection: Connection, tools: list[Any]) -> None:
        """Called by the client once ``server`` answered initialize and tools/list."""
        server.tools = [t for t in tools if server.config.allows(str(t.get("name")))]
        server.connection = connection
        server.state, server.error = "ready", None
        server.connected_at = _now()
        self._tools = None
        server.settled.set()
        await self._emit(McpStartupUpdate(server.name, McpStartupStatus("ready")))

    async def _fail(self, server: _Server, why: str) -> None:
        if server.state in ("failed", "auth_required"):
            return
        was_settled = server.settled.is_set()
        auth = "401" in why or "403" in why
        server.state, server.error = ("auth_required" if auth else "failed"), why
        self._tools = None
        server.settled.set()
        if not was_settled:
            await self._emit(McpStartupUpdate(server.name, McpStartupStatus("failed", why)))
        else:
            log.warning("mcp.server_lost", server=server.name, error=why)

    def _exited(
        self, server: _Server, process: asyncio.subprocess.Process | None = None
    ) -> str | None:
        """Why a stdio server is gone, if its process exited: its code and stderr's tail."""
        process = process or getattr(server.connection, "process", None)
        if process is None or process.returncode is None:
            return None
        tail = bytes(server.stderr).decode(errors="replace").strip().splitlines()[-3:]
        said = f": {' / '.join(tail)}" if tail else ""
        return f"the server exited with code {process.returncode}{said}"

    async def _spawned(self, server: _Server) -> asyncio.subprocess.Process:
        """:meth:`_spawn`, seen through: cancelled meanwhile (the Session ended), the
        process it made is ended too, never left running unseen."""
        spawning = asyncio.ensure_future(self._spawn(server))
        try:
            return await asyncio.shield(spawning)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await _end_process(await spawning)
            raise

    async def _spawn(self, server: _Server) -> asyncio.subprocess.Process:
        from ..tools._reaper import REAPER_ENV_VAR, reaper  # with the first server only

        config = server.config
        assert config.command is not None, "a stdio server has a command (config checks)"
        env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
        env |= dict(config.env)
        env[REAPER_ENV_VAR] = reaper().token
        await asyncio.to_thread(reaper().ensure_started)
        try:
            process = await asyncio.create_subprocess_exec(
                config.command,
                *config.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=config.cwd or self._cwd,
                env=env,
                start_new_session=True,
                limit=1 << 24,  # one JSON-RPC message per line, however large
            )
        except OSError as exc:
            raise McpCallError(f"cannot start {config.command!r}: {exc.strerror or exc}") from None
        reaper().register(process.pid)
        assert process.stderr is not None
        server.stderr_reader = asyncio.create_task(_keep_tail(process.stderr, server))
        return process


async def _keep_tail(stream: asyncio.StreamReader, server: _Server) -> None:
    """Read a server's stderr to its end, keeping the last bytes (and logging them)."""
    while chunk := await stream.read(4096):
        server.stderr += chunk
        del server.stderr[:-STDERR_TAIL]
        log.debug("mcp.stderr", server=server.name, text=chunk.decode(errors="replace"))


async def _end_process(process: asyncio.subprocess.Process) -> None:
    """Close stdin, give the server a moment to exit, then kill its whole group
    (whatever it started too) and reap it. Runs to its end even when cancelled."""
    from ..tools._reaper import reaper

    done = asyncio.ensure_future(_stop_group(process))
    while not done.done():
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            continue
    reaper().unregister(process.pid)


async def _stop_group(process: asyncio.subprocess.Process) -> None:
    if process.stdin is not None:
        process.stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), STOP_GRACE)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is empty already
    else:
        # A signal is delivered when its target next runs: wait until it has, so
        # nothing the server started outlives the Session's end.
        for _ in range(int(GROUP_DEATH_WAIT / 0.01)):
            if not await asyncio.to_thread(_group_runs, process.pid):
                break
            await asyncio.sleep(0.01)  # nothing signals another process's death: poll
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), 5.0)


def _group_runs(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies aside), from /proc."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False  # no /proc: the kill is all we can do
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z" and int(fields[2]) == pgid:
            return True
    return False


_CLIENT: asyncio.Future[Any] | None = None


async def _load_client() -> Any:
    """:mod:`._mcp_client`, imported once per process, off the loop."""
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = asyncio.ensure_future(
            asyncio.to_thread(importlib.import_module, "codexcore.engine._mcp_client")
        )
    try:
        return await asyncio.shield(_CLIENT)
    except ImportError as exc:
        _CLIENT = None
        raise McpCallError(
            f"the MCP SDK is not installed ({exc}): pip install 'codexcore[mcp]'"
        ) from None


def _describe(exc: BaseException) -> str:
    """A failure in words: the innermost error of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, McpCallError) else f"{type(exc).__name__}: {text}"


def _now() -> str:
    moment = datetime.datetime.now(datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def invocation(tool: McpTool, arguments: dict[str, Any] | None) -> McpInvocation:
    return McpInvocation(tool.server, tool.name, arguments)


def duration_since(started: float) -> Duration:
    """The time since ``started`` (``time.monotonic()``) as Codex writes a Duration."""
    nanos = max(0, int((time.monotonic() - started) * 1e9))
    return Duration(nanos // 1_000_000_000, nanos % 1_000_000_000)
