"""Patches into ``.git`` (and ``.codexcore``) ask, whatever the approval policy.

The attack (issue 26 item 2): under workspace-write + on-request a patch added an
``fsmonitor`` command to ``.git/config`` unasked, and the user's next ``git status``
ran it outside any sandbox. These tests run that patch through a real engine on
the scripted model and then a real ``git status``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.testing import ScriptedModel, text_response

from .engine_helpers import running_engine
from .flows import outputs_sent
from .test_engine import say
from .test_engine_patches import add, next_ask_or_done, patch_call

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository (``git init``) with one file, and a clean git environment."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "app.py").write_text('print("hello")\n')
    git(root, "init", "-q", ".")
    return root


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the user's ``git`` in ``repo``: no sandbox, no global or system config."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repo.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=30, check=True
    )


def fsmonitor_patch(marker: Path) -> str:
    """The attack: a command git runs on every ``git status``."""
    return (
        "*** Begin Patch\n*** Update File: .git/config\n@@\n [core]\n"
        f"+\tfsmonitor = touch {marker} #\n*** End Patch"
    )


async def test_a_patch_planting_an_fsmonitor_in_git_config_asks(repo: Path) -> None:
    marker = repo.parent / "planted"
    config = (repo / ".git" / "config").read_text()
    model = ScriptedModel([patch_call(fsmonitor_patch(marker)), text_response("ok")])
    async with running_engine(model, repo, approval_policy="on-request") as ui:
        await ui.submit(say("speed up git status"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert list(request.msg.changes) == [str(repo / ".git" / "config")]
        assert request.msg.reason is not None
        assert ".git/config" in request.msg.reason
        assert "read-only inside the writable roots" in request.msg.reason
        assert (repo / ".git" / "config").read_text() == config  # nothing before the answer
        await ui.submit(p.PatchApproval("p1", "denied"))
        await ui.until(p.TaskComplete)
    assert (repo / ".git" / "config").read_text() == config
    git(repo, "status")
    assert not marker.exists(), "git status ran the planted fsmonitor"


async def test_under_never_the_fsmonitor_patch_is_refused_and_git_status_runs_nothing(
    repo: Path,
) -> None:
    marker = repo.parent / "planted"
    config = (repo / ".git" / "config").read_text()
    model = ScriptedModel([patch_call(fsmonitor_patch(marker)), text_response("ok")])
    async with running_engine(model, repo, approval_policy="never") as ui:
        await ui.submit(say("speed up git status"))
        await ui.until(p.TaskComplete)
    assert ui.of(p.ApplyPatchApprovalRequest) == []
    assert ui.of(p.PatchApplyBegin) == []
    output = outputs_sent(model.requests[1])["p1"]
    assert output.startswith("error: the patch changes .git/config")
    assert "never asks; nothing was changed" in output
    assert (repo / ".git" / "config").read_text() == config
    git(repo, "status")
    assert not marker.exists(), "git status ran the planted fsmonitor"


async def test_with_the_users_approval_the_git_config_patch_is_applied(repo: Path) -> None:
    """The user may still say yes; and the attack is real: git then runs the command."""
    marker = repo.parent / "planted"
    model = ScriptedModel([patch_call(fsmonitor_patch(marker)), text_response("ok")])
    async with running_engine(model, repo, approval_policy="on-request") as ui:
        await ui.submit(say("speed up git status"))
        await ui.until(p.ApplyPatchApprovalRequest)
        await ui.submit(p.PatchApproval("p1", "approved"))
        await ui.until(p.TaskComplete)
    assert not ui.of(p.PatchApplyBegin)[0].auto_approved
    assert "fsmonitor" in (repo / ".git" / "config").read_text()
    git(repo, "status")
    assert marker.exists()


HOOK = (
    "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+#!/bin/sh\n+touch {marker}\n"
    "*** End Patch"
)


@pytest.mark.parametrize("policy", ["on-request", "on-failure", "untrusted"])
async def test_a_patch_adding_a_git_hook_asks_under_every_asking_policy(
    repo: Path, policy: str
) -> None:
    hook = HOOK.format(marker=repo.parent / "planted")
    model = ScriptedModel([patch_call(hook), text_response("ok")])
    async with running_engine(model, repo, approval_policy=policy) as ui:
        await ui.submit(say("add a hook"))
        request = await ui.until(p.ApplyPatchApprovalRequest)
        assert ".git/hooks/pre-commit" in (request.msg.reason or "")
        await ui.submit(p.PatchApproval("p1", "denied"))
        await ui.until(p.TaskComplete)
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()


async def test_under_never_a_git_hook_patch_is_refused(repo: Path) -> None:
    hook = HOOK.format(marker=repo.parent / "planted")
    model = ScriptedModel([patch_call(hook), text_response("ok")])
    async with running_engine(model, repo, approval_policy="never") as ui:
        await ui.submit(say("add a hook"))
        await ui.until(p.TaskComplete)
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert "read-only inside the writable roots" in outputs_sent(model.requests[1])["p1"]


def _symlink_to_git(repo: Path) -> None:
    (repo / "innocent").symlink_to(repo / ".git" / "hooks")


def _nested_repo(repo: Path) -> None:
    git(repo, "init", "-q", "vendor/lib")


def _nothing(repo: Path) -> None:
    pass


def _move(target: str) -> str:
    return (
        "*** Begin Patch\n*** Update File: app.py\n"
        f'*** Move to: {target}\n@@\n-print("hello")\n+exit 0\n*** End Patch'
    )


SPELLINGS: list[tuple[str, Callable[[Path], None], str]] = [
    ("dot-dot", _nothing, add("sub/../.git/hooks/post-checkout", "#!/bin/sh")),
    ("symlinked parent", _symlink_to_git, add("innocent/post-checkout", "#!/bin/sh")),
    ("upper case", _nothing, add(".GIT/hooks/post-checkout", "#!/bin/sh")),
    ("nested repository", _nested_repo, add("vendor/lib/.git/hooks/post-merge", "#!/bin/sh")),
    ("move into .git", _nothing, _move(".git/hooks/pre-push")),
    ("delete from .git", _nothing, "*** Begin Patch\n*** Delete File: .git/HEAD\n*** End Patch"),
    ("codexcore config", _nothing, add(".codexcore/config.toml", "[mcp_servers.x]")),
]


@pytest.mark.parametrize(
    ("setup", "patch"), [s[1:] for s in SPELLINGS], ids=[s[0] for s in SPELLINGS]
)
async def test_every_spelling_of_a_write_into_git_asks(
    repo: Path, setup: Callable[[Path], None], patch: str
) -> None:
    setup(repo)
    before = _snapshot(repo)
    model = ScriptedModel([patch_call(patch), text_response("ok")])
    async with running_engine(model, repo, approval_policy="on-request") as ui:
        await ui.submit(say("go"))
        msg = await next_ask_or_done(ui)
        assert isinstance(msg, p.ApplyPatchApprovalRequest), "applied without asking"
        assert "read-only inside the writable roots" in (msg.reason or "")
        await ui.submit(p.PatchApproval("p1", "denied"))
        await ui.until(p.TaskComplete)
    assert _snapshot(repo) == before


async def test_a_git_pointer_file_and_the_gitdir_it_names_ask(tmp_path: Path) -> None:
    """A ``.git`` file (a linked worktree, a submodule, ``--separate-git-dir``) names
    the git directory; inside a writable root, that directory is git's too."""
    shared = tmp_path / "shared"
    work = shared / "work"
    shared.mkdir()
    git(shared, "init", "-q", f"--separate-git-dir={shared / 'store'}", str(work))
    assert (work / ".git").is_file()
    (work / "app.py").write_text("x\n")
    before = _snapshot(shared)
    patches = [
        "*** Begin Patch\n*** Delete File: .git\n*** End Patch",
        add("../store/hooks/pre-commit", "#!/bin/sh"),
    ]
    calls = [patch_call(patches[0], "p1"), patch_call(patches[1], "p2")]
    model = ScriptedModel([*calls, text_response("ok")])
    # The shared directory is a writable root, so the git directory lies inside one.
    policy = p.SandboxPolicy("workspace-write", writable_roots=(str(shared),))
    async with running_engine(
        model, work, approval_policy="on-request", sandbox_policy=policy
    ) as ui:
        await ui.submit(say("go"))
        hook = str(shared / "store" / "hooks" / "pre-commit")
        for call_id, shown in (("p1", ".git"), ("p2", hook)):
            request = await ui.until(p.ApplyPatchApprovalRequest)
            assert request.msg.call_id == call_id
            assert (request.msg.reason or "").startswith(f"changes {shown}"), request.msg.reason
            await ui.submit(p.PatchApproval(call_id, "denied"))
        await ui.until(p.TaskComplete)
    assert _snapshot(shared) == before


async def test_ordinary_patches_beside_git_are_still_applied_unasked(repo: Path) -> None:
    """``.gitignore``, ``.github/`` and a file named like ``.git.bak`` are the project's."""
    patch = (
        "*** Begin Patch\n*** Add File: .gitignore\n+*.pyc\n"
        "*** Add File: .github/workflows/ci.yml\n+on: push\n"
        "*** Add File: notes/.git.bak\n+x\n*** End Patch"
    )
    model = ScriptedModel([patch_call(patch), text_response("ok")])
    async with running_engine(model, repo, approval_policy="on-request") as ui:
        await ui.submit(say("go"))
        await ui.until(p.TaskComplete)
    assert ui.of(p.ApplyPatchApprovalRequest) == []
    assert ui.of(p.PatchApplyBegin)[0].auto_approved
    assert (repo / ".gitignore").read_text() == "*.pyc\n"


async def test_danger_full_access_protects_nothing_its_commands_could_not_write(
    repo: Path,
) -> None:
    hook = HOOK.format(marker=repo.parent / "planted")
    model = ScriptedModel([patch_call(hook), text_response("ok")])
    policy = p.SandboxPolicy("danger-full-access")
    async with running_engine(
        model, repo, approval_policy="on-request", sandbox_policy=policy
    ) as ui:
        await ui.submit(say("add a hook"))
        await ui.until(p.TaskComplete)
    assert ui.of(p.ApplyPatchApprovalRequest) == []
    assert (repo / ".git" / "hooks" / "pre-commit").exists()


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: a file's bytes, a link's target, a directory as ''."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[key] = ""
            else:
                found[key] = path.read_bytes()
    return found
