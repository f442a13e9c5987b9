"""Patches, turn diffs and the sandbox, through the engine with a scripted model."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@needs_bwrap  # without a sandbox the session starts with a warning event
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
        "session_configured", "task_started", "user_message", "patch_apply_begin",
        "patch_apply_end", "turn_diff", "turn_complete", "agent_message", "turn_complete",
        "task_complete",
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


async def test_patch_outside_the_roots_asks_and_approval_for_session_covers_that_file(
    workspace: Path, tmp_path: Path
) -> None:
    """A session grant covers the file approved, not its directory (issue 13 item 2:
    this test used to pin the directory grant)."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    first = f"*** Begin Patch\n*** Add File: {outside}/a.txt\n+one\n*** End Patch"
    again = f"*** Begin Patch\n*** Add File: {outside}/a.txt\n+once more\n*** End Patch"
    sibling = f"*** Begin Patch\n*** Add File: {outside}/b.txt\n+two\n*** End Patch"
    model = ScriptedModel(
        [
            patch_call(first, "p1"),
            patch_call(again, "p2"),
            patch_call(sibling, "p3"),
            text_response("both written"),
        ]
    )
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("write outside"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert request.msg.grant_root is None
        assert request.msg.reason == f"writes outside the writable roots: {outside / 'a.txt'}"
        await ui.submit(p.PatchApproval("p1", "approved_for_session"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert request.msg.call_id == "p3"
        await ui.submit(p.PatchApproval("p3", "approved"))
        await ui.until(p.TaskComplete)
    assert (outside / "a.txt").read_text() == "once more\n"
    assert (outside / "b.txt").read_text() == "two\n"
    assert [b.auto_approved for b in ui.of(p.PatchApplyBegin)] == [False, True, False]


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


@needs_bwrap  # without a sandbox the session starts with a warning event
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


# --- session grants and symlinks (issue 13, item 2) -------------------------------------------


async def next_ask_or_done(ui: Any, within: float = 10.0) -> Any:
    """The next patch approval request or task completion, whichever comes first."""
    try:
        async with asyncio.timeout(within):
            while True:
                event = await ui.codex.next_event()
                ui.events.append(event)
                if isinstance(event.msg, p.ApplyPatchApprovalRequest | p.TaskComplete):
                    return event.msg
    except TimeoutError:
        seen = ui.types()
        raise AssertionError(f"no request or task_complete in {within} s; saw {seen}") from None


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Files outside the workspace (tmp_path/work): a, b, and a directory d."""
    root = tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    (root / "a").write_text("a\n")
    (root / "b").write_text("b\n")
    return root


def update(path: str, old: str, new: str) -> str:
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch"


def add(path: str, text: str) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+{text}\n*** End Patch"


async def test_a_session_grant_through_a_symlink_covers_only_its_resolved_target(
    workspace: Path, outside: Path
) -> None:
    (workspace / "link1").symlink_to(outside / "a")
    model = ScriptedModel(
        [
            patch_call(update("link1", "a", "A"), "p1"),
            text_response("first"),
            patch_call(update("link1", "A", "AA"), "p2"),
            patch_call(update("link2", "b", "B"), "p3"),
            text_response("second"),
        ]
    )
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("edit a"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert request.msg.resolved_paths == {str(workspace / "link1"): str(outside / "a")}
        assert request.msg.grant_root is None
        assert request.msg.reason is not None
        assert f"link1 -> {outside / 'a'}" in request.msg.reason
        await ui.submit(p.PatchApproval("p1", "approved_for_session"))
        await ui.until(p.TaskComplete)
        (workspace / "link2").symlink_to(outside / "b")  # between Tasks, a new way out

        await ui.submit(say("edit both"))
        asked = await next_ask_or_done(ui)
        assert isinstance(asked, p.ApplyPatchApprovalRequest), "link2 was applied unasked"
        assert asked.call_id == "p3"  # p2, the granted file again, went ahead
        assert asked.resolved_paths == {str(workspace / "link2"): str(outside / "b")}
        await ui.submit(p.PatchApproval("p3", "denied"))
        await ui.until(p.TaskComplete)
    assert (outside / "a").read_text() == "AA\n"
    assert (outside / "b").read_text() == "b\n"
    assert [b.auto_approved for b in ui.of(p.PatchApplyBegin)] == [False, True]


@needs_bwrap  # without a sandbox the session starts with a warning event
async def test_a_grant_does_not_follow_its_symlink_when_it_is_repointed_by_a_command(
    workspace: Path, outside: Path
) -> None:
    """The model's own command re-points the granted link mid-Task: the new target asks."""
    (workspace / "link1").symlink_to(outside / "a")
    script = f"import os; os.remove('link1'); os.symlink({str(outside / 'b')!r}, 'link1')"
    repoint = [sys.executable, "-c", script]
    model = ScriptedModel(
        [
            patch_call(update("link1", "a", "A"), "p1"),
            shell_call(repoint, call_id="c1"),
            patch_call(update("link1", "b", "B"), "p2"),
            text_response("done"),
        ]
    )
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("go"))
        await ui.until(p.ApplyPatchApprovalRequest)
        await ui.submit(p.PatchApproval("p1", "approved_for_session"))
        asked = await next_ask_or_done(ui)
        assert isinstance(asked, p.ApplyPatchApprovalRequest), "the re-pointed link was unasked"
        assert asked.resolved_paths == {str(workspace / "link1"): str(outside / "b")}
        await ui.submit(p.PatchApproval("p2", "denied"))
        await ui.until(p.TaskComplete)
    assert (workspace / "link1").resolve() == outside / "b"  # the command did run
    assert (outside / "a").read_text() == "A\n"
    assert (outside / "b").read_text() == "b\n"


def _link_dir(workspace: Path, outside: Path) -> None:
    (workspace / "dir").symlink_to(outside / "d")


def _link_file(workspace: Path, outside: Path) -> None:
    (workspace / "link1").symlink_to(outside / "a")


def _nothing(workspace: Path, outside: Path) -> None:
    pass


WAYS_OUT = [
    pytest.param(
        _link_dir, add("dir/new", "n"), {"dir/new": "d/new"}, add("dir/other", "o"), "d/other",
        id="add-through-a-symlinked-directory",
    ),
    pytest.param(
        _link_dir,
        "*** Begin Patch\n*** Update File: app.py\n*** Move to: dir/moved.py\n*** End Patch",
        {"app.py": None, "dir/moved.py": "d/moved.py"},
        add("dir/again.py", "x"), "d/again.py",
        id="move-through-a-symlinked-directory",
    ),
    pytest.param(
        _nothing, add("../outside/new", "n"), {"../outside/new": "new"},
        add("../outside/other", "o"), "other",
        id="dotdot",
    ),
    pytest.param(
        _nothing, add("{outside}/new", "n"), {"{outside}/new": "new"},
        add("{outside}/d/../other", "o"), "other",
        id="absolute",
    ),
    pytest.param(
        _link_file,
        "*** Begin Patch\n*** Delete File: app.py\n"
        "*** Update File: link1\n@@\n-a\n+A\n*** End Patch",
        {"app.py": None, "link1": "a"}, update("../outside/b", "b", "B"), "b",
        id="delete-inside-and-update-through-a-link",
    ),
]  # fmt: skip


def _expected(workspace: Path, outside: Path, resolved: dict[str, str | None]) -> dict[str, str]:
    """Patch paths (as written, under the workspace) to their targets (None: themselves)."""
    expected = {}
    for shown, real in resolved.items():
        path = os.path.normpath(workspace / shown.replace("{outside}", str(outside)))
        expected[path] = path if real is None else str(outside / real)
    return expected


@pytest.mark.parametrize(("setup", "first", "resolved", "second", "second_target"), WAYS_OUT)
async def test_each_way_out_of_the_workspace_asks_and_is_granted_exactly(
    workspace: Path,
    outside: Path,
    setup: Any,
    first: str,
    resolved: dict[str, str | None],
    second: str,
    second_target: str,
) -> None:
    """What lands outside asks; the session grant covers those files and no sibling of them."""
    setup(workspace, outside)
    first, second = (text.replace("{outside}", str(outside)) for text in (first, second))
    model = ScriptedModel(
        [patch_call(first, "p1"), patch_call(second, "p2"), text_response("done")]
    )
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("go"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert request.msg.resolved_paths == _expected(workspace, outside, resolved)
        await ui.submit(p.PatchApproval("p1", "approved_for_session"))
        asked = await next_ask_or_done(ui)
        assert isinstance(asked, p.ApplyPatchApprovalRequest), "a sibling was written unasked"
        assert list(asked.resolved_paths.values()) == [str(outside / second_target)]
        await ui.submit(p.PatchApproval("p2", "denied"))
        await ui.until(p.TaskComplete)
    assert ui.of(p.PatchApplyEnd)[0].success
    assert not (outside / second_target).exists() or (outside / second_target).read_text() == "b\n"


async def test_a_path_written_then_removed_in_one_patch_asks_for_the_removal_outside(
    workspace: Path, outside: Path
) -> None:
    """dir/x is a link back into the workspace in a directory outside it: the write
    lands inside, the removal of the link outside, and that must ask."""
    (workspace / "inside.txt").write_text("i\n")
    (workspace / "dir").symlink_to(outside / "d")
    (outside / "d" / "x").symlink_to(workspace / "inside.txt")
    both = (
        "*** Begin Patch\n*** Update File: dir/x\n@@\n-i\n+I\n*** Delete File: dir/x\n*** End Patch"
    )
    model = ScriptedModel([patch_call(both, "p1"), text_response("done")])
    async with running_engine(model, workspace, approval_policy="on-request") as ui:
        await ui.submit(say("go"))
        asked = await next_ask_or_done(ui)
        assert isinstance(asked, p.ApplyPatchApprovalRequest), "the link outside went unasked"
        assert asked.resolved_paths == {str(workspace / "dir/x"): str(outside / "d/x")}
        assert asked.reason == f"writes outside the writable roots: dir/x -> {outside / 'd/x'}"
        await ui.submit(p.PatchApproval("p1", "denied"))
        await ui.until(p.TaskComplete)
    assert (outside / "d" / "x").is_symlink()
    assert (workspace / "inside.txt").read_text() == "i\n"


async def test_a_session_grant_inside_the_workspace_still_covers_its_files(
    workspace: Path,
) -> None:
    """Read-only sessions ask for every patch; a session grant covers the files it named."""
    model = ScriptedModel(
        [
            patch_call(add("app.py", "one"), "p1"),
            patch_call(add("app.py", "two"), "p2"),
            patch_call(add("other.py", "x"), "p3"),
            text_response("done"),
        ]
    )
    policy = p.SandboxPolicy("read-only")
    async with running_engine(
        model, workspace, approval_policy="on-request", sandbox_policy=policy
    ) as ui:
        await ui.submit(say("go"))
        await ui.until(p.ApplyPatchApprovalRequest)
        await ui.submit(p.PatchApproval("p1", "approved_for_session"))
        asked = await next_ask_or_done(ui)
        assert isinstance(asked, p.ApplyPatchApprovalRequest)
        assert asked.call_id == "p3", "the granted file asked again, or a new one did not"
        await ui.submit(p.PatchApproval("p3", "denied"))
        await ui.until(p.TaskComplete)
    assert (workspace / "app.py").read_text() == "two\n"
    assert not (workspace / "other.py").exists()


async def test_a_directory_swapped_for_a_symlink_during_approval_is_not_written_through(
    workspace: Path, outside: Path
) -> None:
    """Check, then write: the write lands where the check looked, or nowhere."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("f\n")
    (outside / "d" / "f.txt").write_text("f\n")  # same text, so a content check passes
    model = ScriptedModel([patch_call(update("sub/f.txt", "f", "F"), "p1"), text_response("ok")])
    async with running_engine(model, workspace, approval_policy="untrusted") as ui:
        await ui.submit(say("go"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert request.msg.resolved_paths == {
            str(workspace / "sub/f.txt"): str(workspace / "sub/f.txt")
        }
        (workspace / "sub").rename(workspace / "sub.away")
        (workspace / "sub").symlink_to(outside / "d")
        await ui.submit(p.PatchApproval("p1", "approved"))
        await ui.until(p.TaskComplete)
    assert (outside / "d" / "f.txt").read_text() == "f\n"
    assert (workspace / "sub.away" / "f.txt").read_text() == "f\n"
    output = outputs_sent(model.requests[1])["p1"]
    assert "patch not applied" in output
    assert "sub" in output
    assert ui.of(p.ErrorEvent) == []


# --- invalid paths are the model's error, not the Task's (issue 13, item 8) ----------------------


BAD_PATHS = [
    pytest.param(add("a\0b", "x"), "NUL", id="nul-in-add"),
    pytest.param(update("app\0.py", "x", "y"), "NUL", id="nul-in-update"),
    pytest.param("*** Begin Patch\n*** Delete File: \0\n*** End Patch", "NUL", id="nul-in-delete"),
    pytest.param(
        "*** Begin Patch\n*** Update File: app.py\n*** Move to: x\0y\n*** End Patch",
        "NUL",
        id="nul-in-move",
    ),
    pytest.param(add("", "x"), "needs a path", id="empty"),
    pytest.param(add("sub", "x"), "is a directory", id="add-over-a-directory"),
    pytest.param(update("sub", "x", "y"), "is a directory", id="update-a-directory"),
    pytest.param(
        "*** Begin Patch\n*** Delete File: sub\n*** End Patch", "is a directory", id="delete-dir"
    ),
    pytest.param(
        "*** Begin Patch\n*** Update File: app.py\n*** Move to: sub\n*** End Patch",
        "is a directory",
        id="move-onto-a-directory",
    ),
    pytest.param(add("x" * 300, "x"), "too long", id="long-name"),
    pytest.param(add("/".join(["d" * 200] * 25), "x"), "too long", id="long-path"),
    # Short enough to parse, too long once joined to the workspace: the OS says so.
    pytest.param(add("/".join(["d" * 254] * 16), "x"), "too long", id="long-joined-path"),
]


@pytest.mark.parametrize(("patch", "problem"), BAD_PATHS)
async def test_an_invalid_patch_path_is_a_tool_error_and_the_task_goes_on(
    workspace: Path, patch: str, problem: str
) -> None:
    (workspace / "sub").mkdir()
    model = ScriptedModel(
        [patch_call(patch, "p1"), shell_call(["ls"], call_id="c1"), text_response("recovered")]
    )
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("go"))
        done = await ui.until(p.TaskComplete)
    assert done.msg.last_agent_message == "recovered"
    assert ui.of(p.ErrorEvent) == []
    output = outputs_sent(model.requests[1])["p1"]
    assert output.startswith("error: patch not applied")
    assert problem in output
    assert sorted(os.listdir(workspace)) == ["app.py", "sub"]
    assert [e.call_id for e in ui.of(p.ExecCommandEnd)] == ["c1"]


@pytest.mark.parametrize(
    "call",
    [
        shell_call(["apply_patch", PATCH], call_id="s1", workdir="a\0b"),
        shell_call(
            ["bash", "-lc", f"cd 'a\0b' && apply_patch <<'EOF'\n{PATCH}\nEOF"], call_id="s1"
        ),
        shell_call(["echo", "a\0b"], call_id="s1"),
    ],
    ids=["shell-workdir", "cd-in-heredoc", "command"],
)
async def test_a_nul_in_a_shell_call_or_patch_workdir_is_a_tool_error(
    workspace: Path, call: ScriptedResponse
) -> None:
    model = ScriptedModel([call, text_response("recovered")])
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("go"))
        done = await ui.until(p.TaskComplete)
    assert done.msg.last_agent_message == "recovered"
    assert ui.of(p.ErrorEvent) == []
    output = outputs_sent(model.requests[1])["s1"]
    assert output.startswith("error:")
    assert "NUL" in output
    assert (workspace / "app.py").read_text() == 'print("hello")\n'
