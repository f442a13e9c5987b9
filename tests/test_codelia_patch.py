"""``tool.call apply_patch`` over a real ``codexcore serve --stdio``: the engine's rules
for a patch, with the UI asked where they ask, and -32003 when the user says no."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel

from .test_codelia import Ui, finish, req, serving, tui_initialize

pytestmark = pytest.mark.anyio


def add_file(path: str, text: str = "hello") -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+{text}\n*** End Patch\n"


def patch_call(rid: str, patch: str) -> dict[str, Any]:
    return req(rid, "tool.call", name="apply_patch", arguments={"patch": patch})


def config(**settings: str) -> None:
    lines = "".join(f'{key} = "{value}"\n' for key, value in settings.items())
    (Path(os.environ["CODEXCORE_HOME"]) / "config.toml").write_text(lines)


async def confirm(ui: Ui, ok: bool) -> dict[str, Any]:
    request = await ui.until("ui.confirm.request")
    await ui.server.send({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": ok}})
    return request


async def test_a_patch_inside_the_workspace_applies_unasked(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedModel([])) as (ui, http):
        await ui.server.send(
            tui_initialize(supports_confirm=True), patch_call("2", add_file("a.txt"))
        )
        answer = await ui.answer("2")
        await finish(ui)
    assert answer["result"] == {
        "ok": True,
        "result": {
            "summary": answer["result"]["result"]["summary"],
            "files": [str(tmp_path / "a.txt")],
        },
    }
    assert "a.txt" in answer["result"]["result"]["summary"]
    assert (tmp_path / "a.txt").read_text() == "hello\n"
    assert not any(m.get("method") == "ui.confirm.request" for m in ui.server.seen)
    assert http.model.requests == []  # the model never hears of it


async def test_a_patch_outside_is_asked_and_a_no_is_user_cancelled(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside.txt"
    work.mkdir()
    async with serving(work, ScriptedModel([])) as (ui, _):
        await ui.server.send(
            tui_initialize(supports_confirm=True), patch_call("2", add_file(str(outside)))
        )
        request = await confirm(ui, False)
        assert request["params"]["title"] == "Apply patch?"
        assert str(outside) in request["params"]["message"]
        denied = await ui.answer("2")
        assert denied["error"]["code"] == -32003
        assert not outside.exists()
        await ui.server.send(patch_call("3", add_file(str(outside))))
        await confirm(ui, True)
        assert (await ui.answer("3"))["result"]["ok"] is True
        await finish(ui)
    assert outside.read_text() == "hello\n"


async def test_untrusted_asks_even_inside_and_git_is_protected(tmp_path: Path) -> None:
    config(approval_policy="untrusted")
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(
            tui_initialize(supports_confirm=True), patch_call("2", add_file("b.txt"))
        )
        await confirm(ui, True)
        assert (await ui.answer("2"))["result"]["ok"] is True
        await finish(ui)
    assert (tmp_path / "b.txt").exists()
    config()
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(
            tui_initialize(supports_confirm=True), patch_call("2", add_file(".git/hooks/x"))
        )
        request = await confirm(ui, False)
        assert ".git/hooks/x" in request["params"]["message"]
        assert (await ui.answer("2"))["error"]["code"] == -32003
        await finish(ui)
    assert not (tmp_path / ".git").exists()


async def test_never_refuses_what_needs_asking_and_a_bad_patch_is_named(tmp_path: Path) -> None:
    config(approval_policy="never")
    outside = tmp_path.parent / f"{tmp_path.name}-never.txt"
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(
            tui_initialize(supports_confirm=True), patch_call("2", add_file(str(outside)))
        )
        refused = await ui.answer("2")
        await ui.server.send(patch_call("3", "not a patch"))
        bad = await ui.answer("3")
        await finish(ui)
    assert refused["error"]["code"] == -32000
    assert "never asks" in refused["error"]["message"]
    assert not outside.exists()
    assert bad["error"]["code"] == -32602
    assert "params.arguments.patch" in bad["error"]["message"]
