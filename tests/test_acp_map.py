"""The ACP mapping tables without a process: diffs to whole texts, event rows, modes,
the engine's command-runner seam, and that only ``codexcore acp`` loads the optional
package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from acp.connection import StreamDirection, StreamEvent

from codexcore import Codex
from codexcore.adapters.acp._diff import DiffMismatch, old_and_new
from codexcore.adapters.acp._map import OUTPUT_SHOWN, ToolCallMapper, user_message_parts
from codexcore.adapters.acp._modes import (
    CUSTOM_MODE,
    MODES_BY_ID,
    mode_of,
    mode_state,
    policies_of,
)
from codexcore.engine import ExecResult
from codexcore.protocol import (
    AgentMessage,
    AgentMessageDelta,
    ConfigureSession,
    Duration,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    McpInvocation,
    McpToolCallBegin,
    McpToolCallEnd,
    PlanItem,
    PlanUpdate,
    SandboxPolicy,
    TaskComplete,
    TextInput,
    TurnAborted,
    UpdateChange,
    UserInput,
)
from codexcore.testing import ScriptedModel, shell_call, text_response

from .acp_helpers import SchemaChecker
from .engine_helpers import Recorder, engine_config
from .server_helpers import server_env

OLD = "a\nb\nc\nd\n"
NEW = "a\nB\nc\nd\ne\n"
DIFF = "--- x\n+++ x\n@@ -1,4 +1,5 @@\n a\n-b\n+B\n c\n d\n+e\n"


def test_a_diff_gives_both_texts_before_or_after_it_was_applied() -> None:
    assert old_and_new(OLD, DIFF) == (OLD, NEW)
    assert old_and_new(NEW, DIFF) == (OLD, NEW)
    with pytest.raises(DiffMismatch):
        old_and_new("something else\n", DIFF)


def test_a_missing_final_newline_is_kept() -> None:
    diff = (
        "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    )
    assert old_and_new("a\nb", diff) == ("a\nb", "a\nc")


@attrs.frozen
class UserMessage:
    """What the engine's user_message event (being added in parallel) looks like to the mapper."""

    message: str
    TYPE = "user_message"


def updates(m: ToolCallMapper, msg: object) -> list[Any]:
    """The updates of ``msg``, untyped: these tests read fields of one update kind each."""
    return list(m.updates(msg))  # type: ignore[arg-type]


def mapper(tmp_path: Path, files: dict[str, str] | None = None) -> ToolCallMapper:
    return ToolCallMapper(str(tmp_path), (files or {}).get, 400_000)


def test_a_streamed_message_is_not_sent_twice_and_an_unstreamed_one_is_sent(tmp_path: Path) -> None:
    m = mapper(tmp_path)
    assert [u.content.text for u in updates(m, AgentMessageDelta("Hel"))] == ["Hel"]
    assert updates(m, AgentMessage("Hello")) == []
    assert [u.content.text for u in updates(m, AgentMessage("Whole"))] == ["Whole"]
    # Live, the user's prompt is the client's own: it is not echoed (issue 27).
    assert updates(m, UserMessage("hi")) == []
    replay = ToolCallMapper(str(tmp_path), lambda _: None, 400_000, replaying=True)
    [user] = updates(replay, UserMessage("hi"))
    assert (user.session_update, user.content.text) == ("user_message_chunk", "hi")


def test_command_output_is_shown_as_its_tail_and_the_exit_code_at_the_end(tmp_path: Path) -> None:
    m = mapper(tmp_path)
    [start] = updates(m, ExecCommandBegin("c1", ("ls", "-l"), str(tmp_path)))
    assert (start.title, start.kind, start.status) == ("ls -l", "execute", "in_progress")
    # A multibyte character split across two chunks decodes whole.
    updates(m, ExecCommandOutputDelta("c1", "stdout", "é".encode()[:1]))
    [shown] = updates(
        m, ExecCommandOutputDelta("c1", "stdout", "é".encode()[1:] + b"x" * OUTPUT_SHOWN)
    )
    text = shown.content[0].content.text
    assert "é" not in text  # only the tail
    assert "earlier output not shown" in text
    [end] = updates(m, ExecCommandEnd("c1", "", "boom\n", "boom\n", 3, 12, "completed"))
    assert end.status == "failed"
    assert "exit code 3" in end.content[0].content.text
    assert end.raw_output == {"exit_code": 3, "status": "completed", "duration_ms": 12}
    assert list(m.unfinished()) == []


def test_an_update_change_shows_whole_texts_and_falls_back_to_the_diff(tmp_path: Path) -> None:
    path = str(tmp_path / "x")
    m = mapper(tmp_path, {path: NEW})
    shown: Any = m.diff("x", UpdateChange(DIFF))
    assert (shown.path, shown.old_text, shown.new_text) == (path, OLD, NEW)
    changed: Any = mapper(tmp_path, {path: "rewritten meanwhile\n"}).diff("x", UpdateChange(DIFF))
    assert changed.type == "content"
    assert DIFF in changed.content.text


def test_modes_are_the_approval_presets() -> None:
    workspace = SandboxPolicy("workspace-write", writable_roots=("/data",), network_access=True)
    assert mode_of("untrusted", workspace) == "ask"
    assert mode_of("on-failure", workspace) == CUSTOM_MODE
    approval, sandbox = policies_of(MODES_BY_ID["full-access"], workspace)
    assert (approval, sandbox.type, sandbox.writable_roots) == (
        "never",
        "danger-full-access",
        ("/data",),
    )
    ids = [m.id for m in mode_state("ask", "on-failure", workspace).available_modes]
    assert ids == ["read-only", "ask", "auto", "full-access", CUSTOM_MODE]
    assert CUSTOM_MODE not in [
        m.id for m in mode_state("ask", "untrusted", workspace).available_modes
    ]


def test_only_the_acp_command_loads_the_acp_package() -> None:
    script = (
        "import sys, codexcore, codexcore.adapters, codexcore.adapters.stdio\n"
        "from codexcore.cli import build_parser\n"
        "build_parser().parse_args(['acp'])\n"
        "print('acp' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_the_acp_agent_loads_the_mcp_sdk_only_for_a_session_with_servers() -> None:
    script = (
        "import sys, codexcore.adapters.acp, codexcore.adapters.acp._map\n"
        "print('mcp' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.anyio
async def test_the_engine_hands_unconfined_commands_to_its_command_runner(tmp_path: Path) -> None:
    """The engine seam the ACP agent's editor terminals use: unconfined commands go to
    ``command_runner`` between their begin and end events; confined ones never do."""
    ran: list[tuple[str, tuple[str, ...], str, int]] = []

    async def runner(call_id: str, argv: tuple[str, ...], cwd: str, timeout_ms: int) -> ExecResult:
        ran.append((call_id, argv, cwd, timeout_ms))
        return ExecResult(3, "elsewhere\n", "", "elsewhere\n", 5, timed_out=False)

    model = ScriptedModel(
        [
            shell_call(["build", "--all"], call_id="c1", timeout_ms=4000),
            text_response("done"),
            shell_call([sys.executable, "-c", "print('here')"], call_id="c2"),
            text_response("done"),
        ]
    )
    config = attrs.evolve(engine_config(tmp_path, approval_policy="never"), command_runner=runner)
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        full = SandboxPolicy("danger-full-access")
        await ui.submit(ConfigureSession(sandbox_policy=full), id="cfg")
        await ui.submit(UserInput((TextInput("build"),)), id="t1")
        await ui.until(TaskComplete, id="t1")
        await ui.submit(ConfigureSession(sandbox_policy=SandboxPolicy("workspace-write")))
        await ui.submit(UserInput((TextInput("again"),)), id="t2")
        await ui.until(TaskComplete, id="t2")
    assert ran == [("c1", ("build", "--all"), str(tmp_path), 4000)]
    [first, second] = ui.of(ExecCommandEnd)
    assert (first.call_id, first.exit_code, first.aggregated_output) == ("c1", 3, "elsewhere\n")
    assert (second.call_id, second.exit_code) == ("c2", 0)
    assert "elsewhere" in str(model.requests[1]["input"])
    assert ui.types(id="t1")[:5] == [
        "task_started",
        "user_message",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
    ]


def test_the_schema_check_of_the_end_to_end_tests_catches_bad_messages() -> None:
    """tests/acp_helpers.SchemaChecker is not vacuous: a wrong shape is a problem."""
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "go"}]}
    checker = SchemaChecker()
    for direction, message in (
        ("in", {"method": "session/update", "params": {"sessionId": "s", "update": chunk}}),
        ("out", {"id": 7, "method": "session/prompt", "params": prompt}),
        ("in", {"id": 7, "result": {"stopReason": "end_turn"}}),
    ):
        checker(event(direction, message))
    assert (checker.checked, checker.problems) == (3, [])
    wrong = {"sessionUpdate": "tool_call", "status": "done"}
    checker(
        event("in", {"method": "session/update", "params": {"sessionId": "s", "update": wrong}})
    )
    checker(event("out", {"id": 8, "method": "session/prompt", "params": prompt}))
    checker(event("in", {"id": 8, "result": {"stopReason": "finished"}}))
    checker(event("in", {"method": "session/unknown", "params": {}}))
    assert {p.split(":")[0] for p in checker.problems} == {
        "session/update",
        "session/prompt result",
        "a method this test does not expect",
    }


def event(direction: str, message: dict[str, Any]) -> StreamEvent:
    way = StreamDirection.INCOMING if direction == "in" else StreamDirection.OUTGOING
    return StreamEvent(way, {"jsonrpc": "2.0", **message})


def test_acp_refuses_stdio_that_is_no_pipe_and_writes_nothing_to_stdout(tmp_path: Path) -> None:
    given = tmp_path / "in.txt"
    given.write_text("{}\n")
    env = server_env("http://127.0.0.1:9/v1")
    with given.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "codexcore", "acp"],
            stdin=stdin,
            capture_output=True,
            env=env,
            check=False,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    assert b"stdin and stdout must be pipes or sockets" in done.stderr


def test_an_mcp_approval_is_a_tool_call_only_for_a_server_of_the_session(tmp_path: Path) -> None:
    m = ToolCallMapper(str(tmp_path), lambda _: None, 400_000, frozenset({"demo"}))
    ask = ExecApprovalRequest("m1", ("mcp", "demo", "erase", '{"path": "x"}'), str(tmp_path))
    [pending] = updates(m, ask)
    assert (pending.kind, pending.title, pending.status) == ("other", "demo.erase", "pending")
    assert pending.raw_input == {"server": "demo", "tool": "erase", "arguments": {"path": "x"}}
    # A shell command that happens to be called mcp stays a command.
    shell = ExecApprovalRequest("c1", ("mcp", "other", "erase", "{}"), str(tmp_path))
    [command] = updates(m, shell)
    assert (command.kind, command.title) == ("execute", "mcp other erase '{}'")


def test_mcp_results_failures_and_refusals(tmp_path: Path) -> None:
    m = ToolCallMapper(str(tmp_path), lambda _: None, 400_000, frozenset({"demo"}))
    called = McpInvocation("demo", "look", {"q": 1})
    took = Duration(0, 5)
    [start] = updates(m, McpToolCallBegin("m1", called))
    assert (start.kind, start.title, start.status) == ("other", "demo.look", "in_progress")
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    ok = {"content": [{"type": "text", "text": "seen"}, image]}
    [end] = updates(m, McpToolCallEnd("m1", called, took, {"Ok": ok}))
    assert end.status == "completed"
    assert end.content[0].content.text == "seen"
    assert (end.content[1].content.type, end.content[1].content.mime_type) == ("image", "image/png")
    updates(m, McpToolCallBegin("m2", called))
    reported = {"content": [{"type": "text", "text": "no such q"}], "isError": True}
    [failed] = updates(m, McpToolCallEnd("m2", called, took, {"Ok": reported}))
    assert (failed.status, failed.content[0].content.text) == ("failed", "no such q")
    updates(m, McpToolCallBegin("m3", called))
    [lost] = updates(m, McpToolCallEnd("m3", called, took, {"Err": "the server exited"}))
    assert (lost.status, lost.content[0].content.text) == ("failed", "the server exited")
    # A call refused in the editor stays failed when the engine reports it ended.
    updates(m, ExecApprovalRequest("m4", ("mcp", "demo", "look", "{}"), str(tmp_path)))
    m.refused_call("m4", "not run: rejected")
    assert updates(m, McpToolCallBegin("m4", called)) == []
    assert updates(m, McpToolCallEnd("m4", called, took, {"Err": "denied"})) == []
    assert list(m.unfinished()) == []


def test_a_plan_is_entries_in_order_with_the_explanation_as_a_thought(tmp_path: Path) -> None:
    plan = (PlanItem("Read", "completed"), PlanItem("Fix", "in_progress"))
    thought, shown = updates(mapper(tmp_path), PlanUpdate(plan, "why"))
    assert thought.content.text == "[plan] why\n"
    assert shown.session_update == "plan"
    assert [(e.content, e.status, e.priority) for e in shown.entries] == [
        ("Read", "completed", "medium"),
        ("Fix", "in_progress", "medium"),
    ]
    [alone] = updates(mapper(tmp_path), PlanUpdate(plan))
    assert alone.session_update == "plan"


def test_a_replayed_prompt_is_split_back_into_its_parts() -> None:
    message = (
        'see <context ref="file:///a.py">\nA = 1\n</context> and <context ref="x">\n\n</context>!'
    )
    parts = user_message_parts(message, ["data:image/png;base64,AAAA", "https://e.x/cat.png"])
    kinds = ["text", "resource", "text", "resource", "text", "image", "resource_link"]
    assert [p.type for p in parts] == kinds
    assert parts[1].resource.uri == "file:///a.py"
    assert parts[1].resource.text == "A = 1"
    assert parts[3].resource.text == ""
    assert (parts[5].mime_type, parts[5].data) == ("image/png", "AAAA")
    assert parts[6].uri == "https://e.x/cat.png"


def test_a_replay_ends_each_call_with_what_became_of_it(tmp_path: Path) -> None:
    m = ToolCallMapper(str(tmp_path), lambda _: None, 400_000, replaying=True)

    def said(update: Any) -> tuple[str, str, str]:
        return (update.tool_call_id, update.status, update.content[0].content.text)

    updates(m, ExecApprovalRequest("c1", ("rm", "x"), str(tmp_path), None))
    # c2 asked after c1: the Task went on, so c1 was rejected (an approved call begins).
    rejected, asked = updates(m, ExecApprovalRequest("c2", ("touch", "y"), str(tmp_path), None))
    assert said(rejected) == ("c1", "failed", "rejected by the user: not run")
    assert (asked.tool_call_id, asked.status) == ("c2", "pending")
    updates(m, ExecCommandBegin("c2", ("touch", "y"), str(tmp_path)))  # approved: it runs
    updates(m, ExecCommandBegin("c3", ("sleep", "9"), str(tmp_path)))
    updates(m, ExecApprovalRequest("c4", ("rm", "z"), str(tmp_path), None))
    ended = [said(u) for u in m.finish_task(TurnAborted.TYPE)]
    assert ended == [
        ("c2", "failed", "cancelled while it ran"),
        ("c3", "failed", "cancelled while it ran"),
        ("c4", "failed", "cancelled before it was approved: not run"),
    ]
