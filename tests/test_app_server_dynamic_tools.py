"""``codexcore app-server``: the client's own tools (Codex's ``dynamicTools`` at
``thread/start``, the ``item/tool/call`` server request), from a real subprocess against
the scripted model. Every message the server sends is validated against the pinned Codex
CLI's own schema (``tests/app_server_helpers.py``); what this client sends (the
``dynamicTools`` of ``thread/start``, its answers to ``item/tool/call``) is validated
against the same CLI's schema with its experimental fields, where ``dynamicTools`` lives.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from codexcore.testing import ScriptedResponsesServer, function_call_response, text_response

from .app_server_helpers import AppServer, Schema, app_servers, find_codex_cli, generate_schema
from .scripted_servers import serve

pytestmark = pytest.mark.anyio

Servers = list[ScriptedResponsesServer]

EDITOR = {
    "type": "function",
    "name": "editor_selection",
    "description": "The open editor's path and selection.",
    "inputSchema": {"type": "object", "properties": {"include_text": {"type": "boolean"}}},
}
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="session")
def schema(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    return generate_schema(tmp_path_factory.mktemp("codex-app-server-schema"))


@pytest.fixture(scope="session")
def client_schema(schema: Schema, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same CLI's schema with its experimental fields (``dynamicTools`` is one)."""
    folder = tmp_path_factory.mktemp("codex-app-server-schema-experimental")
    cli = find_codex_cli()
    assert cli is not None  # `schema` skipped (or failed) without it
    command = [str(cli), "app-server", "generate-json-schema", "--experimental", "--out"]
    subprocess.run([*command, str(folder)], check=True, capture_output=True, timeout=60)
    return folder


def client_sends(folder: Path, name: str, value: Any) -> Any:
    """Check that what this test client sends is what Codex's schema says a client sends."""
    validator = jsonschema.Draft7Validator(json.loads((folder / name).read_text()))
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    assert error is None, f"{name} rejects the test client's {value}: {error.message}"
    return value


@pytest.fixture
async def start(schema: Schema, workspace: Path) -> AsyncIterator[Any]:
    async with app_servers(schema, workspace) as starter:
        yield starter


async def thread_with_tools(server: AppServer, folder: Path, *tools: dict[str, Any]) -> str:
    await server.initialize()
    params = {"dynamicTools": list(tools), "approvalPolicy": "never"}
    result = await server.call(
        "thread/start", client_sends(folder, "v2/ThreadStartParams.json", params)
    )
    return result["thread"]["id"]  # type: ignore[no-any-return]


async def start_turn(server: AppServer, thread_id: str, prompt: str) -> str:
    params = {"threadId": thread_id, "input": [{"type": "text", "text": prompt}]}
    turn = await server.call("turn/start", params)
    return turn["turn"]["id"]  # type: ignore[no-any-return]


async def tool_call(server: AppServer, call_id: str) -> dict[str, Any]:
    """The next server request, which must be ``item/tool/call`` for ``call_id``."""
    asked = await server.server_request()
    assert asked["method"] == "item/tool/call"
    assert asked["params"]["callId"] == call_id
    return asked


def answer(server: AppServer, folder: Path, asked: dict[str, Any], result: Any) -> None:
    client_sends(folder, "DynamicToolCallResponse.json", result)
    server.write({"id": asked["id"], "result": result})


def outputs_sent(request: dict[str, Any]) -> dict[str, str]:
    """The function call outputs a model request carries, by call id."""
    return {
        item["call_id"]: item["output"]
        for item in request["input"]
        if item.get("type") == "function_call_output"
    }


def tool_items(server: AppServer, method: str) -> list[dict[str, Any]]:
    return [
        n["params"]["item"]
        for n in server.notes
        if n["method"] == method and n["params"]["item"]["type"] == "dynamicToolCall"
    ]


def resolved(server: AppServer) -> list[Any]:
    return [
        n["params"]["requestId"] for n in server.notes if n["method"] == "serverRequest/resolved"
    ]


async def test_the_model_calls_a_client_tool_and_the_answer_reaches_the_model(
    start: Any, servers: Servers, client_schema: Path
) -> None:
    model, scripted = serve(
        servers,
        function_call_response("editor_selection", {"include_text": True}, call_id="dyn_1"),
        text_response("You selected lines 10-12."),
    )
    server = await start(scripted.base_url)
    thread_id = await thread_with_tools(server, client_schema, EDITOR)
    turn_id = await start_turn(server, thread_id, "what did I select?")
    asked = await tool_call(server, "dyn_1")
    assert asked["params"] == {
        "threadId": thread_id,
        "turnId": turn_id,
        "callId": "dyn_1",
        "namespace": None,
        "tool": "editor_selection",
        "arguments": {"include_text": True},
    }
    [started] = tool_items(server, "item/started")  # before the request, as Codex sends it
    assert (started["id"], started["status"], started["tool"]) == (
        "dyn_1",
        "inProgress",
        "editor_selection",
    )
    text = [{"type": "inputText", "text": "src/app.py:10-12"}]
    answer(server, client_schema, asked, {"contentItems": text, "success": True})
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "completed"
    offered = {tool["name"]: tool for tool in model.requests[0]["tools"]}["editor_selection"]
    assert offered["parameters"] == EDITOR["inputSchema"]
    assert offered["description"] == EDITOR["description"]
    assert outputs_sent(model.requests[1]) == {"dyn_1": "src/app.py:10-12"}
    [completed] = tool_items(server, "item/completed")
    assert completed["status"] == "completed"
    assert completed["success"] is True
    assert completed["contentItems"] == text
    assert completed["durationMs"] >= 0
    assert resolved(server) == [asked["id"]]
    methods = server.methods()
    assert methods.index("serverRequest/resolved") < methods.index("turn/completed")
    read = await server.call("thread/read", {"threadId": thread_id, "includeTurns": True})
    [recorded] = [i for i in read["thread"]["turns"][0]["items"] if i["id"] == "dyn_1"]
    assert (recorded["type"], recorded["status"]) == ("dynamicToolCall", "completed")
    assert recorded["contentItems"] == text
    assert await server.close() == 0


async def test_failed_answers_reach_the_model_and_the_turn_goes_on(
    start: Any, servers: Servers, client_schema: Path
) -> None:
    model, scripted = serve(
        servers,
        function_call_response("editor_selection", {}, call_id="dyn_1"),
        function_call_response("editor_selection", {}, call_id="dyn_2"),
        function_call_response("editor_selection", {}, call_id="dyn_3"),
        text_response("no editor then"),
    )
    server = await start(scripted.base_url)
    thread_id = await thread_with_tools(server, client_schema, EDITOR)
    await start_turn(server, thread_id, "look")
    failed = [{"type": "inputText", "text": "no editor is open"}]
    answer(
        server,
        client_schema,
        await tool_call(server, "dyn_1"),
        {"contentItems": failed, "success": False},
    )
    errored = await tool_call(server, "dyn_2")
    server.write({"id": errored["id"], "error": {"code": -32000, "message": "plugin crashed"}})
    malformed = await tool_call(server, "dyn_3")
    server.write({"id": malformed["id"], "result": {"contentItems": "nope", "success": True}})
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "completed"
    assert outputs_sent(model.requests[1])["dyn_1"] == "error: no editor is open"
    said = outputs_sent(model.requests[2])["dyn_2"]
    assert said.startswith("error: dynamic tool request failed")
    assert "plugin crashed" in said
    said = outputs_sent(model.requests[3])["dyn_3"]
    assert said.startswith("error: dynamic tool response was invalid: contentItems")
    items = {item["id"]: item for item in tool_items(server, "item/completed")}
    assert [items[c]["status"] for c in ("dyn_1", "dyn_2", "dyn_3")] == ["failed"] * 3
    assert [items[c]["success"] for c in ("dyn_1", "dyn_2", "dyn_3")] == [False] * 3
    assert items["dyn_1"]["contentItems"] == failed
    assert await server.close() == 0


async def test_an_image_answer_is_shown_to_the_model(
    start: Any, servers: Servers, client_schema: Path
) -> None:
    model, scripted = serve(
        servers,
        function_call_response("editor_selection", {}, call_id="dyn_1"),
        text_response("a red pixel"),
    )
    server = await start(scripted.base_url)
    thread_id = await thread_with_tools(server, client_schema, EDITOR)
    await start_turn(server, thread_id, "what is on screen?")
    content = [
        {"type": "inputText", "text": "a screenshot"},
        {"type": "inputImage", "imageUrl": PNG},
    ]
    answer(
        server,
        client_schema,
        await tool_call(server, "dyn_1"),
        {"contentItems": content, "success": True},
    )
    await server.note("turn/completed", lambda p: p["turn"]["status"] == "completed")
    assert outputs_sent(model.requests[1])["dyn_1"].startswith("a screenshot")
    images = [
        part["image_url"]
        for item in model.requests[1]["input"]
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "input_image"
    ]
    assert images == [PNG]
    [completed] = tool_items(server, "item/completed")
    assert completed["contentItems"] == content
    assert await server.close() == 0


async def test_a_name_taken_by_a_built_in_tool_is_refused_at_thread_start(
    start: Any, servers: Servers, client_schema: Path
) -> None:
    _, scripted = serve(servers, text_response("hello"))
    server = await start(scripted.base_url)
    await server.initialize()
    shell = {**EDITOR, "name": "shell"}
    params = client_sends(
        client_schema, "v2/ThreadStartParams.json", {"dynamicTools": [EDITOR, shell]}
    )
    refused = await server.send("thread/start", params)
    error = refused["error"]
    assert error["code"] == -32602
    assert error["data"]["field"] == "params.dynamicTools[1]"
    assert "'shell'" in error["message"]
    assert "built-in" in error["message"]
    assert "thread/started" not in server.methods()
    twice = await server.send("thread/start", {"dynamicTools": [EDITOR, EDITOR]})
    assert twice["error"]["data"]["field"] == "params.dynamicTools[1]"
    result = await server.call("thread/start", {"dynamicTools": [EDITOR]})  # the connection goes on
    assert result["thread"]["id"]
    again = {"threadId": result["thread"]["id"], "dynamicTools": [EDITOR]}
    resumed = await server.send("thread/resume", again)
    assert resumed["error"]["data"]["field"] == "params.dynamicTools"
    assert await server.close() == 0


async def test_an_interrupt_while_the_client_is_asked_ends_the_turn(
    start: Any, servers: Servers, client_schema: Path
) -> None:
    model, scripted = serve(
        servers,
        function_call_response("editor_selection", {}, call_id="dyn_1"),
        text_response("never asked for"),
    )
    server = await start(scripted.base_url)
    thread_id = await thread_with_tools(server, client_schema, EDITOR)
    turn_id = await start_turn(server, thread_id, "look")
    asked = await tool_call(server, "dyn_1")
    assert await server.call("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
    done = await server.note("turn/completed")
    assert done["turn"]["status"] == "interrupted"
    [completed] = tool_items(server, "item/completed")
    assert (completed["status"], completed["success"]) == ("failed", False)
    assert "aborted" in completed["contentItems"][0]["text"]
    await server.note("serverRequest/resolved", lambda p: p["requestId"] == asked["id"])
    # A late answer finds no call: the server drops it, and the thread takes the next turn.
    answer(server, client_schema, asked, {"contentItems": [], "success": True})
    await start_turn(server, thread_id, "again")
    await server.note("turn/completed", lambda p: p["turn"]["status"] == "completed")
    assert len(model.requests) == 2
    assert await server.close() == 0


async def test_a_client_that_goes_away_with_a_call_pending_ends_the_server(
    start: Any, servers: Servers, client_schema: Path
) -> None:
    _, scripted = serve(servers, function_call_response("editor_selection", {}, call_id="dyn_1"))
    server = await start(scripted.base_url)
    thread_id = await thread_with_tools(server, client_schema, EDITOR)
    await start_turn(server, thread_id, "look")
    await tool_call(server, "dyn_1")
    assert await server.close() == 0  # stdin closed: the thread ends, the call with it
