"""The real Codelia TUI answers the model's questions (``ui.pick.request``, a secret
``ui.prompt.request``) over ``codexcore serve --stdio``. Harness: tests/codelia_tui.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codexcore.testing import ScriptedModel, function_call_response, text_response

from .codelia_tui import SEE_SCREEN
from .test_codelia_tui import Setup, finish, session

pytestmark = pytest.mark.timeout(45)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


QUESTIONS = {
    "questions": [
        {
            "id": "db",
            "header": "Storage",
            "question": "Where to keep notes?",
            "options": [
                {"label": "SQLite", "description": "One file."},
                {"label": "JSON files", "description": "Plain files."},
            ],
        },
        {"id": "tok", "header": "Token", "question": "Your token?", "isSecret": True},
    ]
}


def test_the_tui_picks_an_option_and_types_a_secret_for_the_model(setup: Setup) -> None:
    model = ScriptedModel(
        [
            function_call_response("request_user_input", QUESTIONS, call_id="a1"),
            text_response("Noted."),
        ]
    )
    with session(setup, model) as s:
        s.tui.ready()
        s.tui.submit("Ask me.")
        s.tui.wait_for(r"Storage: Where to keep notes\?")
        s.tui.wait_for(r"^\s+>\s+SQLite - One file\.$")
        s.tui.wait_for(r"^\s+Other - answer in your own words$")
        s.tui.press("Down")
        s.tui.press("Enter")
        s.tui.wait_for(r"^\s+Your token\?$")
        s.tui.type("hunter2")
        s.tui.press("Enter")
        s.tui.wait_for(r"Noted\.")
        s.tui.wait_for(r"^● completed$")
        assert "hunter2" not in s.tui.screen(), SEE_SCREEN  # a secret is not echoed
        outputs = [
            item["output"]
            for item in s.model.requests[1]["input"]
            if item.get("type") == "function_call_output"
        ]
        assert json.loads(outputs[0])["answers"] == {
            "db": {"answers": ["JSON files"]},
            "tok": {"answers": ["hunter2"]},
        }
        finish(s.tui)
