"""The threads face, as an IDE plugin uses it: blocking calls from ordinary threads."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from codexcore import EngineClosed
from codexcore.adapters.threads import CodexThread
from codexcore.protocol import (
    Event,
    ExecApproval,
    Shutdown,
    TaskComplete,
    TextInput,
    UserInput,
)
from codexcore.testing import ScriptedModel, shell_call, text_response

from .engine_helpers import engine_config

PY = sys.executable


def _wait_for(codex: CodexThread, kind: str, seen: list[Event], timeout: float = 10.0) -> Event:
    while True:
        try:
            event = codex.next_event(timeout=timeout)
        except TimeoutError:
            raise AssertionError(f"no {kind}; saw {[e.msg.TYPE for e in seen]}") from None
        seen.append(event)
        if event.msg.TYPE == kind:
            return event


def _engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("codexcore")]


def test_blocking_submit_and_next_event(tmp_path: Path) -> None:
    model = ScriptedModel(
        [shell_call([PY, "-c", "print('hi')"], call_id="c1"), text_response("done")]
    )
    seen: list[Event] = []
    with CodexThread(
        engine_config(tmp_path, approval_policy="untrusted"), transport=model.mock_transport()
    ) as codex:
        sub_id = codex.submit(UserInput((TextInput("go"),)))
        request = _wait_for(codex, "exec_approval_request", seen)
        assert request.id == sub_id
        codex.submit(ExecApproval("c1", "approved"))
        done = _wait_for(codex, "task_complete", seen)
        assert isinstance(done.msg, TaskComplete)
        assert done.msg.last_agent_message == "done"
    assert _engine_threads() == []


def test_iteration_ends_after_shutdown_complete(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello")])
    with CodexThread(engine_config(tmp_path), transport=model.mock_transport()) as codex:
        codex.submit(UserInput((TextInput("go"),)))
        types = []
        for event in codex:
            types.append(event.msg.TYPE)
            if event.msg.TYPE == "task_complete":
                codex.submit(Shutdown())
        assert types[-1] == "shutdown_complete"
        with pytest.raises(EngineClosed):
            codex.submit(UserInput((TextInput("late"),)))
    assert _engine_threads() == []


def test_callback_delivery_on_its_own_thread(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello")])
    received: list[Event] = []
    threads: set[str] = set()
    finished = threading.Event()

    def on_event(event: Event) -> None:
        threads.add(threading.current_thread().name)
        received.append(event)
        if event.msg.TYPE == "task_complete":
            finished.set()
        if event.msg.TYPE == "agent_message":
            raise RuntimeError("a broken UI callback must not stop delivery")

    with CodexThread(
        engine_config(tmp_path), transport=model.mock_transport(), on_event=on_event
    ) as codex:
        codex.submit(UserInput((TextInput("go"),)))
        assert finished.wait(10)
        with pytest.raises(RuntimeError, match="on_event"):
            codex.next_event(timeout=0.1)
    assert threads == {"codexcore-events"}
    assert [e.seq for e in received] == list(range(len(received)))
    assert _engine_threads() == []


def test_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    """A notebook already runs a loop; the threads face must not touch it."""
    model = ScriptedModel([text_response("from a loop")])

    async def notebook_cell() -> str:
        with CodexThread(engine_config(tmp_path), transport=model.mock_transport()) as codex:
            codex.submit(UserInput((TextInput("go"),)))
            seen: list[Event] = []
            done = await asyncio.to_thread(_wait_for, codex, "task_complete", seen)
            assert isinstance(done.msg, TaskComplete)
            return str(done.msg.last_agent_message)

    assert asyncio.run(notebook_cell()) == "from a loop"


def test_next_event_timeout(tmp_path: Path) -> None:
    transport = ScriptedModel([]).mock_transport()
    with (
        CodexThread(engine_config(tmp_path), transport=transport) as c,
        pytest.raises(TimeoutError),
    ):
        c.next_event(timeout=0.05)


def test_close_is_idempotent_and_kills_a_running_command(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call(
                [PY, "-c", "import time; print('up', flush=True); time.sleep(60)"], call_id="c1"
            )
        ]
    )
    codex = CodexThread(
        engine_config(tmp_path, approval_policy="never"), transport=model.mock_transport()
    ).start()
    codex.submit(UserInput((TextInput("go"),)))
    _wait_for(codex, "exec_command_output_delta", [])
    codex.close()
    codex.close()
    assert _engine_threads() == []


def test_close_after_reading_to_the_end_never_races(tmp_path: Path) -> None:
    """Submit shutdown, read to the end, then close: the engine's loop may already
    be closing when close() runs. Repeated, since the window is small."""
    for _ in range(15):
        with CodexThread(
            engine_config(tmp_path), transport=ScriptedModel([]).mock_transport()
        ) as codex:
            codex.submit(Shutdown())
            assert [e.msg.TYPE for e in codex][-1] == "shutdown_complete"
    assert _engine_threads() == []
