"""Shared fixtures: every test runs with a clean environment and on asyncio."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never depend on the developer's OPENAI_* or CODEXCORE_* variables."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "CODEXCORE_")):
            monkeypatch.delenv(name)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
