"""The engine's events as Codex's ``exec --json`` thread events (codexcore/cli/_thread_events.py).

The expected lines are what ``codex exec --experimental-json`` 0.169.0 prints for the
same happenings (its item ids, ``exit_code`` null while a command runs, the five
usage fields), and what the Codex SDK's ``ThreadEvent`` type declares.
"""

from __future__ import annotations

from typing import Any

from codexcore import protocol as p
from codexcore.cli._thread_events import ThreadEvents


def mapped(*msgs: Any) -> list[dict[str, Any]]:
    events = ThreadEvents()
    return [line for msg in msgs for line in events.map(msg)]


def configured(session_id: str = "0199a213-81c0-7800-8aa1-bbab2a035a53") -> p.SessionConfigured:
    return p.SessionConfigured(
        session_id=session_id,
        model="m",
        cwd="/w",
        approval_policy="never",
        sandbox_policy=p.SandboxPolicy(),
        history_mode="server",
    )


def usage(inp: int, cached: int, out: int, reasoning: int) -> p.TokenCount:
    return p.TokenCount(
        input_tokens=inp,
        cached_input_tokens=cached,
        output_tokens=out,
        reasoning_output_tokens=reasoning,
        total_tokens=inp + out,
    )


def test_a_turn_with_a_command_and_an_answer() -> None:
    lines = mapped(
        configured(),
        p.TaskStarted(),
        p.UserMessage(message="hi"),
        p.ExecCommandBegin(call_id="c1", command=("bash", "-lc", "echo hi"), cwd="/w"),
        p.ExecCommandOutputDelta(call_id="c1", stream="stdout", chunk=b"hi\n"),
        p.ExecCommandEnd(
            call_id="c1",
            stdout="hi\n",
            stderr="",
            aggregated_output="hi\n",
            exit_code=0,
            duration_ms=3,
            status="completed",
        ),
        usage(100, 20, 10, 4),
        p.AgentReasoning(text="thinking"),
        p.AgentMessage(message="It said hi."),
        usage(150, 100, 5, 0),
        p.TaskComplete(last_agent_message="It said hi."),
    )
    command = {"id": "item_0", "type": "command_execution", "command": "bash -lc 'echo hi'"}
    assert lines == [
        {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
        {"type": "turn.started"},
        {
            "type": "item.started",
            "item": {
                **command,
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {**command, "aggregated_output": "hi\n", "exit_code": 0, "status": "completed"},
        },
        {
            "type": "item.completed",
            "item": {"id": "item_1", "type": "reasoning", "text": "thinking"},
        },
        {
            "type": "item.completed",
            "item": {"id": "item_2", "type": "agent_message", "text": "It said hi."},
        },
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": 250,
                "cached_input_tokens": 120,
                "cache_write_input_tokens": 0,
                "output_tokens": 15,
                "reasoning_output_tokens": 4,
            },
        },
    ]


def test_a_failing_command_is_failed_with_its_exit_code() -> None:
    begin = p.ExecCommandBegin(call_id="c", command=("false",), cwd="/w")
    end = p.ExecCommandEnd(
        call_id="c",
        stdout="",
        stderr="no\n",
        aggregated_output="no\n",
        exit_code=1,
        duration_ms=1,
        status="failed",
    )
    item = mapped(begin, end)[-1]["item"]
    assert (item["status"], item["exit_code"], item["aggregated_output"]) == ("failed", 1, "no\n")


def test_a_patch_is_a_file_change_started_then_completed_with_its_paths_and_kinds() -> None:
    changes: dict[str, Any] = {
        "/w/new.txt": p.AddChange(content="x\n"),
        "/w/old.txt": p.DeleteChange(content="y\n"),
        "/w/kept.txt": p.UpdateChange(unified_diff="@@\n-a\n+b\n"),
    }
    begin = p.PatchApplyBegin(call_id="p", auto_approved=True, changes=changes)
    lines = mapped(begin, p.PatchApplyEnd(call_id="p", stdout="", stderr="", success=True))
    item = {
        "id": "item_0",
        "type": "file_change",
        "changes": [
            {"path": "/w/new.txt", "kind": "add"},
            {"path": "/w/old.txt", "kind": "delete"},
            {"path": "/w/kept.txt", "kind": "update"},
        ],
    }
    assert lines == [
        {"type": "item.started", "item": {**item, "status": "in_progress"}},
        {"type": "item.completed", "item": {**item, "status": "completed"}},
    ]
    failed = mapped(begin, p.PatchApplyEnd(call_id="p", stdout="", stderr="bad", success=False))
    assert failed[-1]["item"]["status"] == "failed"


def test_mcp_calls_start_and_complete_with_result_or_error() -> None:
    call = p.McpInvocation(server="docs", tool="search", arguments={"q": "x"})
    ok = {"Ok": {"content": [{"type": "text", "text": "found"}], "structuredContent": {"n": 1}}}
    lines = mapped(
        p.McpToolCallBegin(call_id="m1", invocation=call),
        p.McpToolCallEnd(call_id="m1", invocation=call, duration=p.Duration(0, 1), result=ok),
        p.McpToolCallBegin(call_id="m2", invocation=call),
        p.McpToolCallEnd(
            call_id="m2", invocation=call, duration=p.Duration(0, 1), result={"Err": "timed out"}
        ),
    )
    started, done, _, failed = lines
    assert started["type"] == "item.started"
    assert started["item"] == {
        "id": "item_0",
        "type": "mcp_tool_call",
        "server": "docs",
        "tool": "search",
        "arguments": {"q": "x"},
        "result": None,
        "error": None,
        "status": "in_progress",
    }
    assert done["item"]["result"] == {
        "content": [{"type": "text", "text": "found"}],
        "structured_content": {"n": 1},
    }
    assert done["item"]["status"] == "completed"
    assert failed["item"]["id"] == "item_1"
    assert failed["item"]["error"] == {"message": "timed out"}
    assert failed["item"]["status"] == "failed"


def test_the_plan_is_a_todo_list_started_updated_and_completed_with_the_turn() -> None:
    def plan(*steps: tuple[str, p.StepStatus]) -> p.PlanUpdate:
        return p.PlanUpdate(plan=tuple(p.PlanItem(step=s, status=st) for s, st in steps))

    lines = mapped(
        p.TaskStarted(),
        plan(("read", "in_progress"), ("fix", "pending")),
        plan(("read", "completed"), ("fix", "in_progress")),
        p.TaskComplete(),
    )
    assert [line["type"] for line in lines] == [
        "turn.started",
        "item.started",
        "item.updated",
        "item.completed",
        "turn.completed",
    ]
    assert lines[1]["item"] == {
        "id": "item_0",
        "type": "todo_list",
        "items": [{"text": "read", "completed": False}, {"text": "fix", "completed": False}],
    }
    assert lines[3]["item"]["id"] == "item_0"
    assert lines[3]["item"]["items"][0] == {"text": "read", "completed": True}


def test_a_failed_task_is_an_error_then_turn_failed() -> None:
    lines = mapped(p.TaskStarted(), p.ErrorEvent(message="the model refused", code="bad_request"))
    assert lines[1:] == [
        {"type": "error", "message": "the model refused"},
        {"type": "turn.failed", "error": {"message": "the model refused"}},
    ]
    aborted = mapped(p.TaskStarted(), p.TurnAborted(reason="interrupted"))
    assert aborted[1] == {
        "type": "turn.failed",
        "error": {"message": "the turn was aborted (interrupted)"},
    }


def test_retries_are_error_events_and_warnings_error_items() -> None:
    lines = mapped(
        p.StreamError(message="connection reset", attempt=2, max_attempts=5),
        p.WarningEvent(message="context is nearly full"),
    )
    assert lines == [
        {"type": "error", "message": "Reconnecting... 2/5 (connection reset)"},
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "error", "message": "context is nearly full"},
        },
    ]


def test_thread_started_once_and_usage_counted_per_turn() -> None:
    events = ThreadEvents()
    assert events.map(configured("t1"))[0]["thread_id"] == "t1"
    assert events.map(configured("t1")) == []  # a reconfiguration: the same thread
    for _ in range(2):
        events.map(p.TaskStarted())
        events.map(usage(10, 0, 1, 0))
        done = events.map(p.TaskComplete())
        assert done[-1]["usage"]["input_tokens"] == 10


def test_events_with_no_thread_event_map_to_nothing() -> None:
    assert (
        mapped(
            p.UserMessage(message="hi"),
            p.AgentMessageDelta(delta="h"),
            p.AgentReasoningDelta(delta="t"),
            p.TurnDiff(unified_diff=""),
            p.TurnComplete(),
        )
        == []
    )
