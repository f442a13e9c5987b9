"""A published app-server client (PyPI's ``codex-app-server-sdk``, unchanged) drives a server
over stdio and over WebSocket: a thread, an approved command, an interrupted turn, a
thread resumed by a new process.

Parametrized over the server: the real ``codex app-server`` of the pinned version
(proving the harness against the reference) and ``codexcore app-server``. Outside CI
a missing client venv or Codex binary skips; in CI (``.ci/run`` installs both) it
fails.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedResponsesServer

from .app_server_harness import (
    CODEX,
    CODEXCORE,
    AppServer,
    HarnessModel,
    alive,
    client_python,
    listening,
    processes_in,
    run_client,
    server_home,
)

pytestmark = pytest.mark.anyio

SERVERS = [CODEX, CODEXCORE]
TRANSPORTS = ["stdio", "ws"]


def _needs(server: AppServer) -> None:
    problems = [server.available()]
    if client_python() is None:
        problems.append("the app-server client venv is missing (.ci/run makes it)")
    problem = next((p for p in problems if p), None)
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{server.name}: {problem}")
    pytest.skip(f"{server.name}: {problem}")


class Rig:
    """A server and its model for one test; :meth:`client` runs one scenario against it."""

    def __init__(self, server: AppServer, transport: str, model: HarnessModel) -> None:
        self.server, self.transport, self.model = server, transport, model
        self.stack = AsyncExitStack()
        self.env: dict[str, str] = {}
        self.home = Path()
        self.workspace = Path()

    async def client(self, scenario: str, **options: Any) -> dict[str, Any]:
        """A client process (and over WebSocket a server process) of its own."""
        async with AsyncExitStack() as stack:
            extra: dict[str, Any] = {"stdio": self.server.stdio()}
            if self.transport == "ws":
                extra = {"ws": await stack.enter_async_context(self._listening())}
            result = await run_client(scenario, self.workspace, self.env, **extra, **options)
        assert "error" not in result, result
        return result

    def _listening(self) -> Any:
        return listening(self.server, self.env, self.home)


@asynccontextmanager
async def rig(server: AppServer, transport: str, workspace: Path) -> AsyncIterator[Rig]:
    _needs(server)
    model = HarnessModel()
    async with ScriptedResponsesServer(model) as http:
        with server_home() as home:
            setup = Rig(server, transport, model)
            setup.home, setup.workspace = home, workspace
            setup.env = server.env(http.base_url, home / "server")
            yield setup


@pytest.fixture(params=SERVERS, ids=lambda s: s.name)
def server(request: pytest.FixtureRequest) -> AppServer:
    found: AppServer = request.param
    return found


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_thread_and_its_first_turn(
    server: AppServer, transport: str, workspace: Path
) -> None:
    async with rig(server, transport, workspace) as setup:
        result = await setup.client("start")
    assert result["thread_id"]
    assert result["final_text"] == "Noted: remember: alpha"


async def test_a_command_that_needs_approval_runs_once_approved(
    server: AppServer, transport: str, workspace: Path
) -> None:
    async with rig(server, transport, workspace) as setup:
        result = await setup.client("approve")
    (approval,) = result["approvals"]
    assert approval["kind"] == "CommandApprovalRequest"
    assert "touch approved.txt" in str(approval["command"])
    assert approval["thread_id"] == result["thread_id"]
    assert result["made"] is True  # the command ran after the approval, not before
    assert result["final_text"] == "Ran it."


async def test_a_running_turn_is_interrupted_and_leaves_no_process(
    server: AppServer, transport: str, workspace: Path
) -> None:
    async with rig(server, transport, workspace) as setup:
        result = await setup.client("interrupt")
    assert (result["was_interrupted"], result["was_completed"]) == (True, False)
    assert result["command_pid"] is not None  # the command was running when it was stopped
    assert not alive(result["command_pid"])
    assert processes_in(workspace) == []
    assert result["after"] == "Noted: after the interrupt"  # the thread goes on


async def test_a_thread_resumes_in_a_new_process(
    server: AppServer, transport: str, workspace: Path
) -> None:
    async with rig(server, transport, workspace) as setup:
        first = await setup.client("start")
        second = await setup.client("resume", thread=first["thread_id"])
        history = setup.model.user_texts()[-1]
    assert second["thread_id"] == first["thread_id"]
    assert second["turns_before"] >= 1
    assert second["final_text"] == "Noted: what did I say?"
    assert any("remember: alpha" in text for text in history), history
