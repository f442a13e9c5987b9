"""Shared fixtures: every test runs with a clean environment and on asyncio; and the
Hypothesis profiles.

Profiles: ``default`` is the README's test command, quick (the fuzz suite runs a
small fraction of its budget); ``ci``, which ``.ci/run`` selects with
``--hypothesis-profile=ci``, runs the fuzz suite's full budget (see
``tests/fuzz/conftest.py`` and docs/testing.md).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

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
