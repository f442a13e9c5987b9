"""The model asks the user (``request_user_input``): the event, the answer, the wait.

Real Tasks on the scripted model: the model calls the tool, the UI sees the
question, answers (or cancels, or interrupts), and the model's next request
carries what it answered. Then the same over a real ``serve`` process, through
``RemoteCodex``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore import Codex
from codexcore import protocol as p
from codexcore.adapters.client import RemoteCodex
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from .engine_helpers import engine_config, running_engine
from .flows import outputs_sent
from .server_helpers import TOKEN, ServerProcess, server_env

pytestmark = pytest.mark.anyio

WITHIN = 15.0

QUESTIONS = {
    "questions": [
        {
            "id": "storage",
            "header": "Storage",
            "question": "Where should the notes be kept?",
            "options": [
                {"label": "SQLite (Recommended)", "description": "One file, queries."},
                {"label": "JSON files", "description": "Plain files, easy to diff."},
            ],
        },
        {
            "id": "extras",
            "header": "Extras",
            "question": "Which extras do you want?",
            "options": [
                {"label": "Search", "description": "Full-text search."},
                {"label": "Export", "description": "Export to Markdown."},
            ],
            "multiSelect": True,
            "isOther": False,
        },
        {"id": "token", "header": "API token", "question": "Your token?", "isSecret": True},
    ]
}

EXPECTED = p.RequestUserInput(
    "ask_1",
    (
        p.RequestUserInputQuestion(
            "storage",
            "Storage",
            "Where should the notes be kept?",
            isOther=True,
            options=(
                p.RequestUserInputQuestionOption("SQLite (Recommended)", "One file, queries."),
                p.RequestUserInputQuestionOption("JSON files", "Plain files, easy to diff."),
            ),
        ),
        p.RequestUserInputQuestion(
            "extras",
            "Extras",
            "Which extras do you want?",
            options=(
                p.RequestUserInputQuestionOption("Search", "Full-text search."),
                p.RequestUserInputQuestionOption("Export", "Export to Markdown."),
            ),
            multiSelect=True,
        ),
        p.RequestUserInputQuestion(
            "token", "API token", "Your token?", isOther=True, isSecret=True
        ),
    ),
)

ANSWER = p.RequestUserInputResponse(
    {
        "storage": p.RequestUserInputAnswer(("JSON files",)),
        "extras": p.RequestUserInputAnswer(("Search", "Export")),
        "token": p.RequestUserInputAnswer(("tok-123",)),
    }
)


def say(text: str) -> p.UserInput:
    return p.UserInput((p.TextInput(text),))


def asking_model(*then: Any) -> ScriptedModel:
    return ScriptedModel(
        [function_call_response("request_user_input", QUESTIONS, call_id="ask_1"), *then]
    )


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in request["tools"]]


async def test_the_question_reaches_the_ui_and_the_answer_reaches_the_model(
    tmp_path: Path,
) -> None:
    model = asking_model(text_response("Using JSON files."))
    async with running_engine(model, tmp_path, ask_user=True) as ui:
        await ui.submit(say("set up the notes store"), id="t")
        asked = await ui.until(p.RequestUserInput, id="t")
        assert asked.msg == EXPECTED
        await ui.submit(p.UserInputAnswer("ask_1", ANSWER), id="answer")
        done = await ui.until(p.TaskComplete, id="t")
    assert done.msg.last_agent_message == "Using JSON files."
    (tool,) = [t for t in model.requests[0]["tools"] if t["name"] == "request_user_input"]
    assert tool["parameters"]["required"] == ["questions"]
    # Codex's answer shape, as the call's output.
    assert json.loads(outputs_sent(model.requests[1])["ask_1"]) == {
        "answers": {
            "storage": {"answers": ["JSON files"]},
            "extras": {"answers": ["Search", "Export"]},
            "token": {"answers": ["tok-123"]},
        }
    }
    assert ui.types(id="answer") == []  # accepted: nothing to say


async def test_a_cancelled_question_tells_the_model_and_the_task_goes_on(tmp_path: Path) -> None:
    model = asking_model(text_response("I will pick SQLite myself."))
    async with running_engine(model, tmp_path, ask_user=True) as ui:
        await ui.submit(say("set up the notes store"), id="t")
        await ui.until(p.RequestUserInput, id="t")
        await ui.submit(p.UserInputAnswer("ask_1", cancelled=True))
        await ui.until(p.TaskComplete, id="t")
    assert "cancelled" in outputs_sent(model.requests[1])["ask_1"]


async def test_an_interrupt_ends_the_wait_and_the_task_once(tmp_path: Path) -> None:
    model = asking_model(text_response("Starting over."))
    async with running_engine(model, tmp_path, ask_user=True) as ui:
        await ui.submit(say("set up the notes store"), id="t")
        await ui.until(p.RequestUserInput, id="t")
        await ui.submit(p.Interrupt())
        aborted = await ui.until(p.TurnAborted, id="t")
        assert aborted.msg.reason == "interrupted"
        # The question is gone: a late answer is refused, and the Task is not revived.
        await ui.submit(p.UserInputAnswer("ask_1", ANSWER), id="late")
        late = await ui.until(p.ErrorEvent, id="late")
        assert late.msg.code == "unknown_call_id"
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    terminal = [t for t in ui.types(id="t") if t in p.TERMINAL_EVENT_TYPES]
    assert terminal == ["turn_aborted"]
    # The next request is a valid conversation: the call is answered as aborted.
    assert outputs_sent(model.requests[1])["ask_1"].startswith("aborted:")


async def test_an_answer_that_does_not_fit_is_refused_and_the_question_keeps_waiting(
    tmp_path: Path,
) -> None:
    model = asking_model(text_response("Thanks."))
    bad = {
        "nope": p.RequestUserInputResponse({"colour": p.RequestUserInputAnswer(("red",))}),
        "two": p.RequestUserInputResponse({"storage": p.RequestUserInputAnswer(("a", "b"))}),
        "not an option": p.RequestUserInputResponse(
            {"extras": p.RequestUserInputAnswer(("Sync",))}
        ),
    }
    async with running_engine(model, tmp_path, ask_user=True) as ui:
        await ui.submit(say("set up the notes store"), id="t")
        await ui.until(p.RequestUserInput, id="t")
        for name, response in bad.items():
            await ui.submit(p.UserInputAnswer("ask_1", response), id=name)
            error = await ui.until(p.ErrorEvent, id=name)
            assert error.msg.code == "bad_answer", error
        messages = [e.message for e in ui.of(p.ErrorEvent)]
        assert "no question 'colour' was asked" in messages[0]
        assert "takes one answer, not several" in messages[1]
        assert "takes only its options' labels, not 'Sync'" in messages[2]
        # Own words are welcome where isOther says so.
        fits = {"storage": p.RequestUserInputAnswer(("Postgres, we have one",))}
        await ui.submit(p.UserInputAnswer("ask_1", p.RequestUserInputResponse(fits)))
        await ui.until(p.TaskComplete, id="t")
    assert "Postgres, we have one" in outputs_sent(model.requests[1])["ask_1"]


async def test_without_the_ui_s_word_the_model_is_not_offered_the_tool(tmp_path: Path) -> None:
    model = asking_model(text_response("I will decide myself."))
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("set up the notes store"), id="t")
        await ui.until(p.TaskComplete, id="t")
    assert "request_user_input" not in tool_names(model.requests[0])
    assert ui.of(p.RequestUserInput) == []
    assert "unavailable" in outputs_sent(model.requests[1])["ask_1"]


async def test_the_ui_turns_the_tool_on_with_configure_session(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("one"), text_response("two")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("first"), id="a")
        await ui.until(p.TaskComplete, id="a")
        await ui.submit(p.ConfigureSession(ask_user=True), id="cfg")
        await ui.until(p.SessionConfigured, id="cfg")
        await ui.submit(say("second"), id="b")
        await ui.until(p.TaskComplete, id="b")
    assert "request_user_input" not in tool_names(model.requests[0])
    assert "request_user_input" in tool_names(model.requests[1])


async def test_a_bad_question_is_answered_to_the_model_and_nothing_is_asked(
    tmp_path: Path,
) -> None:
    duplicate = {"questions": [QUESTIONS["questions"][0], QUESTIONS["questions"][0]]}
    model = ScriptedModel(
        [
            function_call_response("request_user_input", duplicate, call_id="ask_1"),
            text_response("Sorry."),
        ]
    )
    async with running_engine(model, tmp_path, ask_user=True) as ui:
        await ui.submit(say("ask me"), id="t")
        await ui.until(p.TaskComplete, id="t")
    assert ui.of(p.RequestUserInput) == []
    output = outputs_sent(model.requests[1])["ask_1"]
    assert output.startswith("error: request_user_input: every question needs its own 'id'")


async def test_a_stop_withdraws_the_question(tmp_path: Path) -> None:
    model = asking_model()
    async with running_engine(model, tmp_path, ask_user=True) as ui:
        await ui.submit(say("ask me"), id="t")
        await ui.until(p.RequestUserInput, id="t")
        await ui.submit(p.Stop())
        done = await ui.until(p.TaskComplete, id="t")
        assert done.msg.stopped_by == "stop"
        await ui.submit(p.Shutdown())
        await ui.drain()
    assert len(model.requests) == 1  # the Turn ended; no further request


async def test_a_resumed_session_asks_only_if_this_ui_can_answer(tmp_path: Path) -> None:
    """Whether questions can be answered is the connected UI's word, not the recording's."""
    model = ScriptedModel([text_response("one", response_id="r1"), text_response("two")])
    home = str(tmp_path / "home")
    answering = attrs.evolve(engine_config(tmp_path, ask_user=True), home=home)
    async with Codex(answering, transport=model.mock_transport()) as codex:
        await codex.submit(say("first"), id="a")
        session_id = await _until_complete(codex, "a")
    not_answering = attrs.evolve(engine_config(tmp_path), home=home)
    async with Codex(not_answering, transport=model.mock_transport()) as codex:
        await codex.submit(p.ResumeSession(session_id), id="r")
        await codex.submit(say("second"), id="b")
        await _until_complete(codex, "b")
    assert "request_user_input" in tool_names(model.requests[0])
    assert "request_user_input" not in tool_names(model.requests[1])


async def _until_complete(codex: Codex, sub_id: str) -> str:
    session_id = ""
    async with asyncio.timeout(WITHIN):
        async for event in codex.events():
            if isinstance(event.msg, p.SessionConfigured):
                session_id = event.msg.session_id
            if event.id == sub_id and event.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                assert isinstance(event.msg, p.TaskComplete), event
                return session_id
    raise AssertionError("the stream ended")


# --- over a real server, through the client library --------------------------------------


async def ask_and_answer(client: RemoteCodex) -> list[p.Event]:
    """One Task whose question is answered through ``client``; its events."""
    seen: list[p.Event] = []
    await client.submit(p.ConfigureSession(ask_user=True), id="cfg")
    await client.submit(say("set up the notes store"), id="t")
    async with asyncio.timeout(WITHIN):
        async for event in client.events():
            seen.append(event)
            if isinstance(event.msg, p.RequestUserInput):
                await client.submit(p.UserInputAnswer(event.msg.call_id, ANSWER))
            if event.id == "t" and event.msg.TYPE in p.TERMINAL_EVENT_TYPES:
                return seen
    raise AssertionError("the stream ended")


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
async def test_ask_and_answer_over_a_native_connection(tmp_path: Path, transport: str) -> None:
    model = asking_model(text_response("Using JSON files."))
    async with ScriptedResponsesServer(model) as http:
        if transport == "stdio":
            opening = RemoteCodex.spawn_stdio(env=server_env(http.base_url), cwd=tmp_path)
            async with opening as client:
                seen = await ask_and_answer(client)
        else:
            server = await ServerProcess.start(http.base_url, tmp_path)
            try:
                assert server.tcp is not None
                async with RemoteCodex.connect_tcp(*server.tcp, token=TOKEN) as client:
                    seen = await ask_and_answer(client)
            finally:
                await server.kill()
    (asked,) = [e.msg for e in seen if isinstance(e.msg, p.RequestUserInput)]
    assert asked == EXPECTED
    assert isinstance(seen[-1].msg, p.TaskComplete)
    assert json.loads(outputs_sent(model.requests[1])["ask_1"])["answers"]["token"] == {
        "answers": ["tok-123"]
    }
