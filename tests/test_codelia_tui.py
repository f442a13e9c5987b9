"""The real Codelia TUI, unchanged, drives ``codexcore serve --stdio`` (issue 21).

Each test starts the published TUI binary in tmux with its runtime set to
``python -m codexcore serve --stdio`` against a scripted model, types into it as
a user would, and reads the screen. See tests/codelia_tui.py for the harness.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from codexcore.engine import list_sessions
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

from .codelia_tui import SEE_SCREEN, CodeliaTui, write_config

MODEL = "gpt-tui-test"
# Each test takes about a second; its waits are bounded (15 s each), this bounds the whole.
pytestmark = pytest.mark.timeout(45)


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.home = tmp_path / "codexcore-home"
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir()


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


class Session:
    """A scripted model, codexcore's config pointing at it, and the TUI."""

    def __init__(self, model: ScriptedModel, http: ScriptedResponsesServer, tui: CodeliaTui):
        self.model = model
        self.http = http
        self.tui = tui

    def request_text(self, index: int) -> str:
        """The model's ``index``-th request body, as JSON text."""
        assert len(self.model.requests) > index, (
            f"the model got {len(self.model.requests)} request(s), wanted #{index}{SEE_SCREEN}"
        )
        return orjson.dumps(self.model.requests[index]).decode()


@contextlib.contextmanager
def session(setup: Setup, model: ScriptedModel, *args: str, **settings: str) -> Iterator[Session]:
    """The TUI (given ``args``) over codexcore configured with ``settings``."""
    with ScriptedResponsesServer(model) as http:
        write_config(setup.home, http.base_url, MODEL, **settings)
        with CodeliaTui.running(
            cwd=setup.workspace, home=setup.home, tmp=setup.tmp, args=args
        ) as tui:
            yield Session(model, http, tui)


def finish(tui: CodeliaTui, *, expected: str | None = None) -> None:
    """No error, failed-tool or unknown-event line anywhere (but those matching
    ``expected``); Ctrl-C quits cleanly."""
    problems = [line for line in tui.problems() if not (expected and re.search(expected, line))]
    assert problems == [], SEE_SCREEN
    assert tui.quit() == 0, SEE_SCREEN


def test_a_plain_answer_and_its_reasoning_render_once_with_the_model_in_the_status_bar(
    setup: Setup,
) -> None:
    answer = "Paris is the capital of France, says the scripted model."
    thought = "The user asks about geography; recall the capital."
    model = ScriptedModel([text_response(answer, reasoning=thought)])
    with session(setup, model, reasoning_effort="high") as s:
        bar = s.tui.ready()
        assert bar.groupdict() == {"provider": "openai", "model": MODEL, "reasoning": "high"}, (
            SEE_SCREEN
        )

        s.tui.submit("What is the capital of France?")
        s.tui.wait_for(re.escape(answer))
        s.tui.wait_for(r"^● completed$")

        # The typed prompt reached the model through run.start.
        assert "What is the capital of France?" in s.request_text(0)
        # The reasoning is drawn as its own block; a `final` equal to the last `text`
        # is drawn once, not twice.
        assert s.tui.screen().count(thought) == 1, SEE_SCREEN
        assert s.tui.screen().count(answer) == 1, SEE_SCREEN
        finish(s.tui)


def test_a_command_runs_and_its_output_replaces_the_pending_call(setup: Setup) -> None:
    # The command's text and its output differ (the shell does the arithmetic), so
    # the output on screen can only come from running it.
    model = ScriptedModel(
        [shell_call(["sh", "-c", "echo tui-out-$((6*7))"]), text_response("The command ran.")]
    )
    with session(setup, model, approval_policy="never") as s:
        s.tui.ready()
        s.tui.submit("Run the arithmetic command.")
        s.tui.wait_for(r"The command ran\.")
        s.tui.wait_for(r"^● completed$")

        screen = s.tui.screen()
        # Codelia draws a finished shell call as `✔ Shell: COMMAND (N ms)`, in place of
        # the pending `Shell: COMMAND` line, then the output's lines.
        assert re.search(r"^✔ Shell: .*echo tui-out-\$\(\(6\*7\)\)", screen, re.M), SEE_SCREEN
        assert not re.search(r"^Shell: ", screen, re.M), SEE_SCREEN
        assert re.search(r"^\s+tui-out-42$", screen, re.M), SEE_SCREEN
        # ... and the model got the output.
        assert "tui-out-42" in s.request_text(1)
        finish(s.tui)


def test_a_failing_command_is_drawn_failed_with_its_exit_code_and_stderr(setup: Setup) -> None:
    model = ScriptedModel(
        [
            shell_call(["sh", "-c", "echo broke-$((6*7)) >&2; exit 3"]),
            text_response("It failed."),
        ]
    )
    with session(setup, model, approval_policy="never") as s:
        s.tui.ready()
        s.tui.submit("Run the broken command.")
        s.tui.wait_for(r"It failed\.")
        s.tui.wait_for(r"^● completed$")

        screen = s.tui.screen()
        assert re.search(r"^✖ Shell failed - .*exit 3", screen, re.M), SEE_SCREEN
        assert re.search(r"^\s+Exit code: 3$", screen, re.M), SEE_SCREEN
        assert re.search(r"^\s+broke-42$", screen, re.M), SEE_SCREEN
        finish(s.tui, expected=r"Shell failed")


def test_a_command_confirmed_in_the_dialog_runs(setup: Setup) -> None:
    model = ScriptedModel(
        [shell_call(["sh", "-c", "echo confirmed-$((6*7))"]), text_response("Approved and ran.")]
    )
    with session(setup, model, approval_policy="untrusted") as s:
        s.tui.ready()
        s.tui.submit("Run it once I approve.")

        # The dialog: the command, then three choices (approve, approve and remember,
        # deny with a reason), the first selected; `y` approves whatever its label.
        s.tui.wait_for(r"Command: .*echo confirmed-\$\(\(6\*7\)\)")
        label = re.escape(s.tui.wait_for(r"^\s+> 1\. (\S+)$")[1])
        s.tui.wait_for(rf"^\s+2\. {label} \(don't ask again\)$")
        s.tui.wait_for(r"^\s+3\. \S+ \(Tab to add reason\)$")
        assert "confirmed-42" not in s.tui.screen(), SEE_SCREEN
        assert len(s.model.requests) == 1, SEE_SCREEN

        s.tui.press("y")
        s.tui.wait_for(r"Approved and ran\.")
        s.tui.wait_for(r"^● completed$")

        screen = s.tui.screen()
        assert re.search(r"^✔ Shell: .*echo confirmed-\$\(\(6\*7\)\)", screen, re.M), SEE_SCREEN
        assert re.search(r"^\s+confirmed-42$", screen, re.M), SEE_SCREEN
        assert "confirmed-42" in s.request_text(1)
        finish(s.tui)


def test_dont_ask_again_approves_the_same_command_for_the_rest_of_the_session(
    setup: Setup,
) -> None:
    command = ["sh", "-c", "echo again-$((6*7))"]
    model = ScriptedModel(
        [
            shell_call(command),
            text_response("First run."),
            shell_call(command),
            text_response("Second run."),
        ]
    )
    with session(setup, model, approval_policy="untrusted") as s:
        s.tui.ready()
        s.tui.submit("Run it.")
        s.tui.wait_for(r"^\s+2\. \S+ \(don't ask again\)$")
        s.tui.press("2")  # select "don't ask again", then confirm it
        s.tui.press("Enter")
        s.tui.wait_for(r"First run\.")
        s.tui.wait_for(r"^● completed$")

        # The same command again: it runs with no dialog (one would hold the run).
        s.tui.submit("Run it again.")
        s.tui.wait_for(r"Second run\.")
        assert len(re.findall(r"^\s+again-42$", s.tui.screen(), re.M)) == 2, SEE_SCREEN
        finish(s.tui)


def test_a_command_denied_with_a_reason_does_not_run_and_the_model_hears_why(
    setup: Setup,
) -> None:
    model = ScriptedModel(
        [shell_call(["sh", "-c", "echo denied-$((6*7))"]), text_response("Not running it.")]
    )
    with session(setup, model, approval_policy="untrusted") as s:
        s.tui.ready()
        s.tui.submit("Run it if I agree.")
        s.tui.wait_for(r"Tab to add reason")

        # Tab selects the last choice (deny) and opens the reason field.
        s.tui.press("Tab")
        s.tui.type("not on a Friday")
        s.tui.press("Enter")
        s.tui.wait_for(r"Not running it\.")
        s.tui.wait_for(r"^● completed$")

        # The call is drawn failed, with the reason; the command never ran.
        s.tui.wait_for(r"^✖ .*not on a Friday")
        assert "denied-42" not in s.tui.screen(), SEE_SCREEN
        assert "not on a Friday" in s.request_text(1)
        finish(s.tui, expected="not on a Friday")


def test_a_bang_command_runs_by_shell_exec_and_reaches_the_model_once(setup: Setup) -> None:
    # `!COMMAND` is the TUI's bang mode: shell.exec runs it with no model request;
    # the TUI queues its result and puts it, as a <shell_result> block, before the
    # next prompt (Codelia's dev-docs/specs/tui-bang-shell-mode.md: "Execution result
    # is not sent to model at execution time"), so the model must see it once.
    model = ScriptedModel([text_response("I saw it.")])
    with session(setup, model) as s:
        s.tui.ready()
        s.tui.type("!")
        s.tui.submit("echo bang-$((6*7))")
        s.tui.wait_for(r"^bang exec done: exit=0")
        s.tui.wait_for(r"^\s+bang-42$")
        assert model.requests == [], SEE_SCREEN

        s.tui.submit("What did it print?")
        s.tui.wait_for(r"I saw it\.")
        s.tui.wait_for(r"^● completed$")
        request = s.request_text(0)
        assert "<shell_result>" in request, SEE_SCREEN
        given = s.model.requests[0]["input"]
        assert request.count("bang-42") == 1, f"the model got the output more than once: {given}"
        finish(s.tui)


def test_the_tuis_approval_mode_reaches_the_runtime(setup: Setup) -> None:
    # The TUI appends `--approval-mode full-access` to the runtime's arguments; it
    # overrides config.toml's `untrusted`, so the command runs without a dialog.
    model = ScriptedModel(
        [shell_call(["sh", "-c", "echo trusted-$((6*7))"]), text_response("Ran unasked.")]
    )
    with session(setup, model, "--approval-mode", "full-access", approval_policy="untrusted") as s:
        s.tui.ready()
        s.tui.submit("Run it without asking.")
        s.tui.wait_for(r"Ran unasked\.")
        s.tui.wait_for(r"^● completed$")

        screen = s.tui.screen()
        assert "don't ask again" not in screen, SEE_SCREEN
        assert re.search(r"^\s+trusted-42$", screen, re.M), SEE_SCREEN
        finish(s.tui)


def test_a_patch_shows_its_diff_before_the_dialog_and_applies_once_approved(
    setup: Setup,
) -> None:
    target = setup.workspace / "greeting.txt"
    target.write_text("hello\nworld\n")
    patch = (
        "*** Begin Patch\n*** Update File: greeting.txt\n@@\n-hello\n+hello, patched\n world\n"
        "*** End Patch"
    )
    model = ScriptedModel(
        [function_call_response("apply_patch", {"input": patch}), text_response("Patched it.")]
    )
    with session(setup, model, approval_policy="untrusted") as s:
        s.tui.ready()
        s.tui.submit("Patch the greeting.")

        # permission.preview draws the diff (line numbers, -/+ markers) above the dialog.
        s.tui.wait_for(r"don't ask again")
        screen = s.tui.screen()
        assert re.search(r"^\s+1 - hello$", screen, re.M), SEE_SCREEN
        assert re.search(r"^\s+1 \+ hello, patched$", screen, re.M), SEE_SCREEN
        assert target.read_text() == "hello\nworld\n"

        s.tui.press("y")
        s.tui.wait_for(r"Patched it\.")
        s.tui.wait_for(r"^● completed$")

        assert target.read_text() == "hello, patched\nworld\n"
        screen = s.tui.screen()
        # As Codelia draws it: the call counts the files its patch text touches.
        assert re.search(r"^✔ ApplyPatch: 1 file\(s\)$", screen, re.M), SEE_SCREEN
        # The result's diff equals the preview's: Codelia draws it once.
        assert len(re.findall(r"^\s+1 \+ hello, patched$", screen, re.M)) == 1, SEE_SCREEN
        finish(s.tui)


def test_ctrl_c_cancels_a_running_command_and_the_next_prompt_works(setup: Setup) -> None:
    model = ScriptedModel(
        [
            shell_call(["sh", "-c", "echo started; sleep 30; echo never-printed"]),
            text_response("Ready again."),
        ]
    )
    with session(setup, model, approval_policy="never") as s:
        s.tui.ready()
        s.tui.submit("Run the long command.")
        # The sleep itself: "started" is echoed then (the shell's own line, which
        # names "sleep 30" too, exists before it has echoed anything).
        s.tui.wait_for_process("sleep 30", whole=True)

        # Ctrl-C during a run sends run.cancel; the command's process group is killed.
        s.tui.press("C-c")
        s.tui.wait_for(r"Cancel requested")
        s.tui.wait_for(r"runtime status: cancelled")
        s.tui.wait_no_process("sleep 30", within=5)
        screen = s.tui.screen()
        # The call is drawn as run and stopped: its output so far, never what
        # would have followed (the command line itself names "never-printed").
        assert re.search(r"^\s+started$", screen, re.M), SEE_SCREEN
        assert not re.search(r"^\s+never-printed$", screen, re.M), SEE_SCREEN
        assert "command interrupted by the user" in screen, SEE_SCREEN

        s.tui.submit("Are you still there?")
        s.tui.wait_for(r"Ready again\.")
        s.tui.wait_for(r"^● completed$")
        assert "Are you still there?" in s.request_text(1)
        # The interrupted call is drawn as failed; nothing else went wrong.
        finish(s.tui, expected=r"(?i)aborted|cancel|Shell failed - sh -c 'echo started")


@pytest.mark.parametrize("sandbox", ["workspace-write", "danger-full-access"])
def test_force_quitting_mid_command_leaves_no_process(setup: Setup, sandbox: str) -> None:
    # Ctrl-C twice quickly: the TUI exits and SIGKILLs its runtime; the command it
    # was running must not outlive it, sandboxed or not.
    model = ScriptedModel([shell_call(["sh", "-c", "sleep 31"]), text_response("Never.")])
    with session(setup, model, approval_policy="never", sandbox_mode=sandbox) as s:
        s.tui.ready()
        s.tui.submit("Run the long command.")
        s.tui.wait_for_process("sleep 31")
        assert s.tui.quit(presses=2) == 0, SEE_SCREEN


def test_slash_compact_compacts_and_the_next_answer_goes_on_from_the_summary(
    setup: Setup,
) -> None:
    model = ScriptedModel(
        [
            text_response("Lyon is second."),
            text_response("The user asks about French cities; Lyon was named."),
            text_response("After compacting, still Lyon."),
        ]
    )
    with session(setup, model) as s:
        s.tui.ready()
        s.tui.submit("Which French city is second by size?")
        s.tui.wait_for(r"Lyon is second\.")
        s.tui.wait_for(r"^● completed$")

        # The TUI's /compact is run.start with force_compaction: the model summarises.
        s.tui.submit("/compact")
        s.tui.wait_for(r"Compaction: completed \(compacted=true\)")
        assert "Compact this conversation" in s.request_text(1), SEE_SCREEN

        s.tui.submit("And still?")
        s.tui.wait_for(r"After compacting, still Lyon\.")
        # The next request starts a new chain from the summary, not from the old answer.
        third = s.request_text(2)
        assert "The user asks about French cities" in third, SEE_SCREEN
        assert "previous_response_id" not in third, SEE_SCREEN


def test_a_resumed_session_redraws_its_prompts_and_answers(setup: Setup) -> None:
    """``--resume ID``: the TUI replays the session (session.history) before going on;
    each past prompt is drawn as the user typed it (hidden_user_message), then its answer."""
    question, answer = "What is the capital of France?", "Paris, says the scripted model."
    with session(setup, ScriptedModel([text_response(answer)])) as s:
        s.tui.ready()
        s.tui.submit(question)
        s.tui.wait_for(r"^● completed$")
        finish(s.tui)
    (recorded,) = list_sessions(setup.home)
    with session(setup, ScriptedModel([]), "--resume", recorded.session_id) as s:
        s.tui.ready()
        shown = s.tui.wait_for(rf"^\s*> {re.escape(question)}$(?s:.*){re.escape(answer)}")
        assert shown.group(0).count(question) == 1, SEE_SCREEN
        s.tui.wait_for(r"^History restored: \d+ events from 1 runs$")
        finish(s.tui)
