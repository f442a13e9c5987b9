"""The fuzz suite's case budget: each test's share, scaled by the Hypothesis profile
and ``CODEXCORE_FUZZ_SCALE``, a tally of the cases run, and a check that each test
ran its part (reported against that test: see ``pytest_runtest_makereport``)."""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings

F = TypeVar("F", bound=Callable[..., Any])

BUDGET = 100_000
"""Cases of a full run (the ``ci`` profile at scale 1): at most the sum of the shares."""
PROFILE_FRACTION = {"ci": 1.0}
"""The part of each share a profile runs; any other profile (``default``: the README's
test command) runs ``QUICK`` of it, so the plain command stays quick."""
QUICK = 0.02
# Read at import, before the autouse fixture clears CODEXCORE_* for each test.
SCALE = float(os.environ.get("CODEXCORE_FUZZ_SCALE") or "1")


def profile() -> str:
    """The Hypothesis profile in force. Read when a test module is imported (collection,
    after Hypothesis' plugin loaded --hypothesis-profile), never when this conftest is:
    pytest imports it before that when it is given ``tests/fuzz`` on the command line."""
    return settings.get_current_profile_name()


def fraction() -> float:
    """The part of each share this run spends (the profile's, times the scale)."""
    return PROFILE_FRACTION.get(profile(), QUICK) * SCALE


TALLY = "fuzz_cases"  # tests/conftest.py's FUZZ_TALLY
"""Each fuzz test's report carries ``(test, cases run, share)`` under this name, read by
``tests/conftest.py`` for the summary line wherever the test ran."""

CASES: Counter[str] = Counter()
EXAMPLES: dict[str, int] = {}  # cases each test must run, by "module.test"
SHARES: dict[str, int] = {}


def fuzz(share: int) -> Callable[[F], F]:
    """Run the test on ``share`` generated cases (times the profile's fraction and the
    scale) and count each one. Goes directly above ``def``, under ``@given``."""

    def decorate(test: F) -> F:
        key = f"{test.__module__.rpartition('.')[2]}.{test.__name__}"
        SHARES[key] = share
        EXAMPLES[key] = examples = max(1, round(share * fraction()))

        @functools.wraps(test)
        def counted(*args: Any, **kwargs: Any) -> Any:
            CASES[key] += 1
            return test(*args, **kwargs)

        # pytest-timeout's 60 s is for one ordinary test; a scaled-up fuzz run needs more.
        limit = pytest.mark.timeout(180 * max(1.0, fraction()))
        return limit(settings(max_examples=examples)(counted))  # type: ignore[no-any-return]

    return decorate


def _key(nodeid: str) -> str:
    path, _, name = nodeid.partition("::")
    return f"{Path(path).stem}.{name.partition('[')[0]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A fuzz test that passed but ran fewer cases than its part of its share fails,
    naming itself, the count and the profile (checked where it ran, so on any xdist
    worker); its report carries its count for the summary line (``tests/conftest.py``)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    key = _key(item.nodeid)
    if report.when != "call" or key not in SHARES:
        return
    report.user_properties.append((TALLY, (key, CASES[key], SHARES[key])))
    if report.passed and CASES[key] < EXAMPLES[key]:
        report.outcome = "failed"
        report.longrepr = (
            f"fuzz case budget ({profile()} profile): {key} ran {CASES[key]} of its "
            f"{EXAMPLES[key]} cases"
        )


def attempt(call: Callable[[], Any], *allowed: type[Exception]) -> tuple[Any, Exception | None]:
    """``call()``'s value, or the error it raised if that is one of the ``allowed`` types
    (``(None, error)``); any other exception propagates and fails the test."""
    try:
        return call(), None
    except allowed as exc:
        return None, exc
