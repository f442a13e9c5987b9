"""The built-in update_plan tool: plan_update events, checks, and how each face shows a plan."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.adapters.jsonrpc.codelia._events import RunView, build
from codexcore.adapters.jsonrpc.codelia._plan import plan_text
from codexcore.cli._render import TerminalRenderer
from codexcore.engine._plan import PlanError, parse_plan
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from .engine_helpers import running_engine
from .flows import outputs_sent

pytestmark = pytest.mark.anyio

PLAN = {
    "explanation": "The test points at the parser.",
    "plan": [
        {"step": "Read the failing test", "status": "completed"},
        {"step": "Fix the parser", "status": "in_progress"},
        {"step": "Run the suite", "status": "pending"},
    ],
}


def say(text: str) -> p.UserInput:
    return p.UserInput((p.TextInput(text),))


async def test_a_plan_reaches_the_ui_and_the_model_is_told_it_was_updated(tmp_path: Path) -> None:
    model = ScriptedModel(
        [function_call_response("update_plan", PLAN, call_id="c1"), text_response("Planned.")]
    )
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("plan it"))
        update = await ui.until(p.PlanUpdate)
        await ui.until(p.TaskComplete)
    assert update.msg == p.PlanUpdate(
        (
            p.PlanItem("Read the failing test", "completed"),
            p.PlanItem("Fix the parser", "in_progress"),
            p.PlanItem("Run the suite", "pending"),
        ),
        "The test points at the parser.",
    )
    assert outputs_sent(model.requests[1]) == {"c1": "Plan updated"}
    # The model is offered the tool, in Codex's shape.
    (tool,) = [t for t in model.requests[0]["tools"] if t["name"] == "update_plan"]
    assert tool["parameters"]["required"] == ["plan"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (
            {
                "plan": [
                    {"step": "a", "status": "in_progress"},
                    {"step": "b", "status": "in_progress"},
                ]
            },
            "at most one step can be in_progress, and plan[0], plan[1] are",
        ),
        ({"plan": [{"step": "a", "status": "done"}]}, "plan[0].status must be one of"),
        ({"plan": [{"step": "  ", "status": "pending"}]}, "plan[0].step must be a non-empty"),
        ({"plan": "step one"}, "'plan' must be an array"),
        ({"steps": []}, "unknown field(s) steps"),
        ({"plan": [{"step": "a", "status": "pending", "owner": "me"}]}, "unknown field(s) owner"),
        ({"plan": [], "explanation": 3}, "'explanation' must be a string"),
    ],
)
async def test_a_bad_plan_is_an_error_for_the_model_and_sends_no_event(
    tmp_path: Path, arguments: dict[str, object], problem: str
) -> None:
    model = ScriptedModel(
        [function_call_response("update_plan", arguments, call_id="c1"), text_response("Fixed.")]
    )
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("plan it"))
        await ui.until(p.TaskComplete)
    output = outputs_sent(model.requests[1])["c1"]
    assert output.startswith("error: update_plan: "), output
    assert problem in output, output
    assert "the plan was not changed" in output
    assert ui.of(p.PlanUpdate) == []


async def test_arguments_that_are_not_json_are_an_error_too(tmp_path: Path) -> None:
    model = ScriptedModel(
        [function_call_response("update_plan", "{plan:", call_id="c1"), text_response("ok")]
    )
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("plan it"))
        await ui.until(p.TaskComplete)
    assert "not valid JSON" in outputs_sent(model.requests[1])["c1"]


def test_parse_plan_limits() -> None:
    with pytest.raises(PlanError, match="at most 100 are kept"):
        parse_plan({"plan": [{"step": "s", "status": "pending"}] * 101})
    assert parse_plan({"plan": []}) == p.PlanUpdate(())
    assert parse_plan({"plan": [{"step": " pad ", "status": "pending"}]}).plan[0].step == "pad"


def _update() -> p.PlanUpdate:
    return parse_plan(PLAN)


def test_the_terminal_shows_a_checklist() -> None:
    out = io.StringIO()
    TerminalRenderer(out, color=False).show(_update())
    assert out.getvalue() == (
        "Plan (1/3 done)\n"
        "  The test points at the parser.\n"
        "  [x] Read the failing test\n"
        "  [>] Fix the parser\n"
        "  [ ] Run the suite\n"
    )


def test_seed_000_draws_it_as_codelias_todo_list() -> None:
    run = RunView("run-1")
    events = build(run, _update())
    assert [e["type"] for e in events] == ["step_start", "tool_call", "tool_result"]
    call, result = events[1], events[2]
    assert call["tool"] == result["tool"] == "todo_new"
    assert call["tool_call_id"] == result["tool_call_id"] == "run-1:plan-1"
    assert [t["status"] for t in call["args"]["todos"]] == ["completed", "in_progress", "pending"]
    # The text Codelia's TUI parses (crates/tui/src/app/runtime/parser/todo.rs).
    assert result["result"] == (
        "Updated todos (new): 1 pending, 1 in progress, 1 completed. Next: [2].\n"
        "Todo plan:\n"
        "1. [x] Read the failing test\n"
        "2. [>] Fix the parser\n"
        "3. [ ] Run the suite\n"
        "The test points at the parser."
    )
    # A second update is a second call, not a replay of the first.
    assert build(run, _update())[0]["tool_call_id"] == "run-1:plan-2"
    assert plan_text(p.PlanUpdate(())).startswith("Updated todos (new): 0 pending")


def test_codexcore_exec_prints_the_plan(tmp_path: Path) -> None:
    model = ScriptedModel(
        [function_call_response("update_plan", PLAN, call_id="c1"), text_response("Planned.")]
    )
    with ScriptedResponsesServer(model) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
        result = subprocess.run(
            [sys.executable, "-m", "codexcore", "exec", "--approval-policy", "never", "plan"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert "Plan (1/3 done)\n  The test points at the parser.\n  [x] Read the failing test\n" in (
        result.stdout
    )
    assert "  [>] Fix the parser\n  [ ] Run the suite\n" in result.stdout
