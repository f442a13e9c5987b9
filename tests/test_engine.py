"""The engine against a scripted Responses API: the seed's flows and every rule around them."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore import Codex, EngineClosed, Rejected
from codexcore import protocol as p
from codexcore.protocol import (
    ConfigureSession,
    ExecApproval,
    InjectInput,
    Interrupt,
    LocalImageInput,
    SandboxPolicy,
    Shutdown,
    Submission,
    TextInput,
    UserInput,
)
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    function_call_response,
    http_error,
    idle,
    shell_call,
    text_response,
    truncated,
)
from codexcore.tools._reaper import reaper

from .engine_helpers import (
    Recorder,
    contextual_input,
    engine_config,
    running_engine,
    typed_input,
)
from .flows import basic_model, interrupt_model, outputs_sent

pytestmark = pytest.mark.anyio

PY = sys.executable


def say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


# --- the seed's two diagrams ------------------------------------------------------


async def test_basic_ui_flow(tmp_path: Path) -> None:
    """Configure, input, an approved command, then the final message (seed diagram 1)."""
    model = basic_model()
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(ConfigureSession(approval_policy="untrusted"), id="cfg")
        configured = await ui.until(p.SessionConfigured)
        assert configured.id == "cfg"
        assert configured.msg.approval_policy == "untrusted"
        assert configured.msg.cwd == str(tmp_path)

        await ui.submit(say("run it"), id="u1")
        request = await ui.until(p.ExecApprovalRequest)
        assert request.id == "u1"
        assert request.msg.command == (PY, "-c", "print('hello')")
        await ui.submit(ExecApproval("c1", "approved"))
        done = await ui.until(p.TaskComplete)

    assert ui.types(id="u1") == [
        "task_started",
        "user_message",
        "exec_approval_request",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
        "agent_message",
        "turn_complete",
        "task_complete",
    ]
    end = ui.of(p.ExecCommandEnd)[0]
    assert (end.exit_code, end.stdout, end.status) == (0, "hello\n", "completed")
    assert b"".join(d.chunk for d in ui.of(p.ExecCommandOutputDelta)) == b"hello\n"
    assert [t.response_id for t in ui.of(p.TurnComplete)] == ["resp_1", "resp_2"]
    assert (done.msg.last_agent_message, done.msg.response_id) == ("All done.", "resp_2")
    assert "".join(d.delta for d in ui.of(p.AgentMessageDelta)) == "All done."
    # The second request continues the first and carries the command's output.
    second = model.requests[1]
    assert second["previous_response_id"] == "resp_1"
    assert json.loads(outputs_sent(second)["c1"])["output"] == "hello\n"


async def test_task_interrupt_and_continue_from_bookmark(tmp_path: Path) -> None:
    """Interrupt a running command, then fork from the Task's bookmark (seed diagram 2)."""
    model = interrupt_model()
    async with running_engine(model, tmp_path, approval_policy="never") as ui:
        await ui.submit(say("first"), id="t1")
        bookmark = (await ui.until(p.TurnComplete)).msg.response_id
        await ui.until(p.ExecCommandOutputDelta)  # the stubborn command is running
        started = time.monotonic()
        await ui.submit(Interrupt())
        aborted = await ui.until(p.TurnAborted)
        assert time.monotonic() - started < 1.0
        assert (aborted.id, aborted.msg.reason) == ("t1", "interrupted")

        await ui.submit(UserInput((TextInput("go on"),), last_response_id=bookmark), id="t2")
        done = await ui.until(p.TaskComplete)
        assert done.id == "t2"

    assert bookmark == "resp_1"
    fork = model.requests[2]
    assert fork["previous_response_id"] == "resp_1"
    # The fork resends resp_1's answered call so the conversation stays valid.
    assert list(outputs_sent(fork)) == ["c1"]
    assert fork["input"][-1]["content"] == [{"type": "input_text", "text": "go on"}]
    assert ui.types(id="t2") == [
        "task_started",
        "user_message",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
        "agent_message",
        "turn_complete",
        "task_complete",
    ]


# --- approvals -----------------------------------------------------------------------


async def test_denied_command_goes_back_to_the_model(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "open('x','w')"], call_id="c1"),
            text_response("Understood, I won't."),
        ]
    )
    async with running_engine(model, tmp_path, approval_policy="untrusted") as ui:
        await ui.submit(say("write x"))
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(ExecApproval("c1", "denied"))
        await ui.until(p.TaskComplete)
    assert "exec_command_begin" not in ui.types()
    assert not (tmp_path / "x").exists()
    assert "denied" in outputs_sent(model.requests[1])["c1"]


async def test_approved_for_session_is_remembered(tmp_path: Path) -> None:
    argv = [PY, "-c", "print('again')"]
    model = ScriptedModel(
        [
            shell_call(argv, call_id="c1"),
            shell_call(argv, call_id="c2"),
            shell_call([PY, "-c", "print('other')"], call_id="c3"),
            text_response("ok"),
        ]
    )
    async with running_engine(model, tmp_path, approval_policy="untrusted") as ui:
        await ui.submit(say("go"))
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(ExecApproval("c1", "approved_for_session"))
        other = await ui.until(p.ExecApprovalRequest)
        assert other.msg.call_id == "c3"  # c2, the same argv in the same cwd, did not ask
        await ui.submit(ExecApproval("c3", "approved"))
        await ui.until(p.TaskComplete)
    assert [e.call_id for e in ui.of(p.ExecCommandEnd)] == ["c1", "c2", "c3"]


async def test_abort_decision_ends_the_task_like_interrupt(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call([PY, "-c", "pass"], call_id="c1"), text_response("next")])
    async with running_engine(model, tmp_path, approval_policy="untrusted") as ui:
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(ExecApproval("c1", "abort"))
        aborted = await ui.until(p.TurnAborted)
        assert aborted.msg.reason == "interrupted"
        # The session goes on: the next input works and answers the aborted call.
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert "aborted" in outputs_sent(model.requests[1])["c1"]


async def test_known_safe_commands_skip_approval_under_untrusted(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call(["ls"], call_id="c1"), text_response("listed")])
    (tmp_path / "visible.txt").write_text("")
    async with running_engine(model, tmp_path, approval_policy="untrusted") as ui:
        await ui.submit(say("list"))
        await ui.until(p.TaskComplete)
    assert "exec_approval_request" not in ui.types()
    assert "visible.txt" in ui.of(p.ExecCommandEnd)[0].stdout


async def test_on_request_asks_only_for_escalation(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "pass"], call_id="c1"),
            shell_call(
                [PY, "-c", "pass"],
                call_id="c2",
                with_escalated_permissions=True,
                justification="needs the network",
            ),
            text_response("ok"),
        ]
    )
    async with running_engine(model, tmp_path, approval_policy="on-request") as ui:
        await ui.submit(say("go"))
        request = await ui.until(p.ExecApprovalRequest)
        assert (request.msg.call_id, request.msg.reason) == ("c2", "needs the network")
        await ui.submit(ExecApproval("c2", "approved"))
        await ui.until(p.TaskComplete)


# --- tools the model gets wrong ----------------------------------------------------------


async def test_unknown_tool_and_bad_arguments_go_back_to_the_model(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call_response("teleport", {"to": "mars"}, call_id="c1"),
            function_call_response("shell", "{not json", call_id="c2"),
            function_call_response("shell", {"command": "ls -l"}, call_id="c3"),
            text_response("sorry"),
        ]
    )
    async with running_engine(model, tmp_path, approval_policy="never") as ui:
        await ui.submit(say("go"))
        await ui.until(p.TaskComplete)
    assert "unknown tool 'teleport'" in outputs_sent(model.requests[1])["c1"]
    assert "not valid JSON" in outputs_sent(model.requests[2])["c2"]
    assert "array of strings" in outputs_sent(model.requests[3])["c3"]


async def test_command_timeout_reports_124(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "import time; time.sleep(30)"], call_id="c1", timeout_ms=300),
            text_response("too slow"),
        ]
    )
    async with running_engine(model, tmp_path, approval_policy="never") as ui:
        await ui.submit(say("go"))
        await ui.until(p.TaskComplete)
    end = ui.of(p.ExecCommandEnd)[0]
    assert (end.exit_code, end.status) == (124, "timed_out")


# --- the model stream: retries and failures --------------------------------------------


async def test_server_error_is_retried(tmp_path: Path) -> None:
    model = ScriptedModel([http_error(500, {"error": {"message": "boom"}}), text_response("hi")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("go"))
        await ui.until(p.TaskComplete)
    retry = ui.of(p.StreamError)[0]
    assert (retry.attempt, retry.max_attempts) == (1, 5)
    assert "500" in retry.message


async def test_rate_limit_honours_retry_after(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            http_error(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0.3"}),
            text_response("hi"),
        ]
    )
    async with running_engine(model, tmp_path) as ui:
        started = time.monotonic()
        await ui.submit(say("go"))
        await ui.until(p.TaskComplete)
    assert time.monotonic() - started >= 0.3
    assert len(ui.of(p.StreamError)) == 1


async def test_stream_closed_early_is_retried(tmp_path: Path) -> None:
    model = ScriptedModel([truncated(text_response("par")), text_response("whole")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("go"))
        done = await ui.until(p.TaskComplete)
    assert done.msg.last_agent_message == "whole"
    assert len(ui.of(p.StreamError)) == 1


async def test_idle_stream_is_retried(tmp_path: Path) -> None:
    model = ScriptedModel([idle(text_response("stalled")), text_response("fresh")])
    config = engine_config(tmp_path)
    config = type(config)(session=config.session, retry_base_delay=0.01, stream_idle_timeout=0.3)
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        await ui.submit(say("go"))
        done = await ui.until(p.TaskComplete)
    assert done.msg.last_agent_message == "fresh"
    assert len(ui.of(p.StreamError)) == 1


async def test_exhausted_retries_end_the_task_with_error(tmp_path: Path) -> None:
    model = ScriptedModel([http_error(503, "unavailable")] * 5)
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("go"), id="t1")
        error = await ui.until(p.ErrorEvent)
        assert (error.id, error.msg.code) == ("t1", "retries_exhausted")
        assert [s.attempt for s in ui.of(p.StreamError)] == [1, 2, 3, 4]


async def test_unauthorized_fails_at_once_with_the_servers_message(tmp_path: Path) -> None:
    model = ScriptedModel([http_error(401, {"error": {"message": "Incorrect API key"}})])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("go"), id="t1")
        error = await ui.until(p.ErrorEvent)
        assert error.msg.code == "unauthorized"
        assert "Incorrect API key" in error.msg.message
        assert ui.of(p.StreamError) == []
        # After a terminal event the next user_input works.
        await ui.submit(say("again"), id="t2")
        await ui.until(p.ErrorEvent, id="t2")  # the script has nothing left: a 500, retried, fails


# --- history modes and forks -------------------------------------------------------------


async def test_client_history_mode_resends_everything(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            text_response("one", response_id="r1"),
            text_response("two", response_id="r2"),
            text_response("fork", response_id="r3"),
        ]
    )
    async with running_engine(model, tmp_path, history_mode="client") as ui:
        await ui.submit(say("first"), id="a")
        await ui.until(p.TaskComplete, id="a")
        await ui.submit(say("second"), id="b")
        await ui.until(p.TaskComplete, id="b")
        await ui.submit(UserInput((TextInput("instead"),), last_response_id="r1"), id="c")
        await ui.until(p.TaskComplete, id="c")

    def texts(request: dict[str, Any]) -> list[str]:
        return [c.get("text") for i in typed_input(request) for c in i.get("content", [])]

    assert all(r["store"] is False and "previous_response_id" not in r for r in model.requests)
    # The initial context went once, with the first request, and is resent as history.
    assert [len(contextual_input(r)) for r in model.requests] == [1, 1, 1]
    assert texts(model.requests[1]) == ["first", "one", "second"]
    assert texts(model.requests[2]) == ["first", "one", "instead"]


async def test_server_history_mode_chains_and_forks(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            text_response("one", response_id="r1"),
            text_response("two", response_id="r2"),
            text_response("fork", response_id="r3"),
            text_response("far", response_id="r4"),
        ]
    )
    async with running_engine(model, tmp_path, history_mode="server") as ui:
        for sub_id, op in [
            ("a", say("first")),
            ("b", say("second")),
            ("c", UserInput((TextInput("instead"),), last_response_id="r1")),
            ("d", UserInput((TextInput("elsewhere"),), last_response_id="resp_from_before")),
        ]:
            await ui.submit(op, id=sub_id)
            await ui.until(p.TaskComplete, id=sub_id)
    assert [r.get("previous_response_id") for r in model.requests] == [
        None,
        "r1",
        "r1",
        "resp_from_before",
    ]
    assert all(r["store"] is True and len(typed_input(r)) == 1 for r in model.requests)
    # The initial context goes with the first request only, and again on a branch from a
    # response this session never saw (what that conversation told its model is unknown).
    assert [len(contextual_input(r)) for r in model.requests] == [1, 0, 0, 1]


async def test_client_mode_rejects_an_unknown_bookmark_without_harm(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("one")])
    async with running_engine(model, tmp_path, history_mode="client") as ui:
        await ui.submit(UserInput((TextInput("x"),), last_response_id="nope"), id="bad")
        error = await ui.until(p.ErrorEvent)
        assert (error.id, error.msg.code) == ("bad", "unknown_response_id")
        await ui.submit(say("fine"), id="ok")
        await ui.until(p.TaskComplete, id="ok")
    assert "task_started" not in ui.types(id="bad")


# --- replacing, reconfiguring, injecting ---------------------------------------------------


async def test_user_input_replaces_a_running_task(tmp_path: Path) -> None:
    model = ScriptedModel([idle(text_response("slow")), text_response("fast")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("one"), id="t1")
        await ui.until(p.AgentMessageDelta)
        await ui.submit(say("two"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert ui.types() == [
        "session_configured",
        "task_started",
        "user_message",
        "turn_aborted",
        "task_started",
        "user_message",
        "agent_message",
        "turn_complete",
        "task_complete",
    ]
    assert ui.of(p.TurnAborted)[0].reason == "replaced"


async def test_reconfigure_aborts_the_running_task(tmp_path: Path) -> None:
    model = ScriptedModel([idle(text_response("slow"))])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("one"), id="t1")
        await ui.until(p.AgentMessageDelta)
        await ui.submit(ConfigureSession(model="other-model"), id="cfg")
        configured = await ui.until(p.SessionConfigured, id="cfg")
    assert configured.msg.model == "other-model"
    aborted = ui.of(p.TurnAborted)
    assert [a.reason for a in aborted] == ["reconfigured"]
    # The session, its id and its cwd survive reconfiguration.
    first, second = ui.of(p.SessionConfigured)
    assert (first.session_id, first.cwd) == (second.session_id, second.cwd)


async def test_injected_input_joins_the_next_request(tmp_path: Path) -> None:
    gate = [PY, "-c", "import time; print('working', flush=True); time.sleep(0.5)"]
    model = ScriptedModel([shell_call(gate, call_id="c1"), text_response("saw it")])
    async with running_engine(model, tmp_path, approval_policy="never") as ui:
        await ui.submit(say("start"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(InjectInput((TextInput("also check README"),)), id="inj")
        await ui.until(p.TaskComplete, id="t1")
    second = model.requests[1]
    assert second["input"][-1]["content"] == [{"type": "input_text", "text": "also check README"}]
    assert ui.types(id="inj") == []


async def test_inject_when_idle_starts_a_task(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(InjectInput((TextInput("hi"),)), id="i1")
        await ui.until(p.TaskComplete, id="i1")


async def test_local_image_is_sent_inline_and_a_missing_one_is_rejected(tmp_path: Path) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    model = ScriptedModel([text_response("a dot")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(UserInput((LocalImageInput(str(tmp_path / "gone.png")),)), id="bad")
        error = await ui.until(p.ErrorEvent, id="bad")
        assert error.msg.code == "bad_input"
        assert "gone.png" in error.msg.message
        await ui.submit(UserInput((LocalImageInput(str(image)),)), id="ok")
        await ui.until(p.TaskComplete, id="ok")
    content = typed_input(model.requests[0])[0]["content"][0]
    assert content["image_url"].startswith("data:image/png;base64,")


# --- bad submissions and shutdown ------------------------------------------------------------


async def test_bad_submissions_get_errors_and_the_session_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("still here")])
    async with running_engine(model, tmp_path) as ui:
        queue = ui.codex.submission_queue.async_q
        await queue.put(Rejected("", "invalid JSON: unexpected end of data"))
        await queue.put(Rejected("s9", "op.type: unknown Op type 'dance'"))
        await ui.submit(ExecApproval("no-such-call", "approved"), id="appr")
        first = await ui.until(p.ErrorEvent)
        assert (first.id, first.msg.code) == ("", "bad_submission")
        second = await ui.until(p.ErrorEvent)
        assert second.id == "s9"
        assert "dance" in second.msg.message
        third = await ui.until(p.ErrorEvent)
        assert (third.id, third.msg.code) == ("appr", "unknown_call_id")
        await ui.submit(say("ok?"), id="t")
        await ui.until(p.TaskComplete, id="t")


def _children() -> set[int]:
    """Our child processes, less the process-wide reaper (it lives as long as we do)."""
    me = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                found.add(int(entry))
    return found - {reaper().pid}


async def test_shutdown_during_a_command_leaves_nothing_behind(tmp_path: Path) -> None:
    before_tasks = asyncio.all_tasks()
    model = ScriptedModel(
        [
            shell_call(
                [PY, "-c", "import time; print('x', flush=True); time.sleep(60)"], call_id="c1"
            )
        ]
    )
    async with Codex(
        engine_config(tmp_path, approval_policy="never"), transport=model.mock_transport()
    ) as codex:
        ui = Recorder(codex)
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        assert _children(), "the command should be running"
        await ui.submit(Shutdown(), id="bye")
        await ui.drain()
    assert ui.types()[-2:] == ["turn_aborted", "shutdown_complete"]
    assert ui.of(p.TurnAborted)[0].reason == "shutdown"
    assert _children() == set()
    assert asyncio.all_tasks() == before_tasks
    ui.check_invariants()
    with pytest.raises(Exception, match="shut down"):
        await codex.submit(say("too late"))


async def test_closing_without_reading_does_not_hang(tmp_path: Path) -> None:
    """A UI that stops reading blocks the engine (backpressure); closing still works."""
    model = ScriptedModel([text_response("x" * 5000, chunks=2000)])
    config = engine_config(tmp_path)
    config = type(config)(session=config.session, event_queue_size=8)
    async with asyncio.timeout(5):
        async with Codex(config, transport=model.mock_transport()) as codex:
            await codex.submit(say("flood"))
            # Filling the queue has no event of its own: poll the condition.
            while not codex.event_queue.async_q.full():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    assert _children() == set()


async def test_sandbox_policy_is_reported(tmp_path: Path) -> None:
    model = ScriptedModel([])
    async with running_engine(model, tmp_path) as ui:
        policy = SandboxPolicy("read-only")
        await ui.submit(ConfigureSession(sandbox_policy=policy))
        configured = await ui.until(p.SessionConfigured)
    assert configured.msg.sandbox_policy == policy


# --- acknowledgements and duplicates ------------------------------------------------------


async def test_acknowledged_submissions_run_once(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("once")])
    config = attrs.evolve(engine_config(tmp_path), acknowledge_submissions=True)
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        await ui.submit(say("go"), id="u1")
        await ui.submit(say("go"), id="u1")  # a client's resend after a reconnect
        await ui.until(p.TaskComplete, id="u1")
        await ui.submit(Shutdown(), id="bye")
        await ui.drain()
    assert ui.of(p.SubmissionAck)[:2] == [p.SubmissionAck("u1", False), p.SubmissionAck("u1", True)]
    assert ui.types(id="u1").count("task_started") == 1
    assert len(model.requests) == 1
    ui.check_invariants()


def test_seen_ids_expire_after_the_ttl() -> None:
    from codexcore.engine._dedupe import SeenIds

    now = [0.0]
    seen = SeenIds(ttl=10, clock=lambda: now[0])
    assert seen.accept("a")
    assert not seen.accept("a")
    now[0] = 5
    assert seen.accept("b")
    now[0] = 10.5
    assert seen.accept("a")  # expired, so accepted again
    assert not seen.accept("b")
    now[0] = 100
    seen.accept("c")
    assert len(seen) == 1


async def test_tasks_never_overlap_even_when_the_event_queue_is_full(tmp_path: Path) -> None:
    """A Task's terminal event is emitted before the next Task can start, even when
    emitting it has to wait for room in the queue."""
    model = ScriptedModel([text_response(f"answer {i}", chunks=4) for i in range(30)])
    config = attrs.evolve(engine_config(tmp_path), event_queue_size=2)
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        for i in range(30):
            await ui.submit(say(f"question {i}"), id=f"t{i}")
            await asyncio.sleep(0)  # let the Task run until the full queue stops it
        await ui.until(p.TaskComplete, id="t29")
        ui.check_invariants()


async def test_closing_before_the_dispatcher_ever_ran(tmp_path: Path) -> None:
    """request_close() right after start(), with no yield between, must not hang."""
    codex = Codex(engine_config(tmp_path), transport=ScriptedModel([]).mock_transport())
    await codex.start()
    codex.request_close()
    async with asyncio.timeout(5):
        await codex.aclose()
    with pytest.raises(Exception, match="shut down"):
        await codex.submit(say("too late"))


@pytest.mark.parametrize("threadsafe", [True, False], ids=["janus", "loop-only"])
async def test_closing_as_a_task_starts_still_ends_it(tmp_path: Path, threadsafe: bool) -> None:
    """The dispatcher lets the queue's reader run between task_started and making the
    Task's asyncio tasks; a request_close() landing there still gives the Task its one
    terminal event, before shutdown_complete."""
    model = ScriptedModel([text_response("never asked")])
    config = engine_config(tmp_path)
    codex = Codex(config, transport=model.mock_transport(), threadsafe=threadsafe)
    await codex.start()
    await codex.submit(ConfigureSession(), id="cfg")
    async with asyncio.timeout(10):
        while (await codex.next_event()).msg.TYPE != "session_configured":
            pass
    started = codex._seq  # task_started will be numbered this
    await codex.submit(say("hello"), id="u1")
    for _ in range(20):  # until the dispatcher is between task_started and the Task
        await asyncio.sleep(0)
        session = codex._session
        if codex._seq > started and session is not None and session.running is None:
            break
    else:
        pytest.fail("the dispatcher never paused between task_started and the Task")
    codex.request_close(discard=False)
    async with asyncio.timeout(10):
        types = [event.msg.TYPE async for event in codex.events()]
    await codex.aclose()
    assert types == ["task_started", "turn_aborted", "shutdown_complete"]


async def test_commands_never_see_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command's output reaches the model, the rollout and every UI: no keys in it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("CODEXCORE_TOKEN", "server-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    model = ScriptedModel([shell_call(["env"], call_id="c1"), text_response("ok")])
    async with running_engine(model, tmp_path, approval_policy="never") as ui:
        await ui.submit(say("print the environment"))
        await ui.until(p.TaskComplete)
    output = ui.of(p.ExecCommandEnd)[0].stdout
    assert "HARMLESS_SETTING=visible" in output
    for secret in ("sk-very-secret", "server-token", "aws-secret"):
        assert secret not in output


async def test_closing_mid_stream_while_reading_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """A host's pump always drains: request_close(discard=False) must keep seq exact."""
    model = ScriptedModel([text_response("x" * 4000, chunks=2000)])
    config = attrs.evolve(engine_config(tmp_path), event_queue_size=8)
    codex = Codex(config, transport=model.mock_transport())
    await codex.start()
    await codex.submit(say("stream"))
    seen: list[p.Event] = []
    async with asyncio.timeout(10):
        async for event in codex.events():
            seen.append(event)
            if event.msg.TYPE == "agent_message_delta" and len(seen) == 200:
                codex.request_close(discard=False)
    await codex.aclose()
    assert [e.seq for e in seen] == list(range(len(seen)))
    assert seen[-1].msg.TYPE == "shutdown_complete"


# --- the loop-only queue pair and the first event's way out -----------------------------


async def test_a_loop_only_engine_runs_the_flow_and_answers_rejected_lines(
    tmp_path: Path,
) -> None:
    """Codex(threadsafe=False), as a session host uses it: same events, no janus."""
    model = ScriptedModel([text_response("Hi there.")])
    config = engine_config(tmp_path)
    async with Codex(config, transport=model.mock_transport(), threadsafe=False) as codex:
        with pytest.raises(RuntimeError, match="loop-only"):
            _ = codex.event_queue
        with pytest.raises(RuntimeError, match="loop-only"):
            _ = codex.submission_queue
        ui = Recorder(codex)
        await codex.enqueue(Rejected("bad1", "invalid JSON: unexpected end", "invalid_json"))
        error = await ui.until(p.ErrorEvent)
        assert (error.id, error.msg.code) == ("bad1", "invalid_json")
        await ui.submit(say("hello"), id="u1")
        done = await ui.until(p.TaskComplete)
        assert done.msg.last_agent_message == "Hi there."
        await ui.submit(Shutdown(), id="bye")
        await ui.drain()
    assert ui.types()[-1] == "shutdown_complete"
    ui.check_invariants()
    with pytest.raises(EngineClosed):
        await codex.enqueue(Submission("late", Shutdown()))


@pytest.mark.parametrize("threadsafe", [True, False], ids=["janus", "loop-only"])
async def test_task_started_is_relayed_before_the_model_is_asked(
    tmp_path: Path, threadsafe: bool
) -> None:
    """A UI that relays events through a task of its own (as every adapter does) has
    task_started in hand before the Task spends its first stretch on the request."""
    relayed: list[str] = []
    seen_at_request: list[list[str]] = []

    def reply(body: dict[str, Any]) -> ScriptedResponse:
        seen_at_request.append(list(relayed))
        return text_response("ok")

    async def relay(codex: Codex, hop: asyncio.Queue[str]) -> None:
        async for event in codex.events():
            hop.put_nowait(event.msg.TYPE)

    async def show(hop: asyncio.Queue[str]) -> None:
        while (kind := await hop.get()) != "task_complete":
            relayed.append(kind)

    model = ScriptedModel([reply])
    config = engine_config(tmp_path)
    async with Codex(config, transport=model.mock_transport(), threadsafe=threadsafe) as codex:
        hop: asyncio.Queue[str] = asyncio.Queue()
        relaying = asyncio.create_task(relay(codex, hop))
        showing = asyncio.create_task(show(hop))
        await codex.submit(say("hello"), id="u1")
        await asyncio.wait_for(showing, 10)
        relaying.cancel()
    assert seen_at_request == [["session_configured", "task_started", "user_message"]]
