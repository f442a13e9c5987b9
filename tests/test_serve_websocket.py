"""``codexcore serve --ws``: a real server process and a real WebSocket client on 127.0.0.1.

A browser UI's path: Tasks in both dialects, the token beyond loopback, origins, a
message over the limit, a client that vanishes mid-Task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, shell_call, text_response

from .flows import basic_flow, basic_model
from .server_helpers import PY, ServerProcess, hello, say, server_env, sub
from .test_serve_sockets import FLOOD, slow_text
from .websocket_helpers import WsClient, start_ws_server

pytestmark = pytest.mark.anyio

TOKEN = "ws-token-93b1c2d4e5f60718"


@asynccontextmanager
async def serving(
    model: ScriptedModel, cwd: Path, *args: str, listen: str = "127.0.0.1:0", **env: str
) -> AsyncIterator[tuple[ServerProcess, str]]:
    async with ScriptedResponsesServer(model) as http:
        server, url = await start_ws_server(
            http.base_url, cwd, *args, listen=listen, env={"CODEXCORE_LOG": "info", **env}
        )
        try:
            yield server, url
        finally:
            await server.kill()


async def client(server: ServerProcess, url: str, **options: Any) -> WsClient:
    ws = await WsClient.open(url, **options)
    ws.server = server
    return ws


async def greeted(server: ServerProcess, url: str, **fields: Any) -> WsClient:
    ws = await client(server, url)
    await ws.send(hello(token=None, **fields))
    assert (await ws.until("welcome"))["type"] == "welcome"
    return ws


def rpc(rid: str, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


async def test_a_task_end_to_end_in_the_native_dialect(tmp_path: Path) -> None:
    model = basic_model()
    async with serving(model, tmp_path) as (server, url):
        ui = await greeted(server, url)
        await basic_flow(ui, model, tmp_path)  # approval, command, answer: as over TCP
        ui.check_invariants()
        await ui.close()


async def test_a_task_end_to_end_in_json_rpc(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("Over the socket.", reasoning="think")])
    async with serving(model, tmp_path) as (server, url):
        ui = await client(server, url)
        # The first message chooses JSON-RPC; past the upgrade no initialize is owed.
        await ui.send(
            rpc("1", "initialize", protocol_version="0", client={"name": "web", "version": "1"})
        )
        assert (await ui.until("answer:1"))["result"]["server"]["name"] == "codexcore"
        await ui.send(rpc("2", "run.start", input={"type": "text", "text": "hi"}))
        run_id = (await ui.until("answer:2"))["result"]["run_id"]
        while True:
            status = await ui.until("run.status")
            if status["params"]["status"] != "running":
                break
        assert (status["params"]["run_id"], status["params"]["status"]) == (run_id, "completed")
        finals = [
            m["params"]["event"]
            for m in ui.seen
            if m.get("method") == "agent.event" and m["params"]["event"]["type"] == "final"
        ]
        assert finals == [{"type": "final", "content": "Over the socket."}]
        await ui.close()
        assert ui.close_code == 1000


async def test_beyond_loopback_a_token_is_required(tmp_path: Path) -> None:
    async with ScriptedResponsesServer(ScriptedModel([])) as http:
        # No token at all: the server refuses to start, naming why.
        argv = [PY, "-m", "codexcore", "serve", "--ws", "0.0.0.0:0"]
        bare = ServerProcess()
        await bare._spawn(argv, server_env(http.base_url), tmp_path)
        assert await bare.wait_exit() == 1
        assert any("requires a token" in line for line in bare.stderr), bare.stderr

    model = ScriptedModel([])
    async with serving(model, tmp_path, listen="0.0.0.0:0", CODEXCORE_TOKEN=TOKEN) as (
        server,
        url,
    ):
        local = url.replace("0.0.0.0", "127.0.0.1")
        for token in (None, "guess", TOKEN + "x"):
            with pytest.raises(InvalidStatus) as refused:
                await WsClient.open(local, token=token)
            assert refused.value.response.status_code == 401
            assert b"bearer token is missing or wrong" in refused.value.response.body
        ui = await client(server, local, token=TOKEN)
        await ui.send(hello(token=None))  # the upgrade proved the token
        assert (await ui.until("welcome"))["session_id"]
        rpc_ui = await client(server, local, token=TOKEN)
        await rpc_ui.send(rpc("1", "get_status"))
        assert (await rpc_ui.until("answer:1"))["result"]["agent"] == "codexcore"
        await ui.close()
        await rpc_ui.close()


async def test_a_foreign_browser_origin_is_refused(tmp_path: Path) -> None:
    allowed = "https://ui.example.com"
    async with serving(ScriptedModel([]), tmp_path, "--allow-origin", allowed) as (_, url):
        for origin in ("https://evil.example", "http://localhost.evil.example", "null"):
            with pytest.raises(InvalidStatus) as refused:
                await WsClient.open(url, origin=origin)
            assert refused.value.response.status_code == 403, origin
        for accepted in (None, "http://localhost:5173", "http://127.0.0.1:8080", allowed):
            ui = await WsClient.open(url, origin=accepted)
            await ui.send(hello(token=None))
            assert (await ui.until("welcome"))["type"] == "welcome", accepted
            await ui.close()


async def test_an_oversized_message_closes_that_connection_cleanly_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("still here")])
    async with serving(model, tmp_path, "--max-line-bytes", "4096") as (server, url):
        big = await greeted(server, url)
        await big.send(say("t1", "x" * 10_000))
        await big.to_end()  # the server closes it: a close frame, not a reset
        assert big.close_code == 1009
        binary = await greeted(server, url)
        await binary.connection.send(b'{"id":"b","op":{"type":"interrupt"}}')
        await binary.to_end()
        assert binary.close_code == 1003  # only text messages are lines
        ui = await greeted(server, url)
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t2", "hi"))
        done = await ui.until("task_complete", id="t2")
        assert done["msg"]["last_agent_message"] == "still here"
        await ui.close()


async def test_a_client_vanishing_mid_task_leaves_the_session_to_resume(tmp_path: Path) -> None:
    model = ScriptedModel(
        [slow_text("abcdefghijklmnopqrstuvwxyz" * 4, chunks=40), text_response("second")]
    )
    async with serving(model, tmp_path) as (server, url):
        first = await greeted(server, url)
        session_id = first.of("welcome")[0]["session_id"]
        await first.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "go"))
        for _ in range(5):
            await first.until("agent_message_delta")
        first.kill()  # no close frame: the network died
        last_seen = first.seqs()[-1]

        second = await greeted(server, url, session_id=session_id, last_seq=last_seen)
        welcome = second.of("welcome")[0]
        assert (welcome["resumed"], welcome["replay_from"]) == (True, last_seen + 1)
        await second.until("task_complete", id="t1")
        await second.send(say("t2", "again"))
        await second.until("task_complete", id="t2")
        await second.close()

    seqs = first.seqs() + second.seqs()
    assert seqs == list(range(len(seqs)))  # nothing lost, nothing twice
    deltas = first.of("agent_message_delta") + second.of("agent_message_delta")
    assert "".join(d["delta"] for d in deltas[:40]) == "abcdefghijklmnopqrstuvwxyz" * 4


async def test_a_client_that_stops_reading_is_slowed_then_cut_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    """Backpressure: the library's write limit makes the writer wait; a client that reads
    nothing for --stuck-timeout is cut, with server memory bounded."""
    model = ScriptedModel(
        [shell_call(FLOOD, call_id="c1"), text_response("flooded"), text_response("still here")]
    )
    args = ("--send-buffer-bytes", "262144", "--stuck-timeout", "1", "--replay-bytes", "1048576")
    async with serving(model, tmp_path, *args) as (server, url):
        # A websockets client stops reading the socket once 4 messages wait unread.
        sleeper = await client(server, url, max_queue=4)
        await sleeper.send(hello(token=None))
        session_id = (await sleeper.until("welcome"))["session_id"]
        watcher = await greeted(server, url, session_id=session_id, control=False)
        await sleeper.send(
            sub(
                "cfg",
                "configure_session",
                cwd=str(tmp_path),
                approval_policy="never",
                sandbox_policy={"type": "danger-full-access"},
            )
        )
        await watcher.until("session_configured")
        baseline = server.memory_kib()
        await sleeper.send(say("t1", "flood"))  # and never read again
        done = await watcher.until("task_complete", id="t1", within=50)
        await server.wait_stderr("client stuck: disconnecting")
        peak = server.memory_kib("VmHWM")
        back = await greeted(server, url, session_id=session_id, last_seq=done["seq"])
        await back.send(say("t2", "more"))
        await back.until("task_complete", id="t2")
        await back.close()
        sleeper.kill()

    growth_mib = (peak - baseline) / 1024
    assert growth_mib < 30, f"server memory grew by {growth_mib:.1f} MiB for 40 MiB of output"
