"""The engine against the official openai SDK: its request types, its stream events.

Every request body the engine sends is checked against the SDK's
``ResponseCreateParamsStreaming`` (strictly: see ``openai_shapes``), and the
model's replies are streams built from the SDK's own event models (null
fields and all), played through the real model client and the engine.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from codexcore import Codex
from codexcore import protocol as p
from codexcore.engine._models import supports_reasoning
from codexcore.engine._requests import TOOLS, input_item
from codexcore.model import ModelClient, ModelError, RefusalDelta, RetryPolicy, RetryScheduled
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, http_error

from .engine_helpers import Recorder, engine_config
from .openai_shapes import body_problems, item_problems
from .openai_streams import Replay
from .test_engine import say

pytestmark = pytest.mark.anyio

REASONING_MODEL = "gpt-5-codex"
PLAIN_MODEL = "gpt-4.1"
SHELL_ARGS = json.dumps({"command": [sys.executable, "-c", "print(42)"]})


@asynccontextmanager
async def running_engine(
    scripted: ScriptedModel, cwd: Path, **session: Any
) -> AsyncIterator[Recorder]:
    """``engine_helpers.running_engine``, but ``session`` may name the ``model``."""
    async with Codex(engine_config(cwd, **session), transport=scripted.mock_transport()) as codex:
        recorder = Recorder(codex)
        yield recorder
        recorder.check_invariants()


def assert_valid(model: ScriptedModel) -> None:
    assert model.requests, "the engine sent nothing"
    for number, body in enumerate(model.requests):
        assert body_problems(body) == [], f"request #{number}: {json.dumps(body)[:2000]}"


def conversation(model_name: str) -> list[Any]:
    """Two Tasks: reasoning, a shell call, an unrunnable custom call, a refusal, an answer."""
    reasons = model_name == REASONING_MODEL
    first = Replay("r1", model_name)
    if reasons:
        first.reasoning("Look first.")
    first.message("Looking.").function_call("shell", SHELL_ARGS, "call_1")
    first.custom_tool_call("grep", "pattern", "call_2")
    return [
        first.response(),
        Replay("r2", model_name).refusal("I can't help with that.").response(),
        Replay("r3", model_name).message("Fine, done.").response(),
    ]


async def run_conversation(ui: Recorder) -> None:
    await ui.submit(say("first"), id="a")
    await ui.until(p.TaskComplete, id="a")
    await ui.submit(say("second"), id="b")
    await ui.until(p.TaskComplete, id="b")


# --- the validator can fail ---------------------------------------------------------------


GOOD_BODY: dict[str, Any] = {
    "model": REASONING_MODEL,
    "instructions": "Be brief.",
    "tools": list(TOOLS),
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "reasoning": {"summary": "auto"},
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ],
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda b: b["input"][1].update(id="fc_1"), "store is false, so no item may carry an id"),
        (lambda b: b["input"][1].update(status=None), "null"),
        (lambda b: b["input"][2].update(stray=1), "stray key 'stray'"),
        (lambda b: b.update(temperature="hot"), "expected float"),
        (lambda b: b["input"][1].pop("name"), "missing 'name'"),
        (lambda b: b.update(include=["reasoning.everything"]), "not one of"),
        (lambda b: b["reasoning"].update(summary="verbose"), "not one of"),
    ],
)
def test_the_validator_rejects_a_malformed_body(change: Any, problem: str) -> None:
    assert body_problems(GOOD_BODY) == []
    body = copy.deepcopy(GOOD_BODY)
    change(body)
    problems = body_problems(body)
    assert any(problem in line for line in problems), problems


# --- every request body validates ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["server", "client"])
@pytest.mark.parametrize("model_name", [REASONING_MODEL, PLAIN_MODEL])
async def test_every_request_body_validates(tmp_path: Path, mode: str, model_name: str) -> None:
    model = ScriptedModel(conversation(model_name))
    async with running_engine(
        model, tmp_path, history_mode=mode, model=model_name, approval_policy="never"
    ) as ui:
        await run_conversation(ui)
    assert len(model.requests) == 3
    assert_valid(model)
    if mode == "client":
        resent = model.requests[2]["input"]
        assert not any("id" in item for item in resent)
        kinds = [item["type"] for item in resent]
        assert kinds.count("function_call_output") == 1
        assert kinds.count("custom_tool_call_output") == 1


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_request_bodies_after_a_resume_validate(tmp_path: Path, mode: str) -> None:
    first = ScriptedModel(conversation(REASONING_MODEL)[:2])
    async with running_engine(first, tmp_path, history_mode=mode, approval_policy="never") as ui:
        await ui.submit(say("first"), id="a")
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete, id="a")
    second = ScriptedModel([Replay("r9").message("Back again.").response()])
    async with running_engine(second, tmp_path, history_mode=mode) as ui:
        await ui.submit(p.ResumeSession(session_id), id="res")
        await ui.until(p.SessionConfigured, id="res")
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert_valid(first)
    assert_valid(second)
    if mode == "client":
        assert len(second.requests[0]["input"]) > 5  # the recorded history, resent


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_every_kind_of_user_input_validates(tmp_path: Path, mode: str) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    items = (
        p.TextInput("what is this?"),
        p.ImageInput("https://example.test/cat.png"),
        p.LocalImageInput(str(image)),
    )
    model = ScriptedModel([Replay(f"r{n}").message("A dot.").response() for n in (1, 2)])
    async with running_engine(model, tmp_path, history_mode=mode) as ui:
        await ui.submit(p.UserInput(items), id="a")
        await ui.until(p.TaskComplete, id="a")
        await ui.submit(say("and now?"), id="b")
        await ui.until(p.TaskComplete, id="b")
    assert_valid(model)


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_the_request_after_an_interrupted_call_validates(tmp_path: Path, mode: str) -> None:
    """The aborted answer to a call that never ran is a valid input item too."""
    asks = json.dumps({"command": [sys.executable, "-c", "print('needs approval')"]})
    model = ScriptedModel(
        [
            Replay("r1").function_call("shell", asks, "call_1").response(),
            Replay("r2").message("Stopped.").response(),
        ]
    )
    async with running_engine(
        model, tmp_path, history_mode=mode, approval_policy="untrusted"
    ) as ui:
        await ui.submit(say("run it"), id="a")
        await ui.until(p.ExecApprovalRequest, id="a")
        await ui.submit(p.Interrupt(), id="stop")
        await ui.until(p.TurnAborted, id="a")
        await ui.submit(say("never mind"), id="b")
        await ui.until(p.TaskComplete, id="b")
    assert_valid(model)
    outputs = [i for i in model.requests[1]["input"] if i["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_1"]
    assert outputs[0]["output"].startswith("aborted")


def test_client_mode_resends_items_in_their_input_shape() -> None:
    """Output items as the SDK dumps them (ids, nulls, output-only keys) become input items."""
    received: list[dict[str, Any]] = [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "t"}],
            "content": None,
            "encrypted_content": "gAAA",
            "status": None,
        },
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "phase": None,
            "content": [{"type": "output_text", "text": "a", "annotations": [], "logprobs": None}],
        },
        {
            "id": "ctc_1",
            "type": "custom_tool_call",
            "call_id": "c2",
            "name": "grep",
            "input": "x",
            "status": "completed",
            "namespace": None,
        },
    ]
    for item in received:
        assert item_problems(item) != []  # as received, store: false rejects it
        shaped = input_item(item)
        assert item_problems(shaped) == [], shaped
        assert "id" not in shaped
    assert input_item(received[2]) == {
        "type": "custom_tool_call",
        "call_id": "c2",
        "name": "grep",
        "input": "x",
    }


# --- item 12: reasoning options by the model catalogue -----------------------------------


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_a_plain_model_gets_no_reasoning_options(tmp_path: Path, mode: str) -> None:
    model = ScriptedModel([Replay("r1", PLAIN_MODEL).message("Hi.").response()])
    async with running_engine(
        model, tmp_path, history_mode=mode, model=PLAIN_MODEL, reasoning_effort="high"
    ) as ui:
        await ui.submit(say("hi"))
        await ui.until(p.TaskComplete)
    (body,) = model.requests
    assert "reasoning" not in body
    assert "include" not in body
    assert body_problems(body) == []


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_a_reasoning_model_gets_summaries_and_they_reach_the_ui(
    tmp_path: Path, mode: str
) -> None:
    model = ScriptedModel(
        [Replay("r1").reasoning("Plan: answer briefly.").message("Hi.").response()]
    )
    async with running_engine(model, tmp_path, history_mode=mode) as ui:
        await ui.submit(say("hi"))
        await ui.until(p.TaskComplete)
    (body,) = model.requests
    assert body["reasoning"] == {"summary": "auto"}
    assert ("include" in body) == (mode == "client")
    if mode == "client":
        assert body["include"] == ["reasoning.encrypted_content"]
    assert [r.text for r in ui.of(p.AgentReasoning)] == ["Plan: answer briefly."]
    assert "".join(d.delta for d in ui.of(p.AgentReasoningDelta)) == "Plan: answer briefly."
    assert body_problems(body) == []


async def test_the_effort_goes_with_the_summary(tmp_path: Path) -> None:
    model = ScriptedModel([Replay("r1").message("Hi.").response()])
    async with running_engine(model, tmp_path, reasoning_effort="low") as ui:
        await ui.submit(say("hi"))
        await ui.until(p.TaskComplete)
    assert model.requests[0]["reasoning"] == {"summary": "auto", "effort": "low"}


@pytest.mark.parametrize(
    ("model_name", "override", "expected"),
    [
        ("gpt-5-codex", None, True),
        ("o3-2025-04-16", None, True),
        ("o4-mini", None, True),
        ("codex-mini-latest", None, True),
        ("gpt-4.1", None, False),
        ("gpt-4o-mini", None, False),
        ("qwen3-coder", None, False),
        ("qwen3-coder", True, True),
        ("gpt-5", False, False),
    ],
)
def test_the_catalogue_and_its_override(
    model_name: str, override: bool | None, expected: bool
) -> None:
    assert supports_reasoning(model_name, override) is expected


async def test_the_override_reaches_the_request(tmp_path: Path) -> None:
    model = ScriptedModel([Replay("r1", "qwen3-coder").message("Hi.").response()])
    async with running_engine(
        model,
        tmp_path,
        model="qwen3-coder",
        history_mode="client",
        model_supports_reasoning_summaries=True,
    ) as ui:
        await ui.submit(say("hi"))
        await ui.until(p.TaskComplete)
    assert model.requests[0]["reasoning"] == {"summary": "auto"}
    assert model.requests[0]["include"] == ["reasoning.encrypted_content"]


# --- item 10: refusals -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_a_refusal_is_streamed_and_surfaced_as_the_answer(tmp_path: Path, mode: str) -> None:
    refusal = "I can't help with that request."
    model = ScriptedModel(
        [
            Replay("r1").refusal(refusal).response(),
            Replay("r2").message("Sure.").response(),
        ]
    )
    async with running_engine(model, tmp_path, history_mode=mode) as ui:
        await ui.submit(say("something bad"), id="a")
        done = await ui.until(p.TaskComplete, id="a")
        await ui.submit(say("something fine"), id="b")
        await ui.until(p.TaskComplete, id="b")
    deltas = [
        e.msg.delta for e in ui.events if e.id == "a" and isinstance(e.msg, p.AgentMessageDelta)
    ]
    assert "".join(deltas) == refusal
    assert len(deltas) > 1  # streamed, not only at the end
    messages = ui.of(p.AgentMessage)
    assert (messages[0].message, messages[0].refusal) == (refusal, True)
    assert (messages[1].message, messages[1].refusal) == ("Sure.", False)
    assert done.msg.last_agent_message == refusal
    assert_valid(model)
    if mode == "client":
        resent = [i for i in model.requests[1]["input"] if i.get("role") == "assistant"]
        assert resent == [
            {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "refusal", "refusal": refusal}],
            }
        ]


async def test_the_model_client_yields_refusal_deltas() -> None:
    model = ScriptedModel([Replay("r1").refusal("No.", chunks=2).response()])
    async with ModelClient(base_url="http://model.test/v1", transport=model.mock_transport()) as c:
        events = [e async for e in c.stream({"model": REASONING_MODEL, "input": []})]
    assert "".join(e.delta for e in events if isinstance(e, RefusalDelta)) == "No."


# --- item 11: every call gets an output --------------------------------------------------


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_calls_the_engine_cannot_run_are_answered_and_the_task_goes_on(
    tmp_path: Path, mode: str
) -> None:
    unknown = {
        "type": "future_tool_call",
        "id": "ftc_1",
        "call_id": "call_future",
        "payload": {"x": 1},
        "status": "completed",
    }
    server_side = {  # the server ran this one itself: it needs no answer
        "type": "tool_search_call",
        "id": "ts_1",
        "call_id": "call_server",
        "execution": "server",
        "arguments": {},
        "status": "completed",
    }
    first = Replay("r1").custom_tool_call("grep", "needle", "call_custom").raw_item(unknown)
    first.raw_item(server_side)
    model = ScriptedModel([first.response(), Replay("r2").message("Understood.").response()])
    async with running_engine(model, tmp_path, history_mode=mode) as ui:
        await ui.submit(say("go"))
        done = await ui.until(p.TaskComplete)
    assert done.msg.last_agent_message == "Understood."
    sent = model.requests[1]["input"]
    outputs = {i["call_id"]: i for i in sent if i["type"].endswith("_output")}
    assert outputs["call_custom"]["type"] == "custom_tool_call_output"
    assert outputs["call_custom"]["output"].startswith("error: custom_tool_call 'grep'")
    assert outputs["call_future"]["type"] == "function_call_output"
    assert outputs["call_future"]["output"].startswith("error: future_tool_call")
    assert "call_server" not in outputs
    # The SDK cannot know the invented type; everything else must validate.
    known = {**model.requests[1], "input": [i for i in sent if i["type"] != "future_tool_call"]}
    assert body_problems(known) == []
    if mode == "client":
        (resent,) = [i for i in sent if i["type"] == "future_tool_call"]
        assert resent == {k: v for k, v in unknown.items() if k != "id"}


# --- item 3: no key in any error ---------------------------------------------------------


@pytest.mark.parametrize("json_body", [True, False])
def test_a_401_echoing_the_key_leaves_no_trace_of_it(tmp_path: Path, json_body: bool) -> None:
    """A real server and a real ``codexcore exec``: the error, the logs, the session file."""
    key = "proxykey-" + secrets.token_hex(12)  # not sk- shaped: only the configured key knows it
    echo = f"invalid key {key}; you sent Authorization: Bearer {key}"
    body = {"error": {"message": echo, "code": "invalid_api_key"}} if json_body else echo
    first = Replay("r1").function_call("lookup", "{}", "call_1").response()
    model = ScriptedModel([first, http_error(401, body)])
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    with ScriptedResponsesServer(model) as server:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": key,
            "CODEXCORE_HOME": str(home),
            "CODEXCORE_LOG": "debug",
        }
        result = subprocess.run(
            [sys.executable, "-m", "codexcore", "exec", "--events-json", "go"],
            capture_output=True,
            text=True,
            cwd=work,
            env=env,
            timeout=60,
            check=False,
        )
    assert model.requests[1]["input"], "the second request was never made"
    errors = [
        msg
        for line in result.stdout.splitlines()
        if isinstance(msg := p.decode_event(line).msg, p.ErrorEvent)
    ]
    assert [e.code for e in errors] == ["unauthorized"], result.stdout + result.stderr
    assert "[redacted]" in errors[0].message
    recorded = [path.read_text() for path in home.rglob("*") if path.is_file()]
    assert any('"unauthorized"' in text for text in recorded), "the error was not recorded"
    for where, text in [
        ("stdout", result.stdout),
        ("stderr", result.stderr),
        *(("session file", t) for t in recorded),
    ]:
        assert key not in text, f"the key leaked into {where}"
        assert key[len("proxykey-") :] not in text, f"part of the key leaked into {where}"


def test_the_model_client_redacts_an_echoed_key() -> None:
    key = "sk-proj-" + secrets.token_hex(16)

    def echo(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"]
        return httpx.Response(401, json={"error": {"message": f"bad {sent}; key={key}"}})

    async def run() -> ModelError:
        async with ModelClient(
            base_url="http://model.test/v1", api_key=key, transport=httpx.MockTransport(echo)
        ) as client:
            with pytest.raises(ModelError) as caught:
                async for _ in client.stream({"model": REASONING_MODEL, "input": []}):
                    pass
        return caught.value

    error = asyncio.run(run())
    assert key not in str(error)
    where = "POST http://model.test/v1/responses"
    assert error.message == f"HTTP 401: bad [redacted]; key=[redacted] ({where})"


@pytest.mark.parametrize("code", ["invalid_prompt", "server_error"])
def test_a_streamed_error_echoing_the_key_is_redacted(code: str) -> None:
    # A key that looks like no key: only knowing the request's own credential finds it.
    key = "hunter2-" + secrets.token_hex(8)
    error = {"type": "error", "code": code, "message": f"denied for {key}", "param": None}
    body = f"event: error\ndata: {json.dumps({**error, 'sequence_number': 0})}\n\n".encode()

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async def run() -> tuple[list[str], ModelError]:
        reasons: list[str] = []
        async with ModelClient(
            base_url="http://model.test/v1",
            api_key=key,
            transport=httpx.MockTransport(reply),
            retry=RetryPolicy(max_attempts=2, base_delay=0.0),
        ) as client:
            try:
                async for event in client.stream({"model": REASONING_MODEL, "input": []}):
                    if isinstance(event, RetryScheduled):
                        reasons.append(event.reason)
            except ModelError as exc:
                return reasons, exc
        raise AssertionError(f"the stream ended without an error; retries: {reasons}")

    reasons, failure = asyncio.run(run())
    assert key not in str(failure)
    assert key not in failure.message
    assert "denied for [redacted]" in failure.message
    # A transient error is retried first: the retry's reason, which the UI sees, is redacted too.
    assert reasons == (
        [] if code == "invalid_prompt" else ["stream error: denied for [redacted] (server_error)"]
    )
