"""Seed 003's control messages against real servers: ``codexcore serve`` processes, real
Unix and TCP sockets, a real SIGKILL, the ``codexcore control`` command, the client library,
and the agent id through a restart and a resume."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore import Codex
from codexcore.adapters.client import ControlError, RemoteCodex, RemoteCodexThread
from codexcore.adapters.control._sender import SenderOptions
from codexcore.protocol import ResumeSession, SessionConfigured, TaskComplete
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

from .control_helpers import SENDER, SENDER_TOKEN, TEAM, stdin_request
from .engine_helpers import Recorder, engine_config
from .server_helpers import (
    PY,
    TOKEN,
    ServerProcess,
    StdioServer,
    hello,
    private_dir,
    server_env,
    sub,
)

pytestmark = pytest.mark.anyio

WAIT = 20.0


def write_config(home: Path, *, share: Path | None = None, audit: Path | None = None) -> None:
    lines = [
        "[control]",
        f'team = "{TEAM}"',
        f'sender = "{SENDER}"',
    ]
    if share is not None:
        lines += [f'allowed_content_dirs = ["{share}"]', f'share_dir = "{share}"']
    if audit is not None:
        lines.append(f'audit_file = "{audit}"')
    lines += [
        "[[control.senders]]",
        f'name = "{SENDER}"',
        f'team = "{TEAM}"',
        f"uid = {os.getuid()}",
        'token_env = "ARCH_CTM_TOKEN"',
    ]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


@asynccontextmanager
async def serving(
    model: ScriptedModel, cwd: Path, socket_dir: Path, *, tcp: bool = False
) -> AsyncIterator[tuple[ScriptedResponsesServer, ServerProcess]]:
    async with ScriptedResponsesServer(model) as api:
        env = server_env(api.base_url, CODEXCORE_TOKEN=TOKEN, ARCH_CTM_TOKEN=SENDER_TOKEN)
        server = await ServerProcess.start(
            api.base_url, cwd, tcp=tcp, unix=socket_dir / "s.sock", env=env
        )
        try:
            yield api, server
        finally:
            await server.kill()


async def control_ack(client: Any, request: dict[str, Any]) -> dict[str, Any]:
    await client.send(request)
    ack: dict[str, Any] = await client.until(request["type"].replace(".request", ".ack"))
    assert ack["request_id"] == request["request_id"], ack
    return ack


async def test_a_retry_after_sigkill_and_restart_is_a_duplicate_and_never_runs_again(
    tmp_path: Path,
) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    model = ScriptedModel([text_response("ran once"), text_response("ran twice!")])
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets) as (_api, server):
            client = await server.client(unix=True)
            welcome = await client.greet()
            session_id, agent_id = welcome["session_id"], welcome["agent_id"]
            assert welcome["control_messages"] == {
                "v": 1,
                "stdin": True,
                "interrupt": True,
                "content_ref": False,
                "max_inline_bytes": 1024 * 1024,
            }
            request = stdin_request(session_id, agent_id, "deploy exactly once")
            first = await control_ack(client, request)
            assert (first["result"], first["duplicate"]) == ("ok", False), first
            await client.until("task_complete")
            server.process.kill()  # type: ignore[union-attr]  # SIGKILL: no goodbye
            await server.wait_exit()
        assert len(model.requests) == 1
        async with serving(model, tmp_path, sockets) as (_api, server):
            client = await server.client(unix=True)
            await client.greet()
            # The session is resumed from its recording: live again, same agent.
            await client.send(sub("r1", "resume_session", session_id=session_id))
            configured = await client.until("session_configured")
            assert configured["msg"]["session_id"] == session_id
            retry = {**request, "meta": {"retry_count": 1}}
            second = await control_ack(client, retry)
            await client.send(sub("l1", "list_sessions"))
            listing = await client.until("session_list")
    assert (second["result"], second["duplicate"]) == ("ok", True), second
    assert second["detail"] == first["detail"]
    assert second["agent_id"] == agent_id
    assert len(model.requests) == 1  # the retry never reached the model
    (summary,) = [s for s in listing["msg"]["sessions"] if s["session_id"] == session_id]
    assert summary["agent_id"] == agent_id


async def test_jsonrpc_over_tcp_with_the_senders_token(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    model = ScriptedModel([text_response("from tcp")])
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets, tcp=True) as (_api, server):
            owner = await server.client(unix=True)
            welcome = await owner.greet()
            session_id, agent_id = welcome["session_id"], welcome["agent_id"]
            operator = await server.client()
            init: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocol_version": "0",
                    "client": {"name": "ops", "version": "1"},
                    "auth": {"token": SENDER_TOKEN},
                },
            }
            await operator.send(init)
            initialized = await operator.recv()
            assert initialized is not None
            capabilities = initialized["result"]["server_capabilities"]
            assert capabilities["control_messages"]["stdin"] is True
            request = stdin_request(session_id, agent_id, "over tcp")
            call = {"jsonrpc": "2.0", "id": 2, "method": "control.stdin", "params": request}
            await operator.send(call)
            answer = await operator.recv()
            await owner.until("task_complete")
            # The host's own token names no sender: the same request is refused.
            other = await server.client()
            await other.send({**init, "params": {**init["params"], "auth": {"token": TOKEN}}})
            assert await other.recv() is not None
            again = {**request, "request_id": "req-host-token"}
            await other.send({**call, "params": again})
            refused = await other.recv()
    assert answer is not None
    assert answer["result"]["result"] == "ok", answer
    assert answer["result"]["type"] == "control.stdin.ack"
    assert refused is not None
    assert refused["result"]["result"] == "rejected"
    assert "unknown on this connection" in refused["result"]["detail"]
    assert model.requests[0]["input"][-1]["content"][0]["text"] == "over tcp"


async def test_native_over_tcp_the_hellos_token_names_the_sender(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    model = ScriptedModel([text_response("native tcp")])
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets, tcp=True) as (_api, server):
            owner = await server.client(unix=True)
            welcome = await owner.greet()
            target = (welcome["session_id"], welcome["agent_id"])
            operator = await server.client()
            assert (await operator.greet(token=SENDER_TOKEN))["type"] == "welcome"
            accepted = await control_ack(operator, stdin_request(*target, "by token"))
            await owner.until("task_complete")
            host_token = await server.client()
            assert (await host_token.greet(token=TOKEN))["type"] == "welcome"
            refused = await control_ack(host_token, stdin_request(*target, "no sender"))
    assert accepted["result"] == "ok", accepted
    assert refused["result"] == "rejected", refused
    assert "unknown on this connection" in refused["detail"]
    assert len(model.requests) == 1


def control_cli(
    *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "codexcore", "control", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=server_env(None, **{"CODEXCORE_TOKEN": TOKEN, **env}),
        timeout=60,
        check=False,
    )


async def test_the_control_command_prints_the_ack_and_exits_by_result(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    share = tmp_path / "share"
    share.mkdir()
    write_config(home, share=share)
    big = "x" * (1024 * 1024 + 10) + "\nend"
    model = ScriptedModel([text_response("one"), text_response("two")])
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets) as (_api, server):
            owner = await server.client(unix=True)
            welcome = await owner.greet()
            session_id = welcome["session_id"]
            agent = ["--agent", welcome["agent_id"]]
            where = ["--unix", str(server.unix)]
            said = await asyncio.to_thread(
                control_cli, "stdin", "--session", session_id, *agent, *where, "hello there"
            )
            assert said.returncode == 0, said.stdout + said.stderr
            await owner.until("task_complete")
            oversize = await asyncio.to_thread(
                control_cli, "stdin", "--session", session_id, *agent, *where, "-", stdin=big
            )
            await owner.until("task_complete", within=WAIT)
            interrupted = await asyncio.to_thread(
                control_cli, "interrupt", "--session", session_id, *agent, *where
            )
            unknown = await asyncio.to_thread(
                control_cli, "stdin", "--session", "nope", *agent, *where, "hi"
            )
            stranger = await asyncio.to_thread(
                control_cli,
                "stdin",
                "--session",
                session_id,
                *agent,
                *where,
                "--sender",
                "mallory",
                "hi",
            )
    assert said.returncode == 0, said.stderr
    assert json.loads(said.stdout)["result"] == "ok"
    assert oversize.returncode == 0, oversize.stderr
    assert model.requests[1]["input"][-1]["content"][0]["text"] == big
    (written,) = (share / TEAM / "input").glob("req_*.txt")
    assert written.read_text() == big
    assert (interrupted.returncode, json.loads(interrupted.stdout)["detail"]) == (0, "idle")
    assert unknown.returncode == 3, unknown.stdout
    assert stranger.returncode == 2, stranger.stdout
    assert "mallory" in json.loads(stranger.stdout)["detail"]


async def test_the_client_library_sends_and_gates_on_the_capability(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    model = ScriptedModel([text_response("library")])
    options = SenderOptions(team=TEAM, sender=SENDER)
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets) as (_api, server):
            assert server.unix is not None
            async with RemoteCodex.connect_unix(server.unix, token=TOKEN) as codex:
                answer = await codex.control_stdin("from the library", options)
                async for event in codex.events():
                    if isinstance(event.msg, TaskComplete):
                        break
                interrupted = await codex.control_interrupt(options)
    assert (answer["result"], answer["duplicate"]) == ("ok", False), answer
    assert interrupted["detail"] == "idle"
    assert model.requests[0]["input"][-1]["content"][0]["text"] == "from the library"

    (home / "config.toml").unlink()  # no [control]: the capability says no, nothing is sent
    with private_dir() as sockets:
        async with serving(ScriptedModel(), tmp_path, sockets) as (_api, server):
            assert server.unix is not None
            async with RemoteCodex.connect_unix(server.unix, token=TOKEN) as codex:
                with pytest.raises(ControlError, match="does not take control stdin"):
                    await codex.control_stdin("refused here", options)


async def test_a_native_control_line_on_stdio_is_bound_to_the_parents_uid(
    tmp_path: Path,
) -> None:
    """On ``serve --stdio`` the peer is the process that spawned the server: our uid."""
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    model = ScriptedModel([text_response("over stdio")])
    async with ScriptedResponsesServer(model) as api:
        server = await StdioServer.start(api.base_url, tmp_path)
        try:
            await server.send(hello(None))
            welcome = await server.until("welcome")
            request = stdin_request(welcome["session_id"], welcome["agent_id"], "via stdio")
            first = await control_ack(server, request)
            await server.until("task_complete")
            stranger = {**request, "request_id": "req-2", "sender": "mallory"}
            refused = await control_ack(server, stranger)
            await server.close_stdin()
            assert await server.wait_exit() == 0
        finally:
            await server.kill()
    assert (first["result"], first["detail"]) == ("ok", "accepted: started a task"), first
    assert refused["result"] == "rejected"
    assert model.requests[0]["input"][-1]["content"][0]["text"] == "via stdio"


async def test_the_thread_face_sends_control_messages(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    model = ScriptedModel([text_response("threads")])
    options = SenderOptions(team=TEAM, sender=SENDER)
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets) as (_api, server):
            assert server.unix is not None
            path = server.unix

            def blocking() -> tuple[dict[str, Any], dict[str, Any]]:
                with RemoteCodexThread.connect_unix(path, token=TOKEN) as codex:
                    answer = codex.control_stdin("from a thread", options, timeout=WAIT)
                    for event in codex:
                        if isinstance(event.msg, TaskComplete):
                            break
                    return answer, codex.control_interrupt(options, timeout=WAIT)

            answer, interrupted = await asyncio.to_thread(blocking)
    assert answer["result"] == "ok", answer
    assert interrupted["detail"] == "idle"
    assert model.requests[0]["input"][-1]["content"][0]["text"] == "from a thread"


async def test_the_agent_id_is_recorded_and_survives_a_resume(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("first"), text_response("again")])
    async with Codex(engine_config(tmp_path), transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        agent_id = codex.agent_id
        await ui.submit(stdin_cli_op("hello"))
        session_id = (await ui.until(SessionConfigured)).msg.session_id
        await ui.until(TaskComplete)
    meta = await asyncio.to_thread(_meta_of, session_id)
    assert meta["agent_id"] == agent_id
    assert re.fullmatch(r"codexcore:[0-9a-f]{12}", agent_id)
    async with Codex(engine_config(tmp_path), transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        assert codex.agent_id != agent_id  # a new engine's own, until it resumes
        await ui.submit(ResumeSession(session_id))
        await ui.until(SessionConfigured)
        assert codex.agent_id == agent_id
    listed = await asyncio.to_thread(
        subprocess.run,
        [PY, "-m", "codexcore", "sessions", "list"],
        capture_output=True,
        text=True,
        env=server_env(None),
        check=False,
    )
    assert f"agent {agent_id}" in listed.stdout, listed.stdout + listed.stderr


def _meta_of(session_id: str) -> dict[str, Any]:
    (rollout,) = Path(os.environ["CODEXCORE_HOME"]).glob(f"sessions/*/*/*/*{session_id}.jsonl")
    meta: dict[str, Any] = json.loads(rollout.read_text().splitlines()[0])
    return meta


def stdin_cli_op(text: str) -> Any:
    from codexcore.protocol import TextInput, UserInput

    return UserInput((TextInput(text),))


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("SO_PEERCRED is Linux's")
