"""Ralph-style session sockets under ``codexcore serve --stdio``, against real processes: a
UI spawns the server and drives its session over stdio (JSON-RPC) while a monitor (the
protocol's own example client) follows that session over its control socket."""

from __future__ import annotations

import re
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

from .server_helpers import Client, LineLink, StdioServer
from .test_control_socket import (
    WAIT,
    Gate,
    SeedClient,
    call,
    ralph_dir,
    rpc,
    short_home,
    state_change,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def stdio_ui(
    model: ScriptedModel, workspace: Path, home: str, *args: str
) -> AsyncIterator[StdioServer]:
    """``codexcore serve --stdio --protocol jsonrpc ARGS`` as a UI spawns it."""
    with ScriptedResponsesServer(model) as http:  # its own thread: a Gate may block it
        env = {"HOME": home, "CODEXCORE_LOG": "info"}
        server = await StdioServer.start(
            http.base_url, workspace, "--protocol", "jsonrpc", *args, env=env
        )
        try:
            yield server
        finally:
            await server.kill()


async def ask(ui: StdioServer, message: dict[str, Any]) -> Any:
    """A request over stdio; its result (the notifications before it stay in ``ui.seen``)."""
    await ui.send(message)
    while (answer := await ui.recv(WAIT)) is not None and answer.get("id") != message["id"]:
        pass
    assert answer is not None, f"stdout ended before answering {message}"
    return answer.get("result", answer)


async def until_run_ends(ui: LineLink) -> None:
    def ended() -> bool:
        return any(
            m.get("method") == "run.status" and m["params"]["status"] == "completed"
            for m in ui.seen
        )

    while not ended():
        assert await ui.recv(WAIT) is not None, f"stdout ended; saw {ui.summary()}"


def start_run(rid: int, text: str) -> dict[str, Any]:
    return rpc(rid, "run.start", input={"type": "text", "text": text})


async def test_a_monitor_follows_the_session_a_stdio_ui_drives(tmp_path: Path) -> None:
    gates = [
        Gate(shell_call(["printf", "alpha\\nbeta\\n"], text="Looking around.")),
        Gate(text_response("All done.")),
    ]
    with short_home() as home:
        sockets = ralph_dir(home)
        async with stdio_ui(
            ScriptedModel(gates), tmp_path, home, "--session-sockets", str(sockets)
        ) as ui:
            monitor: SeedClient | None = None
            try:
                assert "run_id" in await ask(ui, start_run(1, "fix the build"))
                found = await ui.wait_stderr(r"control socket session='([0-9a-f-]+)'")
                session_id = found.group(1)
                path = sockets / f"{session_id}.sock"
                assert stat.S_IMODE(path.stat().st_mode) == 0o600
                assert stat.S_IMODE(sockets.stat().st_mode) == 0o700
                await gates[0].wait_asked()
                monitor = await SeedClient.start(home, session_id)  # the protocol's client
                await monitor.until("the subscription", lambda: bool(monitor.seen))
                assert monitor.seen[0] == {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "result": {"subscribed": ["*"]},
                }
                gates[0].open.set()
                await gates[1].wait_asked()
                await monitor.until(
                    "turn 1", lambda: {"iteration": 1} in monitor.events("state_change")
                )
                assert monitor.lines() == ["Looking around.", "alpha", "beta"]
                # The UI asks over stdio: the same session, the same count and lines.
                status = await ask(ui, rpc(2, "get_status"))
                assert (status["task_name"], status["iteration"]) == (session_id, 1)
                assert status["recent_output"] == ["Looking around.", "alpha", "beta"]
                assert status["status"] == "running"
                control = await Client.unix(path)
                assert (await call(control, rpc(1, "get_status")))["iteration"] == 1
                gates[1].open.set()
                await until_run_ends(ui)
                await monitor.until(
                    "idle", lambda: {"status": "idle"} in monitor.events("state_change")
                )
                assert monitor.lines()[-1] == "All done."
                # End of input: the session ends, the monitor's connection closes, the
                # socket goes and the server exits 0 with only protocol lines on stdout.
                await ui.close_stdin()
                await ui.to_end(WAIT)
                assert await ui.wait_exit(WAIT) == 0, ui.context()
                assert await monitor.wait_exit() == 0
                assert monitor.events("state_change")[-1] == {"status": "stopped"}
                await control.to_end(WAIT)
                await control.close()
                assert not path.exists()
                assert all(m.get("jsonrpc") == "2.0" for m in ui.seen), ui.seen
            finally:
                for gate in gates:
                    gate.open.set()
                if monitor is not None:
                    await monitor.kill()


async def test_get_status_over_stdio_counts_the_whole_session(tmp_path: Path) -> None:
    """No session socket: a get_status after two Tasks knows both (the status follows the
    session from its start, though stdio keeps no replay for reconnecting clients)."""
    model = ScriptedModel(
        [
            shell_call(["printf", "one\\n"], text="First."),
            text_response("Second."),
            text_response("Third."),
        ]
    )
    with short_home() as home:
        async with stdio_ui(model, tmp_path, home) as ui:
            await ask(ui, start_run(1, "go"))
            await until_run_ends(ui)
            ui.seen.clear()
            await ask(ui, start_run(2, "again"))
            await until_run_ends(ui)
            status = await ask(ui, rpc(3, "get_status"))
            assert status["iteration"] == 3
            assert status["recent_output"] == ["First.", "one", "Second.", "Third."]
            assert (status["status"], status["max_iterations"]) == ("idle", None)
            await ui.close_stdin()
            await ui.to_end(WAIT)
            assert await ui.wait_exit(WAIT) == 0, ui.context()


async def test_stdio_with_session_sockets_refuses_an_unusable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with short_home() as home:
        async with stdio_ui(
            ScriptedModel([]), tmp_path, home, "--session-sockets", str(blocker)
        ) as ui:
            assert await ui.wait_exit(WAIT) == 2
            assert re.search(str(blocker), ui.context()), ui.context()


SEED_PROMPT = "Focus on fixing the type errors first before adding new features."


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of each user message of a model request, in order."""
    return [
        part["text"]
        for item in body["input"]
        if item.get("role") == "user"
        for part in item["content"]
        if part.get("type") == "input_text"
    ]


async def test_inject_prompt_waits_for_the_next_task_and_goes_first(tmp_path: Path) -> None:
    plan = {
        "plan": [
            {"step": "US-003 types", "status": "completed"},
            {"step": "US-004 migration", "status": "in_progress"},
            {"step": "US-005 docs", "status": "pending"},
        ]
    }
    model = ScriptedModel(
        [
            function_call_response("update_plan", plan),
            text_response("Planned."),
            text_response("Started by the prompt."),
        ]
    )
    with short_home() as home:
        async with stdio_ui(model, tmp_path, home) as ui:
            # Idle: the prompt is kept, no Task starts.
            answer = await ask(ui, rpc(1, "inject_prompt", prompt=SEED_PROMPT))
            assert answer == {"status": "prompt_injected", "prompt": SEED_PROMPT}
            status = await ask(ui, rpc(2, "get_status"))
            assert (status["status"], status["iteration"], status["current_story"]) == (
                "idle",
                0,
                None,
            )
            assert model.requests == []
            # The next Task's first request carries it, before the Task's own prompt.
            await ask(ui, start_run(3, "implement the migration"))
            await until_run_ends(ui)
            texts = user_texts(model.requests[0])
            assert texts.index(SEED_PROMPT) < texts.index("implement the migration"), texts
            assert SEED_PROMPT not in user_texts(model.requests[1])  # once only
            status = await ask(ui, rpc(4, "get_status"))
            assert (status["iteration"], status["current_story"]) == (2, "US-004 migration")
            assert status["max_iterations"] is None
            # start: true starts a Task with it when none runs.
            await ask(ui, rpc(5, "subscribe", events=["state_change"]))
            answer = await ask(ui, rpc(6, "inject_prompt", prompt="Go on.", start=True))
            assert answer == {"status": "prompt_injected", "prompt": "Go on."}
            # No run.start, so no run.status: the UI follows it as a monitor would.
            await state_change(ui, {"iteration": 3})
            await state_change(ui, {"status": "idle"})
            assert user_texts(model.requests[2])[-1] == "Go on."
            assert (await ask(ui, rpc(7, "get_status")))["iteration"] == 3
            await ui.close_stdin()
            await ui.to_end(WAIT)
            assert await ui.wait_exit(WAIT) == 0, ui.context()


async def test_get_status_over_a_unix_socket_counts_what_the_replay_lost(tmp_path: Path) -> None:
    """A JSON-RPC connection on ``serve --unix`` whose session's replay buffer keeps 4
    events: get_status after two Turns still counts both and has every line."""
    from .server_helpers import ServerProcess, server_env

    model = ScriptedModel(
        [shell_call(["printf", "a\\nb\\nc\\n"], text="Look."), text_response("Ok.")]
    )
    with short_home() as home, ScriptedResponsesServer(model) as http:
        socket_path = Path(home) / "run" / "s.sock"
        env = server_env(http.base_url, HOME=home)
        server = await ServerProcess.start(
            http.base_url, tmp_path, "--replay-events", "4", tcp=False, unix=socket_path, env=env
        )
        try:
            client = await Client.unix(socket_path)
            await call(client, start_run(2, "go"))
            await until_run_ends(client)  # the first get_status comes after the whole Task
            status = await call(client, rpc(3, "get_status"))
            assert status["iteration"] == 2
            assert status["recent_output"] == ["Look.", "a", "b", "c", "Ok."]
            await client.close()
        finally:
            await server.kill()
