"""The real Codelia TUI over ``codexcore serve --stdio`` (issue 16): a plan drawn as its
todo checklist, an image the model viewed, and the skills picker feeding a run.

Same harness as tests/test_codelia_tui.py (tmux, the pinned TUI binary, a scripted model).
"""

from __future__ import annotations

import re
import struct
import time
import zlib
from pathlib import Path

import pytest

from codexcore.testing import ScriptedModel, function_call_response, text_response

from .codelia_tui import SEE_SCREEN, CodeliaTui
from .test_codelia_tui import Setup, finish, session

pytestmark = pytest.mark.timeout(45)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_a_plan_is_drawn_as_a_checklist(setup: Setup) -> None:
    plan = {
        "plan": [
            {"step": "Read the parser", "status": "completed"},
            {"step": "Fix the tokenizer", "status": "in_progress"},
            {"step": "Run the suite", "status": "pending"},
        ]
    }
    model = ScriptedModel(
        [function_call_response("update_plan", plan, call_id="c1"), text_response("Planned.")]
    )
    with session(setup, model) as s:
        s.tui.ready()
        s.tui.submit("Plan the fix.")
        s.tui.wait_for(r"Planned\.")
        s.tui.wait_for(r"^● completed$")
        screen = s.tui.screen()
        # Codelia's todo rendering: the call, the counts, then one checkbox line per step.
        assert re.search(r"^✔ TODO: Set 3 task\(s\)$", screen, re.M), SEE_SCREEN
        assert "1 pending, 1 in progress, 1 completed" in screen, SEE_SCREEN
        for line in ("1. [x] Read the parser", "2. [>] Fix the tokenizer", "3. [ ] Run the suite"):
            assert re.search(rf"^\s+{re.escape(line)}$", screen, re.M), SEE_SCREEN
        finish(s.tui)


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0\0\0\0"))
    )


def test_an_image_the_model_viewed_is_shown_and_sent(setup: Setup) -> None:
    (setup.workspace / "shot.png").write_bytes(_png())
    model = ScriptedModel(
        [
            function_call_response("view_image", {"path": "shot.png"}, call_id="v1"),
            text_response("A green pixel."),
        ]
    )
    with session(setup, model) as s:
        s.tui.ready()
        s.tui.submit("What is in shot.png?")
        s.tui.wait_for(r"A green pixel\.")
        s.tui.wait_for(r"^● completed$")
        assert "data:image/png;base64," in s.request_text(1)
        assert "shot.png" in s.tui.screen(), SEE_SCREEN
        finish(s.tui)


def test_the_skills_picker_lists_skills_and_a_picked_one_reaches_the_model(setup: Setup) -> None:
    skill = setup.home / "skills" / "release-notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        "---\nname: release-notes\ndescription: Write release notes from the git log\n---\n"
        "Group the changes by area.\n"
    )
    broken = setup.workspace / ".codexcore" / "skills" / "broken" / "SKILL.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("no front matter here\n")
    model = ScriptedModel([text_response("Notes written.")])
    with session(setup, model) as s:
        s.tui.ready()
        open_skills_picker(s.tui)
        s.tui.wait_for(r"release-notes")
        s.tui.press("Enter")
        s.tui.wait_for(r"Inserted skill mention: \$release-notes")
        s.tui.submit(" please")
        s.tui.wait_for(r"Notes written\.")
        s.tui.wait_for(r"^● completed$")
        body = s.request_text(0)
        assert "<skill>\\n<name>release-notes</name>" in body
        assert "Group the changes by area." in body
        # The catalogue went with the first request too, the malformed skill not in it.
        assert "- release-notes: Write release notes from the git log" in body
        assert "broken" not in body.split("<skills_instructions>")[1].split("</skills")[0]
        finish(s.tui)


def test_an_initial_message_waits_for_skills_list_and_then_runs(setup: Setup) -> None:
    # The TUI holds --initial-message until model.list and skills.list (asked for since
    # supports_skills_list is true) are answered; then it runs, and its $mention is
    # attached by the engine.
    skill = setup.home / "skills" / "hello" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: hello\ndescription: Greet the user\n---\nSay hello.\n")
    model = ScriptedModel([text_response("Hello from the initial message.")])
    with session(setup, model, "--initial-message", "Greet me with $hello") as s:
        s.tui.wait_for(r"Hello from the initial message\.")
        s.tui.wait_for(r"^● completed$")
        assert "<name>hello</name>" in s.request_text(0)
        finish(s.tui)


def open_skills_picker(tui: CodeliaTui, *, within: float = 15.0) -> None:
    """``/skills``, again while the TUI says its own start-up ``skills.list`` is still
    running (it refuses a second one then, as a user would see and retry)."""
    busy = "Skills list request already running"
    deadline = time.monotonic() + within
    while True:
        refused = tui.screen().count(busy)
        tui.submit("/skills")
        while time.monotonic() < deadline:
            screen = tui.screen()
            if re.search(r"Skills picker \(1\)", screen):
                return
            if screen.count(busy) > refused:
                break  # refused: the start-up request is still out; retry once it is done
            time.sleep(0.05)
        else:
            raise AssertionError(f"the skills picker never opened{SEE_SCREEN}")
        time.sleep(0.3)
