"""The fuzz suite's case budget: each test's share, scaled by the Hypothesis profile
and ``CODEXCORE_FUZZ_SCALE``, a tally of the cases run, and a check of the tally
that runs as an item of its own (``tests/fuzz::fuzz-case-budget``) after the suite."""

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


CASES: Counter[str] = Counter()
EXAMPLES: dict[str, int] = {}  # cases each test must run, by "module.test"
SHARES: dict[str, int] = {}
FAILED: set[str] = set()  # fuzz tests that failed: already reported, not short
MODULES = {path.stem for path in Path(__file__).parent.glob("test_*.py")}
"""The fuzz modules: the budget is checked only in a run that collected them all."""


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


class BudgetCheck(pytest.Item):
    """Every fuzz test that passed ran its cases, and a ``ci`` run ran the whole budget."""

    def runtest(self) -> None:
        if sum(SHARES.values()) < BUDGET:
            raise BudgetShort(f"the shares add up to {sum(SHARES.values())}, under {BUDGET}")
        short = {
            key: f"{CASES[key]} of {EXAMPLES[key]}"
            for key in SHARES
            if key not in FAILED and CASES[key] < EXAMPLES[key]
        }
        if short:
            raise BudgetShort(f"fuzz tests that ran fewer cases than their share: {short}")
        ran = sum(CASES.values())
        if fraction() >= 1 and not FAILED and ran < BUDGET:
            raise BudgetShort(f"{ran} cases ran, under the budget of {BUDGET}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, BudgetShort):
            return f"fuzz case budget ({profile()} profile): {excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, "fuzz case budget"


class BudgetShort(Exception):
    """The fuzz suite ran fewer cases than it declares."""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Append the budget check after everything else, when every fuzz test is selected."""
    fuzz_items = [item for item in items if _key(item.nodeid) in SHARES]
    selected = {_key(item.nodeid) for item in fuzz_items}
    collected = {key.partition(".")[0] for key in SHARES}
    if fuzz_items and collected == MODULES and selected == set(SHARES):
        package = fuzz_items[0].parent.parent if fuzz_items[0].parent else None
        assert package is not None
        items.append(BudgetCheck.from_parent(package, name="fuzz-case-budget"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed and _key(report.nodeid) in SHARES:
        FAILED.add(_key(report.nodeid))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CASES:
        ran = sum(CASES.values())
        terminalreporter.write_line(
            f"fuzz: {ran} cases in {len(CASES)} tests ({profile()} profile: "
            f"{fraction():g} of the {sum(SHARES.values())}-case budget)"
        )


def attempt(call: Callable[[], Any], *allowed: type[Exception]) -> tuple[Any, Exception | None]:
    """``call()``'s value, or the error it raised if that is one of the ``allowed`` types
    (``(None, error)``); any other exception propagates and fails the test."""
    try:
        return call(), None
    except allowed as exc:
        return None, exc
