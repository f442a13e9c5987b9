"""``codexcore app-server --listen ws://IP:PORT``: Codex's flags for the door, a real
subprocess, a real ``websockets`` client on 127.0.0.1. The published client's scenarios
over WebSocket are in ``test_app_server_clients.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

from .app_server_helpers import Schema, generate_schema
from .server_helpers import PY, ServerProcess, server_env
from .websocket_helpers import WsClient

pytestmark = pytest.mark.anyio

TOKEN = "capability-token-for-the-test"
INITIALIZE = {
    "id": 0,
    "method": "initialize",
    "params": {"clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="session")
def schema(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    """The pinned Codex CLI's schema, which every answer here must satisfy."""
    return generate_schema(tmp_path_factory.mktemp("codex-app-server-schema"))


async def initialized(client: WsClient, schema: Schema) -> dict[str, object]:
    """``initialize`` over ``client``: the answer, checked against Codex's schema."""
    await client.send(INITIALIZE)
    answer = await client.recv()
    assert answer is not None
    schema.check(answer, lambda _: "initialize")
    return answer


async def app_server(cwd: Path, base_url: str, *args: str) -> ServerProcess:
    server = ServerProcess()
    argv = [PY, "-m", "codexcore", "app-server", *args]
    await server._spawn(argv, server_env(base_url, OPENAI_API_KEY="sk-test"), cwd)
    return server


async def listening_url(server: ServerProcess) -> str:
    found = await server.wait_stderr(r"listening on (ws://\S+)")
    return found.group(1)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--listen", "ws://0.0.0.0:0"], "requires a token"),
        (["--listen", "ws://127.0.0.1:0", "--ws-auth", "signed-bearer-token"], "not supported"),
        (["--listen", "ws://127.0.0.1:0", "--ws-auth", "capability-token"], "--ws-token-file"),
        (["--listen", "ws://127.0.0.1:0", "--ws-token-file", "/nonexistent"], "--ws-auth"),
        (["--listen", "wss://127.0.0.1:0"], "not a transport"),
    ],
)
async def test_a_door_that_cannot_be_kept_is_refused_before_listening(
    tmp_path: Path, flags: list[str], says: str
) -> None:
    server = await app_server(tmp_path, "http://127.0.0.1:9/v1", *flags)
    assert await server.wait_exit() == 2
    assert any(says in line for line in server.stderr), server.stderr


async def test_beyond_loopback_only_the_capability_token_opens(
    tmp_path: Path, schema: Schema
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    async with ScriptedResponsesServer(ScriptedModel([])) as http:
        server = await app_server(
            tmp_path,
            http.base_url,
            "--listen",
            "ws://0.0.0.0:0",
            "--ws-auth",
            "capability-token",
            "--ws-token-file",
            str(token_file),
        )
        try:
            url = (await listening_url(server)).replace("0.0.0.0", "127.0.0.1")
            for token in (None, "guess", TOKEN + "x"):
                with pytest.raises(InvalidStatus) as refused:
                    await WsClient.open(url, token=token)
                assert refused.value.response.status_code == 401
            client = await WsClient.open(url, token=TOKEN)
            answer = await initialized(client, schema)
            assert answer["id"] == 0
            await client.close()
        finally:
            await server.kill()


async def test_a_foreign_page_cannot_open_the_socket(tmp_path: Path, schema: Schema) -> None:
    async with ScriptedResponsesServer(ScriptedModel([])) as http:
        allowed = "https://ui.example.com"
        server = await app_server(
            tmp_path, http.base_url, "--listen", "ws://127.0.0.1:0", "--allow-origin", allowed
        )
        try:
            url = await listening_url(server)
            with pytest.raises(InvalidStatus) as refused:
                await WsClient.open(url, origin="https://evil.example")
            assert refused.value.response.status_code == 403
            client = await WsClient.open(url, origin=allowed)
            assert (await initialized(client, schema))["id"] == 0
            await client.close()
        finally:
            await server.kill()


async def test_sigterm_ends_the_server_with_clients_connected(
    tmp_path: Path, schema: Schema
) -> None:
    async with ScriptedResponsesServer(ScriptedModel([])) as http:
        server = await app_server(tmp_path, http.base_url, "--listen", "ws://127.0.0.1:0")
        url = await listening_url(server)
        client = await WsClient.open(url)
        assert (await initialized(client, schema))["id"] == 0
        assert server.process is not None
        server.process.terminate()
        assert await server.wait_exit() == 0
        await client.close()


async def messages_until(
    client: WsClient, schema: Schema, methods: dict[Any, str], wanted: str
) -> dict[str, Any]:
    """Read (checking each against Codex's schema) until a message whose method is
    ``wanted``; ``methods`` maps this client's request ids to their methods."""
    while True:
        message = await client.recv()
        assert message is not None, f"the connection ended before {wanted}"
        schema.check(message, methods.get)
        if message.get("method") == wanted:
            return message


async def test_a_tool_call_pending_at_disconnect_is_asked_again_of_the_next_client(
    tmp_path: Path, schema: Schema
) -> None:
    """A WebSocket client goes away while the model waits on its tool; the client that
    resumes the live thread is asked the same call, and its answer reaches the model."""
    tool = {
        "type": "function",
        "name": "editor_selection",
        "description": "The selection.",
        "inputSchema": {"type": "object", "properties": {}},
    }
    model = ScriptedModel(
        [
            function_call_response("editor_selection", {}, call_id="call_sel"),
            text_response("Got it."),
        ]
    )
    async with ScriptedResponsesServer(model) as http:
        server = await app_server(tmp_path, http.base_url, "--listen", "ws://127.0.0.1:0")
        try:
            url = await listening_url(server)
            first = await WsClient.open(url)
            await initialized(first, schema)
            ids = {0: "initialize", 1: "thread/start", 2: "turn/start"}
            await first.send(
                {
                    "id": 1,
                    "method": "thread/start",
                    "params": {"dynamicTools": [tool], "approvalPolicy": "never"},
                }
            )
            started = await first.recv()
            assert started is not None
            schema.check(started, ids.get)
            thread_id = started["result"]["thread"]["id"]
            await first.send(
                {
                    "id": 2,
                    "method": "turn/start",
                    "params": {
                        "threadId": thread_id,
                        "input": [{"type": "text", "text": "where am I?"}],
                    },
                }
            )
            asked = await messages_until(first, schema, ids, "item/tool/call")
            assert asked["params"]["callId"] == "call_sel"
            await first.close()  # gone, without an answer

            second = await WsClient.open(url)
            await initialized(second, schema)
            await second.send(
                {"id": 1, "method": "thread/resume", "params": {"threadId": thread_id}}
            )
            again = await messages_until(
                second, schema, {0: "initialize", 1: "thread/resume"}, "item/tool/call"
            )
            assert again["params"]["callId"] == "call_sel"
            await second.send(
                {
                    "id": again["id"],
                    "result": {
                        "contentItems": [{"type": "inputText", "text": "src/app.py:10-12"}],
                        "success": True,
                    },
                }
            )
            await messages_until(
                second, schema, {0: "initialize", 1: "thread/resume"}, "turn/completed"
            )
            await second.close()
        finally:
            await server.kill()
    assert "src/app.py:10-12" in json.dumps(model.requests[-1]["input"])


async def test_an_approval_pending_at_disconnect_is_asked_again_of_the_next_client(
    tmp_path: Path, schema: Schema
) -> None:
    model = ScriptedModel(
        [shell_call([PY, "-c", "print('approved')"], call_id="call_echo"), text_response("Ran it.")]
    )
    async with ScriptedResponsesServer(model) as http:
        server = await app_server(tmp_path, http.base_url, "--listen", "ws://127.0.0.1:0")
        try:
            url = await listening_url(server)
            first = await WsClient.open(url)
            await initialized(first, schema)
            ids = {0: "initialize", 1: "thread/start", 2: "turn/start"}
            await first.send(
                {"id": 1, "method": "thread/start", "params": {"approvalPolicy": "untrusted"}}
            )
            started = await messages_until_answer(first, schema, ids, 1)
            thread_id = started["result"]["thread"]["id"]
            await first.send(
                {
                    "id": 2,
                    "method": "turn/start",
                    "params": {
                        "threadId": thread_id,
                        "input": [{"type": "text", "text": "echo it"}],
                    },
                }
            )
            method = "item/commandExecution/requestApproval"
            assert (await messages_until(first, schema, ids, method))["params"]["itemId"] == (
                "call_echo"
            )
            await first.close()

            second = await WsClient.open(url)
            await initialized(second, schema)
            ids = {0: "initialize", 1: "thread/resume"}
            await second.send(
                {"id": 1, "method": "thread/resume", "params": {"threadId": thread_id}}
            )
            again = await messages_until(second, schema, ids, method)
            await second.send({"id": again["id"], "result": {"decision": "accept"}})
            completed = await messages_until(second, schema, ids, "turn/completed")
            assert completed["params"]["turn"]["status"] == "completed"
            await second.close()
        finally:
            await server.kill()
    assert "approved" in json.dumps(model.requests[-1]["input"])


async def messages_until_answer(
    client: WsClient, schema: Schema, methods: dict[Any, str], request_id: int
) -> dict[str, Any]:
    while True:
        message = await client.recv()
        assert message is not None, f"the connection ended before the answer to {request_id}"
        schema.check(message, methods.get)
        if message.get("id") == request_id and "method" not in message:
            return message
