"""``codexcore acp`` as a real subprocess, driven by the ``agent-client-protocol`` package's
own client side against a real scripted HTTP model; every message is checked against
the protocol's schema (tests/acp_helpers.py)."""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    SseMcpServer,
    TextContentBlock,
    TextResourceContents,
)

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    incomplete_response,
    shell_call,
    text_response,
)

from .acp_helpers import PY, RecordingClient, acp_agent, serving

pytestmark = pytest.mark.anyio

# A 1x1 transparent PNG.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6"
    "kgAAAABJRU5ErkJggg=="
)


def prompt_text(value: str) -> list[Any]:
    return [TextContentBlock(type="text", text=value)]


def patch_call(call_id: str, body: str) -> Any:
    return function_call_response("apply_patch", {"input": body}, call_id=call_id)


def outputs_of(request: dict[str, Any]) -> dict[str, str]:
    """The function_call_output items of a model request, by call_id."""
    return {
        item["call_id"]: item["output"]
        for item in request["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def texts_of(request: dict[str, Any]) -> list[str]:
    """The input_text parts of a model request's messages."""
    return [
        part["text"]
        for item in request["input"]
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item["content"]
        if part.get("type") == "input_text"
    ]


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


async def test_a_prompt_with_a_command_that_needs_permission_and_a_patch(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("one\ntwo\nthree\n")
    command = [PY, "-c", "print('hello from the command')"]
    model = ScriptedModel(
        [
            shell_call(command, call_id="c1"),
            patch_call(
                "p1",
                "*** Begin Patch\n*** Update File: notes.txt\n"
                "@@\n one\n-two\n+TWO\n three\n*** End Patch",
            ),
            text_response("All done.", chunks=3),
        ]
    )
    client = RecordingClient(fs=True)
    async with serving(model, client, tmp_path) as (conn, checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        modes = session.modes
        assert modes is not None
        assert {m.id for m in modes.available_modes} >= {
            "read-only",
            "ask",
            "auto",
            "full-access",
        }
        assert (
            modes.current_mode_id == "auto"
        )  # config.toml's defaults: on-request, workspace-write
        await conn.set_session_mode(session_id=session.session_id, mode_id="ask")
        await client.wait_for(lambda: client.of("current_mode_update"))
        response = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=prompt_text("edit the notes")), 30
        )
    assert response.stop_reason == "end_turn"
    assert response.usage is not None
    assert response.usage.total_tokens == 450
    # The command: announced pending, asked with the four options, run, output streamed, exit code.
    # Mode "ask" (approval untrusted): the command and the patch are both asked about.
    assert [p.tool_call.tool_call_id for p in client.permissions] == ["c1", "p1"]
    asked = client.permissions[0]
    assert [o.kind for o in asked.options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    c1 = client.call("c1")
    assert c1[0].session_update == "tool_call"
    assert c1[0].kind == "execute"
    assert c1[0].status == "pending"
    assert c1[0].title == shlex.join(command)
    assert [u.status for u in c1 if u.status][1:] == ["in_progress", "completed"]
    final = c1[-1]
    shown = final.content[0].content.text
    assert "hello from the command" in shown
    assert "exit code 0" in shown
    assert final.raw_output["exit_code"] == 0
    # The patch: an edit with the whole old and new texts, a location, completed.
    p1 = client.call("p1")
    assert p1[0].kind == "edit"
    assert p1[0].status == "pending"
    assert client.permissions[1].tool_call.kind == "edit"
    # The permission request itself shows what it allows: the diff, the command.
    asked_patch: Any = client.permissions[1].tool_call
    assert asked_patch.content[0].new_text == "one\nTWO\nthree\n"
    assert asked.tool_call.raw_input == {"command": command, "cwd": str(tmp_path)}
    [diff] = p1[0].content
    assert diff.type == "diff"
    assert diff.path == str(target)
    assert (diff.old_text, diff.new_text) == ("one\ntwo\nthree\n", "one\nTWO\nthree\n")
    assert [loc.path for loc in p1[0].locations] == [str(target)]
    assert [u.status for u in p1] == ["pending", "in_progress", "completed"]
    assert target.read_text() == "one\nTWO\nthree\n"
    assert client.writes == [(str(target), "one\nTWO\nthree\n")]  # the editor records the edit
    # The answer streamed as chunks, after the tool calls.
    assert client.text() == "All done."
    assert len(client.of("agent_message_chunk")) == 3
    assert outputs_of(model.requests[1])["c1"].count("hello from the command") == 1
    assert "session/request_permission" in checker.methods


async def test_cancel_mid_command_answers_cancelled_and_leaves_no_process(tmp_path: Path) -> None:
    # The command starts a child of its own: the whole process group must go.
    script = (
        "import subprocess, sys, time, os; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print(os.getpid(), c.pid, flush=True); time.sleep(60)"
    )
    model = ScriptedModel(
        [shell_call([PY, "-c", script], call_id="c1"), text_response("still here")]
    )
    client = RecordingClient()
    # The SDK's client closes stdin, waits this long, then sends SIGTERM: the
    # agent, still running the prompt it was sent, ends it then.
    async with serving(model, client, tmp_path, shutdown_timeout=1.0) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="full-access")
        prompt = asyncio.create_task(
            conn.prompt(session_id=session.session_id, prompt=prompt_text("sleep"))
        )
        started = await client.wait_for(
            lambda: [
                u
                for u in client.call("c1")
                if u.content and u.content[0].content.text.strip("`\n ")
            ]
        )
        pids = [int(p) for p in started[0].content[0].content.text.strip("`\n ").split()]
        assert all(alive(pid) for pid in pids)
        await conn.cancel(session_id=session.session_id)
        response = await asyncio.wait_for(prompt, 20)
        assert response.stop_reason == "cancelled"
        for _ in range(200):  # the kill is signalled, not announced: poll /proc
            if not any(alive(pid) for pid in pids):
                break
            await asyncio.sleep(0.05)
        assert not any(alive(pid) for pid in pids), pids
        assert client.call("c1")[-1].status == "failed"  # its final state, not left running
        # The session goes on after a cancel.
        again = await conn.prompt(session_id=session.session_id, prompt=prompt_text("hi"))
        assert again.stop_reason == "end_turn"
        assert client.text().endswith("still here")


async def test_a_rejection_is_told_to_the_model_and_reject_always_is_remembered(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    command = [PY, "-c", f"open({str(marker)!r}, 'w').close()"]
    model = ScriptedModel(
        [
            shell_call(command, call_id="c1"),
            text_response("Understood, I will not."),
            shell_call(command, call_id="c2"),
            text_response("Still not."),
        ]
    )
    client = RecordingClient(answer=lambda request: "reject_always")
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="ask")
        first = await conn.prompt(session_id=session.session_id, prompt=prompt_text("run it"))
        second = await conn.prompt(session_id=session.session_id, prompt=prompt_text("again"))
    assert (first.stop_reason, second.stop_reason) == ("end_turn", "end_turn")
    assert not marker.exists()
    told = outputs_of(model.requests[1])["c1"]
    assert "denied" in told
    assert "rejected it in the editor" in told
    # Asked once: the second time the same command is refused without asking.
    assert [p.tool_call.tool_call_id for p in client.permissions] == ["c1"]
    assert "rejected" in outputs_of(model.requests[3])["c2"]
    for call_id in ("c1", "c2"):
        final = client.call(call_id)[-1]
        assert final.status == "failed"
        assert "reject" in final.content[0].content.text


async def test_a_cancelled_permission_request_denies(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    model = ScriptedModel(
        [
            shell_call([PY, "-c", f"open({str(marker)!r}, 'w').close()"], call_id="c1"),
            text_response("ok"),
        ]
    )
    client = RecordingClient(answer=lambda request: None)
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="ask")
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("go"))
    assert response.stop_reason == "end_turn"
    assert not marker.exists()
    assert "cancelled" in outputs_of(model.requests[1])["c1"]
    assert client.call("c1")[-1].status == "failed"


async def test_session_load_replays_the_recorded_session_then_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "print('recorded output')"], call_id="c1"),
            text_response("First answer.", reasoning="thinking it over"),
            text_response("Second answer."),
        ]
    )
    async with ScriptedResponsesServer(model) as http:
        first = RecordingClient()
        async with acp_agent(first, http.base_url, tmp_path) as (conn, _, _checker):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.set_session_mode(session_id=session.session_id, mode_id="full-access")
            await conn.prompt(session_id=session.session_id, prompt=prompt_text("run"))
        client = RecordingClient()
        async with acp_agent(client, http.base_url, tmp_path) as (conn, _, _checker):
            listed = await conn.list_sessions(cwd=str(tmp_path))
            elsewhere = await conn.list_sessions(cwd=str(tmp_path / "nowhere"))
            loaded = await conn.load_session(
                cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[]
            )
            replayed = list(client.updates)  # everything sent before the response
            response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("more"))
    [info] = listed.sessions
    assert (info.session_id, info.cwd, info.title) == (session.session_id, str(tmp_path), "run")
    assert listed.next_cursor is None
    assert elsewhere.sessions == []
    assert loaded is not None
    assert loaded.modes is not None
    kinds = [u.session_update for u in replayed]
    assert "agent_message_chunk" in kinds
    assert "agent_thought_chunk" in kinds
    # The user's own prompt comes back first, as they typed it (a recorded user_message).
    assert kinds[0] == "user_message_chunk", kinds
    said = [u.content.text for u in replayed if u.session_update == "user_message_chunk"]
    assert said == ["run"]
    assert "".join(
        u.content.text for u in replayed if u.session_update == "agent_message_chunk"
    ) == ("First answer.")
    calls = [u for u in replayed if getattr(u, "tool_call_id", None) == "c1"]
    assert calls[0].session_update == "tool_call"
    assert calls[0].kind == "execute"
    assert calls[-1].status == "completed"
    assert "recorded output" in calls[-1].content[0].content.text
    assert not client.permissions
    # Live again: the model is sent the recorded conversation with the new prompt.
    assert response.stop_reason == "end_turn"
    assert client.text().endswith("Second answer.")
    sent = str(model.requests[2]["input"]) + str(model.requests[2].get("previous_response_id"))
    assert "more" in sent


async def test_a_client_without_fs_gets_files_read_and_written_on_disk(tmp_path: Path) -> None:
    linked = tmp_path / "linked.py"
    linked.write_text("ANSWER = 42  # on disk\n")
    model = ScriptedModel(
        [
            patch_call("p1", "*** Begin Patch\n*** Add File: new.txt\n+fresh\n*** End Patch"),
            text_response("done"),
        ]
    )
    client = RecordingClient(fs=False)
    async with serving(model, client, tmp_path) as (conn, checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        link = ResourceContentBlock(type="resource_link", uri=linked.as_uri(), name="linked.py")
        attached = EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="file:///elsewhere/spec.md", text="EMBEDDED SPEC"),
        )
        image = ImageContentBlock(type="image", mime_type="image/png", data=PNG)
        response = await conn.prompt(
            session_id=session.session_id,
            prompt=[*prompt_text("look at"), link, attached, image],
        )
    assert response.stop_reason == "end_turn"
    sent = str(model.requests[0]["input"])
    assert '<context ref="file:///elsewhere/spec.md">\nEMBEDDED SPEC\n</context>' in texts_of(
        model.requests[0]
    )
    assert f"data:image/png;base64,{PNG}" in sent
    assert "ANSWER = 42  # on disk" in sent
    assert linked.as_uri() in sent
    assert (tmp_path / "new.txt").read_text() == "fresh\n"
    [diff] = client.call("p1")[0].content
    assert (diff.old_text, diff.new_text) == (None, "fresh\n")
    assert not client.reads
    assert not client.writes
    assert not any(m.startswith("fs/") for m in checker.methods)


async def test_a_linked_file_is_read_from_the_editor_buffer(tmp_path: Path) -> None:
    linked = tmp_path / "linked.py"
    linked.write_text("ANSWER = 42  # saved\n")
    model = ScriptedModel([text_response("seen")])
    client = RecordingClient(fs=True, buffers={str(linked): "ANSWER = 43  # unsaved edit\n"})
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        link = ResourceContentBlock(type="resource_link", uri=linked.as_uri(), name="linked.py")
        await conn.prompt(session_id=session.session_id, prompt=[link])
    assert client.reads == [str(linked)]
    sent = str(model.requests[0]["input"])
    assert "ANSWER = 43  # unsaved edit" in sent
    assert "saved" not in sent.replace("unsaved", "")


async def test_stop_reasons_errors_and_mcp_servers_are_reported(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            incomplete_response("max_output_tokens", text="partial"),
            incomplete_response("content_filter"),
        ]
    )
    client = RecordingClient()
    # An SSE server: a transport the agent does not offer, reported, never dropped.
    server = SseMcpServer(type="sse", name="files", url="http://127.0.0.1:9/sse", headers=[])
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[server])
        assert session.field_meta is not None
        [notice] = session.field_meta["codexcore"]["notices"]
        assert "'files'" in notice
        assert "not started" in notice
        assert "(sse)" in notice
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("go"))
        assert response.stop_reason == "max_tokens"
        assert client.text().startswith(notice)
        filtered = await conn.prompt(session_id=session.session_id, prompt=prompt_text("go on"))
        assert filtered.stop_reason == "refusal"
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="nope", prompt=prompt_text("x"))
        assert "unknown session 'nope'" in str(unknown.value)
        with pytest.raises(RequestError) as bad_mode:
            await conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        assert "unknown mode 'yolo'" in str(bad_mode.value)
        with pytest.raises(RequestError) as bad_cwd:
            await conn.new_session(cwd="relative/dir", mcp_servers=[])
        assert "absolute path" in str(bad_cwd.value)
        with pytest.raises(RequestError) as bad_cursor:
            await conn.list_sessions(cursor="page-two")
        assert "not a cursor of session/list: 'page-two'" in str(bad_cursor.value)


async def test_unconfined_commands_run_in_the_editor_terminal_confined_ones_here(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "print('in the editor terminal')"], call_id="c1"),
            text_response("ran"),
            shell_call([PY, "-c", "print('confined here')"], call_id="c2"),
            text_response("ran again"),
        ]
    )
    client = RecordingClient(terminal=True)
    async with serving(model, client, tmp_path) as (conn, checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="full-access")
        first = await conn.prompt(session_id=session.session_id, prompt=prompt_text("run"))
        await conn.set_session_mode(session_id=session.session_id, mode_id="auto")
        second = await conn.prompt(session_id=session.session_id, prompt=prompt_text("again"))
    assert (first.stop_reason, second.stop_reason) == ("end_turn", "end_turn")
    # Full access: the editor ran it, and the tool call shows its terminal.
    assert client.created == [(PY, ["-c", "print('in the editor terminal')"], str(tmp_path))]
    assert client.released == ["term-1"]
    c1 = client.call("c1")
    assert c1[1].content[0].type == "terminal"
    assert c1[1].content[0].terminal_id == "term-1"
    assert c1[-1].status == "completed"
    assert [c.type for c in c1[-1].content] == ["terminal", "content"]
    assert c1[-1].content[1].content.text == "exit code 0"
    assert "in the editor terminal" in outputs_of(model.requests[1])["c1"]
    # Auto (workspace-write): confined by codexcore's sandbox, not in the editor.
    assert len(client.created) == 1
    assert "confined here" in client.call("c2")[-1].content[0].content.text
    assert "terminal/create" in checker.methods


async def test_cancel_kills_and_releases_the_editor_terminal(tmp_path: Path) -> None:
    script = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    model = ScriptedModel([shell_call([PY, "-c", script], call_id="c1")])
    client = RecordingClient(terminal=True)
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="full-access")
        prompt = asyncio.create_task(
            conn.prompt(session_id=session.session_id, prompt=prompt_text("sleep"))
        )
        await client.wait_for(lambda: [u for u in client.call("c1") if u.content])
        terminal = client.terminals["term-1"]
        await client.wait_for(lambda: terminal.output.strip())
        pid = int(terminal.output)
        await conn.cancel(session_id=session.session_id)
        response = await asyncio.wait_for(prompt, 20)
    assert response.stop_reason == "cancelled"
    assert client.killed == ["term-1"]
    assert client.released == ["term-1"]
    assert terminal.process.returncode is not None
    assert not alive(pid)
    assert client.call("c1")[-1].status == "failed"


async def test_the_editor_going_away_mid_command_leaves_no_process(tmp_path: Path) -> None:
    script = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    model = ScriptedModel([shell_call([PY, "-c", script], call_id="c1")])
    client = RecordingClient()
    # The SDK's client closes stdin, waits this long, then sends SIGTERM: the
    # agent, still running the prompt it was sent, ends it then.
    async with serving(model, client, tmp_path, shutdown_timeout=1.0) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="full-access")
        prompt = asyncio.create_task(
            conn.prompt(session_id=session.session_id, prompt=prompt_text("sleep"))
        )
        started = await client.wait_for(
            lambda: [u for u in client.call("c1") if u.content and u.status is None]
        )
        pid = int(started[0].content[0].content.text.strip("`\n "))
        assert alive(pid)
    # Closed stdin, then SIGTERM: it shut down (exit 0, checked by the helper).
    with pytest.raises(ConnectionError):
        await prompt
    assert not alive(pid)


async def test_initialize_says_what_the_agent_takes_and_images_only_for_known_models(
    tmp_path: Path,
) -> None:
    client = RecordingClient()
    async with serving(ScriptedModel([]), client, tmp_path) as (conn, _checker):
        known = client.initialized
    assert known is not None
    assert known.protocol_version == 1
    assert known.agent_info is not None
    assert known.agent_info.name == "codexcore"
    caps = known.agent_capabilities
    assert caps is not None
    assert caps.load_session is True
    assert caps.prompt_capabilities is not None
    assert (caps.prompt_capabilities.image, caps.prompt_capabilities.audio) == (True, False)
    assert caps.prompt_capabilities.embedded_context is True
    assert caps.mcp_capabilities is not None
    assert (caps.mcp_capabilities.http, caps.mcp_capabilities.sse) == (True, False)
    local = RecordingClient()
    async with (
        ScriptedResponsesServer(ScriptedModel([])) as http,
        acp_agent(local, http.base_url, tmp_path, "-m", "my-local-model") as (conn, _, _checker),
    ):
        assert local.initialized is not None
        assert local.initialized.agent_capabilities is not None
        prompt_caps = local.initialized.agent_capabilities.prompt_capabilities
        assert prompt_caps is not None
        assert prompt_caps.image is False
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        image = ImageContentBlock(type="image", mime_type="image/png", data=PNG)
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=session.session_id, prompt=[image])
        assert "'my-local-model' is not known to take images" in str(refused.value)


async def test_the_models_plan_reaches_the_editor_as_plan_updates(tmp_path: Path) -> None:
    first: dict[str, Any] = {
        "explanation": "The test points at the parser.",
        "plan": [
            {"step": "Read the failing test", "status": "completed"},
            {"step": "Fix the parser", "status": "in_progress"},
            {"step": "Run the suite", "status": "pending"},
        ],
    }
    second = {"plan": [{"step": s["step"], "status": "completed"} for s in first["plan"]]}
    model = ScriptedModel(
        [
            function_call_response("update_plan", first, call_id="u1"),
            function_call_response("update_plan", second, call_id="u2"),
            text_response("Planned and done."),
        ]
    )
    client = RecordingClient()
    async with serving(model, client, tmp_path) as (conn, checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("plan"))
    assert response.stop_reason == "end_turn"
    plans = client.of("plan")
    assert [[(e.content, e.status, e.priority) for e in plan.entries] for plan in plans] == [
        [
            ("Read the failing test", "completed", "medium"),
            ("Fix the parser", "in_progress", "medium"),
            ("Run the suite", "pending", "medium"),
        ],
        [
            ("Read the failing test", "completed", "medium"),
            ("Fix the parser", "completed", "medium"),
            ("Run the suite", "completed", "medium"),
        ],
    ]
    # The explanation is the model's note: shown as a thought, before the plan it explains.
    kinds = [u.session_update for u in client.updates]
    thought = client.text("agent_thought_chunk")
    assert "[plan] The test points at the parser." in thought
    assert kinds.index("agent_thought_chunk") < kinds.index("plan")
    assert "session/update" in checker.methods
    assert outputs_of(model.requests[1]) == {"u1": "Plan updated"}
