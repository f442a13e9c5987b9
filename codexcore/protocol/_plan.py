"""The wire types of the built-in ``update_plan`` and ``view_image`` tools' events.

Codex's shapes: ``plan_update`` is its ``EventMsg::PlanUpdate(UpdatePlanArgs)``
(``protocol/src/plan_tool.rs``), ``view_image_tool_call`` its
``ViewImageToolCallEvent``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._value import Value
from ._wire import EVENT_MSGS, Tagged

StepStatus = Literal["pending", "in_progress", "completed"]
"""Where a plan step stands. At most one step of a plan is ``in_progress``."""


@attrs.frozen(repr=False, eq=False)
class PlanItem(Value):
    """One step of a plan (Codex's ``PlanItemArg``)."""

    step: str
    status: StepStatus


@EVENT_MSGS.register("plan_update")
@attrs.frozen(repr=False, eq=False)
class PlanUpdate(Tagged):
    """The model's plan, whole, each time it calls ``update_plan`` (the latest replaces
    any earlier one). ``explanation`` is the model's note on what changed, if any.
    The engine checked it: steps are non-empty and at most one is ``in_progress``."""

    plan: tuple[PlanItem, ...]
    explanation: str | None = None


@EVENT_MSGS.register("view_image_tool_call")
@attrs.frozen(repr=False, eq=False)
class ViewImageToolCall(Tagged):
    """The model looked at the image file ``path`` (absolute) with ``view_image``: it is
    attached to the model's next request. Sent only once the image was read and checked."""

    call_id: str
    path: str
