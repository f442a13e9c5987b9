"""An ACP client for tests: the ``agent-client-protocol`` package's own client side,
recording every update, answering permissions and file requests as told, and
checking every message both ways against the protocol's JSON schema (the one
the package ships, as its generated ``acp.schema`` models)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import jsonschema
from acp import spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.interfaces import Agent, Client
from acp.schema import (
    AllowedOutcome,
    CancelNotification,
    ClientCapabilities,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateTerminalRequest,
    CreateTerminalResponse,
    DeniedOutcome,
    EnvVariable,
    FileSystemCapabilities,
    InitializeRequest,
    InitializeResponse,
    KillTerminalRequest,
    KillTerminalResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    PermissionOption,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    SetSessionModeRequest,
    SetSessionModeResponse,
    TerminalExitStatus,
    TerminalOutputRequest,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from pydantic import BaseModel, RootModel

from codexcore.testing import ScriptedModel, ScriptedResponsesServer

from .server_helpers import server_env

PY = sys.executable


class ElicitationRequest(RootModel[CreateElicitationRequest]):
    """``elicitation/create``'s params (a union in the package: a model to check against)."""


class ElicitationResponse(RootModel[CreateElicitationResponse]):
    """``elicitation/create``'s result."""


# method -> (params model, result model or None for a notification)
METHODS: dict[str, tuple[type[BaseModel], type[BaseModel] | None]] = {
    "initialize": (InitializeRequest, InitializeResponse),
    "session/new": (NewSessionRequest, NewSessionResponse),
    "session/load": (LoadSessionRequest, LoadSessionResponse),
    "session/list": (ListSessionsRequest, ListSessionsResponse),
    "session/prompt": (PromptRequest, PromptResponse),
    "session/set_mode": (SetSessionModeRequest, SetSessionModeResponse),
    "session/cancel": (CancelNotification, None),
    "session/update": (SessionNotification, None),
    "session/request_permission": (RequestPermissionRequest, RequestPermissionResponse),
    "fs/read_text_file": (ReadTextFileRequest, ReadTextFileResponse),
    "fs/write_text_file": (WriteTextFileRequest, WriteTextFileResponse),
    "terminal/create": (CreateTerminalRequest, CreateTerminalResponse),
    "terminal/output": (TerminalOutputRequest, TerminalOutputResponse),
    "terminal/wait_for_exit": (WaitForTerminalExitRequest, WaitForTerminalExitResponse),
    "terminal/kill": (KillTerminalRequest, KillTerminalResponse),
    "terminal/release": (ReleaseTerminalRequest, ReleaseTerminalResponse),
    "elicitation/create": (ElicitationRequest, ElicitationResponse),
}
ERROR_SCHEMA = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
}


@functools.cache
def validator(model: type[BaseModel]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(model.model_json_schema(by_alias=True))


class SchemaChecker:
    """Observes the connection: every message is checked against its method's schema;
    problems are collected, not raised (an observer's exception would be swallowed)."""

    def __init__(self) -> None:
        self.checked = 0
        self.problems: list[str] = []
        self.methods: list[str] = []
        self._pending: dict[tuple[StreamDirection, Any], str] = {}

    def __call__(self, event: StreamEvent) -> None:
        message = event.message
        if message.get("jsonrpc") != "2.0":
            self.problems.append(f"not JSON-RPC 2.0: {message}")
        method = message.get("method")
        if method is not None:
            self._request(event.direction, method, message)
        elif "id" in message:
            self._response(event.direction, message)
        self.checked += 1

    def _request(self, direction: StreamDirection, method: str, message: dict[str, Any]) -> None:
        self.methods.append(method)
        if method not in METHODS:
            self.problems.append(f"a method this test does not expect: {method}")
            return
        params_model, result_model = METHODS[method]
        if "id" in message:
            if result_model is None:
                self.problems.append(f"{method} is a notification but came with an id")
            self._pending[(direction, message["id"])] = method
        elif result_model is not None:
            self.problems.append(f"{method} is a request but came without an id")
        self._check(params_model, message.get("params"), method)

    def _response(self, direction: StreamDirection, message: dict[str, Any]) -> None:
        asked = (
            StreamDirection.OUTGOING
            if direction == StreamDirection.INCOMING
            else (StreamDirection.INCOMING)
        )
        method = self._pending.pop((asked, message["id"]), None)
        if method is None:
            self.problems.append(f"a response to no request: {message}")
            return
        if "error" in message:
            for error in jsonschema.Draft202012Validator(ERROR_SCHEMA).iter_errors(
                message["error"]
            ):
                self.problems.append(f"{method} error: {error.message}")
            return
        result_model = METHODS[method][1]
        assert result_model is not None
        self._check(result_model, message.get("result"), f"{method} result")

    def _check(self, model: type[BaseModel], value: Any, what: str) -> None:
        for error in validator(model).iter_errors(value):
            self.problems.append(f"{what}: {error.message} at {list(error.absolute_path)}")


Answer = Callable[[RequestPermissionRequest], str | None]
"""Chooses a permission option id (None: the request is cancelled)."""


class RecordingClient:
    """The editor's side: records updates and requests, answers as configured."""

    def __init__(
        self,
        *,
        fs: bool = True,
        terminal: bool = False,
        answer: Answer = lambda request: "allow_once",
        buffers: dict[str, str] | None = None,
    ) -> None:
        self.fs = fs
        self.terminal = terminal
        self.terminals: dict[str, Terminal] = {}
        self.created: list[tuple[str, list[str], str | None]] = []
        self.killed: list[str] = []
        self.released: list[str] = []
        self.answer = answer
        self.buffers = buffers or {}
        self.updates: list[Any] = []
        self.permissions: list[RequestPermissionRequest] = []
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.changed = asyncio.Condition()
        self.initialized: InitializeResponse | None = None

    def capabilities(self) -> ClientCapabilities:
        fs = FileSystemCapabilities(read_text_file=self.fs, write_text_file=self.fs)
        return ClientCapabilities(fs=fs, terminal=self.terminal)

    def on_connect(self, conn: Agent) -> None:
        pass

    async def _note(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        await self._note()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        request = RequestPermissionRequest(
            session_id=session_id, tool_call=tool_call, options=options
        )
        self.permissions.append(request)
        await self._note()
        choice = self.answer(request)
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kw: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=await asyncio.to_thread(Path(path).read_text))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    # --- terminals: the editor runs the command (in its own process group) ---

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = await Terminal.start(
            [command, *(args or [])], cwd, self._note
        )
        self.created.append((command, list(args or []), cwd))
        await self._note()
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self.terminals[terminal_id]
        return TerminalOutputResponse(
            output=terminal.output.decode(), truncated=False, exit_status=terminal.status()
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        status = await self.terminals[terminal_id].wait()
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        self.killed.append(terminal_id)
        await self.terminals[terminal_id].kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self.released.append(terminal_id)
        await self.terminals[terminal_id].kill()
        await self._note()
        return ReleaseTerminalResponse()

    async def wait_for(self, predicate: Callable[[], Any], within: float = 20.0) -> Any:
        """Wait until ``predicate()`` is truthy; on timeout, fail showing what came."""
        async with self.changed:
            try:
                async with asyncio.timeout(within):
                    while not (result := predicate()):
                        await self.changed.wait()
            except TimeoutError:
                raise AssertionError(f"waited {within}s; updates: {self.summary()}") from None
        return result

    def summary(self) -> list[str]:
        return [describe(update) for update in self.updates]

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(kind))

    def call(self, call_id: str) -> list[Any]:
        """Every tool_call / tool_call_update of ``call_id``, in order."""
        return [
            u
            for u in self.updates
            if u.session_update in ("tool_call", "tool_call_update") and u.tool_call_id == call_id
        ]


class Terminal:
    """A command the test editor runs for the agent, in a process group of its own."""

    def __init__(
        self, process: asyncio.subprocess.Process, notify: Callable[[], Awaitable[None]]
    ) -> None:
        self.process = process
        self.notify = notify
        self.output = bytearray()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(
        cls, argv: list[str], cwd: str | None, notify: Callable[[], Awaitable[None]]
    ) -> Terminal:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        return cls(process, notify)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.output += chunk
            await self.notify()

    def status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)

    async def wait(self) -> TerminalExitStatus:
        await self.process.wait()
        await self.reader
        status = self.status()
        assert status is not None
        return status

    async def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        await self.wait()


def describe(update: Any) -> str:
    kind = update.session_update
    if kind in ("tool_call", "tool_call_update"):
        return f"{kind}:{update.tool_call_id}:{update.status}"
    if kind.endswith("_chunk"):
        return f"{kind}:{update.content.text!r}"
    return str(kind)


@asynccontextmanager
async def acp_agent(
    client: RecordingClient,
    base_url: str,
    cwd: Path,
    *args: str,
    shutdown_timeout: float = 10.0,
    unstable: bool = False,
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process, SchemaChecker]]:
    """``codexcore acp`` as an editor spawns it, initialized; on exit every message
    must have passed the schema, and the process must have exited 0. ``unstable``: the
    client takes the protocol's unstable methods (``elicitation/create``)."""
    checker = SchemaChecker()
    stderr_path = cwd.parent / f"{cwd.name}-acp-stderr.log"
    with stderr_path.open("wb") as stderr:
        async with spawn_agent_process(
            cast(Client, client),  # the methods it leaves out answer -32601
            PY,
            "-m",
            "codexcore",
            "acp",
            *args,
            env=server_env(base_url),
            cwd=cwd,
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": shutdown_timeout},
            observers=[checker],
            use_unstable_protocol=unstable,
        ) as (conn, process):
            client.initialized = await asyncio.wait_for(
                conn.initialize(protocol_version=1, client_capabilities=client.capabilities()), 20
            )
            yield conn, process, checker
    assert await asyncio.wait_for(process.wait(), 10) == 0, stderr_path.read_text()
    assert not checker.problems, checker.problems
    assert checker.checked > 0


@asynccontextmanager
async def serving(
    model: ScriptedModel,
    client: RecordingClient,
    cwd: Path,
    *args: str,
    shutdown_timeout: float = 10.0,
    unstable: bool = False,
) -> AsyncIterator[tuple[ClientSideConnection, SchemaChecker]]:
    """A scripted model on a real local HTTP server, and ``codexcore acp`` using it."""
    async with (
        ScriptedResponsesServer(model) as http,
        acp_agent(
            client, http.base_url, cwd, *args, shutdown_timeout=shutdown_timeout, unstable=unstable
        ) as (
            conn,
            _,
            checker,
        ),
    ):
        yield conn, checker


def prompt_text(value: str) -> list[Any]:
    """A prompt of one text block, as an editor sends what the user typed."""
    from acp.schema import TextContentBlock

    return [TextContentBlock(type="text", text=value)]


def outputs_of(request: dict[str, Any]) -> dict[str, str]:
    """The function_call_output items of a model request, by call_id."""
    return {
        item["call_id"]: item["output"]
        for item in request["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
