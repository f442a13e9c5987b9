"""Seed 000's rendering of ``plan_update`` and ``view_image_tool_call``.

Codelia's ``AgentEvent`` union has no plan event, but its TUI draws a checklist for
the result of its own ``todo_new`` tool (``crates/tui/src/app/runtime/parser/todo.rs``):
a ``tool_result`` whose text is ``Updated todos (new): N pending, ...`` then ``Todo
plan:`` and one ``1. [ ] step`` line a step (``[>]`` in progress, ``[x]`` done).
``todo_new`` replaces the whole list, as ``update_plan`` does, so a plan update is
sent as a ``todo_new`` call and its result, in exactly that text. An image the model
viewed is a ``view_image`` call (Codelia has one too) with its result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codexcore.protocol import PlanUpdate, ViewImageToolCall

if TYPE_CHECKING:
    from ._events import AgentEvent, RunView

TODO_TOOL = "todo_new"
VIEW_IMAGE = "view_image"
_MARK = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


def plan_text(msg: PlanUpdate) -> str:
    """The plan as Codelia's todo tools word their result (what its TUI parses)."""
    counts = {status: sum(item.status == status for item in msg.plan) for status in _MARK}
    running = next((n for n, item in enumerate(msg.plan, 1) if item.status == "in_progress"), None)
    nxt = f" Next: [{running}]." if running is not None else ""
    lines = [
        f"Updated todos (new): {counts['pending']} pending, {counts['in_progress']} in "
        f"progress, {counts['completed']} completed.{nxt}",
        "Todo plan:",
        *(f"{n}. {_MARK[item.status]} {item.step}" for n, item in enumerate(msg.plan, 1)),
    ]
    if msg.explanation:
        lines.append(msg.explanation)
    return "\n".join(lines)


def plan_events(run: RunView, msg: PlanUpdate) -> list[AgentEvent]:
    run.plans += 1
    call_id = f"{run.run_id}:plan-{run.plans}"
    todos: list[dict[str, Any]] = [
        {"id": str(n), "content": item.step, "status": item.status}
        for n, item in enumerate(msg.plan, 1)
    ]
    call = {
        "type": "tool_call",
        "tool": TODO_TOOL,
        "args": {"todos": todos},
        "tool_call_id": call_id,
    }
    result = {
        "type": "tool_result",
        "tool": TODO_TOOL,
        "result": plan_text(msg),
        "tool_call_id": call_id,
        "is_error": False,
    }
    return [call, result]


def image_events(run: RunView, msg: ViewImageToolCall) -> list[AgentEvent]:
    args = {"file_path": msg.path}
    return [
        {"type": "tool_call", "tool": VIEW_IMAGE, "args": args, "tool_call_id": msg.call_id},
        {
            "type": "tool_result",
            "tool": VIEW_IMAGE,
            "result": f"Attached image: {msg.path}",
            "tool_call_id": msg.call_id,
            "is_error": False,
        },
    ]
