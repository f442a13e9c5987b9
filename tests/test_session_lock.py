"""One writer per session (issue 26 item 11): a second resume of an open session is
refused naming the holder, and a holder killed with SIGKILL leaves no stale lock.

The attack as reported: two ``exec --resume SID`` runs at once interleaved their
Turns in one rollout, and the next resume sent two outputs for each call id.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore import Codex, EngineConfig, SessionConfig
from codexcore import protocol as p
from codexcore.engine._rollout_lock import SessionBusy, take_lock
from codexcore.testing import (
    Hang,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    text_response,
)

from .engine_helpers import Recorder, typed_input
from .test_engine import say

WAIT = 30.0


def exec_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "codexcore", "exec", *args]


def start_exec(server: ScriptedResponsesServer, cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    return subprocess.Popen(
        exec_argv(*args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        text=True,
    )


def run_exec(server: ScriptedResponsesServer, cwd: Path, *args: str) -> tuple[int, str]:
    """Run exec to its end: its exit code, and stdout and stderr together."""
    child = start_exec(server, cwd, *args)
    out, err = child.communicate(timeout=WAIT)
    return child.returncode, out + err


def first_session(server: ScriptedResponsesServer, cwd: Path) -> str:
    child = start_exec(server, cwd, "--events-json", "--history-mode", "client", "one")
    out, err = child.communicate(timeout=WAIT)
    assert child.returncode == 0, err
    msg = p.decode_event(out.splitlines()[0]).msg
    assert isinstance(msg, p.SessionConfigured)
    return msg.session_id


def gate(arrived: threading.Event, release: threading.Event, reply: ScriptedResponse) -> Any:
    """A responder that says its request came, then answers once released."""

    def respond(body: dict[str, Any]) -> ScriptedResponse:
        arrived.set()
        release.wait(WAIT)
        return reply

    return respond


def rollout_of(home: Path, session_id: str) -> Path:
    (path,) = home.glob(f"sessions/*/*/*/rollout-*-{session_id}.jsonl")
    return path


def user_texts(path: Path) -> list[str]:
    """What the user said, by the rollout's user_message events."""
    texts = []
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        if record["type"] == "event" and record["event"]["msg"]["type"] == "user_message":
            texts.append(record["event"]["msg"]["message"])
    return texts


def said(request: dict[str, Any]) -> list[str]:
    return [c["text"] for m in typed_input(request) for c in m.get("content", [])]


def test_a_second_exec_resume_of_an_open_session_fails_naming_the_first(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    arrived, release = threading.Event(), threading.Event()
    model = ScriptedModel(
        [
            text_response("first answer"),
            gate(arrived, release, text_response("second answer")),
            text_response("fourth answer"),
        ]
    )
    server = ScriptedResponsesServer(model).start_in_thread()
    servers.append(server)
    session_id = first_session(server, workspace)
    holder = start_exec(server, workspace, "--resume", session_id, "two")
    try:
        assert arrived.wait(WAIT), "the first resume never asked the model"
        code, output = run_exec(server, workspace, "--resume", session_id, "three")
    finally:
        release.set()
        _, err = holder.communicate(timeout=WAIT)
    assert holder.returncode == 0, err
    assert code == 1
    assert f"session {session_id} is open in process {holder.pid} (codexcore exec" in output
    assert "session_busy" in output
    home = Path(os.environ["CODEXCORE_HOME"])
    assert user_texts(rollout_of(home, session_id)) == ["one", "two"]
    # The next resume sends one conversation: nothing of the refused run in it.
    code, output = run_exec(server, workspace, "--resume", session_id, "four")
    assert code == 0, output
    assert said(model.requests[-1]) == ["one", "first answer", "two", "second answer", "four"]


def test_a_holder_killed_with_sigkill_leaves_no_stale_lock(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    arrived = threading.Event()

    def hang(body: dict[str, Any]) -> ScriptedResponse:
        arrived.set()
        return ScriptedResponse(steps=(Hang(),))

    model = ScriptedModel([text_response("first answer"), hang, text_response("back again")])
    server = ScriptedResponsesServer(model).start_in_thread()
    servers.append(server)
    session_id = first_session(server, workspace)
    holder = start_exec(server, workspace, "--resume", session_id, "two")
    assert arrived.wait(WAIT), "the first resume never asked the model"
    holder.kill()
    holder.communicate(timeout=WAIT)
    code, output = run_exec(server, workspace, "--resume", session_id, "three")
    assert code == 0, output
    assert "back again" in output


# --- in one process: engines, connections, fork ------------------------------------------


def engine(cwd: Path, model: ScriptedModel) -> Codex:
    config = EngineConfig(session=SessionConfig(cwd=str(cwd)), retry_base_delay=0.01)
    return Codex(config, transport=model.mock_transport())


async def recorded_session(cwd: Path) -> str:
    """A session recorded by an engine that has ended."""
    async with engine(cwd, ScriptedModel([text_response("hi", response_id="r1")])) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"))
        await ui.until(p.TaskComplete)
        return ui.of(p.SessionConfigured)[0].session_id


@pytest.mark.anyio
async def test_two_engines_in_one_process_cannot_both_resume_a_session(workspace: Path) -> None:
    """Two connections of one server resuming one session: each runs its own engine."""
    session_id = await recorded_session(workspace)
    model = ScriptedModel([text_response("again")])
    async with engine(workspace, model) as first, engine(workspace, model) as second:
        a, b = Recorder(first), Recorder(second)
        await a.submit(p.ResumeSession(session_id))
        await a.until(p.SessionConfigured)
        sub = await b.submit(p.ResumeSession(session_id))
        error = await b.until(p.ErrorEvent, id=sub)
        assert error.msg.code == "session_busy"
        assert f"session {session_id} is open in this process (pid {os.getpid()}" in (
            error.msg.message
        )
        # Refused before anything changed: the second engine goes on, and forking works.
        sub = await b.submit(p.ForkSession(session_id, "r1"))
        forked = await b.until(p.SessionConfigured, id=sub)
        assert forked.msg.session_id != session_id
        # The holder goes on recording.
        await a.submit(say("two"))
        await a.until(p.TaskComplete)


@pytest.mark.anyio
async def test_an_engine_may_resume_its_own_session_and_keeps_it_locked(workspace: Path) -> None:
    session_id = await recorded_session(workspace)
    async with engine(workspace, ScriptedModel([])) as codex:
        ui = Recorder(codex)
        for _ in range(2):  # the second resume is of the Session the engine already has
            sub = await ui.submit(p.ResumeSession(session_id))
            await ui.until(p.SessionConfigured, id=sub)
        home = Path(os.environ["CODEXCORE_HOME"])
        with pytest.raises(SessionBusy):
            take_lock(rollout_of(home, session_id), session_id)
    take_lock(rollout_of(home, session_id), session_id).release()  # released with the engine


def test_a_new_sessions_file_is_locked_from_its_creation(tmp_path: Path) -> None:
    from codexcore.engine._rollout import RolloutWriter

    writer = RolloutWriter(tmp_path / "rollout-2026-01-01T00-00-00-abc.jsonl", deferred=True)
    writer.record_change("turn", (), "r1")
    with pytest.raises(SessionBusy, match="open in this process"):
        take_lock(writer.path, "abc")
    writer.close()
    take_lock(writer.path, "abc").release()
