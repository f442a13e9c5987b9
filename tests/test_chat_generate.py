"""``generate``, ``customize`` and ``clarify`` of the Copilot-CLI-style chat protocol.

A real ``codexcore serve --stdio`` process and a scripted Responses server: the
model's structured answer streams its ``code`` as ``stream/chunk`` while it is
written, the result carries the protocol's fields, the model asking the user
becomes the ``clarify`` result, the protocol's error codes, the prompt file, a
client that takes no stream, a retried request joining the running one, and
``$/cancelRequest``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.adapters.jsonrpc.chat._generate import CUSTOMIZE_SCHEMA, GENERATE_SCHEMA
from codexcore.adapters.jsonrpc.chat._json_stream import FieldStream
from codexcore.testing import (
    Hang,
    Pause,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    http_error,
    text_response,
    truncated,
)

from .server_helpers import PY, StdioServer
from .test_seed001 import EXIT, INITIALIZE, Stream, chat, exits_cleanly, read_chat

pytestmark = pytest.mark.anyio

SPEC = {
    "title": "Pet Store",
    "endpoints": [
        {"method": "GET", "path": "/pets", "summary": "List pets"},
        {"method": "GET", "path": "/pets/{id}", "summary": "Get a pet"},
    ],
}
CODE = (
    'import React from "react";\n\n'
    "export function PetList({ pets }) {\n"
    '\treturn <ul className="pets">{pets.map((p) => <li key={p.id}>{p.name}</li>)}</ul>;\n'
    '// a \\ backslash, a "quote", \u00e9 漢 🙂 and a \x01 control character\n'
    "}\n"
)
GENERATED = {"code": CODE, "componentCount": 2, "description": "A list and a detail view"}
CUSTOMIZED = {
    "clarificationNeeded": False,
    "question": None,
    "options": None,
    "code": CODE + "export const Search = () => <input />;\n",
    "description": "Added a search bar",
    "assumptions": ["Filtering is client-side"],
}


def generate(rid: Any, **params: Any) -> dict[str, Any]:
    base = {"spec": SPEC, "format": "react", "theme": "light", "options": {"pagination": True}}
    return {"jsonrpc": "2.0", "id": rid, "method": "generate", "params": {**base, **params}}


def customize(rid: Any, **params: Any) -> dict[str, Any]:
    base = {"currentCode": CODE, "prompt": "Add a search bar", "spec": SPEC, "history": []}
    return {"jsonrpc": "2.0", "id": rid, "method": "customize", "params": {**base, **params}}


def answer(value: dict[str, Any], chunks: int = 12) -> ScriptedResponse:
    """The model's structured answer, written in ``chunks`` deltas (escapes get cut)."""
    return text_response(json.dumps(value), chunks=chunks)


@asynccontextmanager
async def serve(
    tmp_path: Path, responses: list[ScriptedResponse], env: dict[str, str] | None = None
) -> AsyncIterator[tuple[StdioServer, ScriptedModel]]:
    model = ScriptedModel(responses)
    async with ScriptedResponsesServer(model) as http:
        argv = [PY, "-m", "codexcore", "--log-level", "info", "serve", "--stdio"]
        server = await StdioServer.start(http.base_url, tmp_path, argv=argv, env=env)
        try:
            yield server, model
        finally:
            await server.kill()


async def answer_of(ui: StdioServer, rid: Any) -> dict[str, Any]:
    """The response to ``rid``; fails on any chunk before it."""
    message = await ui.recv()
    assert message is not None, ui.context()
    assert message.get("id") == rid, message
    return message


def tools_of(request: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in request["tools"]]


def user_text(request: dict[str, Any]) -> str:
    return str(request["input"][-1]["content"][0]["text"])


# --- generate ---------------------------------------------------------------------------------


async def test_generate_streams_the_code_as_written_then_answers_the_result(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, [answer(GENERATED, chunks=40)]) as (ui, model):
        await ui.send(INITIALIZE, generate(2))
        capabilities = (await answer_of(ui, 1))["result"]["capabilities"]
        assert capabilities == {"codeGeneration": True, "customization": True, "streaming": True}
        stream = await read_chat(ui, 2)
        assert stream.response == {"jsonrpc": "2.0", "id": 2, "result": GENERATED}
        chunks = stream.chunks
        assert [c["index"] for c in chunks] == list(range(len(chunks)))
        assert [c["done"] for c in chunks] == [False] * (len(chunks) - 1) + [True]
        assert len(chunks) > 10  # the code came in pieces, as the model wrote it
        assert stream.text == CODE  # escapes decoded, nothing lost or doubled

        (request,) = model.requests
        assert request["text"]["format"] == {
            "type": "json_schema",
            "name": "codex_output_schema",
            "schema": GENERATE_SCHEMA,
            "strict": True,
        }
        prompt = user_text(request)
        assert json.dumps(SPEC, ensure_ascii=False, indent=1) in prompt
        assert "Output format: react. Theme: light." in prompt
        assert "request_user_input" in tools_of(request)  # the model may ask
        await ui.send(EXIT)
        await exits_cleanly(ui)


async def test_a_client_that_takes_no_stream_gets_only_the_answers(tmp_path: Path) -> None:
    params: dict[str, Any] = INITIALIZE["params"]
    quiet = {**INITIALIZE, "params": {**params, "capabilities": {"streaming": False}}}
    responses = [answer(GENERATED), text_response("Plain answer.", chunks=4)]
    async with serve(tmp_path, responses) as (ui, _):
        await ui.send(quiet)
        assert (await answer_of(ui, 1))["result"]["capabilities"]["streaming"] is False
        await ui.send(generate(2))
        assert (await answer_of(ui, 2))["result"] == GENERATED  # no chunk came before it
        await ui.send(chat(3, "hello"))
        assert (await answer_of(ui, 3))["result"]["message"] == "Plain answer."
        await ui.send(EXIT)
        await exits_cleanly(ui)


async def test_after_a_model_stream_retry_the_code_streams_again_and_adds_up(
    tmp_path: Path,
) -> None:
    cut = truncated(answer(GENERATED, chunks=30), keep=14)  # the connection drops mid-code
    async with serve(tmp_path, [cut, answer(GENERATED, chunks=30)]) as (ui, model):
        await ui.send(generate(2))
        stream = await read_chat(ui, 2)
        assert stream.response["result"] == GENERATED
        assert len(model.requests) == 2
        # What streamed before the drop is a start of the code; what streamed since the
        # retry is the whole code again, so the app can restart its view at a shorter text.
        texts = [c["chunk"] for c in stream.chunks]
        for cut_at in range(1, len(texts)):
            before, since = "".join(texts[:cut_at]), "".join(texts[cut_at:])
            if CODE.startswith(before) and since == CODE:
                break
        else:
            raise AssertionError(f"the chunks are no prefix then the whole code: {texts}")


# --- customize and clarify ----------------------------------------------------------------------


async def test_customize_streams_and_answers_the_updated_code(tmp_path: Path) -> None:
    async with serve(tmp_path, [answer(CUSTOMIZED, chunks=20)]) as (ui, model):
        history = [
            {"role": "user", "content": "Generate an interface for this API"},
            {"role": "assistant", "content": "Generated interface with 2 endpoints"},
        ]
        await ui.send(customize(3, history=history))
        stream = await read_chat(ui, 3)
        assert stream.response["result"] == {
            "code": CUSTOMIZED["code"],
            "description": "Added a search bar",
            "assumptions": ["Filtering is client-side"],
            "clarificationNeeded": False,
        }
        assert stream.text == CUSTOMIZED["code"]
        (request,) = model.requests
        assert request["text"]["format"]["schema"] == CUSTOMIZE_SCHEMA
        prompt = user_text(request)
        assert "The user's request: Add a search bar" in prompt
        assert "assistant: Generated interface with 2 endpoints" in prompt
        assert CODE in prompt


async def test_an_answer_that_needs_clarification_is_the_clarify_result(tmp_path: Path) -> None:
    asks = {
        **CUSTOMIZED,
        "clarificationNeeded": True,
        "question": "Which table: Users or Orders?",
        "options": ["Users table", "Orders table", "Both tables"],
        "code": None,
    }
    async with serve(tmp_path, [answer(asks)]) as (ui, _):
        await ui.send(customize(3))
        stream = await read_chat(ui, 3)
        assert stream.response["result"] == {
            "code": None,
            "clarificationNeeded": True,
            "question": "Which table: Users or Orders?",
            "options": ["Users table", "Orders table", "Both tables"],
        }
        assert stream.text == ""  # no code to stream


async def test_the_model_asking_the_user_ends_the_task_with_the_clarify_result(
    tmp_path: Path,
) -> None:
    question = {
        "questions": [
            {
                "id": "table",
                "header": "Table",
                "question": "Which table gets the search bar?",
                "options": [
                    {"label": "Users table", "description": "The first one."},
                    {"label": "Orders table", "description": "The second one."},
                ],
            }
        ]
    }
    responses = [
        function_call_response("request_user_input", question, call_id="ask_1"),
        answer(CUSTOMIZED),  # the next customize, with the user's pick
        text_response("Sure."),  # a chat: the tool is not offered there
    ]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(customize(3))
        stream = await read_chat(ui, 3)
        assert stream.response["result"] == {
            "code": None,
            "clarificationNeeded": True,
            "question": "Which table gets the search bar?",
            "options": ["Users table", "Orders table"],
        }
        assert [c["chunk"] for c in stream.chunks] == [""]
        history = [{"role": "assistant", "content": "Which table gets the search bar?"}]
        history.append({"role": "user", "content": "Users table"})
        await ui.send(customize(4, history=history))
        assert (await read_chat(ui, 4)).response["result"]["code"] == CUSTOMIZED["code"]
        # The question was withdrawn (the Task ended cleanly, after its Turn), and the
        # next request went on with the same conversation.
        output = [i for i in model.requests[1]["input"] if i["type"] == "function_call_output"]
        assert output
        assert "not asked" in output[0]["output"]
        await ui.send(chat(5, "thanks"))
        assert (await read_chat(ui, 5)).response["result"]["message"] == "Sure."
        assert "request_user_input" not in tools_of(model.requests[2])
        await ui.send(EXIT)
        await exits_cleanly(ui)


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "code", "text"),
    [
        (generate(2, spec={}), -32002, "Spec invalid: params.spec: the spec is empty"),
        (generate(2, spec=[1]), -32002, "Spec invalid: params.spec: expected an object"),
        (customize(2, spec="openapi: 3"), -32002, "Spec invalid: params.spec: expected an object"),
        (
            {"jsonrpc": "2.0", "id": 2, "method": "generate", "params": {"format": "react"}},
            -32602,
            "Invalid params: params.spec: missing required field",
        ),
        (generate(2, theme=3), -32602, "Invalid params: params.theme: expected a string"),
        (customize(2, prompt=" "), -32602, "Invalid params: params.prompt: empty"),
        (
            customize(2, history=[{"role": "robot", "content": "x"}]),
            -32602,
            "Invalid params: params.history[0].role: expected one of",
        ),
    ],
)
async def test_bad_params_are_refused_naming_the_field(
    tmp_path: Path, message: dict[str, Any], code: int, text: str
) -> None:
    async with serve(tmp_path, [answer(GENERATED)]) as (ui, model):
        await ui.send(message)
        error = (await answer_of(ui, 2))["error"]
        assert error["code"] == code
        assert error["message"].startswith(text), error
        await ui.send(generate(3))  # the connection goes on
        assert (await read_chat(ui, 3)).response["result"] == GENERATED
        assert len(model.requests) == 1


TOO_LONG = {"error": {"message": "too long", "code": "context_length_exceeded"}}


@pytest.mark.parametrize(
    ("request_", "responses", "code", "data"),
    [
        (generate(2), [http_error(401, "bad key")], -32000, {"code": "unauthorized"}),
        (customize(2), [http_error(401, "bad key")], -32001, {"code": "unauthorized"}),
        (generate(2), [text_response("Here is your UI!")], -32000, {"code": "bad_answer"}),
        (
            customize(2),
            [answer({**CUSTOMIZED, "code": None, "description": "There is no table."})],
            -32001,
            {"code": "not_applied"},
        ),
        (
            generate(2),
            [http_error(400, TOO_LONG) for _ in range(4)],
            -32003,
            {"code": "context_window_exceeded"},
        ),
    ],
)
async def test_failures_answer_the_protocols_codes(
    tmp_path: Path,
    request_: dict[str, Any],
    responses: list[ScriptedResponse],
    code: int,
    data: dict[str, Any],
) -> None:
    async with serve(tmp_path, responses) as (ui, _):
        await ui.send(request_)
        stream = await read_chat(ui, 2)
        assert [c["done"] for c in stream.chunks][-1:] == [True]  # the stream ends first
        error = stream.response["error"]
        assert (error["code"], error.get("data")) == (code, data), error


# --- the prompt file ----------------------------------------------------------------------------


async def test_the_prompt_file_can_be_replaced(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.toml"
    prompts.write_text(
        '[generate]\nprompt = "Build $format for: $spec (cost: $$0)"\n'
        '[customize]\nprompt = "Change: $prompt, with $nothing"\n'
    )
    env = {"CODEXCORE_CHAT_PROMPTS": str(prompts)}
    async with serve(tmp_path, [answer(GENERATED)], env=env) as (ui, model):
        await ui.send(generate(2, spec={"title": "Tiny"}))
        assert (await read_chat(ui, 2)).response["result"] == GENERATED
        expected = 'Build react for: {\n "title": "Tiny"\n} (cost: $0)'
        assert user_text(model.requests[0]) == expected
        await ui.send(customize(3))
        error = (await answer_of(ui, 3))["error"]
        assert error["code"] == -32001
        assert error["data"] == {"code": "bad_prompt_file"}
        assert str(prompts) in error["message"]
        assert "$nothing" in error["message"]
        await ui.wait_stderr("prompt file unusable")


# --- a retry joins; $/cancelRequest ---------------------------------------------------------------


def held(value: dict[str, Any], after: int, step: Pause | Hang) -> ScriptedResponse:
    """``value`` as an answer whose stream waits (``step``) after ``after`` steps."""
    steps = answer(value, chunks=12).steps
    return ScriptedResponse(steps=(*steps[:after], step, *steps[after:]))


async def test_a_retried_request_joins_the_running_one(tmp_path: Path) -> None:
    # The model stops for a while after a few deltas: the app's retry comes meanwhile.
    responses = [held(GENERATED, after=8, step=Pause(3.0))]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(generate(2))
        first = await ui.recv()
        assert first is not None
        assert first["params"]["requestId"] == 2
        await ui.send(generate(3))  # the same params: the app's retry after its timeout
        chunks: dict[int, list[dict[str, Any]]] = {2: [first["params"]], 3: []}
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 2:
            message = await ui.recv()
            assert message is not None, ui.context()
            if "id" in message:
                answers[message["id"]] = message
            else:
                chunks[message["params"]["requestId"]].append(message["params"])
        for rid in (2, 3):
            stream = Stream(chunks[rid], answers[rid])
            assert [c["index"] for c in chunks[rid]] == list(range(len(chunks[rid])))
            assert [c["done"] for c in chunks[rid]][-2:] == [False, True]
            assert stream.text == CODE, rid
            assert answers[rid]["result"] == GENERATED
        assert len(model.requests) == 1  # one Task for both
        await ui.wait_stderr("request joins the same one")


async def test_a_retried_chat_joins_the_running_one_too(tmp_path: Path) -> None:
    steps = text_response("The first half. The second half.", chunks=8).steps
    responses = [ScriptedResponse(steps=(*steps[:6], Pause(3.0), *steps[6:]))]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(chat(4, "What formats?"))
        first = await ui.recv()
        assert first is not None
        assert first["params"]["requestId"] == 4
        await ui.send(chat(5, "What formats?"))  # the app's retry: the same params
        chunks: dict[int, list[dict[str, Any]]] = {4: [first["params"]], 5: []}
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 2:
            message = await ui.recv()
            assert message is not None, ui.context()
            if "id" in message:
                answers[message["id"]] = message
            else:
                chunks[message["params"]["requestId"]].append(message["params"])
        for rid in (4, 5):
            Stream(chunks[rid], answers[rid]).check(rid)
            assert "".join(c["chunk"] for c in chunks[rid]) == "The first half. The second half."
            assert answers[rid]["result"]["message"] == "The first half. The second half."
        assert len(model.requests) == 1


async def test_cancelling_the_first_of_joined_requests_leaves_the_task_to_the_other(
    tmp_path: Path,
) -> None:
    steps = text_response("One. Two. Three.", chunks=6).steps
    responses = [ScriptedResponse(steps=(*steps[:5], Pause(3.0), *steps[5:]))]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(chat(4, "count"))
        first = await ui.recv()
        assert first is not None
        await ui.send(chat(5, "count"))
        await ui.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 4}})
        chunks: dict[int, list[dict[str, Any]]] = {4: [first["params"]], 5: []}
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 2:
            message = await ui.recv()
            assert message is not None, ui.context()
            if "id" in message:
                answers[message["id"]] = message
            else:
                chunks[message["params"]["requestId"]].append(message["params"])
        assert answers[4]["error"]["code"] == -32800
        assert not any(c["done"] for c in chunks[4])  # nothing more went to it
        Stream(chunks[5], answers[5]).check(5)
        assert "".join(c["chunk"] for c in chunks[5]) == "One. Two. Three."
        assert answers[5]["result"]["message"] == "One. Two. Three."
        assert len(model.requests) == 1


async def test_a_retry_of_a_queued_chat_joins_it_and_outlives_its_cancel(tmp_path: Path) -> None:
    steps = text_response("First.", chunks=4).steps
    responses = [
        ScriptedResponse(steps=(*steps[:5], Pause(3.0), *steps[5:])),
        text_response("Second.", chunks=3),
    ]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(chat(4, "one"))
        first = await ui.recv()
        assert first is not None
        await ui.send(chat(5, "two"), chat(6, "two"))  # 5 waits its turn; 6 is its retry
        await ui.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 5}})
        seen: dict[int, list[dict[str, Any]]] = {4: [first["params"]], 5: [], 6: []}
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 3:
            message = await ui.recv()
            assert message is not None, ui.context()
            if "id" in message:
                answers[message["id"]] = message
            else:
                seen[message["params"]["requestId"]].append(message["params"])
        assert answers[5]["error"]["code"] == -32800
        assert seen[5] == []
        Stream(seen[6], answers[6]).check(6)
        assert "".join(c["chunk"] for c in seen[6]) == "Second."
        assert answers[6]["result"]["message"] == "Second."
        assert [user_text(r) for r in model.requests] == ["one", "two"]


async def past_chunks(ui: StdioServer, rid: Any) -> dict[str, Any]:
    """The next response, past the chunks of request ``rid`` that streamed before it."""
    while (message := await ui.recv()) is not None and "id" not in message:
        assert message["params"]["requestId"] == rid, message
    assert message is not None, ui.context()
    return message


async def test_cancel_request_interrupts_the_running_task_and_drops_a_queued_one(
    tmp_path: Path,
) -> None:
    responses = [held(GENERATED, after=8, step=Hang()), text_response("Still here.")]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(generate(2))
        first = await ui.recv()
        assert first is not None
        assert first["params"]["requestId"] == 2
        await ui.send(chat(3, "queued behind it"))
        await ui.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 3}})
        assert (await past_chunks(ui, 2))["error"] == {
            "code": -32800,
            "message": "Request cancelled: chat",
        }
        await ui.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}})
        assert await past_chunks(ui, 2) == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32800, "message": "Request cancelled: generate"},
        }
        # The Task was interrupted: the next request runs at once, and the cancelled chat
        # never reached the model.
        await ui.send(chat(4, "next"))
        assert (await read_chat(ui, 4)).response["result"]["message"] == "Still here."
        assert [user_text(r) for r in model.requests][1] == "next"
        # A request not running (answered already, or never sent) is no error.
        cancel = {"jsonrpc": "2.0", "id": 5, "method": "$/cancelRequest", "params": {"id": 4}}
        await ui.send(cancel)
        assert (await answer_of(ui, 5))["result"] is False
        await ui.send(EXIT)
        await exits_cleanly(ui)


# --- the code field, decoded as it is written ----------------------------------------------------

TRICKY: list[dict[str, Any]] = [
    {"code": CODE, "componentCount": 2, "description": "d"},
    {"description": 'says "code": "no"', "nested": {"code": "inner"}, "code": 'a\\"b', "x": [1]},
    {"items": [{"code": "in a list"}], "code": "\U0001f642\u00e9\n", "n": None},
    {"code": None, "description": "none to stream"},
]


@pytest.mark.parametrize("value", TRICKY)
@pytest.mark.parametrize("ascii_only", [True, False])
def test_the_code_field_decodes_the_same_wherever_the_text_is_cut(
    value: dict[str, Any], ascii_only: bool
) -> None:
    """Every cut of the answer's text in two, and one character at a time: the pieces
    the decoder returns join to what json.loads reads (escapes, surrogate pairs, a
    "code" key that is not the object's own)."""
    text = json.dumps(value, ensure_ascii=ascii_only, indent=1)
    want = json.loads(text)["code"] or ""
    for cut in range(len(text) + 1):
        field = FieldStream("code")
        assert field.feed(text[:cut]) + field.feed(text[cut:]) == want, cut
    field = FieldStream("code")
    assert "".join(field.feed(char) for char in text) == want
    assert field.done is (value["code"] is not None)
