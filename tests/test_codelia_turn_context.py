"""Seed 000's model.set, run.context and context.inspect(include_agents) on the engine's
per-turn settings, token counts and initial context, over a real ``serve --stdio``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from codexcore.testing import ScriptedModel, shell_call, text_response

from .engine_helpers import contextual_input
from .test_codelia import TUI_CAPABILITIES, finish, req, serving, tui_initialize

pytestmark = pytest.mark.anyio


async def test_model_set_applies_from_the_running_runs_next_request(tmp_path: Path) -> None:
    """The run waits for a confirm when the model changes: it is not cancelled, and its
    next request goes to the new model."""
    command = [sys.executable, "-c", "print('hi')"]
    model = ScriptedModel([shell_call(command, call_id="c1"), text_response("done")])
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (ui, http):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "run it"}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        confirm = await ui.until("ui.confirm.request")
        await ui.server.send(req("3", "model.set", name="gpt-5-mini", reasoning="low"))
        assert (await ui.answer("3"))["result"]["name"] == "gpt-5-mini"
        await ui.server.send({"jsonrpc": "2.0", "id": confirm["id"], "result": {"ok": True}})
        assert await ui.run_to_end(run_id) == "completed"
        await ui.server.send(req("4", "model.list"))
        listed = (await ui.answer("4"))["result"]
        await finish(ui)
    assert [r["model"] for r in http.model.requests] == ["gpt-5-codex", "gpt-5-mini"]
    assert http.model.requests[1]["reasoning"]["effort"] == "low"
    assert (listed["current"], listed["reasoning"]) == ("gpt-5-mini", "low")


async def test_run_context_and_model_list_follow_the_configured_catalogue(
    tmp_path: Path,
) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "config.toml").write_text(
        '[models."gpt-5-codex"]\ncontext_window = 1000\n'
        "cost_per_1m_cached_input_tokens_usd = 0.2\n"
        '[models."my-local"]\ncontext_window = 8192\nmax_output_tokens = 2048\n'
    )
    model = ScriptedModel([text_response("hi")])  # usage: 150 tokens in all
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "hello"}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        context = await ui.until("run.context", run_id=run_id)
        assert await ui.run_to_end(run_id) == "completed"
        await ui.server.send(req("3", "model.list", include_details=True))
        listed = (await ui.answer("3"))["result"]
        await finish(ui)
    # 150 of the configured 1000 tokens, not of the built-in 400 000.
    assert context["params"]["context_left_percent"] == 85
    assert listed["models"][-1] == "my-local"
    assert listed["details"]["my-local"]["context_window"] == 8192
    assert listed["details"]["my-local"]["max_output_tokens"] == 2048
    assert listed["details"]["gpt-5-codex"]["context_window"] == 1000
    assert listed["details"]["gpt-5-codex"]["cost_per_1m_cached_input_tokens_usd"] == 0.2


async def test_context_inspect_shows_the_agents_md_the_model_is_sent(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "AGENTS.md").write_text("Answer in English.")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Run the tests with pytest.")
    cwd = repo / "pkg"
    cwd.mkdir()
    (cwd / "AGENTS.md").write_text("This package is pure.")
    model = ScriptedModel([text_response("ok")])
    async with serving(cwd, model) as (ui, http):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES), req("2", "context.inspect", include_agents=True)
        )
        agents = (await ui.answer("2"))["result"]["agents"]
        await ui.server.send(req("3", "run.start", input={"type": "text", "text": "go"}))
        run_id = (await ui.answer("3"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        await finish(ui)
    assert agents["root"] == str(repo)
    assert [(f["scope"], f["path"]) for f in agents["files"]] == [
        ("global", str(home / "AGENTS.md")),
        ("project", str(repo / "AGENTS.md")),
        ("project", str(cwd / "AGENTS.md")),
    ]
    assert agents["truncated"] is False
    assert (
        agents["text"]
        == "Answer in English.\n\nRun the tests with pytest.\n\nThis package is pure."
    )
    instructions = contextual_input(http.model.requests[0])[0]
    assert instructions == f"<user_instructions>\n\n{agents['text']}\n\n</user_instructions>"
