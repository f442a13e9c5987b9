"""Patches, turn diffs and the sandbox, through the engine with a scripted model."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    function_call_response,
    shell_call,
    text_response,
)
from codexcore.tools.sandbox import probe_sandbox

from .engine_helpers import running_engine
from .flows import outputs_sent
from .test_engine import say

pytestmark = pytest.mark.anyio

needs_bwrap = pytest.mark.skipif(
    probe_sandbox().kind != "bwrap", reason=f"no working bubblewrap: {probe_sandbox().reason}"
)

PATCH = """*** Begin Patch
*** Update File: app.py
@@
-print("hello")
+print("hello, world")
*** End Patch"""


def patch_call(patch: str = PATCH, call_id: str = "p1") -> ScriptedResponse:
    return function_call_response("apply_patch", {"input": patch}, call_id=call_id)


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A directory outside /tmp: inside the sandbox /tmp is private, so writes
    there vanish rather than fail, which would hide what these tests check."""
    path = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="codexcore-test-"))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "app.py").write_text('print("hello")\n')
    return root


async def test_patch_inside_the_workspace_is_auto_approved(workspace: Path) -> None:
    model = ScriptedModel([patch_call(), text_response("patched")])
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("fix it"))
        await ui.until(p.TaskComplete)
    assert (workspace / "app.py").read_text() == 'print("hello, world")\n'
    begin = ui.of(p.PatchApplyBegin)[0]
    assert begin.auto_approved
    change = begin.changes[str(workspace / "app.py")]
    assert isinstance(change, p.UpdateChange)
    assert '+print("hello, world")' in change.unified_diff
    end = ui.of(p.PatchApplyEnd)[0]
    assert end.success
    assert "M app.py" in end.stdout
    assert ui.types() == [
        "session_configured", "task_started", "patch_apply_begin", "patch_apply_end",
        "turn_diff", "turn_complete", "agent_message", "turn_complete", "task_complete",
    ]  # fmt: skip
    diff = ui.of(p.TurnDiff)[0].unified_diff
    assert diff.startswith("diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n")
    assert '-print("hello")\n+print("hello, world")\n' in diff
    assert "M app.py" in outputs_sent(model.requests[1])["p1"]


async def test_untrusted_asks_and_the_ui_approves(workspace: Path) -> None:
    model = ScriptedModel([patch_call(), text_response("patched")])
    async with running_engine(model, workspace, approval_policy="untrusted") as ui:
        await ui.submit(say("fix it"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert list(request.msg.changes) == [str(workspace / "app.py")]
        assert (workspace / "app.py").read_text() == 'print("hello")\n'  # not before approval
        await ui.submit(p.PatchApproval("p1", "approved"))
        await ui.until(p.TaskComplete)
    assert (workspace / "app.py").read_text() == 'print("hello, world")\n'
    assert not ui.of(p.PatchApplyBegin)[0].auto_approved
    assert len(ui.of(p.TurnDiff)) == 1


async def test_a_denied_patch_leaves_the_file_as_it_was(workspace: Path) -> None:
    model = ScriptedModel([patch_call(), text_response("ok, not patching")])
    async with running_engine(model, workspace, approval_policy="untrusted") as ui:
        await ui.submit(say("fix it"))
        await ui.until(p.ApplyPatchApprovalRequest)
        await ui.submit(p.PatchApproval("p1", "denied"))
        await ui.until(p.TaskComplete)
    assert (workspace / "app.py").read_text() == 'print("hello")\n'
    assert ui.of(p.PatchApplyBegin) == []
    assert ui.of(p.TurnDiff) == []
    assert "denied" in outputs_sent(model.requests[1])["p1"]


async def test_patch_outside_the_roots_asks_and_approval_for_session_covers_the_root(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    first = f"*** Begin Patch\n*** Add File: {outside}/a.txt\n+one\n*** End Patch"
    second = f"*** Begin Patch\n*** Add File: {outside}/b.txt\n+two\n*** End Patch"
    model = ScriptedModel(
        [patch_call(first, "p1"), patch_call(second, "p2"), text_response("both written")]
    )
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("write outside"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert request.msg.grant_root == str(outside)
        assert request.msg.reason == "writes outside the writable roots"
        await ui.submit(p.PatchApproval("p1", "approved_for_session"))
        await ui.until(p.TaskComplete)
    assert (outside / "a.txt").read_text() == "one\n"
    assert (outside / "b.txt").read_text() == "two\n"
    assert len(ui.of(p.ApplyPatchApprovalRequest)) == 1
    assert [b.auto_approved for b in ui.of(p.PatchApplyBegin)] == [False, True]


async def test_read_only_sessions_always_ask_for_patches(workspace: Path) -> None:
    model = ScriptedModel([patch_call(), text_response("asked")])
    async with running_engine(
        model, workspace, approval_policy="on-request", sandbox_policy=p.SandboxPolicy("read-only")
    ) as ui:
        await ui.submit(say("fix it"))
        await ui.until(p.ApplyPatchApprovalRequest)
        await ui.submit(p.PatchApproval("p1", "denied"))
        await ui.until(p.TaskComplete)


@pytest.mark.parametrize(
    "argv",
    [
        ["apply_patch", PATCH],
        ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH}\nEOF\n"],
    ],
    ids=["argv", "heredoc"],
)
async def test_patches_sent_through_the_shell_are_applied(workspace: Path, argv: list[str]) -> None:
    model = ScriptedModel([shell_call(argv, call_id="s1"), text_response("done")])
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("fix it"))
        await ui.until(p.TaskComplete)
    assert (workspace / "app.py").read_text() == 'print("hello, world")\n'
    assert ui.of(p.ExecCommandBegin) == []
    assert ui.of(p.PatchApplyEnd)[0].success


async def test_a_bare_patch_handed_to_the_shell_is_rejected(workspace: Path) -> None:
    model = ScriptedModel([shell_call([PATCH], call_id="s1"), text_response("oops")])
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("fix it"))
        await ui.until(p.TaskComplete)
    assert "a patch is not a command" in outputs_sent(model.requests[1])["s1"]
    assert ui.of(p.ExecCommandBegin) == []


async def test_a_patch_that_does_not_match_changes_nothing(workspace: Path) -> None:
    bad = PATCH.replace('-print("hello")', '-print("goodbye")')
    model = ScriptedModel([patch_call(bad), text_response("will retry")])
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("fix it"))
        await ui.until(p.TaskComplete)
    assert (workspace / "app.py").read_text() == 'print("hello")\n'
    output = outputs_sent(model.requests[1])["p1"]
    assert "nothing changed" in output
    assert "app.py" in output
    assert 'print("goodbye")' in output
    assert ui.of(p.TurnDiff) == []


async def test_turn_diff_covers_commands_too(workspace: Path) -> None:
    write = [sys.executable, "-c", "open('made.txt', 'w').write('by a command\\n')"]
    model = ScriptedModel(
        [shell_call(write, call_id="c1"), patch_call(call_id="p1"), text_response("done")]
    )
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("work"))
        await ui.until(p.TaskComplete)
    first, second = (d.unified_diff for d in ui.of(p.TurnDiff))
    assert "diff --git a/made.txt b/made.txt\nnew file mode 100644\n" in first
    assert "+by a command\n" in first
    assert "app.py" not in first
    assert "made.txt" not in second
    assert '+print("hello, world")' in second


# --- the sandbox, through the engine ----------------------------------------------------------


@needs_bwrap
async def test_workspace_write_confines_commands(workspace: Path, host_dir: Path) -> None:
    outside = host_dir / "outside.txt"
    script = f"open('inside.txt','w').write('ok'); open({str(outside)!r},'w').write('no')"
    model = ScriptedModel(
        [shell_call([sys.executable, "-c", script], call_id="c1"), text_response("tried")]
    )
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("write"))
        configured = await ui.until(p.SessionConfigured)
        assert configured.msg.sandbox == "bwrap"
        await ui.until(p.TaskComplete)
    assert (workspace / "inside.txt").read_text() == "ok"
    assert not outside.exists()
    assert "Read-only file system" in ui.of(p.ExecCommandEnd)[0].stderr


@needs_bwrap
async def test_on_failure_offers_to_rerun_without_the_sandbox(
    workspace: Path, host_dir: Path
) -> None:
    outside = host_dir / "outside.txt"
    script = f"open({str(outside)!r},'w').write('written')"
    model = ScriptedModel(
        [shell_call([sys.executable, "-c", script], call_id="c1"), text_response("done")]
    )
    async with running_engine(model, workspace, approval_policy="on-failure") as ui:
        await ui.submit(say("write outside"))
        request = await ui.until(p.ExecApprovalRequest)
        assert request.msg.reason is not None
        assert "sandbox" in request.msg.reason
        assert not outside.exists()
        await ui.submit(p.ExecApproval("c1", "approved"))
        await ui.until(p.TaskComplete)
    assert outside.read_text() == "written"
    assert [e.exit_code for e in ui.of(p.ExecCommandEnd)][-1] == 0
    assert len(ui.of(p.ExecCommandEnd)) == 2


async def test_without_a_sandbox_the_session_says_so_and_asks(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEXCORE_SANDBOX", "none")
    model = ScriptedModel(
        [shell_call([sys.executable, "-c", "pass"], call_id="c1"), text_response("ok")]
    )
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("go"))
        configured = await ui.until(p.SessionConfigured)
        assert configured.msg.sandbox == "none"
        assert configured.msg.sandbox_reason is not None
        assert "CODEXCORE_SANDBOX" in configured.msg.sandbox_reason
        warning = await ui.until(p.WarningEvent)
        assert "cannot be confined" in warning.msg.message
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(p.ExecApproval("c1", "approved"))
        await ui.until(p.TaskComplete)


async def test_without_a_sandbox_never_refuses_rather_than_run_unconfined(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEXCORE_SANDBOX", "none")
    model = ScriptedModel(
        [
            shell_call([sys.executable, "-c", "open('x','w')"], call_id="c1"),
            shell_call(["ls"], call_id="c2"),
            text_response("ok"),
        ]
    )
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("go"))
        await ui.until(p.TaskComplete)
    assert not (workspace / "x").exists()
    assert "no sandbox is available" in outputs_sent(model.requests[1])["c1"]
    assert [e.call_id for e in ui.of(p.ExecCommandEnd)] == ["c2"]  # known safe still runs
