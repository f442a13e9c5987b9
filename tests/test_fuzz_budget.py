"""The fuzz suite's case-budget check is an item of its own, run after every fuzz test,
so a short budget is reported against itself and never against an unrelated test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
