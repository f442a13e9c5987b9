"""What published ACP clients (Toad, the SDKs' clients, Zed) saw of ``codexcore acp``
(issue 27), as the SDK's own client drives a real ``codexcore acp`` subprocess against a
real scripted HTTP model: the message sequences a client sends (initialize,
session/new, session/prompt, session/cancel, session/load)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

from .acp_helpers import PY, RecordingClient, acp_agent, outputs_of, prompt_text, serving

pytestmark = pytest.mark.anyio

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6"
    "kgAAAABJRU5ErkJggg=="
)


def add_file(call_id: str, name: str) -> Any:
    patch = f"*** Begin Patch\n*** Add File: {name}\n+hello\n*** End Patch"
    return function_call_response("apply_patch", {"input": patch}, call_id=call_id)


def index_of(updates: list[Any], predicate: Any) -> int:
    return next(i for i, update in enumerate(updates) if predicate(update))


def last_text(update: Any) -> str:
    return "".join(c.content.text for c in update.content or [] if c.type == "content")


async def test_a_live_prompt_is_not_echoed_and_a_replayed_one_keeps_its_parts(
    tmp_path: Path,
) -> None:
    # Issue 27.1: every live prompt came back as a user_message_chunk (Toad showed it
    # twice; Zed appends it to the user's message).
    model = ScriptedModel([text_response("Seen.")])
    spec = TextResourceContents(uri="file:///project/spec.md", text="THE SPEC")
    sent: list[Any] = [
        TextContentBlock(type="text", text="look at these"),
        EmbeddedResourceContentBlock(type="resource", resource=spec),
        ImageContentBlock(type="image", mime_type="image/png", data=PNG),
    ]
    async with ScriptedResponsesServer(model) as http:
        live = RecordingClient()
        async with acp_agent(live, http.base_url, tmp_path) as (conn, _, _checker):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            answer = await conn.prompt(session_id=session.session_id, prompt=sent)
        replay = RecordingClient()
        async with acp_agent(replay, http.base_url, tmp_path) as (conn, _, _checker):
            await conn.load_session(
                cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[]
            )
    assert answer.stop_reason == "end_turn"
    assert live.of("user_message_chunk") == [], live.summary()
    assert live.text() == "Seen."
    kinds = [u.session_update for u in replay.updates]
    assert kinds[:3] == ["user_message_chunk"] * 3, replay.summary()
    text, resource, image = (u.content for u in replay.updates[:3])
    assert text.text == "look at these"
    assert (resource.resource.uri, resource.resource.text) == (spec.uri, "THE SPEC")
    assert (image.mime_type, image.data) == ("image/png", PNG)
    assert replay.text() == "Seen."


async def test_a_cancelled_command_is_told_as_run_and_replayed_in_its_place(
    tmp_path: Path,
) -> None:
    # Issue 27.2: after session/cancel during a command that had printed, the model was
    # told "aborted: the user interrupted before this call ran", and session/load showed
    # the call after every later turn, as "not run".
    script = "print('partial output', flush=True); import time; time.sleep(60)"
    model = ScriptedModel(
        [shell_call([PY, "-c", script], call_id="c1"), text_response("It was stopped.")]
    )
    async with ScriptedResponsesServer(model) as http:
        live = RecordingClient()
        async with acp_agent(live, http.base_url, tmp_path) as (conn, _, _checker):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            await conn.set_session_mode(session_id=sid, mode_id="full-access")
            running = asyncio.create_task(conn.prompt(session_id=sid, prompt=prompt_text("run")))
            await live.wait_for(
                lambda: any("partial output" in last_text(u) for u in live.call("c1"))
            )
            await conn.cancel(session_id=sid)
            cancelled = await asyncio.wait_for(running, 20)
            again = await conn.prompt(session_id=sid, prompt=prompt_text("what happened?"))
        replay = RecordingClient()
        async with acp_agent(replay, http.base_url, tmp_path) as (conn, _, _checker):
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert (cancelled.stop_reason, again.stop_reason) == ("cancelled", "end_turn")
    told = json.loads(outputs_of(model.requests[1])["c1"])
    assert told["output"].startswith("partial output\n"), told
    assert "command interrupted by the user" in told["output"]
    assert told["metadata"]["exit_code"] == 143  # SIGTERM
    for client in (live, replay):
        end = client.call("c1")[-1]
        assert end.status == "failed"
        assert "partial output" in last_text(end)
        assert "command interrupted by the user" in last_text(end)
    # In its place: before the next prompt, not after every later turn.
    updates = replay.updates
    ended = index_of(updates, lambda u: getattr(u, "tool_call_id", None) == "c1" and u.status)
    asked = index_of(
        updates,
        lambda u: u.session_update == "user_message_chunk" and u.content.text == "what happened?",
    )
    assert ended < asked, replay.summary()


async def test_a_rejected_call_is_replayed_as_rejected_where_it_was(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    model = ScriptedModel(
        [
            shell_call([PY, "-c", f"open({str(marker)!r}, 'w').close()"], call_id="c1"),
            text_response("I did not run it."),
        ]
    )
    async with ScriptedResponsesServer(model) as http:
        live = RecordingClient(answer=lambda request: "reject_once")
        async with acp_agent(live, http.base_url, tmp_path) as (conn, _, _checker):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.set_session_mode(session_id=session.session_id, mode_id="ask")
            await conn.prompt(session_id=session.session_id, prompt=prompt_text("make it"))
        replay = RecordingClient()
        async with acp_agent(replay, http.base_url, tmp_path) as (conn, _, _checker):
            await conn.load_session(
                cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[]
            )
    assert not marker.exists()
    end = replay.call("c1")[-1]
    assert (end.status, last_text(end)) == ("failed", "rejected by the user: not run")
    updates = replay.updates
    ended = updates.index(end)
    answered = index_of(updates, lambda u: u.session_update == "agent_message_chunk")
    assert ended < answered, replay.summary()
    assert not replay.permissions  # a replay asks nothing


async def test_the_unknown_model_note_is_logged_once_and_never_in_the_answer(
    tmp_path: Path,
) -> None:
    # Issue 27.5: "model 'X' is not in the model catalogue: ..." was the first text of
    # the agent's answer.
    model = ScriptedModel([text_response("Hello."), text_response("Hello again.")])
    client = RecordingClient()
    async with serving(model, client, tmp_path, "-m", "my-local-model") as (conn, _checker):
        answers = []
        for _ in range(2):  # two sessions: two engines in one process
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=prompt_text("hi"))
            answers.append(client.text())
            client.updates.clear()
    stderr = (tmp_path.parent / f"{tmp_path.name}-acp-stderr.log").read_text()
    assert answers == ["Hello.", "Hello again."]
    assert stderr.count("'my-local-model' is not in the model catalogue") == 1, stderr
    assert model.requests[0]["model"] == "my-local-model"


async def test_each_mode_says_what_it_asks_before_and_does_so(tmp_path: Path) -> None:
    # Issue 27.6: "Ask" said it asks only before edits outside the workspace, and asked
    # for every patch.
    model = ScriptedModel(
        [add_file("p1", "a.txt"), text_response("ok"), add_file("p2", "b.txt"), text_response("ok")]
    )
    client = RecordingClient()
    async with serving(model, client, tmp_path) as (conn, _checker):
        asked: dict[str, int] = {}
        for mode in ("ask", "auto"):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.set_session_mode(session_id=session.session_id, mode_id=mode)
            before = len(client.permissions)
            await conn.prompt(session_id=session.session_id, prompt=prompt_text("add a file"))
            asked[mode] = len(client.permissions) - before
        assert session.modes is not None
        said = {m.id: m.description or "" for m in session.modes.available_modes}
    assert asked == {"ask": 1, "auto": 0}  # a patch inside the workspace
    assert "every edit" in said["ask"]
    assert "outside the workspace" not in said["ask"]
    assert "edits in the workspace run without asking" in said["auto"].lower()
    assert (tmp_path / "a.txt").exists()
    assert (tmp_path / "b.txt").exists()


async def test_a_command_cancelled_in_an_editor_terminal_is_told_with_its_output(
    tmp_path: Path,
) -> None:
    script = "print('terminal says hi', flush=True); import time; time.sleep(60)"
    model = ScriptedModel(
        [shell_call([PY, "-c", script], call_id="c1"), text_response("It was stopped.")]
    )
    client = RecordingClient(terminal=True)
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="full-access")
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=prompt_text("run")))
        await client.wait_for(lambda: "term-1" in client.terminals)
        terminal = client.terminals["term-1"]
        await client.wait_for(lambda: b"terminal says hi" in terminal.output)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(running, 20)).stop_reason == "cancelled"
        await conn.prompt(session_id=sid, prompt=prompt_text("what happened?"))
    told = json.loads(outputs_of(model.requests[1])["c1"])
    assert told["output"].startswith("terminal says hi\n"), told
    assert "command interrupted by the user" in told["output"]
    assert told["metadata"]["exit_code"] == 128 + 9  # the editor's terminal/kill
    assert client.released == ["term-1"]


class SlowToAnswerCreate(RecordingClient):
    """An editor that starts the command at once but answers ``terminal/create`` only
    once the test lets it: the agent's cancel lands while it awaits that answer."""

    def __init__(self) -> None:
        super().__init__(terminal=True)
        self.answer_create = asyncio.Event()

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        created = await super().create_terminal(*args, **kwargs)
        await self.answer_create.wait()
        return created


async def test_a_cancel_before_the_editor_answers_create_still_stops_and_tells(
    tmp_path: Path,
) -> None:
    # Seen under load: the cancel came before the agent had terminal/create's answer;
    # the terminal was never killed or released and the model was told "never ran".
    script = "print('terminal says hi', flush=True); import time; time.sleep(60)"
    model = ScriptedModel(
        [shell_call([PY, "-c", script], call_id="c1"), text_response("It was stopped.")]
    )
    client = SlowToAnswerCreate()
    async with serving(model, client, tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="full-access")
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=prompt_text("run")))
        await client.wait_for(lambda: "term-1" in client.terminals)
        terminal = client.terminals["term-1"]
        await client.wait_for(lambda: b"terminal says hi" in terminal.output)
        await conn.cancel(session_id=sid)
        await asyncio.sleep(0.2)  # the agent's cancel is under way; now the answer comes
        client.answer_create.set()
        assert (await asyncio.wait_for(running, 20)).stop_reason == "cancelled"
        await conn.prompt(session_id=sid, prompt=prompt_text("what happened?"))
    told = json.loads(outputs_of(model.requests[1])["c1"])
    assert told["output"].startswith("terminal says hi\n"), told
    assert "command interrupted by the user" in told["output"]
    assert client.killed == ["term-1"]
    assert client.released == ["term-1"]
