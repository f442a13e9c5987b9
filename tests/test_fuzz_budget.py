"""The fuzz suite's case-budget check is an item of its own, run after every fuzz test,
so a short budget is reported against itself and never against an unrelated test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUDGET_ITEM = "tests/fuzz::fuzz-case-budget"


def _collected(*args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/fuzz", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if line.startswith("tests/")]


def test_the_budget_check_runs_last_when_every_fuzz_test_does() -> None:
    items = _collected()
    assert items[-1] == BUDGET_ITEM
    assert items.count(BUDGET_ITEM) == 1
    assert len(items) > 10


def test_no_budget_check_when_only_some_fuzz_tests_run() -> None:
    items = _collected("-k", "decode_event")
    assert items
    assert BUDGET_ITEM not in items


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "fuzz: 1 cases in 1 tests (default profile"),
        (("--hypothesis-profile=ci",), "fuzz: 40 cases in 1 tests (ci profile"),
    ],
)
def test_the_profile_decides_the_cases(args: tuple[str, ...], expected: str) -> None:
    """``ci`` runs each whole share, ``default`` a small part of it: here a 4,000-case
    share at scale 0.01, with ``tests/fuzz`` named on the command line (when pytest
    imports the fuzz conftest before Hypothesis loads the profile)."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "tests/fuzz", "-k", "connection_msgs", *args],
        cwd=ROOT,
        env={**os.environ, "CODEXCORE_FUZZ_SCALE": "0.01"},
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
