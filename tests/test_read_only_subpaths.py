"""The read-only subpaths of a writable root: one list for the sandbox and for patches."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from codexcore.tools._read_only_subpaths import protected_part, read_only_subpaths
from codexcore.tools.sandbox import SandboxSpec, confine, probe_sandbox, wrap_command


def _git_dir(root: Path) -> Path:
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    return root / ".git"


def _pointer(root: Path) -> Path:
    """``--separate-git-dir``: ``.git`` is a file naming a directory beside it."""
    (root / "store" / "hooks").mkdir(parents=True)
    (root / ".git").write_text("gitdir: store\n")
    return root / "store"


def _symlinked(root: Path) -> Path:
    (root / "real-git" / "hooks").mkdir(parents=True)
    (root / ".git").symlink_to(root / "real-git")
    return root / "real-git"


def _codexcore(root: Path) -> Path:
    (root / ".codexcore").mkdir()
    (root / ".codexcore" / "config.toml").write_text("model = 'x'\n")
    return root / ".codexcore"


LAYOUTS: dict[str, Callable[[Path], Path]] = {
    "git directory": _git_dir,
    "gitdir pointer": _pointer,
    "symlinked .git": _symlinked,
    ".codexcore": _codexcore,
}


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_the_sandbox_mounts_and_patches_ask_about_the_same_paths(
    tmp_path: Path, layout: str
) -> None:
    """They cannot drift: every listed path is a read-only mount of a confined command
    and a path patch approval asks about."""
    protected = LAYOUTS[layout](tmp_path).resolve()
    listed = read_only_subpaths([str(tmp_path)])
    assert str(protected) in listed
    argv = wrap_command(["true"], SandboxSpec("workspace-write"), str(tmp_path), seccomp_fd=None)
    for path in listed:
        assert any(argv[i : i + 3] == ["--ro-bind", path, path] for i in range(len(argv))), path
        assert protected_part(path + "/hooks/pre-commit", [str(tmp_path)]) == path


def test_a_pointer_to_a_gitdir_outside_the_roots_is_left_to_the_read_only_mount(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    (tmp_path / "elsewhere").mkdir()
    assert read_only_subpaths([str(work)]) == [str(work / ".git")]


def test_a_fifo_planted_as_git_does_not_hang_the_listing(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / ".git")
    assert read_only_subpaths([str(tmp_path)]) == [str(tmp_path / ".git")]


def test_writable_roots_listing_git_opt_it_out_for_patches_too(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    roots = [str(tmp_path), str(git_dir)]
    assert read_only_subpaths(roots) == []
    assert protected_part(str(git_dir / "config"), roots) is None


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        (".git/config", ".git"),
        (".GIT/config", ".GIT"),
        (".Git", ".Git"),
        ("vendor/lib/.git/hooks/x", "vendor/lib/.git"),
        (".codexcore/config.toml", ".codexcore"),
        ("sub/.codexcore/config.toml", None),  # only a root's own is codexcore's
        (".gitignore", None),
        (".github/workflows/ci.yml", None),
        ("src/.git.bak", None),
    ],
)
def test_which_names_are_protected_even_before_they_exist(
    tmp_path: Path, relative: str, expected: str | None
) -> None:
    found = protected_part(str(tmp_path / relative), [str(tmp_path)])
    assert found == (None if expected is None else str(tmp_path / expected))


@pytest.fixture
def bwrap() -> str:
    status = probe_sandbox()
    if status.kind != "bwrap" or status.executable is None:
        pytest.skip(f"no working bubblewrap here: {status.reason}")
    return status.executable


@pytest.mark.parametrize(
    ("layout", "script"),
    [
        ("gitdir pointer", "echo evil > store/hooks/pre-commit"),
        (".codexcore", "echo 'mcp = 1' >> .codexcore/config.toml"),
        ("symlinked .git", "echo evil > real-git/hooks/pre-commit"),
    ],
)
def test_a_confined_command_cannot_write_them(
    bwrap: str, tmp_path: Path, layout: str, script: str
) -> None:
    protected = LAYOUTS[layout](tmp_path)
    before = sorted(p.name for p in protected.rglob("*"))
    spec = SandboxSpec("workspace-write")
    with confine(["sh", "-c", script], spec, str(tmp_path), bwrap=bwrap) as command:
        result = subprocess.run(
            command.argv,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            pass_fds=command.pass_fds,
        )
    assert result.returncode != 0
    assert "Read-only file system" in result.stderr
    assert sorted(p.name for p in protected.rglob("*")) == before
