"""The command line, run as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def codexcore(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codexcore", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_demo_runs_a_real_task_offline() -> None:
    result = codexcore("demo", "--yes")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "$ echo 'hello from a real subprocess' && uname -sm && ls" in out
    assert "exit 0 in" in out
    # The final message quotes the command's real output, read from the request.
    assert out.count("hello from a real subprocess") >= 3
    assert "notes.txt" in out
    assert "done · tokens:" in out


@pytest.mark.parametrize(("answer", "runs"), [("y\n", True), ("n\n", False), ("", False)])
def test_demo_asks_at_the_terminal(answer: str, runs: bool) -> None:
    result = codexcore("demo", stdin=answer)
    assert result.returncode == 0, result.stderr
    assert "[y]es / [a]lways this session / [n]o / a[b]ort" in result.stdout
    assert ("exit 0 in" in result.stdout) is runs
    if not runs:
        assert "I ran nothing" in result.stdout


def test_demo_abort_exits_non_zero() -> None:
    result = codexcore("demo", stdin="b\n")
    assert result.returncode == 1
    assert "aborted: interrupted" in result.stdout


def test_schema_matches_the_committed_file() -> None:
    result = codexcore("schema")
    assert result.returncode == 0
    committed = (ROOT / "docs" / "protocol.schema.json").read_text()
    assert json.loads(result.stdout) == json.loads(committed)


def test_help_shows_examples() -> None:
    result = codexcore("demo", "--help")
    assert result.returncode == 0
    assert "codexcore demo --yes" in result.stdout


def test_logs_go_to_stderr_only() -> None:
    result = codexcore("--log-level", "debug", "demo", "--yes")
    assert result.returncode == 0
    assert "model.request" in result.stderr
    assert "model.request" not in result.stdout
