"""The engine's seams for other dialects: approvals with the user's reason, a graceful
``stop``, a ``checkpoint`` pause, and input injected into a running Task.

Everything goes through the public queue pair with a scripted model. Where a test
needs the engine to be at a precise point, it waits on a gate: a command that runs
until the test creates a file, or a model stream held before its last event until
the test releases it. A probe submission (an approval for no call, answered at
once by the dispatcher) shows that every earlier submission has been handled.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import orjson
import pytest

from codexcore import Codex
from codexcore import protocol as p
from codexcore.engine import State
from codexcore.engine._rollout_reader import find_rollout, load_session, read_events, read_records
from codexcore.engine._submissions import PLAN
from codexcore.protocol import (
    Checkpoint,
    ExecApproval,
    InjectInput,
    Interrupt,
    PatchApproval,
    ResumeSession,
    SandboxPolicy,
    Stop,
    TextInput,
    UserInput,
)
from codexcore.protocol._wire import OPS
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    function_call_response,
    shell_call,
    text_response,
)

from .engine_helpers import Recorder, engine_config, typed_input
from .flows import outputs_sent

pytestmark = pytest.mark.anyio

PY = sys.executable
UNCONFINED = SandboxPolicy("danger-full-access")
NOT_ASKED = "not run: the user stopped the task before this call was approved"
_probes = itertools.count(1)


def say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


def inject(text: str) -> InjectInput:
    return InjectInput((TextInput(text),))


def home() -> Path:
    """Where the engine records sessions in tests (conftest sets it per test)."""
    return Path(os.environ["CODEXCORE_HOME"])


def user_texts(request: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for item in typed_input(request)
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item["content"]
    ]


class CommandGate:
    """A command that says ``ready`` and then runs until the test opens the gate
    (a file outside the session's cwd, so no Turn's diff shows it)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "gate-open"

    @property
    def argv(self) -> list[str]:
        wait = (
            "import os, sys, time\n"
            "print('ready', flush=True)\n"
            "while not os.path.exists(sys.argv[1]): time.sleep(0.005)\n"
            "print('released')\n"
        )
        return [PY, "-c", wait, str(self.path)]

    def open(self) -> None:
        self.path.touch()


class StreamGate:
    """Serves a ScriptedModel; the ``number``-th response is held before its last event
    (``response.completed``) until ``release`` is set: the Turn is then in flight,
    its items streamed, its end not yet."""

    def __init__(self, model: ScriptedModel, number: int) -> None:
        self.model, self.number = model, number
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._handle)

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        reply = self.model.respond(orjson.loads(await request.aread()))
        held = len(self.model.requests) == self.number
        headers = [(k, v) for k, v in reply.headers if k.lower() == "content-type"]
        return httpx.Response(reply.status, headers=headers, content=self._play(reply, held))

    async def _play(self, reply: ScriptedResponse, held: bool) -> AsyncIterator[bytes]:
        steps = [step for step in reply.steps if isinstance(step, bytes)]
        for index, step in enumerate(steps):
            if held and index == len(steps) - 1:
                self.reached.set()
                await self.release.wait()
            yield step


def calls_response(calls: Iterable[tuple[str, list[str]]], response_id: str) -> ScriptedResponse:
    """One response holding several ``shell`` calls (call_id, argv), in order."""
    from codexcore._testing_script import _Stream

    stream = _Stream(response_id)
    stream.created()
    for call_id, argv in calls:
        stream.function_call("shell", json.dumps({"command": argv}), call_id)
    stream.completed(None)
    return stream.build()


@pytest.fixture
def gate(tmp_path_factory: pytest.TempPathFactory) -> CommandGate:
    return CommandGate(tmp_path_factory.mktemp("gate"))


@asynccontextmanager
async def engine(
    cwd: Path, transport: httpx.AsyncBaseTransport, **session: Any
) -> AsyncIterator[Recorder]:
    async with Codex(engine_config(cwd, **session), transport=transport) as codex:
        recorder = Recorder(codex)
        yield recorder
        recorder.check_invariants()


async def settled(ui: Recorder) -> None:
    """Return once every submission made so far has been handled (they are taken in order)."""
    probe = f"probe{next(_probes)}"
    await ui.submit(ExecApproval("no-such-call", "approved"), id=probe)
    answer = await ui.until(p.ErrorEvent, id=probe)
    assert answer.msg.code == "unknown_call_id"


def terminals(ui: Recorder, task_id: str) -> list[str]:
    return [t for t in ui.types(id=task_id) if t in p.TERMINAL_EVENT_TYPES]


# --- approvals that carry the user's reason --------------------------------------------


async def test_a_denied_command_tells_the_model_the_users_reason(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "open('x','w')"], call_id="c1"),
            text_response("I will use the staging copy."),
        ]
    )
    async with engine(tmp_path, model.mock_transport(), approval_policy="untrusted") as ui:
        await ui.submit(say("write x"), id="t1")
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(ExecApproval("c1", "denied", reason="not there: use the staging copy"))
        done = await ui.until(p.TaskComplete, id="t1")
    assert not (tmp_path / "x").exists()
    assert outputs_sent(model.requests[1])["c1"] == (
        "error: the user denied this command: not there: use the staging copy"
    )
    assert done.msg.last_agent_message == "I will use the staging copy."


async def test_a_denied_patch_tells_the_model_the_users_reason(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"
    model = ScriptedModel(
        [
            function_call_response("apply_patch", {"input": patch}, call_id="c1"),
            text_response("ok"),
        ]
    )
    async with engine(tmp_path, model.mock_transport(), approval_policy="untrusted") as ui:
        await ui.submit(say("add notes"), id="t1")
        await ui.until(p.ApplyPatchApprovalRequest)
        await ui.submit(PatchApproval("c1", "denied", reason="notes live in the wiki"))
        await ui.until(p.TaskComplete, id="t1")
    assert not (tmp_path / "notes.txt").exists()
    assert outputs_sent(model.requests[1])["c1"] == (
        "error: the user denied this patch: notes live in the wiki"
    )


async def test_a_denial_without_a_reason_still_says_denied(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call([PY, "-c", "pass"], call_id="c1"), text_response("ok")])
    async with engine(tmp_path, model.mock_transport(), approval_policy="untrusted") as ui:
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(ExecApproval("c1", "denied", reason="   "))
        await ui.until(p.TaskComplete, id="t1")
    assert outputs_sent(model.requests[1])["c1"].startswith("error: the user denied this;")


async def test_an_approval_reason_is_recorded_and_changes_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call([PY, "-c", "print(42)"], call_id="c1"), text_response("ok")])
    async with engine(tmp_path, model.mock_transport(), approval_policy="untrusted") as ui:
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(ExecApproval("c1", "approved", reason="looks harmless"))
        await ui.until(p.TaskComplete, id="t1")
        session_id = ui.of(p.SessionConfigured)[0].session_id
    assert json.loads(outputs_sent(model.requests[1])["c1"])["output"] == "42\n"
    records = list(read_records(find_rollout(home(), session_id)))
    assert {
        "type": "approval",
        "op": "exec_approval",
        "call_id": "c1",
        "decision": "approved",
        "reason": "looks harmless",
    } in records


async def test_abort_with_a_reason_reaches_the_model_with_the_next_task(tmp_path: Path) -> None:
    model = ScriptedModel(
        [shell_call([PY, "-c", "pass"], call_id="c1", response_id="r1"), text_response("ok")]
    )
    async with engine(tmp_path, model.mock_transport(), approval_policy="untrusted") as ui:
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(ExecApproval("c1", "abort", reason="wrong branch, stop"))
        aborted = await ui.until(p.TurnAborted, id="t1")
        assert aborted.msg.reason == "interrupted"
        await ui.submit(say("now the right branch"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert outputs_sent(model.requests[1])["c1"] == (
        "aborted: the user stopped the task here: wrong branch, stop"
    )


# --- stop: the current Turn finishes, then nothing more goes to the model ------------------


async def test_stop_lets_a_running_command_finish_and_asks_the_model_nothing_more(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel(
        [
            shell_call(gate.argv, call_id="c1", response_id="r1"),
            text_response("never asked", response_id="r2"),
            text_response("continued", response_id="r3"),
        ]
    )
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("run it"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)  # the command runs
        await ui.submit(Stop(), id="stop")
        await settled(ui)
        gate.open()
        done = await ui.until(p.TaskComplete, id="t1")
        assert len(model.requests) == 1
        assert ui.types(id="stop") == []
        # The next input continues the same conversation, the answered call included.
        await ui.submit(say("go on"), id="t2")
        again = await ui.until(p.TaskComplete, id="t2")

    assert (done.msg.stopped_by, done.msg.response_id) == ("stop", "r1")
    assert done.msg.last_agent_message is None  # the Turn that ran said nothing
    end = ui.of(p.ExecCommandEnd)[0]
    assert (end.exit_code, end.stdout) == (0, "ready\nreleased\n")
    assert ui.types(id="t1") == [
        "session_configured",
        "task_started",
        "user_message",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
        "task_complete",
    ]
    second = model.requests[1]
    assert second["previous_response_id"] == "r1"
    assert json.loads(outputs_sent(second)["c1"])["output"] == "ready\nreleased\n"
    assert user_texts(second) == ["go on"]
    assert (again.msg.stopped_by, again.msg.last_agent_message) == (None, "never asked")


async def test_stop_mid_stream_runs_the_calls_already_made(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "print('ran')"], call_id="c1", response_id="r1"),
            text_response("never asked"),
        ]
    )
    gate = StreamGate(model, number=1)
    async with engine(
        tmp_path, gate.transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("go"), id="t1")
        await asyncio.wait_for(gate.reached.wait(), 10)
        await ui.submit(Stop(), id="stop")
        await settled(ui)
        gate.release.set()
        done = await ui.until(p.TaskComplete, id="t1")
    assert done.msg.stopped_by == "stop"
    assert ui.of(p.ExecCommandEnd)[0].stdout == "ran\n"
    assert len(model.requests) == 1


async def test_stop_while_awaiting_approval_answers_the_calls_as_not_run(tmp_path: Path) -> None:
    """The Turn must end without anyone answering: the waiting request is withdrawn,
    a later call that would ask is not asked, a call that needs no approval runs."""
    model = ScriptedModel(
        [
            calls_response(
                [
                    ("c1", [PY, "-c", "open('one','w')"]),
                    ("c2", [PY, "-c", "open('two','w')"]),
                    ("c3", ["ls"]),
                ],
                response_id="r1",
            ),
            text_response("next task"),
        ]
    )
    async with engine(tmp_path, model.mock_transport(), approval_policy="untrusted") as ui:
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecApprovalRequest)
        await ui.submit(Stop(), id="stop")
        done = await ui.until(p.TaskComplete, id="t1")
        # The withdrawn request can no longer be answered.
        await ui.submit(ExecApproval("c1", "approved"), id="late")
        late = await ui.until(p.ErrorEvent, id="late")
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert done.msg.stopped_by == "stop"
    assert late.msg.code == "unknown_call_id"
    assert [r.call_id for r in ui.of(p.ExecApprovalRequest)] == ["c1"]
    assert [e.call_id for e in ui.of(p.ExecCommandEnd)] == ["c3"]
    assert not (tmp_path / "one").exists()
    assert not (tmp_path / "two").exists()
    outputs = outputs_sent(model.requests[1])
    assert (outputs["c1"], outputs["c2"]) == (NOT_ASKED, NOT_ASKED)
    assert json.loads(outputs["c3"])["metadata"]["exit_code"] == 0


async def test_a_stop_while_the_approval_request_waits_for_room_is_not_missed(
    tmp_path: Path,
) -> None:
    """The request is held by a full event queue when the stop is handled, so no
    answer is waiting yet to withdraw: the Task must still not wait for one."""
    model = ScriptedModel([shell_call([PY, "-c", "open('x','w')"], call_id="c1")])
    policy = p.ConfigureSession(approval_policy="untrusted", sandbox_policy=UNCONFINED)
    config = attrs.evolve(engine_config(tmp_path), event_queue_size=3)
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        await ui.submit(policy, id="cfg")
        await ui.until(p.SessionConfigured, id="cfg")
        await ui.submit(say("go"), id="t1")
        # task_started, user_message and token_count fill the queue;
        # exec_approval_request waits. (The first request waits for the initial
        # context, read off the loop: a deadline, not a count of loop turns.)
        deadline = time.monotonic() + 5
        for _ in itertools.count():
            if codex._locked_emits or time.monotonic() > deadline:
                break
            await asyncio.sleep(0)
        assert codex._locked_emits == 1, ui.types(noise=True)
        await ui.submit(Stop(), id="stop")
        done = await ui.until(p.TaskComplete, id="t1")
        ui.check_invariants()
    assert done.msg.stopped_by == "stop"
    assert [r.call_id for r in ui.of(p.ExecApprovalRequest)] == ["c1"]
    assert not (tmp_path / "x").exists()


async def test_stop_then_interrupt_aborts_at_once(tmp_path: Path, gate: CommandGate) -> None:
    # The gate is never opened: only the interrupt ends the command.
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("never")])
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(Stop(), id="stop")
        await ui.submit(Interrupt(), id="int")
        aborted = await ui.until(p.TurnAborted, id="t1")
        await settled(ui)
    assert aborted.msg.reason == "interrupted"
    assert terminals(ui, "t1") == ["turn_aborted"]
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("requests", "stopped_by"),
    [
        ((Stop(), Stop()), "stop"),
        ((Stop(), Checkpoint()), "checkpoint"),
        ((Checkpoint(), Stop()), "stop"),
    ],
    ids=["stop-twice", "stop-then-checkpoint", "checkpoint-then-stop"],
)
async def test_the_latest_stop_or_checkpoint_names_the_one_end(
    tmp_path: Path, gate: CommandGate, requests: tuple[p.Op, ...], stopped_by: str
) -> None:
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("never")])
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        for op in requests:
            await ui.submit(op)
        await settled(ui)
        gate.open()
        done = await ui.until(p.TaskComplete, id="t1")
        await settled(ui)
    assert done.msg.stopped_by == stopped_by
    assert terminals(ui, "t1") == ["task_complete"]
    assert len(model.requests) == 1


async def test_stop_and_checkpoint_when_idle_change_nothing(tmp_path: Path) -> None:
    model = ScriptedModel(
        [shell_call([PY, "-c", "pass"], call_id="c1"), text_response("finished", chunks=1)]
    )
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(Stop(), id="s0")  # no session yet
        await ui.submit(Checkpoint(), id="c0")
        await settled(ui)
        await ui.submit(p.ConfigureSession(), id="cfg")
        await ui.until(p.SessionConfigured, id="cfg")
        await ui.submit(Stop(), id="s1")  # idle
        await ui.submit(Checkpoint(), id="c1")
        await settled(ui)
        # Neither is kept for later: the next Task runs all its Turns.
        await ui.submit(say("go"), id="t1")
        done = await ui.until(p.TaskComplete, id="t1")
    assert [ui.types(id=i) for i in ("s0", "c0", "s1", "c1")] == [[], [], [], []]
    assert (done.msg.stopped_by, done.msg.last_agent_message) == (None, "finished")
    assert len(model.requests) == 2


# --- checkpoint: paused after the Turn until the next input --------------------------------


async def test_checkpoint_pauses_with_the_rollout_written_until_the_next_input(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel(
        [
            shell_call(gate.argv, call_id="c1", response_id="r1"),
            text_response("picked up again", response_id="r2"),
        ]
    )
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("start"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(Checkpoint(), id="cp")
        await settled(ui)
        gate.open()
        paused = await ui.until(p.TaskComplete, id="t1")
        session_id = ui.of(p.SessionConfigured)[0].session_id
        # Read as another process would, at the moment the pause is seen.
        path = find_rollout(home(), session_id)
        recorded = read_events(path)
        loaded = load_session(home(), session_id)
        assert len(model.requests) == 1
        await ui.submit(inject("carry on"), id="i1")
        resumed = await ui.until(p.TaskComplete, id="i1")

    assert (paused.msg.stopped_by, paused.msg.response_id) == ("checkpoint", "r1")
    assert recorded[-1] == p.Event("t1", paused.seq, paused.msg)
    kinds = [kind for kind, _, _ in loaded.history.branch()]
    assert kinds == ["turn", "tool_outputs"]
    assert loaded.history.branch()[1][1][0]["call_id"] == "c1"
    second = model.requests[1]
    assert second["previous_response_id"] == "r1"
    assert list(outputs_sent(second)) == ["c1"]
    assert user_texts(second) == ["carry on"]
    assert ui.types(id="i1")[0] == "task_started"
    assert (resumed.msg.stopped_by, resumed.msg.last_agent_message) == (None, "picked up again")


async def test_checkpoint_during_the_last_turn_still_pauses(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("all done", response_id="r1")])
    gate = StreamGate(model, number=1)
    async with engine(tmp_path, gate.transport()) as ui:
        await ui.submit(say("go"), id="t1")
        await asyncio.wait_for(gate.reached.wait(), 10)
        await ui.submit(Checkpoint(), id="cp")
        await settled(ui)
        gate.release.set()
        done = await ui.until(p.TaskComplete, id="t1")
    assert (done.msg.stopped_by, done.msg.last_agent_message) == ("checkpoint", "all done")
    assert terminals(ui, "t1") == ["task_complete"]


async def test_a_stopped_task_resumes_well_formed_from_its_rollout(
    tmp_path: Path, gate: CommandGate
) -> None:
    """The answered call is in the rollout: another engine resumes the session and
    its first request pairs the call with its output (client mode resends it all)."""
    model = ScriptedModel(
        [shell_call(gate.argv, call_id="c1", response_id="r1"), text_response("resumed")]
    )
    mode: dict[str, Any] = {"history_mode": "client", "sandbox_policy": UNCONFINED}
    async with engine(tmp_path, model.mock_transport(), approval_policy="never", **mode) as ui:
        await ui.submit(say("start"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(Stop())
        await settled(ui)
        gate.open()
        await ui.until(p.TaskComplete, id="t1")
        session_id = ui.of(p.SessionConfigured)[0].session_id
    async with engine(tmp_path, model.mock_transport(), approval_policy="never", **mode) as ui:
        await ui.submit(ResumeSession(session_id), id="res")
        await ui.until(p.SessionConfigured, id="res")
        await ui.submit(say("where were we"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    kinds = [(i.get("type"), i.get("call_id")) for i in typed_input(model.requests[1])]
    assert kinds == [
        ("message", None),
        ("function_call", "c1"),
        ("function_call_output", "c1"),
        ("message", None),
    ]
    assert user_texts(model.requests[1]) == ["start", "where were we"]


# --- injected input ------------------------------------------------------------------------


async def test_injected_input_joins_the_running_tasks_next_request(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("saw it")])
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("start"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(inject("also check README"), id="inj")
        await settled(ui)
        gate.open()
        await ui.until(p.TaskComplete, id="t1")
    assert user_texts(model.requests[1]) == ["also check README"]
    assert ui.types(id="inj") == []


async def test_input_injected_as_the_task_ends_starts_the_next_task(tmp_path: Path) -> None:
    """The Task has made its last request and only its task_complete is left to send
    (held here by a full event queue): the input cannot join that Task, so it starts
    the next one, right after task_complete."""
    model = ScriptedModel([text_response("first", chunks=1), text_response("second")])
    config = attrs.evolve(engine_config(tmp_path), event_queue_size=6)
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        await ui.submit(p.ConfigureSession(sandbox_policy=UNCONFINED), id="cfg")
        await ui.until(p.SessionConfigured, id="cfg")
        await ui.submit(say("one"), id="t1")
        # task_started, user_message, the delta, agent_message, token_count and
        # turn_complete fill the queue.
        session = codex._session
        for _ in range(1000):
            if session is not None and session.running is not None:
                break
            await asyncio.sleep(0)
        assert session is not None
        assert session.running is not None
        await asyncio.wait_for(asyncio.wait({session.running.runner}), 10)
        assert codex.state is State.RUNNING  # task_complete is not out yet
        await ui.submit(inject("and then this"), id="i1")
        done = await ui.until(p.TaskComplete, id="i1")
        ui.check_invariants()
    assert [(e.id, e.msg.TYPE) for e in ui.events if e.msg.TYPE.startswith("task_")] == [
        ("t1", "task_started"),
        ("t1", "task_complete"),
        ("i1", "task_started"),
        ("i1", "task_complete"),
    ]
    assert user_texts(model.requests[1])[-1] == "and then this"
    assert done.msg.last_agent_message == "second"


async def test_input_injected_after_a_checkpoint_lifts_the_pause(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("going on")])
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("start"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(Checkpoint())
        await ui.submit(inject("keep going with this"), id="inj")
        await settled(ui)
        gate.open()
        done = await ui.until(p.TaskComplete, id="t1")
    assert (done.msg.stopped_by, done.msg.last_agent_message) == (None, "going on")
    assert user_texts(model.requests[1]) == ["keep going with this"]
    assert ui.types(id="inj") == []


async def test_input_injected_after_a_stop_waits_for_the_next_task(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("both seen")])
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("start"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(Stop())
        await ui.submit(inject("for later"), id="inj")
        warning = await ui.until(p.WarningEvent, id="inj")
        gate.open()
        done = await ui.until(p.TaskComplete, id="t1")
        assert len(model.requests) == 1
        await ui.submit(say("next"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert done.msg.stopped_by == "stop"
    assert "next task" in warning.msg.message
    assert sorted(user_texts(model.requests[1])) == ["for later", "next"]


async def test_input_injected_before_an_interrupt_goes_with_the_next_task(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("both")])
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(say("start"), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(inject("remember this"), id="inj")
        await ui.submit(Interrupt())
        await ui.until(p.TurnAborted, id="t1")
        await ui.submit(say("next"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert sorted(user_texts(model.requests[1])) == ["next", "remember this"]


# --- the table ------------------------------------------------------------------------------


def test_every_state_has_a_step_for_every_op() -> None:
    """PLAN is the one source of truth: a missing pair would stop the dispatcher."""
    missing = [
        (state.value, tag)
        for state in State
        for tag, cls in OPS.by_tag.items()
        if (state, cls) not in PLAN
    ]
    assert missing == []
