"""Tools a client declares and answers (dynamic tools), in the engine.

Real Tasks on the scripted model: the client declares a tool, the model calls
it, the client sees ``dynamic_tool_call_request`` and answers (or does not, or
interrupts), and the model's next request carries the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore import Codex
from codexcore import protocol as p
from codexcore.engine._mcp_config import McpServerConfig
from codexcore.testing import ScriptedModel, function_call_response, text_response

from .engine_helpers import Recorder, engine_config, running_engine
from .flows import outputs_sent

pytestmark = pytest.mark.anyio

EDITOR = p.DynamicToolSpec(
    "editor_selection",
    "The open editor's path and selection.",
    {"type": "object", "properties": {"include_text": {"type": "boolean"}}},
)
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def say(text: str) -> p.UserInput:
    return p.UserInput((p.TextInput(text),))


def calling_model(*then: Any) -> ScriptedModel:
    return ScriptedModel(
        [
            function_call_response("editor_selection", {"include_text": True}, call_id="dyn_1"),
            *then,
        ]
    )


def tools_offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in request["tools"]}


async def test_the_call_reaches_the_client_and_its_answer_reaches_the_model(
    tmp_path: Path,
) -> None:
    model = calling_model(text_response("You selected lines 10-12."))
    async with running_engine(model, tmp_path, dynamic_tools=(EDITOR,)) as ui:
        await ui.submit(say("what did I select?"), id="t")
        asked = await ui.until(p.DynamicToolCallRequest, id="t")
        assert asked.msg == p.DynamicToolCallRequest(
            "dyn_1", "editor_selection", {"include_text": True}
        )
        await ui.submit(p.DynamicToolResponse("dyn_1", "src/app.py:10-12"), id="answer")
        done = await ui.until(p.TaskComplete, id="t")
    assert done.msg.last_agent_message == "You selected lines 10-12."
    offered = tools_offered(model.requests[0])["editor_selection"]
    assert offered["parameters"] == EDITOR.input_schema
    assert offered["description"] == EDITOR.description
    assert outputs_sent(model.requests[1])["dyn_1"] == "src/app.py:10-12"
    (begin,) = ui.of(p.McpToolCallBegin)
    (end,) = ui.of(p.McpToolCallEnd)
    assert begin.invocation == p.McpInvocation("client", "editor_selection", {"include_text": True})
    assert end.result == {"Ok": {"content": [{"type": "text", "text": "src/app.py:10-12"}]}}
    order = ui.types(id="t")
    assert order.index("mcp_tool_call_begin") < order.index("dynamic_tool_call_request")
    assert ui.types(id="answer") == []


async def test_a_failed_call_and_content_items_reach_the_model(tmp_path: Path) -> None:
    model = calling_model(
        function_call_response("editor_selection", {}, call_id="dyn_2"),
        text_response("ok"),
    )
    async with running_engine(model, tmp_path, dynamic_tools=(EDITOR,)) as ui:
        await ui.submit(say("look"), id="t")
        await ui.until(p.DynamicToolCallRequest, id="t")
        await ui.submit(p.DynamicToolResponse("dyn_1", "no editor is open", success=False))
        await ui.until(p.DynamicToolCallRequest, id="t")
        items = (p.DynamicToolOutputText("a screenshot"), p.DynamicToolOutputImage(PNG))
        await ui.submit(p.DynamicToolResponse("dyn_2", content_items=items))
        await ui.until(p.TaskComplete, id="t")
    assert outputs_sent(model.requests[1])["dyn_1"] == "error: no editor is open"
    assert ui.of(p.McpToolCallEnd)[0].result["Ok"]["isError"] is True
    assert outputs_sent(model.requests[2])["dyn_2"].startswith("a screenshot")
    images = [
        part["image_url"]
        for item in model.requests[2]["input"]
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "input_image"
    ]
    assert images == [PNG]


async def test_no_answer_within_the_timeout_closes_the_call_and_the_task_goes_on(
    tmp_path: Path,
) -> None:
    model = calling_model(text_response("The editor did not answer."))
    session = {"dynamic_tools": (EDITOR,), "dynamic_tool_timeout_ms": 200}
    async with running_engine(model, tmp_path, **session) as ui:
        await ui.submit(say("what did I select?"), id="t")
        await ui.until(p.DynamicToolCallRequest, id="t")
        done = await ui.until(p.TaskComplete, id="t")
        # Too late: the call is closed, and the answer is refused.
        await ui.submit(p.DynamicToolResponse("dyn_1", "late"), id="late")
        late = await ui.until(p.ErrorEvent, id="late")
    assert done.msg.last_agent_message == "The editor did not answer."
    assert late.msg.code == "unknown_call_id"
    output = outputs_sent(model.requests[1])["dyn_1"]
    assert output.startswith("error: editor_selection: the client")
    assert "200 ms" in output
    assert "Err" in ui.of(p.McpToolCallEnd)[0].result


async def test_an_interrupt_ends_the_wait_and_the_call_is_aborted(tmp_path: Path) -> None:
    model = calling_model(text_response("again"))
    async with running_engine(model, tmp_path, dynamic_tools=(EDITOR,)) as ui:
        await ui.submit(say("what did I select?"), id="t")
        await ui.until(p.DynamicToolCallRequest, id="t")
        await ui.submit(p.Interrupt())
        aborted = await ui.until(p.TurnAborted, id="t")
        await ui.submit(p.DynamicToolResponse("dyn_1", "late"), id="late")
        late = await ui.until(p.ErrorEvent, id="late")
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert aborted.msg.reason == "interrupted"
    assert late.msg.code == "unknown_call_id"
    assert ui.of(p.McpToolCallEnd)[0].result == {"Err": "aborted: the user interrupted the call"}
    assert outputs_sent(model.requests[1])["dyn_1"].startswith("aborted:")


async def test_a_stop_lets_the_call_finish(tmp_path: Path) -> None:
    model = calling_model(text_response("unused"))
    async with running_engine(model, tmp_path, dynamic_tools=(EDITOR,)) as ui:
        await ui.submit(say("look"), id="t")
        await ui.until(p.DynamicToolCallRequest, id="t")
        await ui.submit(p.Stop())
        await ui.submit(p.DynamicToolResponse("dyn_1", "src/app.py"), id="answer")
        done = await ui.until(p.TaskComplete, id="t")
    assert done.msg.stopped_by == "stop"
    assert ui.types(id="answer") == []
    assert ui.of(p.McpToolCallEnd)[0].result["Ok"]["content"][0]["text"] == "src/app.py"


async def test_an_answer_for_an_unknown_call_is_an_error_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("fine")])
    async with running_engine(model, tmp_path, dynamic_tools=(EDITOR,)) as ui:
        await ui.submit(p.DynamicToolResponse("nope", "x"), id="stray")
        error = await ui.until(p.ErrorEvent, id="stray")
        await ui.submit(say("hello"), id="t")
        await ui.until(p.TaskComplete, id="t")
    assert error.msg.code == "unknown_call_id"
    assert "'nope'" in error.msg.message


@pytest.mark.parametrize(
    ("name", "taken_by"),
    [("shell", "a built-in tool"), ("request_user_input", "a built-in tool")],
)
async def test_a_name_taken_by_a_built_in_tool_is_refused(
    tmp_path: Path, name: str, taken_by: str
) -> None:
    model = ScriptedModel([text_response("fine")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(p.ConfigureSession(dynamic_tools=(p.DynamicToolSpec(name),)), id="c")
        error = await ui.until(p.ErrorEvent, id="c")
        await ui.submit(say("hello"), id="t")
        await ui.until(p.TaskComplete, id="t")
    assert error.msg.code == "tool_name_taken"
    assert f"taken by {taken_by}" in error.msg.message
    assert name not in [t["name"] for t in model.requests[0]["tools"] if t["name"] != "shell"]


async def test_names_taken_by_mcp_function_tools_or_each_other_are_refused(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("fine")])
    config = attrs.evolve(
        engine_config(tmp_path),
        mcp_servers={"docs": McpServerConfig(command="/bin/false", enabled=False)},
    )
    async with Codex(config, transport=model.mock_transport()) as codex:

        def open_file(path: str) -> str:
            """Open a file in the editor."""
            return path

        codex.tools.add(open_file)
        ui = Recorder(codex)
        bad = {
            "mcp": (p.DynamicToolSpec("docs__search"),),
            "function": (p.DynamicToolSpec("open_file"),),
            "twice": (EDITOR, EDITOR),
            "malformed": (p.DynamicToolSpec("has space"),),
            "schema": (p.DynamicToolSpec("x", input_schema={"type": "string"}),),
        }
        for sub_id, specs in bad.items():
            await ui.submit(p.OverrideTurnContext(dynamic_tools=specs), id=sub_id)
            await ui.until(p.ErrorEvent, id=sub_id)
        await ui.submit(p.ConfigureSession(dynamic_tools=(EDITOR,)), id="ok")
        await ui.until(p.SessionConfigured, id="ok")
        # And the other way round: a function tool may not take a client's tool's name.
        with pytest.raises(ValueError, match="client of the session declared"):
            codex.tools.add(open_file, name="editor_selection")
    codes = {e.message.split(":")[1].strip(): e.code for e in ui.of(p.ErrorEvent)}
    assert [e.code for e in ui.of(p.ErrorEvent)] == [
        "tool_name_taken",
        "tool_name_taken",
        "tool_name_taken",
        "bad_dynamic_tool",
        "bad_dynamic_tool",
    ], codes
    messages = [e.message for e in ui.of(p.ErrorEvent)]
    assert "MCP server 'docs'" in messages[0]
    assert "function tool" in messages[1]
    assert "another of these tools" in messages[2]


async def test_override_turn_context_changes_the_tools_of_the_next_request(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("one"), text_response("two")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("first"), id="a")
        await ui.until(p.TaskComplete, id="a")
        await ui.submit(p.OverrideTurnContext(dynamic_tools=(EDITOR,)))
        await ui.submit(say("second"), id="b")
        await ui.until(p.TaskComplete, id="b")
    assert "editor_selection" not in tools_offered(model.requests[0])
    assert "editor_selection" in tools_offered(model.requests[1])


async def test_a_resumed_session_offers_the_tools_of_the_client_that_resumes_it(
    tmp_path: Path,
) -> None:
    """A client's tools are that client's: not recorded, not brought back by a resume."""
    model = ScriptedModel([text_response("one", response_id="r1"), text_response("two")])
    home = str(tmp_path / "home")
    declaring = attrs.evolve(engine_config(tmp_path, dynamic_tools=(EDITOR,)), home=home)
    async with Codex(declaring, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        await ui.submit(say("first"), id="a")
        configured = await ui.until(p.SessionConfigured)
        await ui.until(p.TaskComplete, id="a")
    session_id = configured.msg.session_id
    (rollout,) = (tmp_path / "home").rglob(f"*{session_id}*.jsonl")
    assert "editor_selection" not in rollout.read_text()
    plain = attrs.evolve(engine_config(tmp_path), home=home)
    async with Codex(plain, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        await ui.submit(p.ResumeSession(session_id), id="r")
        await ui.until(p.SessionConfigured, id="r")
        await ui.submit(say("second"), id="b")
        await ui.until(p.TaskComplete, id="b")
    assert "editor_selection" in tools_offered(model.requests[0])
    assert "editor_selection" not in tools_offered(model.requests[1])
