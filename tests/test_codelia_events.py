"""The EventMsg -> AgentEvent table of the Codelia protocol (adapters/jsonrpc/codelia/_events.py),
checked whole."""

from __future__ import annotations

import json
import typing
from typing import Any

import orjson

from codexcore.adapters.jsonrpc.codelia._events import (
    AGENT_EVENT_TYPES,
    MAPPING,
    NOT_SENT,
    RunView,
    build,
    failure_kind,
)
from codexcore.adapters.jsonrpc.codelia._runs import _confirm_result, confirm_params
from codexcore.engine import DEFAULT_CONTEXT_WINDOW, MODEL_DETAILS, context_window, model_details
from codexcore.protocol import (
    AddChange,
    AgentMessage,
    AgentMessageDelta,
    AgentReasoning,
    AgentReasoningDelta,
    ApplyPatchApprovalRequest,
    ContextCompacted,
    ContextCompactionStarted,
    ErrorEvent,
    EventMsg,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    FileChange,
    ListSkillsResponse,
    PatchApplyBegin,
    PatchApplyEnd,
    PlanItem,
    PlanUpdate,
    SandboxPolicy,
    SessionConfigured,
    SessionHistory,
    SessionList,
    ShutdownComplete,
    StreamError,
    SubmissionAck,
    TaskComplete,
    TaskStarted,
    TokenCount,
    TurnAborted,
    TurnComplete,
    TurnDiff,
    UpdateChange,
    UserMessage,
    ViewImageToolCall,
    WarningEvent,
)

from .protocol_samples import EVENT_MSGS as SAMPLE_EVENT_MSGS

# The union of Codelia's AgentEvent (packages/shared-types/src/events.ts), as its source spells it.
CODELIA_UNION = {
    "text",
    "reasoning",
    "llm.retry",
    "step_start",
    "tool_call",
    "tool_result",
    "permission.preview",
    "permission.ready",
    "step_complete",
    "compaction_start",
    "compaction_complete",
    "hidden_user_message",
    "final",
}

CHANGES: dict[str, FileChange] = {
    "/w/a.txt": UpdateChange("@@ -1 +1 @@\n-old\n+new\n"),
    "/w/b.txt": AddChange("hi\n"),
}

ONE_OF_EACH: list[EventMsg] = [
    SessionConfigured("s", "gpt-5", "/w", "on-request", SandboxPolicy(), "server"),
    TaskStarted(),
    AgentMessageDelta("Hel"),
    AgentMessage("Hello"),
    AgentReasoningDelta("thi"),
    AgentReasoning("thinking"),
    ExecApprovalRequest("c1", ("touch", "x y"), "/w"),
    ExecCommandBegin("c1", ("touch", "x y"), "/w"),
    ExecCommandOutputDelta("c1", "stdout", b"out"),
    ExecCommandEnd("c1", "out\n", "", "out\n", 0, 5, "completed"),
    ApplyPatchApprovalRequest("p1", CHANGES),
    PatchApplyBegin("p1", False, CHANGES),
    PatchApplyEnd("p1", "M a.txt", "", True),
    TurnDiff("diff"),
    TokenCount(10, 0, 5, 0, 15),
    WarningEvent("careful"),
    StreamError("HTTP 429: slow down", 1, 5),
    TurnComplete("r1"),
    ContextCompactionStarted("auto"),
    ContextCompacted(),
    SubmissionAck("x", False),
    SessionList(()),
    SessionHistory("s", 0, 0, ()),
    PlanUpdate((PlanItem("read", "completed"), PlanItem("fix", "in_progress"))),
    ViewImageToolCall("v1", "/w/shot.png"),
    ListSkillsResponse(()),
    TaskComplete("Hello"),
    TurnAborted("interrupted"),
    ErrorEvent("boom", "internal"),
    *[msg for msg in SAMPLE_EVENT_MSGS if msg.TYPE.startswith("mcp_")],
    *[msg for msg in SAMPLE_EVENT_MSGS if msg.TYPE == "request_user_input"],
    *[msg for msg in SAMPLE_EVENT_MSGS if msg.TYPE == "dynamic_tool_call_request"],
    ShutdownComplete(),
    UserMessage("hello"),
]


def test_every_event_type_is_mapped_or_listed_as_not_sent() -> None:
    (union,) = typing.get_args(EventMsg)[:1]
    engine_types = {member.TYPE for member in typing.get_args(union)}
    assert set(MAPPING) | set(NOT_SENT) == engine_types
    assert not set(MAPPING) & set(NOT_SENT)
    assert {type(msg).TYPE for msg in ONE_OF_EACH} == engine_types


def test_nothing_built_falls_outside_codelias_union() -> None:
    assert AGENT_EVENT_TYPES == CODELIA_UNION
    for preflight in (False, True):
        run = RunView("run-1", preflight=preflight)
        built = [event for msg in ONE_OF_EACH for event in build(run, msg)]
        assert {event["type"] for event in built} <= CODELIA_UNION
        types = [event["type"] for event in built]
        assert ("permission.preview" in types) is preflight
        assert ("permission.ready" in types) is preflight


def test_a_command_is_one_call_and_one_result_with_its_command_as_a_string() -> None:
    run = RunView("run-1", preflight=True)
    built = [e for m in ONE_OF_EACH[6:10] for e in build(run, m)]
    assert [e["type"] for e in built] == [
        "step_start",
        "tool_call",
        "permission.ready",
        "tool_result",
    ]
    assert built[1]["args"] == {"command": "touch 'x y'", "cwd": "/w"}
    result = json.loads(built[3]["result"])
    assert result == {
        "state": "completed",
        "command": "touch 'x y'",
        "exit_code": 0,
        "duration_ms": 5,
        "stdout": "out",
    }
    assert built[3]["tool_call_id"] == "c1"
    assert built[3]["is_error"] is False


def test_a_patch_previews_its_diff_and_its_result_carries_the_same() -> None:
    run = RunView("run-1", preflight=True)
    built = [e for m in ONE_OF_EACH[10:13] for e in build(run, m)]
    types = [e["type"] for e in built]
    assert types == [
        "step_start",
        "tool_call",
        "permission.preview",
        "permission.ready",
        "tool_result",
    ]
    preview = built[2]["diff"]
    assert "+new" in preview
    assert "+++ b//w/b.txt" in preview
    assert json.loads(built[4]["result"])["diff"] == preview


def test_turns_are_steps_and_the_task_ends_with_final() -> None:
    run = RunView("run-1")
    built = [
        e
        for m in (
            TaskStarted(),
            AgentMessage("a"),
            TurnComplete("r"),
            AgentMessage("b"),
            TaskComplete("b"),
        )
        for e in build(run, m)
    ]
    assert [e["type"] for e in built] == [
        "step_start",
        "text",
        "step_complete",
        "step_start",
        "text",
        "step_complete",
        "final",
    ]
    assert built[-1] == {"type": "final", "content": "b"}
    assert [e["step_number"] for e in built if e["type"] == "step_start"] == [1, 2]


def test_a_call_left_open_is_closed_when_the_turn_ends() -> None:
    run = RunView("run-1")
    build(run, ExecApprovalRequest("c9", ("rm", "x"), "/w"))
    closing = build(run, TurnAborted("interrupted"))
    assert closing[0] == {
        "type": "tool_result",
        "tool": "shell",
        "result": "aborted",
        "tool_call_id": "c9",
        "is_error": True,
    }


def test_retry_kinds() -> None:
    assert failure_kind("HTTP 429 Too Many Requests") == "rate_limit"
    assert failure_kind("the stream was idle for 300 s") == "timeout"
    assert failure_kind("HTTP 500") == "provider"


def test_the_model_table_answers_snapshots_by_family_and_unknown_models_conservatively() -> None:
    assert next(iter(MODEL_DETAILS)) == "gpt-5.1-codex"
    dates = [d.release_date or "" for d in MODEL_DETAILS.values()]
    assert dates == sorted(dates, reverse=True)  # newest first, as model.list lists them
    assert context_window("gpt-5-codex-2025-09-15") == 400_000  # its family, not gpt-5's alone
    assert model_details("gpt-4o-mini-2024-07-18") == MODEL_DETAILS["gpt-4o-mini"]
    assert context_window("llama3:8b") == DEFAULT_CONTEXT_WINDOW
    assert DEFAULT_CONTEXT_WINDOW == min(d.context_window for d in MODEL_DETAILS.values())


def test_only_an_explicit_ok_true_approves() -> None:
    assert _confirm_result({"ok": True, "remember": True, "reason": None}) == (True, True, None)
    assert _confirm_result({"ok": False, "remember": False, "reason": " no "}) == (
        False,
        False,
        "no",
    )
    for answer in ({"ok": "true"}, {"ok": 1}, None, [True], "ok", {}):
        assert _confirm_result(answer)[0] is False, answer


def test_a_confirm_shows_where_a_patch_really_writes() -> None:
    request = ApplyPatchApprovalRequest(
        "p1",
        {"/w/link": AddChange("x\n")},
        reason="writes outside the writable roots: link -> /etc/x",
        resolved_paths={"/w/link": "/etc/x"},
    )
    params = confirm_params("run-1", request)
    assert params["message"].splitlines()[0] == "/w/link -> /etc/x"
    assert params["danger_level"] == "danger"
    exec_params = confirm_params("run-1", ExecApprovalRequest("c1", ("rm", "-rf", "a b"), "/w"))
    assert exec_params["message"] == "rm -rf 'a b'\nin /w"
    assert exec_params["danger_level"] == "normal"


def test_the_delta_hot_path_writes_the_generic_paths_bytes() -> None:
    """A codexcore_events client's delta lines, cut from the native encoding, are byte for
    byte what agent_events + notify would write; an event of another run or type stops
    the cut (the generic path takes it), and a client that did not ask gets no line."""
    from codexcore.adapters.jsonrpc._machine import notification
    from codexcore.adapters.jsonrpc.codelia._deltas import take_deltas
    from codexcore.adapters.jsonrpc.codelia._events import RunView
    from codexcore.adapters.jsonrpc.codelia._runs import agent_events
    from codexcore.protocol import AgentMessageDelta, Event, TaskComplete, encode_event

    texts = [
        "tok1 ",
        "",
        'say "hi"\n',
        "é🙂\u2028",
        ',"msg":{"type":"agent_message_delta","delta":',
    ]
    events = [Event("run-1", 7 + i, AgentMessageDelta(t)) for i, t in enumerate(texts)]
    batch = [encode_event(e) for e in events]
    batch += [encode_event(Event("run-2", 20, AgentMessageDelta("x")))]
    batch += [encode_event(Event("run-1", 21, TaskComplete()))]
    expected = []
    for seq, event in enumerate(events, start=3):
        agent, meta = agent_events(RunView("run-1", preflight=False), event, True)
        params = {"run_id": "run-1", "seq": seq, "event": agent[0], "meta": meta}
        expected.append(notification("agent.event", params))
    lines: list[bytes] = []
    assert take_deltas("run-1", 3, batch, 0, lines) == (len(texts), 3 + len(texts))
    assert lines == expected
    assert take_deltas("run-1", 3, batch, 1, None) == (len(texts), 3)
    assert take_deltas("run-2", 0, batch, 0, []) == (0, 0)


def test_compactions_become_codelias_compaction_events() -> None:
    run = RunView("run-1")
    start = build(run, ContextCompactionStarted("auto"))
    assert [e["type"] for e in start] == ["step_start", "compaction_start"]
    done = build(run, ContextCompacted())
    assert done == [
        {"type": "compaction_complete", "timestamp": done[0]["timestamp"], "compacted": True}
    ]
    # A compaction the Task did not finish is completed as not compacted, before the step closes.
    run = RunView("run-2")
    build(run, ContextCompactionStarted("manual"))
    ended = build(run, ErrorEvent("too long", "context_window_exceeded"))
    assert [(e["type"], e.get("compacted")) for e in ended] == [
        ("compaction_complete", False),
        ("step_complete", None),
    ]
    assert build(run, TurnAborted("interrupted")) == []  # nothing left open


def test_a_run_that_only_compacted_ends_with_codelias_words() -> None:
    run = RunView("run-1")
    only: list[EventMsg] = [TaskStarted(), ContextCompactionStarted("manual"), ContextCompacted()]
    for msg in only:
        build(run, msg)
    assert build(run, TaskComplete())[-1] == {
        "type": "final",
        "content": "Compaction run completed.",
    }
    run = RunView("run-2")  # an auto-compaction inside a run that answered: its own final
    answered: list[EventMsg] = [
        TaskStarted(),
        TurnComplete("r1"),
        ContextCompactionStarted("auto"),
        ContextCompacted(),
    ]
    for msg in answered:
        build(run, msg)
    assert build(run, TaskComplete())[-1] == {"type": "final", "content": ""}


def test_a_codexcore_event_carries_the_native_event_once() -> None:
    """For a client that asked for every EventMsg, a ``codexcore.*`` event is the native
    msg, so ``meta.codexcore`` is its seq alone, and the native event is rebuilt from the
    line whole; a mapped event keeps the whole native event in ``meta``, and a Codelia
    UI's lines are as before (the native event whole beside Codelia's event)."""
    from codexcore.adapters.jsonrpc.codelia._deltas import take_deltas
    from codexcore.adapters.jsonrpc.codelia._events import RunView
    from codexcore.adapters.jsonrpc.codelia._runs import agent_events
    from codexcore.protocol import AgentMessage, AgentMessageDelta, Event, TokenCount, encode_event

    def native_of(params: dict[str, Any]) -> dict[str, Any]:
        event = params["event"]
        msg = {**event, "type": event["type"].removeprefix("codexcore.")}
        return {"id": params["run_id"], "seq": params["meta"]["codexcore"]["seq"], "msg": msg}

    delta = Event("run-1", 41, AgentMessageDelta('a "quoted" delta'))
    lines: list[bytes] = []
    take_deltas("run-1", 0, [encode_event(delta)], 0, lines)
    (line,) = lines
    assert line.count(b'a \\"quoted\\" delta') == 1  # the text once, not twice
    params = orjson.loads(line)["params"]
    assert params["meta"] == {"codexcore": {"seq": 41}}
    assert native_of(params) == orjson.loads(encode_event(delta))
    usage = Event("run-1", 42, TokenCount(input_tokens=10, total_tokens=12))
    built, meta = agent_events(RunView("run-1"), usage, True)
    assert native_of({"run_id": "run-1", "event": built[0], "meta": meta}) == orjson.loads(
        encode_event(usage)
    )
    answer = Event("run-1", 43, AgentMessage("Done."))
    for wants_codexcore in (True, False):
        built, meta = agent_events(RunView("run-1"), answer, wants_codexcore)
        assert [e["type"] for e in built] == ["step_start", "text"]
        assert meta == {"codexcore": orjson.loads(encode_event(answer))}
    assert agent_events(RunView("run-1"), usage, False) == (
        [],
        {"codexcore": orjson.loads(encode_event(usage))},
    )
