"""``codexcore app-server``: Codex's app-server protocol from a real subprocess against the
scripted model, every message it sends validated against the pinned Codex CLI's own schema
(``tests/app_server_helpers.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import (
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

from .app_server_helpers import AppServer, Schema, app_servers, generate_schema
from .scripted_servers import serve
from .server_helpers import server_env

pytestmark = pytest.mark.anyio

Servers = list[ScriptedResponsesServer]


@pytest.fixture(scope="session")
def schema(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    """The pinned Codex CLI's schema, generated once per test session."""
    return generate_schema(tmp_path_factory.mktemp("codex-app-server-schema"))


@pytest.fixture
async def start(schema: Schema, workspace: Path) -> AsyncIterator[Any]:
    """``start(base_url)``: a ``codexcore app-server`` process; all are killed after the test."""
    async with app_servers(schema, workspace) as starter:
        yield starter


async def new_thread(server: AppServer, **params: Any) -> str:
    await server.initialize()
    result = await server.call("thread/start", params)
    thread_id: str = result["thread"]["id"]
    started = await server.note("thread/started")
    assert started["thread"]["id"] == thread_id
    return thread_id


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


async def run_turn(server: AppServer, thread_id: str, prompt: str, **params: Any) -> dict[str, Any]:
    """Start a turn and wait for its end; the ``turn/completed`` params."""
    result = await server.call(
        "turn/start", {"threadId": thread_id, "input": text(prompt), **params}
    )
    turn_id = result["turn"]["id"]
    return await server.note("turn/completed", lambda p: p["turn"]["id"] == turn_id)


def items(server: AppServer, method: str, kind: str) -> list[dict[str, Any]]:
    return [
        n["params"]["item"]
        for n in server.notes
        if n["method"] == method and n["params"]["item"]["type"] == kind
    ]


async def test_a_turn_streams_the_agent_text(start: Any, servers: Servers) -> None:
    model, scripted = serve(servers, text_response("Hello from codexcore", chunks=4))
    server = await start(scripted.base_url)
    thread_id = await new_thread(server)
    done = await run_turn(server, thread_id, "say hello")
    assert done["turn"]["status"] == "completed"
    deltas = [
        n["params"]["delta"] for n in server.notes if n["method"] == "item/agentMessage/delta"
    ]
    assert len(deltas) == 4
    assert "".join(deltas) == "Hello from codexcore"
    [message] = items(server, "item/completed", "agentMessage")
    assert message["text"] == "Hello from codexcore"
    [user] = items(server, "item/completed", "userMessage")
    assert user["content"][0]["text"] == "say hello"
    methods = server.methods()
    assert methods.index("turn/started") < methods.index("item/agentMessage/delta")
    assert "thread/tokenUsage/updated" in methods
    assert model.requests[0]["input"][-1]["content"][0]["text"] == "say hello"
    assert await server.close() == 0


async def test_a_command_is_approved_then_another_declined(
    start: Any, servers: Servers, workspace: Path
) -> None:
    _, scripted = serve(
        servers,
        shell_call(["touch", "approved.txt"], call_id="c1"),
        shell_call(["touch", "declined.txt"], call_id="c2"),
        text_response("done"),
    )
    server = await start(scripted.base_url)
    thread_id = await new_thread(server, approvalPolicy="untrusted", sandbox="danger-full-access")
    turn = await server.call("turn/start", {"threadId": thread_id, "input": text("touch")})
    for decision in ("accept", "decline"):
        asked = await server.server_request()
        assert asked["method"] == "item/commandExecution/requestApproval"
        params = asked["params"]
        assert params["threadId"] == thread_id
        assert params["turnId"] == turn["turn"]["id"]
        server.write({"id": asked["id"], "result": {"decision": decision}})
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "completed"
    assert (workspace / "approved.txt").exists()
    assert not (workspace / "declined.txt").exists()
    by_id = {item["id"]: item for item in items(server, "item/completed", "commandExecution")}
    assert by_id["c1"]["status"] == "completed"
    assert by_id["c1"]["exitCode"] == 0
    assert by_id["c2"]["status"] == "declined"
    resolved = [n for n in server.notes if n["method"] == "serverRequest/resolved"]
    assert len(resolved) == 2
    assert await server.close() == 0


async def test_a_command_approved_for_the_session_is_not_asked_again(
    start: Any, servers: Servers, workspace: Path
) -> None:
    argv = ["touch", "again.txt"]
    _, scripted = serve(
        servers,
        shell_call(argv, call_id="c1"),
        shell_call(argv, call_id="c2"),
        text_response("done"),
    )
    server = await start(scripted.base_url)
    thread_id = await new_thread(server, approvalPolicy="untrusted", sandbox="danger-full-access")
    await server.call("turn/start", {"threadId": thread_id, "input": text("twice")})
    asked = await server.server_request()
    server.write({"id": asked["id"], "result": {"decision": "acceptForSession"}})
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "completed"
    assert server.requests.empty()  # the second call ran without asking
    ran = items(server, "item/completed", "commandExecution")
    assert [item["id"] for item in ran] == ["c1", "c2"]
    assert all(item["status"] == "completed" for item in ran)
    assert await server.close() == 0


async def test_a_patch_is_applied_as_a_file_change(
    start: Any, servers: Servers, workspace: Path
) -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
    _, scripted = serve(
        servers,
        function_call_response("apply_patch", {"input": patch}, call_id="p1"),
        text_response("patched"),
    )
    server = await start(scripted.base_url)
    thread_id = await new_thread(server, approvalPolicy="untrusted", sandbox="workspace-write")
    await server.call("turn/start", {"threadId": thread_id, "input": text("patch")})
    asked = await server.server_request()
    assert asked["method"] == "item/fileChange/requestApproval"
    assert asked["params"]["itemId"] == "p1"
    server.write({"id": asked["id"], "result": {"decision": "accept"}})
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "completed"
    assert (workspace / "hello.txt").read_text() == "hello\n"
    [change] = items(server, "item/completed", "fileChange")
    assert change["status"] == "completed"
    assert change["changes"][0]["path"].endswith("hello.txt")
    assert change["changes"][0]["kind"] == {"type": "add"}
    assert await server.close() == 0


async def test_interrupting_a_running_command_leaves_no_process(
    start: Any, servers: Servers, workspace: Path
) -> None:
    script = "echo pid=$$; exec sleep 60"
    _, scripted = serve(servers, shell_call(["bash", "-c", script], call_id="slow"))
    server = await start(scripted.base_url)
    thread_id = await new_thread(server, approvalPolicy="never", sandbox="danger-full-access")
    turn = await server.call("turn/start", {"threadId": thread_id, "input": text("wait")})
    turn_id = turn["turn"]["id"]
    output = await server.note(
        "item/commandExecution/outputDelta", lambda p: p["delta"].startswith("pid=")
    )
    assert output["itemId"] == "slow"
    assert output["turnId"] == turn_id
    pid = int(output["delta"].split("=")[1])
    assert _alive(pid)
    assert await server.call("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "interrupted"
    assert not _alive(pid)
    assert await server.close() == 0


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_threads_resume_in_a_new_process_list_read_fork_and_archive(
    start: Any, servers: Servers
) -> None:
    model, scripted = serve(
        servers,
        text_response("first answer", response_id="resp_1"),
        text_response("second answer", response_id="resp_2"),
    )
    first = await start(scripted.base_url)
    thread_id = await new_thread(first)
    assert (await run_turn(first, thread_id, "first question"))["turn"]["status"] == "completed"
    assert await first.close() == 0

    second = await start(scripted.base_url)
    await second.initialize()
    listed = await second.call("thread/list", {})
    [entry] = [t for t in listed["data"] if t["id"] == thread_id]
    assert entry["status"] == {"type": "notLoaded"}
    assert entry["preview"] == "first question"
    read = await second.call("thread/read", {"threadId": thread_id, "includeTurns": True})
    [past] = read["thread"]["turns"]
    assert [i["type"] for i in past["items"]] == ["userMessage", "agentMessage"]
    assert past["items"][1]["text"] == "first answer"

    resumed = await second.call("thread/resume", {"threadId": thread_id})
    assert resumed["thread"]["id"] == thread_id
    assert len(resumed["thread"]["turns"]) == 1
    done = await run_turn(second, thread_id, "second question")
    assert done["turn"]["status"] == "completed"
    assert model.requests[1]["previous_response_id"] == "resp_1"

    forked = await second.call("thread/fork", {"threadId": thread_id})
    assert forked["thread"]["id"] != thread_id
    assert forked["thread"]["forkedFromId"] == thread_id

    assert await second.call("thread/archive", {"threadId": thread_id}) == {}
    assert (await second.note("thread/archived"))["threadId"] == thread_id
    listed = await second.call("thread/list", {})
    assert thread_id not in [t["id"] for t in listed["data"]]
    archived = await second.call("thread/list", {"archived": True})
    assert thread_id in [t["id"] for t in archived["data"]]
    assert await second.close() == 0


async def test_errors_name_the_method_or_the_field(start: Any, servers: Servers) -> None:
    _, scripted = serve(servers)
    server = await start(scripted.base_url)
    early = await server.send("thread/start", {})
    assert early["error"]["code"] == -32600
    assert "initialized" in early["error"]["message"]
    await server.initialize()
    unknown = await server.send("account/read", {})
    assert unknown["error"]["code"] == -32601
    assert "account/read" in unknown["error"]["message"]
    bad = await server.send("thread/start", {"sandbox": "everything"})
    assert bad["error"]["code"] == -32602
    assert bad["error"]["message"].startswith("params.sandbox:")
    thread_id = (await server.call("thread/start", {}))["thread"]["id"]
    wrong = await server.send(
        "turn/start", {"threadId": thread_id, "input": [{"type": "video", "url": "x"}]}
    )
    assert wrong["error"]["code"] == -32602
    assert wrong["error"]["message"].startswith("params.input[0].type:")
    stray = await server.send("turn/interrupt", {"threadId": thread_id, "turnId": "nope"})
    assert stray["error"]["message"].startswith("params.turnId:")
    missing = await server.send("turn/start", {"input": text("hi")})
    assert missing["error"]["message"] == "params.threadId: is required"
    models = await server.call("model/list", {})
    defaults = [m for m in models["data"] if m["isDefault"]]
    assert len(defaults) == 1
    assert await server.close() == 0


# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e5277ede0000000049454e44ae426082"
)


async def test_a_turn_takes_images_its_own_model_effort_and_output_schema(
    start: Any, servers: Servers, workspace: Path
) -> None:
    model, scripted = serve(servers, text_response('{"answer": 42}'))
    server = await start(scripted.base_url)
    thread_id = await new_thread(server)
    (workspace / "dot.png").write_bytes(PNG)
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    params = {
        "threadId": thread_id,
        "input": [
            {"type": "text", "text": "what is in it?"},
            {"type": "localImage", "path": str(workspace / "dot.png")},
            {"type": "image", "url": "https://example.com/cat.png"},
        ],
        "model": "gpt-5-mini",
        "effort": "high",
        "outputSchema": schema,
    }
    await server.call("turn/start", params)
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "completed"
    [request] = model.requests
    assert request["model"] == "gpt-5-mini"
    assert request["reasoning"]["effort"] == "high"
    assert request["text"]["format"]["type"] == "json_schema"
    assert request["text"]["format"]["schema"] == schema
    content = request["input"][-1]["content"]
    images = [part["image_url"] for part in content if part["type"] == "input_image"]
    assert images[0].startswith("data:image/png;base64,")
    assert images[1] == "https://example.com/cat.png"
    assert await server.close() == 0


async def test_sigterm_ends_the_threads_and_their_commands(start: Any, servers: Servers) -> None:
    _, scripted = serve(servers, shell_call(["bash", "-c", "echo pid=$$; exec sleep 60"]))
    server = await start(scripted.base_url)
    thread_id = await new_thread(server, approvalPolicy="never", sandbox="danger-full-access")
    await server.call("turn/start", {"threadId": thread_id, "input": text("wait")})
    output = await server.note(
        "item/commandExecution/outputDelta", lambda p: p["delta"].startswith("pid=")
    )
    pid = int(output["delta"].split("=")[1])
    server.process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(30):
        assert await server.process.wait() == 0
    assert not _alive(pid)


async def test_a_thread_is_a_session_watched_and_stopped_over_its_control_socket(
    start: Any, servers: Servers, workspace: Path
) -> None:
    os.mkfifo(workspace / "gate")  # holds the command (and so the Turn) until written
    model, scripted = serve(
        servers,
        shell_call(["bash", "-c", "echo ready; cat gate"], call_id="held"),
        text_response("never asked: the stop ends the Task after this Turn"),
    )
    sockets = Path(tempfile.mkdtemp(prefix="cx-"))  # a short path: Unix sockets need one
    try:
        server = await start(
            scripted.base_url, "--session-sockets", str(sockets), "--log-level", "info"
        )
        thread_id = await new_thread(server, approvalPolicy="never", sandbox="danger-full-access")
        await server.logged("control socket")
        await server.call("turn/start", {"threadId": thread_id, "input": text("hold")})
        await server.note("item/commandExecution/outputDelta", lambda p: "ready" in p["delta"])
        reader, writer = await asyncio.open_unix_connection(sockets / f"{thread_id}.sock")
        status = await _socket_call(reader, writer, "get_status")
        assert status["status"] == "running"
        assert status["task_dir"] == str(workspace)
        assert await _socket_call(reader, writer, "stop") == {"status": "stop_requested"}
        (workspace / "gate").write_text("go\n")  # the command ends, and with it the Turn
        done = await server.note("turn/completed")
        assert done["turn"]["status"] == "completed"
        assert len(model.requests) == 1  # the stop: no request after the command's Turn
        writer.close()
        assert await server.close() == 0
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


async def _socket_call(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str
) -> Any:
    writer.write(json.dumps({"jsonrpc": "2.0", "id": method, "method": method}).encode() + b"\n")
    async with asyncio.timeout(30):
        while True:
            answer = json.loads(await reader.readline())
            if answer.get("id") == method:
                return answer["result"]


async def test_listen_names_the_transports_it_serves() -> None:
    for url, says in (("unix:///tmp/x.sock", "not a transport codexcore serves"),):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "codexcore",
            "app-server",
            "--listen",
            url,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=server_env(None, OPENAI_API_KEY="sk-test"),
        )
        async with asyncio.timeout(30):
            out, err = await process.communicate()
        assert process.returncode == 2
        assert out == b""
        assert says in err.decode()
