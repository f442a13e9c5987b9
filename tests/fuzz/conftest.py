"""The fuzz suite's case budget: each test's share, scaled by ``CODEXCORE_FUZZ_SCALE``,
and a tally of the cases run, printed (and checked against the budget) at the end."""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

F = TypeVar("F", bound=Callable[..., Any])

# Read at import, before the autouse fixture clears CODEXCORE_* for each test.
SCALE = float(os.environ.get("CODEXCORE_FUZZ_SCALE") or "1")
BUDGET = 100_000
"""Cases per full run at scale 1: the sum of every test's ``fuzz(share)``."""

CASES: Counter[str] = Counter()
SHARES: dict[str, int] = {}  # by "module.test"
MODULES = {path.stem for path in Path(__file__).parent.glob("test_*.py")}
"""The fuzz modules: the budget is checked only in a run that collected them all."""

# No example database: a CI run never depends on what an earlier run left behind,
# and a failure prints its seed and a @reproduce_failure blob instead.
settings.register_profile(
    "codexcore-fuzz",
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_BASE = settings.get_profile("codexcore-fuzz")


def fuzz(share: int) -> Callable[[F], F]:
    """Run the test on ``share`` generated cases (times the scale) and count each one.

    Goes directly above ``def``, under ``@given``.
    """

    def decorate(test: F) -> F:
        key = f"{test.__module__.rpartition('.')[2]}.{test.__name__}"
        SHARES[key] = share

        @functools.wraps(test)
        def counted(*args: Any, **kwargs: Any) -> Any:
            CASES[key] += 1
            return test(*args, **kwargs)

        examples = max(1, round(share * SCALE))
        # pytest-timeout's 60 s is for one ordinary test; a scaled-up fuzz run needs more.
        limit = pytest.mark.timeout(180 * max(1.0, SCALE))
        return limit(settings(_BASE, max_examples=examples)(counted))  # type: ignore[no-any-return]

    return decorate


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CASES:
        ran = sum(CASES.values())
        terminalreporter.write_line(
            f"fuzz: {ran} cases in {len(CASES)} tests (budget {sum(SHARES.values())} x {SCALE:g})"
        )


@pytest.fixture(scope="session", autouse=True)
def _fuzz_budget_held() -> Any:
    """When every fuzz test ran, the cases run add up to the budget (none fell short)."""
    yield
    collected = {key.partition(".")[0] for key in SHARES}
    if collected == MODULES and set(CASES) == set(SHARES) and SCALE >= 1:
        assert sum(SHARES.values()) >= BUDGET, SHARES
        short = {name: CASES[name] for name in SHARES if CASES[name] < SHARES[name]}
        assert not short, f"fuzz tests that ran fewer cases than their share: {short}"


def attempt(call: Callable[[], Any], *allowed: type[Exception]) -> tuple[Any, Exception | None]:
    """``call()``'s value, or the error it raised if that is one of the ``allowed`` types
    (``(None, error)``); any other exception propagates and fails the test."""
    try:
        return call(), None
    except allowed as exc:
        return None, exc
