"""The built-in ``update_plan`` tool: the model keeps a checklist the user can see.

The tool does nothing but check its arguments and report them as ``plan_update``
(Codex's ``handlers/plan.rs``): its inputs are what matters, to the UI that draws the
plan and to the model that has to state one. A bad call is answered with an error
naming the problem, and no event is sent.
"""

from __future__ import annotations

from typing import Any, get_args

from ..protocol import PlanItem, PlanUpdate, StepStatus

PLAN_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "update_plan",
    "description": (
        "Updates the task plan.\n"
        "Provide an optional explanation and a list of plan items, each with a step and "
        "status.\nAt most one step can be in_progress at a time."
    ),
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "plan": {
                "type": "array",
                "description": "The list of steps",
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string"},
                        "status": {
                            "type": "string",
                            "description": "One of: pending, in_progress, completed",
                        },
                    },
                    "required": ["step", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["plan"],
        "additionalProperties": False,
    },
}

PLAN_UPDATED = "Plan updated"
"""What the model is told of a plan it sent that was accepted (Codex's words)."""

MAX_STEPS = 100
MAX_STEP_CHARS = 1000
_STATUSES: tuple[str, ...] = get_args(StepStatus)


class PlanError(ValueError):
    """The arguments are no valid plan; the message names the problem, for the model."""


def parse_plan(args: dict[str, Any]) -> PlanUpdate:
    """``update_plan``'s arguments (a decoded JSON object) as a checked ``plan_update``."""
    unknown = sorted(set(args) - {"explanation", "plan"})
    if unknown:
        raise PlanError(f"unknown field(s) {', '.join(unknown)}; the fields are explanation, plan")
    explanation = args.get("explanation")
    if explanation is not None and not isinstance(explanation, str):
        raise PlanError("'explanation' must be a string")
    steps = args.get("plan")
    if not isinstance(steps, list):
        raise PlanError("'plan' must be an array of {step, status}")
    if len(steps) > MAX_STEPS:
        raise PlanError(f"'plan' has {len(steps)} steps; at most {MAX_STEPS} are kept")
    plan = tuple(_item(n, step) for n, step in enumerate(steps))
    running = [n for n, item in enumerate(plan) if item.status == "in_progress"]
    if len(running) > 1:
        where = ", ".join(f"plan[{n}]" for n in running)
        raise PlanError(f"at most one step can be in_progress, and {where} are")
    return PlanUpdate(plan, explanation or None)


def _item(n: int, value: Any) -> PlanItem:
    where = f"plan[{n}]"
    if not isinstance(value, dict):
        raise PlanError(f"{where} must be an object {{step, status}}")
    unknown = sorted(set(value) - {"step", "status"})
    if unknown:
        raise PlanError(f"{where} has unknown field(s) {', '.join(unknown)}")
    step, status = value.get("step"), value.get("status")
    if not isinstance(step, str) or not step.strip():
        raise PlanError(f"{where}.step must be a non-empty string")
    if len(step) > MAX_STEP_CHARS:
        raise PlanError(f"{where}.step is longer than {MAX_STEP_CHARS} characters")
    if status not in _STATUSES:
        raise PlanError(f"{where}.status must be one of {', '.join(_STATUSES)}, not {status!r}")
    return PlanItem(step.strip(), status)
