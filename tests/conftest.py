"""Shared fixtures: every test runs with a clean environment and on asyncio."""

from __future__ import annotations

import os

import pytest


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
