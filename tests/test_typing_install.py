"""Typing for users: mypy, run in a project outside the checkout, follows the README's
editable install of codexcore and checks calls against codexcore's own types."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """\
from codexcore import Codex, EngineConfig
from codexcore.adapters.threads import CodexThread

config = EngineConfig(max_attempts="five")
codex = Codex(config, max_retries="two")
CodexThread(config, on_event=3)
"""


def _run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in argv], cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.mark.timeout(300)  # a venv, an editable build (setuptools from the index) and mypy
def test_mypy_follows_an_editable_install_from_outside_the_checkout(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    made = _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
    )
    # codexcore's dependencies come from this environment (a path line: its own .pth files,
    # codexcore's install among them, are not read), so only the editable install is new.
    Path(purelib.stdout.strip(), "_dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    installed = _run(
        python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
        "-e", ROOT, cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr

    project = tmp_path / "project"
    project.mkdir()
    (project / "plugin.py").write_text(USER_CODE)
    checked = _run(
        sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable",
        python, "plugin.py", cwd=project,
    )  # fmt: skip
    out = checked.stdout + checked.stderr
    assert "import-not-found" not in out, out
    assert "library stub" not in out, out
    assert 'Argument "max_attempts" to "EngineConfig" has incompatible type "str"' in out, out
    assert 'Argument "max_retries" to "Codex" has incompatible type "str"' in out, out
    assert 'Argument "on_event" to "CodexThread" has incompatible type "int"' in out, out
    assert "Found 3 errors in 1 file" in out, out
