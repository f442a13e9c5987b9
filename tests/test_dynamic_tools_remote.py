"""A remote client's own tools, over a real ``codexcore serve`` and the mock model.

The client library offers local functions (``RemoteCodex(tools=...)``); the
model's call travels from the scripted model through the server to the client's
function, and its answer back through the server to the model's next request.
Then the reconnection cases over TCP: a client that attaches while a call waits
is sent it again and answers it; with nobody attached the call is closed with an
error when its timeout passes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codexcore import function_tool
from codexcore import protocol as p
from codexcore.adapters.client import RemoteCodex, RemoteCodexThread
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from .flows import outputs_sent
from .server_helpers import TOKEN, ServerProcess, private_dir, server_env

pytestmark = pytest.mark.anyio

WITHIN = 20.0


def say(text: str) -> p.UserInput:
    return p.UserInput((p.TextInput(text),))


def editor_selection(include_text: bool = False) -> str:
    """The open editor's path and selection.

    Args:
        include_text: Whether to include the selected text.
    """
    return "src/app.py:10-12" + (" `return 42`" if include_text else "")


async def line_count(path: str) -> dict[str, Any]:
    """How many lines a file of the open project has."""
    await asyncio.sleep(0)
    return {"path": path, "lines": 120}


def calling_model(*then: Any) -> ScriptedModel:
    call = function_call_response("editor_selection", {"include_text": True}, call_id="dyn_1")
    return ScriptedModel([call, *then])


async def run_task(client: RemoteCodex, *first: p.Op) -> list[p.Event]:
    """Submit ``first`` and a Task; its events up to its terminal one."""
    seen: list[p.Event] = []
    for op in first:
        await client.submit(op)
    await client.submit(say("what did I select?"), id="t")
    async with asyncio.timeout(WITHIN):
        async for event in client.events():
            seen.append(event)
            if event.id == "t" and event.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                return seen
    raise AssertionError("the stream ended")


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
async def test_the_model_s_call_reaches_the_client_s_function_and_its_answer_the_model(
    tmp_path: Path, transport: str
) -> None:
    size = function_call_response("line_count", {"path": "src/app.py"}, call_id="dyn_2")
    model = calling_model(size, text_response("Lines 10-12 of 120."))
    tools: list[Callable[..., Any]] = [editor_selection, line_count]
    async with ScriptedResponsesServer(model) as http:
        if transport == "stdio":
            env = server_env(http.base_url)
            async with RemoteCodex.spawn_stdio(env=env, cwd=tmp_path, tools=tools) as client:
                seen = await run_task(client, p.ConfigureSession())
        else:
            server = await ServerProcess.start(http.base_url, tmp_path)
            try:
                assert server.tcp is not None
                opening = RemoteCodex.connect_tcp(*server.tcp, token=TOKEN, tools=tools)
                async with opening as client:
                    seen = await run_task(client, p.ConfigureSession())
            finally:
                await server.kill()
    assert isinstance(seen[-1].msg, p.TaskComplete), seen[-1]
    offered = {tool["name"]: tool for tool in model.requests[0]["tools"]}
    # The schema is function_tool's, read off the signature and the docstring.
    assert offered["editor_selection"]["parameters"] == function_tool(editor_selection).parameters
    assert "include_text" in offered["editor_selection"]["parameters"]["properties"]
    assert offered["editor_selection"]["description"] == "The open editor's path and selection."
    assert outputs_sent(model.requests[1])["dyn_1"] == "src/app.py:10-12 `return 42`"
    assert outputs_sent(model.requests[2])["dyn_2"] == '{"path":"src/app.py","lines":120}'


async def test_a_client_tool_that_raises_answers_with_its_error(tmp_path: Path) -> None:
    def editor_selection(include_text: bool) -> str:
        """The open editor's path and selection."""
        raise LookupError("no editor is open")

    model = calling_model(text_response("No editor."))
    async with ScriptedResponsesServer(model) as http:
        env = server_env(http.base_url)
        tools = [editor_selection]
        async with RemoteCodex.spawn_stdio(env=env, cwd=tmp_path, tools=tools) as client:
            # No configure_session: the library declares its tools before the first input.
            seen = await run_task(client)
    assert isinstance(seen[-1].msg, p.TaskComplete)
    assert outputs_sent(model.requests[1])["dyn_1"] == "error: LookupError: no editor is open"


def blocking_plugin(path: Path, ran_on: list[int]) -> list[p.Event]:
    """A plugin without an event loop, over a Unix socket: its sync tool is added
    after connecting and runs on a worker thread, not the plugin's nor the client's."""

    def editor_selection(include_text: bool) -> str:
        """The open editor's path and selection."""
        ran_on.append(threading.get_ident())
        return "src/app.py:10-12"

    seen: list[p.Event] = []
    ran_on.append(threading.get_ident())  # the plugin's own thread, first
    with RemoteCodexThread.connect_unix(path, token=TOKEN) as codex:
        codex.tools.add(editor_selection)
        codex.submit(say("what did I select?"), id="t")
        for event in codex:
            seen.append(event)
            if event.id == "t" and event.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                break
    return seen


async def test_the_blocking_face_answers_over_a_unix_socket(tmp_path: Path) -> None:
    model = calling_model(text_response("Lines 10-12."))
    ran_on: list[int] = []
    with private_dir() as run:
        async with ScriptedResponsesServer(model) as http:
            server = await ServerProcess.start(
                http.base_url, tmp_path, tcp=False, unix=run / "s.sock"
            )
            try:
                assert server.unix is not None
                seen = await asyncio.wait_for(
                    asyncio.to_thread(blocking_plugin, server.unix, ran_on), WITHIN
                )
            finally:
                await server.kill()
    assert isinstance(seen[-1].msg, p.TaskComplete), seen[-1]
    assert outputs_sent(model.requests[1])["dyn_1"] == "src/app.py:10-12"
    assert "editor_selection" in {tool["name"] for tool in model.requests[0]["tools"]}
    plugin, *tool = ran_on
    assert len(tool) == 1
    assert tool[0] not in (plugin, threading.get_ident())


def signalling(event: asyncio.Event, reply: ScriptedResponse) -> Callable[[dict[str, Any]], Any]:
    def respond(body: dict[str, Any]) -> ScriptedResponse:
        event.set()
        return reply

    return respond


DECLARED = p.ConfigureSession(
    dynamic_tools=(p.DynamicToolSpec("editor_selection", "The open editor's selection."),),
    dynamic_tool_timeout_ms=15_000,
)


async def until_request(client: RemoteCodex) -> p.Event:
    async with asyncio.timeout(WITHIN):
        async for event in client.events():
            if isinstance(event.msg, p.DynamicToolCallRequest):
                return event
    raise AssertionError("the stream ended")


@pytest.mark.parametrize("replay", ["from_last_seq", "from_the_start"])
async def test_a_call_pending_when_its_client_leaves_is_sent_to_the_next_one(
    tmp_path: Path, replay: str
) -> None:
    model = calling_model(text_response("Lines 10-12."))
    async with ScriptedResponsesServer(model) as http:
        server = await ServerProcess.start(http.base_url, tmp_path)
        try:
            assert server.tcp is not None
            # The first client declares the tool by hand and leaves without answering.
            first = await RemoteCodex.connect_tcp(*server.tcp, token=TOKEN)
            await first.submit(DECLARED)
            await first.submit(say("what did I select?"), id="t")
            request = await until_request(first)
            session_id, last_seq = first.session_id, first.last_seq
            await first.detach()
            # It saw the request: replaying from its last seq would not bring it again.
            assert last_seq is not None
            assert last_seq >= request.seq
            options: dict[str, Any] = {"session_id": session_id}
            if replay == "from_last_seq":
                options["last_seq"] = last_seq
            opening = RemoteCodex.connect_tcp(
                *server.tcp, token=TOKEN, tools=[editor_selection], **options
            )
            async with opening as second:
                async with asyncio.timeout(WITHIN):
                    async for event in second.events():
                        if event.id == "t" and event.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                            assert isinstance(event.msg, p.TaskComplete), event
                            break
        finally:
            await server.kill()
    # The second client's function answered the first client's call.
    assert outputs_sent(model.requests[1])["dyn_1"] == "src/app.py:10-12 `return 42`"


async def test_a_call_nobody_answers_is_closed_with_an_error_after_the_timeout(
    tmp_path: Path,
) -> None:
    asked_again = asyncio.Event()
    model = calling_model(signalling(asked_again, text_response("The editor is gone.")))
    declared = p.ConfigureSession(dynamic_tools=DECLARED.dynamic_tools, dynamic_tool_timeout_ms=300)
    async with ScriptedResponsesServer(model) as http:
        server = await ServerProcess.start(http.base_url, tmp_path)
        try:
            assert server.tcp is not None
            first = await RemoteCodex.connect_tcp(*server.tcp, token=TOKEN)
            await first.submit(declared)
            await first.submit(say("what did I select?"), id="t")
            await until_request(first)
            session_id, last_seq = first.session_id, first.last_seq
            await first.detach()
            # Nobody attaches: the timeout closes the call and the Task asks the model again.
            async with asyncio.timeout(WITHIN):
                await asked_again.wait()
            opening = RemoteCodex.connect_tcp(
                *server.tcp, token=TOKEN, session_id=session_id, last_seq=last_seq
            )
            async with opening as watcher:
                seen: list[p.Event] = []
                async with asyncio.timeout(WITHIN):
                    async for event in watcher.events():
                        seen.append(event)
                        if event.id == "t" and event.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                            break
        finally:
            await server.kill()
    assert isinstance(seen[-1].msg, p.TaskComplete)
    (end,) = [e.msg for e in seen if isinstance(e.msg, p.McpToolCallEnd)]
    assert "did not answer within 300 ms" in end.result["Err"]
    # Not re-sent: the call is closed, nothing waits.
    assert not [e for e in seen if isinstance(e.msg, p.DynamicToolCallRequest)]
    assert "did not answer within 300 ms" in outputs_sent(model.requests[1])["dyn_1"]


async def test_a_call_sent_again_while_the_function_runs_runs_once(tmp_path: Path) -> None:
    """The client reconnects while its function runs: the server sends the waiting call
    again (the client's replay starts after it), and the client does not run it twice."""
    model = calling_model(text_response("Lines 10-12."))
    release = asyncio.Event()
    calls: list[bool] = []
    offered: list[str] = []

    async def editor_selection(include_text: bool) -> str:
        """The open editor's path and selection."""
        calls.append(include_text)
        await release.wait()  # until the call has come again
        return "src/app.py:10-12"

    async with ScriptedResponsesServer(model) as http:
        server = await ServerProcess.start(http.base_url, tmp_path)
        try:
            assert server.tcp is not None
            opening = RemoteCodex.connect_tcp(*server.tcp, token=TOKEN, tools=[editor_selection])
            async with opening as client:
                offer = client.tools.offer

                def counting(request: p.DynamicToolCallRequest, submit: Any) -> None:
                    offered.append(request.call_id)
                    offer(request, submit)
                    if len(offered) == 2:
                        release.set()

                setattr(client.tools, "offer", counting)  # noqa: B010 (a spy on the method)
                await client.submit(say("what did I select?"), id="t")
                await until_request(client)
                await client.reconnect()
                async with asyncio.timeout(WITHIN):
                    async for event in client.events():
                        if event.id == "t" and event.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                            assert isinstance(event.msg, p.TaskComplete), event
                            break
        finally:
            await server.kill()
    assert offered == ["dyn_1", "dyn_1"]  # sent, then sent again after the reconnect
    assert calls == [True]  # run once
    assert outputs_sent(model.requests[1])["dyn_1"] == "src/app.py:10-12"
