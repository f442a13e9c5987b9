"""The model asks the user over the Codelia runtime protocol, and confirms without capabilities.

A real ``codexcore serve --stdio`` and a scripted model: the model calls
``request_user_input``; the UI gets ``ui.pick.request`` / ``ui.prompt.request``
(section 7 of the protocol), answers or cancels, and the model's next request
carries what it answered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel, function_call_response, shell_call, text_response

from .test_codelia import SEED_000_INITIALIZE, SEED_000_RUN_START, Ui, finish, req, serving

pytestmark = pytest.mark.anyio

QUESTIONS: dict[str, list[dict[str, Any]]] = {
    "questions": [
        {
            "id": "storage",
            "header": "Storage",
            "question": "Where should the notes be kept?",
            "options": [
                {"label": "SQLite", "description": "One file, queries."},
                {"label": "JSON files", "description": "Plain files."},
            ],
        },
        {
            "id": "extras",
            "header": "Extras",
            "question": "Which extras?",
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


def initialize(**capabilities: Any) -> dict[str, Any]:
    return req(
        "1",
        "initialize",
        protocol_version="0",
        client={"name": "codelia-tui", "version": "0.1.0"},
        ui_capabilities=capabilities,
    )


def asking(questions: dict[str, Any] = QUESTIONS) -> ScriptedModel:
    return ScriptedModel(
        [
            function_call_response("request_user_input", questions, call_id="ask_1"),
            text_response("Noted."),
        ]
    )


def tool_output(model: ScriptedModel, request: int = 1) -> str:
    items = model.requests[request]["input"]
    (output,) = [i for i in items if i.get("type") == "function_call_output"]
    return str(output["output"])


async def start(ui: Ui, **capabilities: Any) -> str:
    await ui.server.send(initialize(**capabilities), SEED_000_RUN_START)
    return str((await ui.answer("2"))["result"]["run_id"])


async def reply(ui: Ui, request: dict[str, Any], result: Any) -> None:
    await ui.server.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


async def test_options_become_a_pick_free_text_a_secret_prompt(tmp_path: Path) -> None:
    model = asking()
    async with serving(tmp_path, model) as (ui, http):
        run_id = await start(ui, supports_pick=True, supports_prompt=True, supports_confirm=True)
        await ui.until("run.status", run_id=run_id, status="awaiting_ui")
        first = await ui.until("ui.pick.request")
        tools = [t["name"] for t in http.model.requests[0]["tools"]]
        assert "request_user_input" in tools
        assert first["params"]["run_id"] == run_id
        assert first["params"]["multi"] is False
        items = first["params"]["items"]
        assert [i["id"] for i in items] == ["SQLite", "JSON files", "__other__"]
        assert items[0] == {"id": "SQLite", "label": "SQLite", "detail": "One file, queries."}
        await reply(ui, first, {"ids": ["JSON files"]})
        second = await ui.until("ui.pick.request")
        assert second["params"]["multi"] is True
        assert [i["id"] for i in second["params"]["items"]] == ["Search", "Export"]  # no Other
        await reply(ui, second, {"ids": ["Search", "Export"]})
        third = await ui.until("ui.prompt.request")
        assert third["params"]["secret"] is True
        assert third["params"]["title"] == "API token"
        assert third["params"]["message"] == "Your token?"
        await reply(ui, third, {"value": "s3cret"})
        await ui.until("run.status", run_id=run_id, status="running")
        assert await ui.run_to_end(run_id) == "completed"
        answers = json.loads(tool_output(http.model))["answers"]
        assert answers == {
            "storage": {"answers": ["JSON files"]},
            "extras": {"answers": ["Search", "Export"]},
            "token": {"answers": ["s3cret"]},
        }
        await finish(ui)


async def test_picking_other_prompts_for_own_words(tmp_path: Path) -> None:
    one = {"questions": [QUESTIONS["questions"][0]]}
    async with serving(tmp_path, asking(one)) as (ui, http):
        run_id = await start(ui, supports_pick=True, supports_prompt=True)
        pick = await ui.until("ui.pick.request")
        await reply(ui, pick, {"ids": ["__other__"]})
        prompt = await ui.until("ui.prompt.request")
        assert "default_value" not in prompt["params"]
        await reply(ui, prompt, {"value": "Postgres"})
        assert await ui.run_to_end(run_id) == "completed"
        assert json.loads(tool_output(http.model))["answers"] == {
            "storage": {"answers": ["Postgres"]}
        }
        await finish(ui)


@pytest.mark.parametrize(
    "answer",
    [
        {"result": {"ids": []}},
        {"error": {"code": -32003, "message": "user cancelled"}},
    ],
)
async def test_an_empty_pick_or_user_cancelled_cancels(tmp_path: Path, answer: Any) -> None:
    async with serving(tmp_path, asking()) as (ui, http):
        run_id = await start(ui, supports_pick=True, supports_prompt=True)
        pick = await ui.until("ui.pick.request")
        await ui.server.send({"jsonrpc": "2.0", "id": pick["id"], **answer})
        assert await ui.run_to_end(run_id) == "completed"  # the run goes on
        assert "cancelled" in tool_output(http.model)
        assert not any(m.get("method") == "ui.prompt.request" for m in ui.server.seen)
        await finish(ui)


async def test_a_null_prompt_value_cancels(tmp_path: Path) -> None:
    free = {"questions": [QUESTIONS["questions"][2]]}
    async with serving(tmp_path, asking(free)) as (ui, http):
        run_id = await start(ui, supports_prompt=True)
        prompt = await ui.until("ui.prompt.request")
        await reply(ui, prompt, {"value": None})
        assert await ui.run_to_end(run_id) == "completed"
        assert "cancelled" in tool_output(http.model)
        await finish(ui)


async def test_a_prompt_only_ui_answers_options_in_words(tmp_path: Path) -> None:
    one = {"questions": [QUESTIONS["questions"][1] | {"multiSelect": False}]}
    async with serving(tmp_path, asking(one)) as (ui, http):
        run_id = await start(ui, supports_prompt=True)
        prompt = await ui.until("ui.prompt.request")
        assert prompt["params"]["default_value"] == "Search"
        assert "- Export: Export to Markdown." in prompt["params"]["message"]
        await reply(ui, prompt, {"value": "neither"})  # not an option: asked again
        again = await ui.until("ui.prompt.request")
        assert "Answer with one of: Export, Search" in again["params"]["message"]
        await reply(ui, again, {"value": "Export"})
        assert await ui.run_to_end(run_id) == "completed"
        assert json.loads(tool_output(http.model))["answers"] == {"extras": {"answers": ["Export"]}}
        await finish(ui)


async def test_a_ui_that_cannot_pick_or_prompt_is_never_asked(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedModel([text_response("Hi.")])) as (ui, http):
        run_id = await start(ui, supports_confirm=True)
        assert await ui.run_to_end(run_id) == "completed"
        tools = [t["name"] for t in http.model.requests[0]["tools"]]
        assert "request_user_input" not in tools
        await finish(ui)


async def test_cancelling_the_run_withdraws_the_question(tmp_path: Path) -> None:
    async with serving(tmp_path, asking()) as (ui, _):
        run_id = await start(ui, supports_pick=True, supports_prompt=True)
        await ui.until("ui.pick.request")
        await ui.server.send(req("3", "run.cancel", run_id=run_id))
        assert await ui.run_to_end(run_id) == "cancelled"
        await finish(ui)


async def test_no_ui_capabilities_still_gets_the_confirm(tmp_path: Path) -> None:
    """The protocol's own initialize example carries no ui_capabilities, and its own
    ui.confirm.request example follows: such a UI is asked."""
    model = ScriptedModel([shell_call(["touch", "yes"], call_id="c1"), text_response("OK.")])
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (ui, _):
        await ui.server.send(SEED_000_INITIALIZE, SEED_000_RUN_START)
        run_id = (await ui.answer("2"))["result"]["run_id"]
        confirm = await ui.until("ui.confirm.request")
        assert confirm["params"]["title"] == "Run command?"
        await reply(ui, confirm, {"ok": True})
        assert await ui.run_to_end(run_id) == "completed"
        assert (tmp_path / "yes").exists()
        await finish(ui)


async def test_supports_confirm_false_is_denied_once_worded(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call(["touch", "nope"], call_id="c1"), text_response("OK.")])
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (ui, http):
        run_id = await start(ui, supports_confirm=False)
        assert await ui.run_to_end(run_id) == "completed"
        assert not any(m.get("method") == "ui.confirm.request" for m in ui.server.seen)
        results = [e["event"] for e in ui.events(run_id) if e["event"]["type"] == "tool_result"]
        assert results[0]["result"].startswith("denied: the UI cannot ask")
        assert "denied: denied" not in results[0]["result"]
        assert "supports_confirm: false" in tool_output(http.model)
        await finish(ui)
