"""Function tools in a real engine: the model's call reaches the Python function, its
answer reaches the model, and the events show it as an MCP call of server codexcore.

Each test drives a real Codex against a scripted model (httpx's mock transport) and
reads the requests the model received."""

from __future__ import annotations

import asyncio
import base64
import json
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from codexcore import CallbackExecutor, Codex, FunctionTool, ToolImage, function_tool
from codexcore import protocol as p
from codexcore.adapters.threads import CodexThread
from codexcore.engine import EngineConfig, McpServerConfig
from codexcore.engine._function_registry import ToolNameTaken
from codexcore.protocol import ExecApproval, Interrupt, TextInput, UserInput
from codexcore.testing import ScriptedModel, function_call_response, text_response

from .engine_helpers import Recorder, engine_config

pytestmark = pytest.mark.anyio

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


def outputs(request: dict[str, Any]) -> list[Any]:
    return [i["output"] for i in request["input"] if i.get("type") == "function_call_output"]


def calling(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ScriptedModel:
    return ScriptedModel(
        [function_call_response(name, arguments, call_id=call_id), text_response("done")]
    )


async def run_task(
    tmp_path: Path, model: ScriptedModel, tools: list[Any], **session: Any
) -> Recorder:
    config = engine_config(tmp_path, **session)
    async with Codex(config, transport=model.mock_transport(), tools=tools) as codex:
        ui = Recorder(codex)
        await ui.submit(say("go"), id="t1")
        await ui.until(p.TaskComplete, within=20)
    ui.check_invariants()
    return ui


async def test_a_sync_tool_gets_the_arguments_and_the_model_gets_its_answer(
    tmp_path: Path,
) -> None:
    # Other tests of this process (an xdist worker) may have abandoned sync tools.
    before = set(threading.enumerate())
    threads: list[int] = []

    @function_tool
    def editor_selection(path: str, line: int = 1) -> str:
        """The open editor's selection.

        Args:
            path: The file.
            line: Where the selection starts.
        """
        threads.append(threading.get_ident())
        return f"{path}:{line}: selected text"

    model = calling("editor_selection", {"path": "a.py", "line": None})
    ui = await run_task(tmp_path, model, [editor_selection])
    offered = {t["name"]: t for t in model.requests[0]["tools"]}
    assert offered["editor_selection"] == editor_selection.spec
    assert offered["editor_selection"]["strict"] is True
    assert outputs(model.requests[1]) == ["a.py:1: selected text"]
    # Ran on a worker thread, not on the engine's (here: the test's) loop thread.
    assert threads
    assert threads[0] != threading.get_ident()
    begin, end = ui.of(p.McpToolCallBegin)[0], ui.of(p.McpToolCallEnd)[0]
    called = p.McpInvocation("codexcore", "editor_selection", {"path": "a.py", "line": None})
    assert begin == p.McpToolCallBegin("c1", called)
    assert end.invocation == called
    assert end.result == {"Ok": {"content": [{"type": "text", "text": "a.py:1: selected text"}]}}
    assert ui.types().index("mcp_tool_call_end") < ui.types().index("turn_complete")
    # The closed engine left no worker thread of its own behind.
    left = set(threading.enumerate()) - before
    assert not [t for t in left if t.name == "codexcore-tool"]


async def test_an_async_tool_runs_on_the_engines_loop_and_json_reaches_the_model(
    tmp_path: Path,
) -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def diagnostics(path: str) -> dict[str, Any]:
        loops.append(asyncio.get_running_loop())
        return {"path": path, "errors": [{"line": 3, "message": "undefined name"}]}

    model = calling("diagnostics", {"path": "a.py"})
    ui = await run_task(tmp_path, model, [diagnostics])  # a plain function, made a tool
    assert loops == [asyncio.get_running_loop()]
    expected = {"path": "a.py", "errors": [{"line": 3, "message": "undefined name"}]}
    assert json.loads(outputs(model.requests[1])[0]) == expected
    assert ui.of(p.McpToolCallEnd)[0].result["Ok"]["structuredContent"] == expected


async def test_an_exception_is_the_tools_error_and_the_task_goes_on(tmp_path: Path) -> None:
    def run_tests(task: str) -> str:
        raise RuntimeError(f"no test task named {task}")

    model = calling("run_tests", {"task": "unit"})
    ui = await run_task(tmp_path, model, [run_tests])
    assert outputs(model.requests[1]) == [
        "error: the tool reported a failure: RuntimeError: no test task named unit"
    ]
    assert ui.of(p.McpToolCallEnd)[0].result["Ok"]["isError"] is True
    assert ui.of(p.TaskComplete)[0].last_agent_message == "done"


async def test_bad_arguments_are_the_models_to_fix(tmp_path: Path) -> None:
    called: list[int] = []

    def goto(line: int) -> str:
        called.append(line)
        return "ok"

    model = calling("goto", {"row": 3})
    ui = await run_task(tmp_path, model, [goto])
    [said] = outputs(model.requests[1])
    assert said.startswith("error: goto: unknown argument(s): row"), said
    assert not called
    assert not ui.of(p.McpToolCallBegin)


async def test_an_image_result_is_shown_to_the_model(tmp_path: Path) -> None:
    def screenshot() -> ToolImage:
        return ToolImage(PNG, "image/png")

    model = calling("screenshot", {})
    ui = await run_task(tmp_path, model, [screenshot])
    assert "returned an image (image/png" in outputs(model.requests[1])[0]
    images = [
        part["image_url"]
        for item in model.requests[1]["input"]
        if item.get("type") == "message"
        for part in item["content"]
        if part.get("type") == "input_image"
    ]
    assert images == [f"data:image/png;base64,{base64.b64encode(PNG).decode()}"]
    content = ui.of(p.McpToolCallEnd)[0].result["Ok"]["content"]
    assert content[0]["type"] == "image"
    assert content[0]["mimeType"] == "image/png"


# --- approval -------------------------------------------------------------------------


async def approval_run(
    tmp_path: Path, decision: str, policy: str = "on-request"
) -> tuple[Recorder, ScriptedModel, list[str]]:
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def rename_symbol(old: str, new: str) -> str:
        ran.append(new)
        return "renamed in 3 files"

    model = calling("rename_symbol", {"old": "a", "new": "b"})
    config = engine_config(tmp_path, approval_policy=policy)
    async with Codex(config, transport=model.mock_transport(), tools=[rename_symbol]) as codex:
        ui = Recorder(codex)
        await ui.submit(say("go"), id="t1")
        if policy != "never":
            request = await ui.until(p.ExecApprovalRequest)
            assert request.msg.command == (
                "mcp",
                "codexcore",
                "rename_symbol",
                '{"old":"a","new":"b"}',
            )
            await ui.submit(ExecApproval("c1", decision))  # type: ignore[arg-type]
        await ui.until(p.TaskComplete, within=20)
    return ui, model, ran


async def test_a_tool_that_needs_approval_runs_once_approved(tmp_path: Path) -> None:
    _ui, model, ran = await approval_run(tmp_path, "approved")
    assert ran == ["b"]
    assert outputs(model.requests[1]) == ["renamed in 3 files"]


async def test_a_denied_tool_is_not_called(tmp_path: Path) -> None:
    ui, model, ran = await approval_run(tmp_path, "denied")
    assert ran == []
    assert outputs(model.requests[1])[0].startswith("error: the user denied this call")
    assert "Err" in ui.of(p.McpToolCallEnd)[0].result


async def test_under_never_a_tool_that_needs_approval_is_refused(tmp_path: Path) -> None:
    ui, model, ran = await approval_run(tmp_path, "", policy="never")
    assert ran == []
    assert outputs(model.requests[1]) == [
        "error: rename_symbol needs the user's approval, and this session never asks"
    ]
    assert not ui.of(p.ExecApprovalRequest)


# --- interrupt ---------------------------------------------------------------------------


async def interrupted(tmp_path: Path, tool: FunctionTool, started: Any) -> Recorder:
    model = ScriptedModel(
        [function_call_response(tool.name, {}, call_id="c1"), text_response("after")]
    )
    config = engine_config(tmp_path)
    async with Codex(config, transport=model.mock_transport(), tools=[tool]) as codex:
        ui = Recorder(codex)
        await ui.submit(say("go"), id="t1")
        await ui.until(p.McpToolCallBegin)
        await started()
        await ui.submit(Interrupt())
        aborted = await ui.until(p.TurnAborted, within=5)
        assert aborted.id == "t1"
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, within=10)
    end = ui.of(p.McpToolCallEnd)[0]
    assert end.result == {"Err": "aborted: the user interrupted the call"}
    # The next request answers the call as aborted, so the conversation stays valid.
    assert outputs(model.requests[1])[0].startswith("aborted:")
    return ui


async def test_an_interrupt_cancels_a_running_async_tool(tmp_path: Path) -> None:
    running = asyncio.Event()
    cancelled = asyncio.Event()

    async def build_project() -> str:
        running.set()
        try:
            await asyncio.Event().wait()  # a build that never ends by itself
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "built"

    async def started() -> None:
        await asyncio.wait_for(running.wait(), 5)

    await interrupted(tmp_path, FunctionTool.of(build_project), started)
    assert cancelled.is_set()


async def test_an_interrupt_abandons_a_running_sync_tool(tmp_path: Path) -> None:
    running = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def build_project() -> str:
        running.set()
        release.wait(10)
        finished.set()
        return "built"

    async def started() -> None:
        assert await asyncio.to_thread(running.wait, 5)

    await interrupted(tmp_path, FunctionTool.of(build_project), started)
    assert not finished.is_set()  # the Task did not wait for it
    release.set()
    assert await asyncio.to_thread(finished.wait, 5)


# --- registration ---------------------------------------------------------------------


def test_names_that_collide_are_refused_at_registration() -> None:
    def shell() -> str:
        return ""

    def docs__search() -> str:
        return ""

    def fine() -> str:
        return ""

    # api_key="": no request is made here, and no key is needed to register tools.
    codex = Codex(EngineConfig(api_key="", mcp_servers={"docs": McpServerConfig(command="x")}))
    with pytest.raises(ToolNameTaken, match="'shell': it is a built-in tool"):
        codex.tools.add(shell)
    with pytest.raises(ToolNameTaken, match="are the tools of the MCP server 'docs'"):
        codex.tools.add(docs__search)
    codex.tools.add(fine)
    with pytest.raises(ToolNameTaken, match="registered already"):
        codex.tools.add(fine)
    with pytest.raises(ToolNameTaken, match="built-in"):
        Codex(api_key="", tools=[shell])
    assert codex.tools.names() == ["fine"]
    assert codex.tools.remove("fine").name == "fine"
    with pytest.raises(KeyError, match="no function tool named 'fine'"):
        codex.tools.remove("fine")


async def test_tools_change_between_tasks(tmp_path: Path) -> None:
    def open_file(path: str) -> str:
        return f"opened {path}"

    model = ScriptedModel([text_response("one"), text_response("two"), text_response("three")])
    async with Codex(engine_config(tmp_path), transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        for n, change in enumerate(
            (None, lambda: codex.tools.add(open_file), lambda: codex.tools.remove("open_file"))
        ):
            if change is not None:
                change()
            await ui.submit(say("go"), id=f"t{n}")
            await ui.until(p.TaskComplete)
    offered = [[t["name"] for t in r["tools"]] for r in model.requests]
    assert "open_file" not in offered[0]
    assert "open_file" in offered[1]
    assert "open_file" not in offered[2]


def test_the_thread_face_runs_a_tool_on_the_ui_thread(tmp_path: Path) -> None:
    """A UI toolkit's tool runs on the UI's own thread: the engine posts the call to
    the queue the UI thread polls, beside its events."""
    inbox: queue.Queue[Any] = queue.Queue()
    ran_on: list[int] = []

    def open_editor_path() -> str:
        ran_on.append(threading.get_ident())
        return "/work/a.py"

    tool = FunctionTool.of(open_editor_path, executor=CallbackExecutor(inbox.put))
    model = calling("open_editor_path", {})
    config = engine_config(tmp_path)
    with CodexThread(config, api_key="", on_event=inbox.put, tools=[tool]) as first:
        assert first.tools.names() == ["open_editor_path"]
    with CodexThread(config, transport=model.mock_transport(), on_event=inbox.put) as codex:
        codex.tools.add(tool)
        codex.submit(say("go"))
        while True:
            item = inbox.get(timeout=20)
            if callable(item):
                item()  # the UI thread runs the posted call
            elif item.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                assert item.msg.TYPE == "task_complete"
                break
    assert ran_on == [threading.get_ident()]
    assert outputs(model.requests[1]) == ["/work/a.py"]
