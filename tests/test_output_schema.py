"""Structured output: a Task whose final answer follows a JSON Schema.

Natively (``output_schema`` on ``user_input``/``user_turn``) the request body asks
for it as the Responses API defines it (``text.format``, checked against the
official openai SDK's types), and ``codexcore exec --output-schema FILE`` prints
the answer alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from .engine_helpers import running_engine
from .openai_shapes import body_problems

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {
        "failing": {"type": "integer"},
        "summary": {"type": "string"},
    },
    "required": ["failing", "summary"],
    "additionalProperties": False,
}
ANSWER = '{"failing": 2, "summary": "two parser tests"}'
FORMAT = {"type": "json_schema", "name": "codex_output_schema", "schema": SCHEMA, "strict": True}


def say(text: str, **fields: object) -> p.UserInput:
    return p.UserInput((p.TextInput(text),), **fields)  # type: ignore[arg-type]


async def test_every_request_of_the_task_asks_for_the_schema(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call_response("update_plan", {"plan": []}, call_id="c1"),
            text_response(ANSWER),
            text_response("plain words"),
        ]
    )
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("how many tests fail?", output_schema=SCHEMA), id="t")
        done = await ui.until(p.TaskComplete, id="t")
        await ui.submit(say("thanks"), id="u")
        await ui.until(p.TaskComplete, id="u")
    assert json.loads(done.msg.last_agent_message or "") == {
        "failing": 2,
        "summary": "two parser tests",
    }
    first, second, after = model.requests
    assert first["text"] == {"format": FORMAT}
    assert second["text"] == {"format": FORMAT}  # the Task's every Turn
    assert "text" not in after  # the next Task's answer is free again
    for body in model.requests:
        assert body_problems(body) == [], body


async def test_user_turn_takes_a_schema_too(tmp_path: Path) -> None:
    model = ScriptedModel([text_response(ANSWER)])
    async with running_engine(model, tmp_path, history_mode="client") as ui:
        await ui.submit(p.UserTurn((p.TextInput("how many?"),), output_schema=SCHEMA), id="t")
        await ui.until(p.TaskComplete, id="t")
    assert model.requests[0]["text"] == {"format": FORMAT}
    assert body_problems(model.requests[0]) == []


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ([{"type": "object"}], "must be a JSON object (a JSON Schema), not list"),
        ({"type": "string"}, 'its root needs "type": "object"'),
        ({"properties": {}}, 'its root needs "type": "object"'),
    ],
)
async def test_a_schema_that_is_no_object_schema_is_refused(
    tmp_path: Path, schema: object, problem: str
) -> None:
    model = ScriptedModel([text_response("fine")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("go", output_schema=schema), id="bad")
        error = await ui.until(p.ErrorEvent, id="bad")
        await ui.submit(say("go"), id="good")
        await ui.until(p.TaskComplete, id="good")
    assert error.msg.code == "bad_output_schema"
    assert problem in error.msg.message
    assert "task_started" not in ui.types(id="bad")
    assert len(model.requests) == 1


# --- codexcore exec --output-schema -------------------------------------------------------


def run_exec(
    server: ScriptedResponsesServer, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    return subprocess.run(
        [sys.executable, "-m", "codexcore", "exec", *args],
        input="",
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )


def test_exec_prints_the_answer_alone(tmp_path: Path) -> None:
    (tmp_path / "answer.schema.json").write_text(json.dumps(SCHEMA))
    model = ScriptedModel([text_response(ANSWER, reasoning="Count them.")])
    with ScriptedResponsesServer(model) as server:
        result = run_exec(
            server, tmp_path, "--output-schema", "answer.schema.json", "how many tests fail?"
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"failing": 2, "summary": "two parser tests"}
    assert result.stdout.count("\n") == 1  # nothing else: a script reads it as it is
    assert "tokens:" in result.stderr  # the human output is still there, on stderr
    assert model.requests[0]["text"] == {"format": FORMAT}
    assert body_problems(model.requests[0]) == []


def test_exec_json_carries_the_answer_in_task_complete(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    model = ScriptedModel([text_response(ANSWER)])
    with ScriptedResponsesServer(model) as server:
        result = run_exec(
            server, tmp_path, "--events-json", "--output-schema", "s.json", "how many?"
        )
    assert result.returncode == 0, result.stderr
    last = p.decode_event(result.stdout.splitlines()[-1]).msg
    assert isinstance(last, p.TaskComplete)
    assert last.last_agent_message == ANSWER


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "missing.json: No such file or directory"),
        ("{not json", "bad.json: not JSON"),
        ('{"type": "array", "items": {}}', "bad.json: output_schema must describe an object"),
    ],
)
def test_exec_refuses_a_bad_schema_file(tmp_path: Path, content: str | None, problem: str) -> None:
    name = "missing.json" if content is None else "bad.json"
    if content is not None:
        (tmp_path / name).write_text(content)
    model = ScriptedModel([text_response("never sent")])
    with ScriptedResponsesServer(model) as server:
        result = run_exec(server, tmp_path, "--output-schema", name, "hi")
    assert result.returncode == 2
    assert f"codexcore exec: --output-schema {problem}" in result.stderr
    assert model.requests == []
