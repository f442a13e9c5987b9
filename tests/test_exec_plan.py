"""The table that decides whether a command asks first and whether it is confined."""

from __future__ import annotations

import pytest

from codexcore.engine._approvals import ExecPlan, plan_exec
from codexcore.protocol import ApprovalPolicy

R, RC = ExecPlan.RUN, ExecPlan.RUN_CONFINED
AR, ARC, NO = ExecPlan.ASK_THEN_RUN, ExecPlan.ASK_THEN_CONFINED, ExecPlan.REFUSE

# policy, confine wanted, bwrap works, known safe, escalation -> plan
CASES: list[tuple[ApprovalPolicy, bool, bool, bool, bool, ExecPlan]] = [
    # a working sandbox
    ("untrusted", True, True, False, False, ARC),
    ("untrusted", True, True, True, False, RC),
    ("on-request", True, True, False, False, RC),
    ("on-failure", True, True, False, False, RC),
    ("never", True, True, False, False, RC),
    # escalation always needs a person
    ("untrusted", True, True, True, True, AR),
    ("on-request", True, True, False, True, AR),
    ("on-failure", True, True, False, True, AR),
    ("never", True, True, False, True, NO),
    # confinement wanted but bwrap unavailable: ask for anything not known safe
    ("untrusted", True, False, False, False, AR),
    ("on-request", True, False, False, False, AR),
    ("on-failure", True, False, False, False, AR),
    ("never", True, False, False, False, NO),
    ("never", True, False, True, False, R),
    ("on-request", True, False, True, False, R),
    # danger-full-access: no confinement wanted
    ("untrusted", False, True, False, False, AR),
    ("untrusted", False, True, True, False, R),
    ("on-failure", False, True, False, False, AR),
    ("on-request", False, True, False, False, R),
    ("never", False, False, False, False, R),
]


@pytest.mark.parametrize(
    ("policy", "confine", "can_confine", "safe", "escalated", "expected"),
    CASES,
    ids=[
        f"{c[0]}-{'confine' if c[1] else 'full'}-{'bwrap' if c[2] else 'nobwrap'}"
        f"-{'safe' if c[3] else 'unsafe'}{'-escalated' if c[4] else ''}"
        for c in CASES
    ],
)
def test_plan(
    policy: ApprovalPolicy,
    confine: bool,
    can_confine: bool,
    safe: bool,
    escalated: bool,
    expected: ExecPlan,
) -> None:
    assert (
        plan_exec(
            policy,
            confine=confine,
            can_confine=can_confine,
            known_safe=safe,
            escalation_requested=escalated,
        )
        is expected
    )
