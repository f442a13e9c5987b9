"""Seed 000's ``context.inspect``, ``ui.context.update`` and ``tool.call`` over a real
``codexcore serve --stdio``, with a scripted model.

``ui.context.update`` is sent as the seed (and Codelia's runtime) has it: a
notification. Commands run under danger-full-access (the test's config.toml), so
the tests hold on a machine without bubblewrap; tests/test_jsonrpc_shell.py
covers the sandbox's confinement of the same engine op.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from codexcore.adapters.jsonrpc.codelia._context import MAX_SELECTED_TEXT, ui_context_part
from codexcore.protocol import TextInput
from codexcore.testing import ScriptedModel, text_response

from .test_codelia import finish, req, serving, tui_initialize

pytestmark = pytest.mark.anyio

SELECTION = {
    "path": "src/app.ts",
    "range": {"start": {"line": 3, "column": 0}, "end": {"line": 4, "column": 0}},
    "selected_text": "const answer = 42;\n",
}


@pytest.fixture(autouse=True)
def clean_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


def full_access() -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "config.toml").write_text('sandbox_mode = "danger-full-access"\n')


def note(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def ui_context_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``<ui_context>`` blocks in a model request's user messages, decoded."""
    blocks = []
    for item in body["input"]:
        for part in item.get("content") or []:
            text = part.get("text", "") if isinstance(part, dict) else ""
            if text.startswith("<ui_context>\n"):
                inner = text.removeprefix("<ui_context>\n").removesuffix("\n</ui_context>")
                blocks.append(json.loads(inner))
    return blocks


async def test_context_inspect_answers_the_runtime_dirs_and_the_kept_ui_context(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([])
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(tui_initialize(), req("2", "context.inspect"))
        capabilities = (await ui.answer("1"))["result"]["server_capabilities"]
        assert capabilities["supports_context_inspect"] is True
        assert capabilities["supports_tool_call"] is True
        before = (await ui.answer("2"))["result"]
        assert before == {
            "runtime_working_dir": str(tmp_path),
            "runtime_sandbox_root": str(tmp_path),
            "ui_context": {},
        }
        await ui.server.send(
            note("ui.context.update", cwd="/w/app", workspace_root="/w"),
            note("ui.context.update", active_file={"path": "src/app.ts", "language_id": "ts"}),
            req("3", "context.inspect", include_agents=True, include_skills=True),
        )
        after = await ui.answer("3")  # the notifications got no answer: this is the next line
        assert after["result"]["ui_context"] == {
            "cwd": "/w/app",
            "workspace_root": "/w",
            "active_file_path": "src/app.ts",
        }
        # No AGENTS.md anywhere: the answer says so (the engine sends none).
        assert after["result"]["agents"] == {
            "root": str(tmp_path),
            "max_bytes": 32768,
            "truncated": False,
            "files": [],
            "text": "",
        }
        # Issue 16: include_skills answers the (here empty) catalogue.
        assert after["result"]["skills"] == {
            "root_dir": str(tmp_path),
            "working_dir": str(tmp_path),
            "catalog": {"skills": [], "errors": [], "truncated": False},
            "loaded_versions": [],
        }
        await finish(ui)
    assert [m.get("id") for m in ui.server.seen if "method" not in m] == ["1", "2", "3"]


async def test_the_kept_ui_context_reaches_the_models_next_request(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("Seen."), text_response("Again.")])
    async with serving(tmp_path, model) as (ui, http):
        await ui.server.send(
            tui_initialize(),
            note("ui.context.update", cwd="/w/app", selection=SELECTION),
            req(
                "2",
                "run.start",
                input={"type": "text", "text": "explain the selection"},
                ui_context={"active_file": {"path": "src/app.ts"}},
            ),
        )
        first = (await ui.answer("2"))["result"]["run_id"]
        assert await ui.run_to_end(first) == "completed"
        await ui.server.send(
            note("ui.context.update", cwd="/w/other"),
            req("3", "run.start", input={"type": "text", "text": "and now?"}),
        )
        second = (await ui.answer("3"))["result"]["run_id"]
        assert await ui.run_to_end(second) == "completed"
        await finish(ui)
    first_body, second_body = http.model.requests
    merged = {"cwd": "/w/app", "selection": SELECTION, "active_file": {"path": "src/app.ts"}}
    assert ui_context_blocks(first_body) == [merged]
    user = first_body["input"][-1]
    assert [p["text"] for p in user["content"]][1:] == ["explain the selection"]
    # The second run's own input carries the kept context again, with its update.
    assert ui_context_blocks({"input": [second_body["input"][-1]]}) == [
        {**merged, "cwd": "/w/other"}
    ]


async def test_a_bad_ui_context_in_run_start_is_refused_naming_the_field(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedModel([])) as (ui, http):
        await ui.server.send(
            tui_initialize(),
            req(
                "2",
                "run.start",
                input={"type": "text", "text": "hi"},
                ui_context={"selection": {"path": "a.ts"}},
            ),
        )
        error = (await ui.answer("2"))["error"]
        assert error["code"] == -32602
        assert "params.ui_context.selection.range" in error["message"]
        await finish(ui)
    assert http.model.requests == []


async def test_tool_call_shell_runs_the_command_and_answers_ok_and_its_result(
    tmp_path: Path,
) -> None:
    full_access()
    (tmp_path / "sub").mkdir()
    async with serving(tmp_path, ScriptedModel([])) as (ui, http):
        await ui.server.send(
            tui_initialize(),
            req("2", "tool.call", name="shell", arguments={"command": "pwd", "cwd": "sub"}),
            req("3", "tool.call", name="shell", arguments={"command": "echo no >&2; exit 3"}),
        )
        # Both run at once: either may be answered first.
        answers: dict[str, Any] = {}
        while len(answers) < 2:
            message = await ui.next()
            if message.get("id") in ("2", "3") and "method" not in message:
                answers[message["id"]] = message["result"]
        done, failed = answers["2"], answers["3"]
        await finish(ui)
    assert done["ok"] is True
    assert (done["result"]["exit_code"], done["result"]["stdout"]) == (0, f"{tmp_path / 'sub'}\n")
    assert failed["ok"] is False
    assert (failed["result"]["exit_code"], failed["result"]["stderr"]) == (3, "no\n")
    assert http.model.requests == []  # no Task: the model was never asked


async def all_answers(ui: Any, rids: tuple[str, ...]) -> dict[str, Any]:
    """The answers to ``rids``, in whatever order they come (calls run at once)."""
    found: dict[str, Any] = {}
    while len(found) < len(rids):
        message = await ui.next()
        if message.get("id") in rids and "method" not in message:
            found[message["id"]] = message
    return found


async def test_tool_call_refuses_unknown_tools_and_bad_arguments_naming_them(
    tmp_path: Path,
) -> None:
    full_access()
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(
            tui_initialize(),
            req("2", "tool.call", name="apply_patch", arguments={"patch": "x"}),
            req("3", "tool.call", name="shell", arguments={"cmd": "ls"}),
            req("4", "tool.call", name="shell", arguments={"command": 7}),
            req("5", "tool.call", name="shell"),
            req("6", "tool.call", name="shell", arguments={"command": "ls", "cwd": "/"}),
            req("7", "tool.call", name="view_image"),
            req("8", "tool.call", name="lane"),
        )
        found = await all_answers(ui, ("2", "3", "4", "5", "6", "7", "8"))
        errors = {rid: answer["error"] for rid, answer in found.items()}
        await finish(ui)
    assert {e["code"] for e in errors.values()} == {-32602}
    assert "params.arguments.patch: not applied: invalid patch" in errors["2"]["message"]
    assert "params.arguments.command: missing required field" in errors["3"]["message"]
    assert "params.arguments.command: expected a string" in errors["4"]["message"]
    # arguments is optional, as in the protocol: the tool names what it misses.
    assert "params.arguments.command: missing required field" in errors["5"]["message"]
    assert "params.arguments.cwd" in errors["6"]["message"]
    assert "'view_image' cannot run outside a Task" in errors["7"]["message"]
    assert (
        "unknown tool 'lane' (tool.call serves: shell, read_file, tool_output_cache, apply_patch)"
        in errors["8"]["message"]
    )


async def test_tool_call_read_file_reads_inside_the_sandbox_root_only(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\nworld\n")
    (tmp_path / "big.txt").write_text("x" * 100)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret")
    (tmp_path / "link.txt").symlink_to(outside)
    async with serving(tmp_path, ScriptedModel([])) as (ui, http):
        await ui.server.send(
            tui_initialize(),
            req("2", "tool.call", name="read_file", arguments={"path": "notes.txt"}),
            req("3", "tool.call", name="read_file", arguments={"path": "big.txt", "max_bytes": 10}),
            req("4", "tool.call", name="read_file", arguments={"path": str(outside)}),
            req("5", "tool.call", name="read_file", arguments={"path": "link.txt"}),
            req("6", "tool.call", name="read_file", arguments={"path": "."}),
        )
        answers = await all_answers(ui, ("2", "3", "4", "5", "6"))
        await finish(ui)
    assert answers["2"]["result"] == {
        "ok": True,
        "result": {
            "path": str(tmp_path / "notes.txt"),
            "content": "hello\nworld\n",
            "size_bytes": 12,
            "truncated": False,
        },
    }
    cut = answers["3"]["result"]["result"]
    assert (cut["content"], cut["size_bytes"], cut["truncated"]) == ("x" * 10, 100, True)
    for rid in ("4", "5", "6"):
        error = answers[rid]["error"]
        assert error["code"] == -32602, error
        assert "params.arguments.path" in error["message"]
        assert "secret" not in error["message"]
    assert http.model.requests == []


def test_a_long_selection_reaches_the_model_cut_and_saying_so() -> None:
    text = "x" * (MAX_SELECTED_TEXT + 5)
    (part,) = ui_context_part({"selection": {**SELECTION, "selected_text": text}})
    assert isinstance(part, TextInput)
    shown = ui_context_blocks({"input": [{"content": [{"text": part.text}]}]})
    assert shown[0]["selection"]["selected_text"] == "x" * MAX_SELECTED_TEXT + "...[5 more]"
    assert ui_context_part({}) == ()


async def test_ui_context_update_sent_as_a_request_is_kept_and_answered_null(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(
            tui_initialize(),
            req("2", "ui.context.update", workspace_root="/w"),
            req("3", "ui.context.update", active_file={"language_id": "ts"}),
            req("4", "context.inspect"),
        )
        assert (await ui.answer("2"))["result"] is None
        error = (await ui.answer("3"))["error"]
        assert error["code"] == -32602
        assert "params.active_file.path: missing required field" in error["message"]
        assert (await ui.answer("4"))["result"]["ui_context"] == {"workspace_root": "/w"}
        await finish(ui)
