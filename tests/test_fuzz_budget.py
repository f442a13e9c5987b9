"""The fuzz suite's case budget: the shares add up to it, and the profile decides how
much of each share a run spends (a test short of its part fails by its own name:
``tests/fuzz/conftest.py``)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_shares_add_up_to_the_budget() -> None:
    """A ``ci`` run, in which every fuzz test must run its whole share (or fail by
    name), runs at least the budget: the shares add up to it."""
    for path in sorted((ROOT / "tests" / "fuzz").glob("test_*.py")):
        importlib.import_module(f"tests.fuzz.{path.stem}")  # each @fuzz declares its share
    from tests.fuzz import conftest as fuzz

    assert len(fuzz.SHARES) > 20
    assert sum(fuzz.SHARES.values()) >= fuzz.BUDGET, fuzz.SHARES


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("-n", "0"), "fuzz: 1 cases in 1 tests (default profile"),
        # One xdist worker: the count travels from the worker to the summary, as in
        # the suite's own runs, without starting four interpreters on a loaded machine.
        (("-n", "1", "--hypothesis-profile=ci"), "fuzz: 40 cases in 1 tests (ci profile"),
    ],
)
def test_the_profile_decides_the_cases(args: tuple[str, ...], expected: str) -> None:
    """``ci`` runs each whole share, ``default`` a small part of it: here a 4,000-case
    share at scale 0.01, with ``tests/fuzz`` named on the command line (when pytest
    imports the fuzz conftest before Hypothesis loads the profile)."""
    # -n 4 from addopts started four interpreters for one test: 10 s here, over the
    # 50 s timeout in a CI run already busy on its own four workers.
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


def test_a_fuzz_test_short_of_its_cases_fails_by_its_own_name(tmp_path: Path) -> None:
    """Hypothesis stops early when a strategy has fewer values than the share asks
    for: that test fails, by its own name, with its count and the profile."""
    package = tmp_path / "fuzzcopy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copy(ROOT / "tests" / "fuzz" / "conftest.py", package / "conftest.py")
    (package / "test_tiny.py").write_text(
        "from hypothesis import given, strategies as st\n"
        "from .conftest import fuzz\n\n"
        "@given(st.booleans())\n@fuzz(100)\ndef test_tiny(b: bool) -> None:\n    pass\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "fuzzcopy"],
        cwd=tmp_path,
        # The default profile runs 2% of a share; at scale 50 that is all 100 cases.
        env={**os.environ, "CODEXCORE_FUZZ_SCALE": "50"},
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED fuzzcopy/test_tiny.py::test_tiny - fuzz case budget" in result.stdout
    # 100 cases in the default profile; a ci run's profile reaches the child too.
    assert re.search(r"test_tiny\.test_tiny ran 2 of its \d+ cases", result.stdout), result.stdout
