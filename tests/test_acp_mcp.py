"""MCP servers an editor lists in ``session/new``: started as the session's own (real
servers written with the SDK's ``MCPServer``, tests/mcp_server.py), their tools' calls
shown as tool calls and asked about as permission requests, their processes gone when
the session ends; a server that cannot start is reported and the session goes on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    EnvVariable,
    HttpHeader,
    HttpMcpServer,
    McpServerStdio,
    RequestPermissionRequest,
    TextContentBlock,
)

from codexcore.testing import ScriptedModel, function_call_response, text_response

from .acp_helpers import PY, RecordingClient, serving
from .test_mcp import http_server

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).with_name("mcp_server.py"))
__all__ = ["http_server"]  # the fixture, shared with tests/test_mcp.py


def prompt_text(value: str) -> list[Any]:
    return [TextContentBlock(type="text", text=value)]


def group_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


def group_members(pgid: int) -> list[int]:
    """The live processes (zombies aside) of process group ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return found


def tool_outputs(request: dict[str, Any]) -> dict[str, str]:
    return {
        item["call_id"]: item["output"]
        for item in request["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def demo(name: str = "demo", **env: str) -> McpServerStdio:
    variables = [EnvVariable(name=k, value=v) for k, v in env.items()]
    return McpServerStdio(name=name, command=PY, args=[SERVER, "--name", name], env=variables)


async def test_an_editors_stdio_server_runs_for_the_session_and_its_calls_are_tool_calls(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            function_call_response("demo__spawn", {}, call_id="m1"),
            function_call_response("demo__erase", {"path": "notes.txt"}, call_id="m2"),
            function_call_response("demo__environment", {}, call_id="m3"),
            text_response("Done with the tools."),
        ]
    )
    client = RecordingClient()
    async with serving(model, client, tmp_path) as (conn, _checker):
        server = demo(FROM_THE_EDITOR="1")
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[server])
        assert session.field_meta is None  # nothing to report: the server is started
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("go"))
        assert response.stop_reason == "end_turn"
        # spawn (read-only, so not asked) left a sleep in the server's process group.
        spawned = client.call("m1")
        sleeper = int(spawned[-1].content[0].content.text)
        group = group_of(sleeper)
        assert group != os.getpgid(0)
        assert sleeper in group_members(group)
    # The session ended with the editor's connection: the server's whole group is gone.
    assert group_members(group) == [], f"left running in group {group}"
    tools = {t["name"] for t in model.requests[0]["tools"]}
    assert {"demo__add", "demo__erase", "demo__spawn"} <= tools
    # A call is a tool call of kind other titled server.tool, in progress then completed.
    assert spawned[0].session_update == "tool_call"
    assert (spawned[0].kind, spawned[0].title, spawned[0].status) == (
        "other",
        "demo.spawn",
        "in_progress",
    )
    assert spawned[-1].status == "completed"
    assert spawned[-1].raw_output["content"][0]["type"] == "text"
    # erase is destructive: asked first, shown pending with its arguments, then run.
    [asked] = client.permissions
    assert asked.tool_call.tool_call_id == "m2"
    assert (asked.tool_call.title, asked.tool_call.kind) == ("demo.erase", "other")
    assert asked.tool_call.raw_input == {
        "server": "demo",
        "tool": "erase",
        "arguments": {"path": "notes.txt"},
    }
    assert "this tool" in next(o.name for o in asked.options if o.kind == "allow_always")
    erased = client.call("m2")
    assert [u.status for u in erased if u.status] == ["pending", "in_progress", "completed"]
    assert erased[-1].content[0].content.text == "erased notes.txt"
    # The editor's env reaches the server, and the model gets the results.
    outputs = {k: v for request in model.requests for k, v in tool_outputs(request).items()}
    assert outputs["m2"] == "erased notes.txt"
    assert "FROM_THE_EDITOR" in outputs["m3"]
    assert "OPENAI_API_KEY" not in outputs["m3"]


async def test_reject_always_rejects_the_tool_whatever_its_arguments(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call_response("demo__erase", {"path": "a"}, call_id="m1"),
            function_call_response("demo__erase", {"path": "b"}, call_id="m2"),
            text_response("I will not erase anything."),
        ]
    )

    def reject(request: RequestPermissionRequest) -> str:
        return "reject_always"

    client = RecordingClient(answer=reject)
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[demo()])
        await conn.prompt(session_id=session.session_id, prompt=prompt_text("erase a and b"))
    assert [p.tool_call.tool_call_id for p in client.permissions] == ["m1"]
    for call_id in ("m1", "m2"):
        final = client.call(call_id)[-1]
        assert final.status == "failed", client.summary()
    outputs = {k: v for request in model.requests for k, v in tool_outputs(request).items()}
    assert outputs["m2"].startswith("error: the user denied this call"), outputs
    assert "rejected earlier in this session" in client.call("m2")[-1].content[0].content.text


async def test_a_server_that_cannot_start_is_reported_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("Still here.")])
    client = RecordingClient()
    ghost = McpServerStdio(name="ghost", command=str(tmp_path / "no-such-server"), args=[], env=[])
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[ghost, demo()])
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("hi"))
    assert response.stop_reason == "end_turn"
    said = client.text()
    assert "MCP server 'ghost' failed to start: cannot start" in said, said
    assert "no-such-server" in said
    assert said.index("failed to start") < said.index("Still here.")
    # The other server started all the same.
    assert "demo__add" in {t["name"] for t in model.requests[0]["tools"]}
    assert not any("ghost" in t["name"] for t in model.requests[0]["tools"])


async def test_an_editors_streamable_http_server_with_its_headers(
    tmp_path: Path, http_server: str
) -> None:
    model = ScriptedModel(
        [
            function_call_response("remote__add", {"a": 2, "b": 40}, call_id="h1"),
            text_response("42"),
        ]
    )
    client = RecordingClient()
    headers = [HttpHeader(name="Authorization", value="Bearer t0ken")]
    remote = HttpMcpServer(type="http", name="remote", url=http_server, headers=headers)
    refused = HttpMcpServer(type="http", name="refused", url=http_server, headers=[])
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[remote, refused])
        await conn.prompt(session_id=session.session_id, prompt=prompt_text("add"))
    added = client.call("h1")
    assert (added[0].title, added[-1].status) == ("remote.add", "completed")
    assert added[-1].content[0].content.text == "42"
    # Without the token the server refuses: reported, the other one still serves.
    assert "MCP server 'refused' failed to start" in client.text()
