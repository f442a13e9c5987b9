"""Shared fixtures: every test runs with a clean environment and on asyncio; and the
Hypothesis profiles.

Profiles: ``default`` is the README's test command, quick (the fuzz suite runs a
small fraction of its budget); ``ci``, which ``.ci/run`` selects with
``--hypothesis-profile=ci``, runs the fuzz suite's full budget (see
``tests/fuzz/conftest.py`` and docs/testing.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from hypothesis import HealthCheck, settings

from codexcore.testing import ScriptedResponsesServer

# No example database: a run never depends on what an earlier run left behind, and
# a failure prints its seed and a @reproduce_failure blob instead. No deadline: the
# machine is shared, and a slow case is not a wrong one.
settings.register_profile(
    "default",
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", settings.get_profile("default"))
# Registered before Hypothesis' plugin loads --hypothesis-profile (pytest_configure).
settings.load_profile("default")


@pytest.fixture(autouse=True)
def _clean_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Tests never depend on the developer's OPENAI_* or CODEXCORE_* variables,
    and never write recorded sessions into the developer's ~/.codexcore."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "CODEXCORE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CODEXCORE_HOME", str(tmp_path_factory.mktemp("codexcore-home")))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- real codexcore processes against scripted servers (tests/scripted_servers.py) ----


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder for a command's cwd; a module may define its own."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def servers() -> Iterator[list[ScriptedResponsesServer]]:
    """The scripted model servers a test started (``serve``); stopped after it."""
    started: list[ScriptedResponsesServer] = []
    yield started
    for server in started:
        server.stop()


# --- the fuzz suite's summary line ------------------------------------------------------
# Here, not in tests/fuzz/conftest.py: this conftest is loaded where the run is
# reported (xdist's controller collects nothing, so never loads the fuzz one).

FUZZ_TALLY = "fuzz_cases"  # tests/fuzz/conftest.py's TALLY
_fuzz_tallied: dict[str, tuple[int, int]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == FUZZ_TALLY:
            key, cases, share = cast(tuple[str, int, int], value)
            _fuzz_tallied[key] = (cases, share)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _fuzz_tallied:
        cases = sum(cases for cases, _ in _fuzz_tallied.values())
        shares = sum(share for _, share in _fuzz_tallied.values())
        profile = settings.get_current_profile_name()
        terminalreporter.write_line(
            f"fuzz: {cases} cases in {len(_fuzz_tallied)} tests ({profile} profile; "
            f"their shares: {shares})"
        )
