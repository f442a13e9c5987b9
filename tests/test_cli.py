"""The command line, run as a real process."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import codexcore as codexcore_package
from codexcore import cli

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


def test_the_demo_says_nothing_of_an_unknown_model() -> None:
    # Issue 27.5: its first, red, line was "model 'demo-model' is not in the model
    # catalogue": the demo's own model is in its catalogue.
    result = codexcore("demo", "--yes")
    assert result.returncode == 0, result.stderr
    assert "model catalogue" not in result.stdout + result.stderr
    assert result.stdout.startswith("Let me look around first."), result.stdout[:200]


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


def test_version_prints_the_installed_version() -> None:
    result = codexcore("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"codexcore {metadata.version('codexcore')}\n"


def test_version_without_package_metadata_is_the_source_trees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert cli.version() == codexcore_package.__version__
    # ...which is the version pyproject.toml gives the distribution.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert codexcore_package.__version__ == project["version"]


def command_paths(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every command and subcommand of the real parser, so a new one is checked too."""
    paths = [path]
    for action in parser._actions:  # argparse has no public walk of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths += command_paths(sub, (*path, name))
    return paths


@pytest.mark.parametrize(
    "path", [" ".join(p) for p in command_paths(cli.build_parser())], ids=lambda p: p or "top"
)
def test_help_is_plain_text(path: str) -> None:
    result = codexcore(*path.split(), "--help")
    assert result.returncode == 0, result.stderr
    assert "``" not in result.stdout, result.stdout
    assert not re.search(r":[a-z]+:`", result.stdout), result.stdout
    assert "usage: codexcore" in result.stdout


def test_plain_unmarks_literals_and_roles() -> None:
    text = "``exec`` puts :class:`~codexcore.protocol.Submission`\\ s on :mod:`codexcore.protocol`"
    assert cli.plain(text) == "exec puts Submissions on codexcore.protocol"


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    # `codexcore schema | head -1` where head has already exited: every write fails.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "codexcore", "schema"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141
    assert result.stderr == ""
