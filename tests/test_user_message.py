"""``user_message``: the user's input enters the conversation, and the record keeps it.

Codex's ``EventMsg::UserMessage``: a UI replaying a session (``session.history``,
``codexcore sessions history``) shows what the user asked, and ``session_list``'s
``last_user_message`` is the user's own prompt.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.engine._rollout_reader import find_rollout, list_sessions, read_events
from codexcore.protocol import ImageInput, InjectInput, Interrupt, TextInput, UserInput
from codexcore.testing import Hang, ScriptedModel, ScriptedResponse, shell_call, text_response

from .engine_helpers import running_engine
from .test_engine_stop import UNCONFINED, CommandGate, engine, gate, settled

__all__ = ["gate"]  # the fixture, used by name

pytestmark = pytest.mark.anyio


def home() -> Path:
    return Path(os.environ["CODEXCORE_HOME"])


async def test_user_input_is_announced_right_after_task_started(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("a cat")])
    picture = "https://example.com/cat.png"
    prompt = UserInput((TextInput("What is "), ImageInput(picture), TextInput("in this?")))
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(prompt, id="t1")
        await ui.until(p.TaskComplete, id="t1")
    assert ui.types(id="t1")[1:4] == ["task_started", "user_message", "agent_message"]
    (said,) = ui.of(p.UserMessage)
    assert (said.message, said.images) == ("What is in this?", (picture,))


async def test_injected_input_is_announced_with_the_request_that_carries_it(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("saw it")])
    async with engine(
        tmp_path, model.mock_transport(), approval_policy="never", sandbox_policy=UNCONFINED
    ) as ui:
        await ui.submit(UserInput((TextInput("start"),)), id="t1")
        await ui.until(p.ExecCommandOutputDelta)
        await ui.submit(InjectInput((TextInput("also check README"),)), id="inj")
        await settled(ui)
        assert [m.message for m in ui.of(p.UserMessage)] == ["start"]  # not sent yet
        gate.open()
        await ui.until(p.TaskComplete, id="t1")
    # Under the Task's id, after the Turn that ran the command, before the next answer.
    said = [(e.id, e.msg.message) for e in ui.events if isinstance(e.msg, p.UserMessage)]
    assert said == [("t1", "start"), ("t1", "also check README")]
    types = ui.types(id="t1")
    first_turn_end = types.index("turn_complete")
    assert types.index("user_message", first_turn_end) == first_turn_end + 1
    assert ui.types(id="inj") == []


async def test_the_rollout_keeps_the_prompts_for_replay_and_listing(tmp_path: Path) -> None:
    """The second Task is interrupted before any answer: its prompt is in no Turn
    record, but it is recorded, and it is the session's last_user_message."""
    model = ScriptedModel([text_response("one"), ScriptedResponse(steps=[Hang()])])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(UserInput((TextInput("first question"),)), id="t1")
        configured = await ui.until(p.SessionConfigured)
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(UserInput((TextInput("second question"),)), id="t2")
        await ui.until(p.UserMessage, id="t2")
        await ui.submit(Interrupt(), id="stop")
        await ui.until(p.TurnAborted, id="t2")
    session_id = configured.msg.session_id
    recorded = read_events(find_rollout(home(), session_id))
    said = [(e.id, e.msg.message) for e in recorded if isinstance(e.msg, p.UserMessage)]
    assert said == [("t1", "first question"), ("t2", "second question")]
    (summary,) = list_sessions(home())
    assert (summary.first_user_message, summary.last_user_message) == (
        "first question",
        "second question",
    )
