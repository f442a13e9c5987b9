"""Crash recovery of recorded sessions, with real ``codexcore exec`` processes.

A real exec against the real scripted Responses server is killed with SIGKILL
while its command runs; resuming must send a conversation the API accepts.
A session file whose last line is cut stays resumable, and the records
appended after the resume are whole. A failed run records nothing.
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore import protocol as p
from codexcore.engine import default_home
from codexcore.engine._rollout_reader import load_session, read_records
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    http_error,
    shell_call,
    text_response,
)

from .engine_helpers import running_engine, typed_input
from .test_engine import say

# Prints, then waits until its parent (the exec process, or bubblewrap) is gone.
SLEEPER = [
    sys.executable,
    "-c",
    "import os, time\np = os.getppid()\nprint('sleeping', flush=True)\n"
    "while os.getppid() == p: time.sleep(0.05)",
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def scripted() -> Iterator[Callable[..., tuple[ScriptedModel, ScriptedResponsesServer]]]:
    servers: list[ScriptedResponsesServer] = []

    def start(*responses: ScriptedResponse) -> tuple[ScriptedModel, ScriptedResponsesServer]:
        model = ScriptedModel(responses)
        servers.append(ScriptedResponsesServer(model).start_in_thread())
        return model, servers[-1]

    yield start
    for server in servers:
        server.stop()


def rollouts() -> list[Path]:
    return sorted((default_home() / "sessions").glob("*/*/*/rollout-*.jsonl"))


def exec_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "codexcore", "exec", "--approval-policy", "never", *args]


def run_exec(
    server: ScriptedResponsesServer, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    return subprocess.run(
        exec_argv(*args), capture_output=True, text=True, cwd=cwd, env=env, timeout=60, check=False
    )


class JsonEvents:
    """The ``--events-json`` events of a running exec, read with a deadline."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        self.child, self.fd = child, child.stdout.fileno()
        self.buffer = b""
        self.seen: list[dict[str, Any]] = []

    def until(self, wanted: Callable[[dict[str, Any]], bool], within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while not any(wanted(event) for event in self.seen):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            chunk = os.read(self.fd, 65536) if ready else b""
            if not chunk:
                types = [e["msg"]["type"] for e in self.seen]
                raise AssertionError(f"exec ended or stalled; saw {types}")
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            self.seen += [orjson.loads(line) for line in lines if line]

    def first(self, kind: str) -> dict[str, Any]:
        return next(e["msg"] for e in self.seen if e["msg"]["type"] == kind)


def sleeping(event: dict[str, Any]) -> bool:
    msg = event["msg"]
    return msg["type"] == "exec_command_output_delta" and b"sleeping" in base64.b64decode(
        msg["chunk"]
    )


def kill_mid_command(server: ScriptedResponsesServer, cwd: Path, *args: str) -> str:
    """Run exec until its command runs, SIGKILL it; the session id."""
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    child = subprocess.Popen(
        exec_argv("--events-json", *args, "run it"), stdout=subprocess.PIPE, cwd=cwd, env=env
    )
    try:
        events = JsonEvents(child)
        events.until(sleeping)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait(timeout=10)
        assert child.stdout is not None
        child.stdout.close()
    return str(events.first("session_configured")["session_id"])


def aborted_outputs(request: dict[str, Any]) -> dict[str, str]:
    return {
        item["call_id"]: item["output"]
        for item in typed_input(request)
        if item.get("type") == "function_call_output"
    }


def whole_records(path: Path) -> list[dict[str, Any]]:
    """Every line of the file, each of which must be a whole record."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), data[-200:]
    lines = data.split(b"\n")[:-1]
    records = [orjson.loads(line) for line in lines]
    assert records == list(read_records(path))
    return records


# --- item 5: resuming after SIGKILL mid-command -------------------------------------------------


@pytest.mark.parametrize("mode", ["client", "server"])
def test_resume_after_sigkill_answers_the_call_that_was_running(
    workspace: Path, scripted: Any, mode: str
) -> None:
    model, server = scripted(
        shell_call(SLEEPER, call_id="c1", response_id="r1"),
        text_response("carrying on", response_id="r2"),
    )
    session_id = kill_mid_command(server, workspace, "--history-mode", mode)
    assert len(model.requests) == 1

    resumed = run_exec(server, workspace, "--resume", session_id, "next")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    request = model.requests[1]
    outputs = aborted_outputs(request)
    assert list(outputs) == ["c1"], request["input"]
    assert outputs["c1"].startswith("aborted: ")
    user_text = [c["text"] for i in typed_input(request) for c in i.get("content", [])]
    if mode == "client":
        kinds = [item["type"] for item in typed_input(request)]
        assert kinds == ["message", "function_call", "function_call_output", "message"]
        assert user_text == ["run it", "next"]
    else:
        # The stored response r1 holds the unanswered call: its output goes first.
        assert request["previous_response_id"] == "r1"
        assert [i["type"] for i in typed_input(request)] == ["function_call_output", "message"]
        assert user_text == ["next"]
    # Loaded again, the History is the same well-formed conversation.
    (path,) = rollouts()
    history = load_session(default_home(), session_id).history
    assert [i.get("call_id") for i in history.items() if "call_id" in i] == ["c1", "c1"]
    whole_records(path)


def test_an_interrupted_command_is_told_as_run_and_stopped_with_its_output(
    workspace: Path, scripted: Any
) -> None:
    """Ctrl-C during a command that printed: the model learns that it ran, what it
    printed, that the user interrupted it and how it ended (issue 27.2: it used to be
    told the call never ran). A crash, where nothing was recorded, still says so."""
    model, server = scripted(
        shell_call(SLEEPER, call_id="c1", response_id="r1"),
        text_response("ok", response_id="r2"),
    )
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    child = subprocess.Popen(
        exec_argv("--events-json", "--history-mode", "client", "run it"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=workspace,
        env=env,
    )
    try:
        events = JsonEvents(child)
        events.until(sleeping)
        child.send_signal(signal.SIGINT)
        events.until(lambda e: e["msg"]["type"] == "turn_aborted")
    finally:
        child.kill()
        child.wait(timeout=10)
        assert child.stdout is not None
        child.stdout.close()
    session_id = str(events.first("session_configured")["session_id"])
    assert run_exec(server, workspace, "--resume", session_id, "next").returncode == 0
    interrupted = json.loads(aborted_outputs(model.requests[1])["c1"])
    assert interrupted["output"].startswith("sleeping\n"), interrupted
    assert "command interrupted by the user" in interrupted["output"]
    assert interrupted["metadata"]["exit_code"] == 128 + signal.SIGTERM


# --- item 6: a torn last line -------------------------------------------------------------------


def test_resume_cuts_off_a_torn_last_line_and_appends_whole_records(
    workspace: Path, scripted: Any
) -> None:
    model, server = scripted(
        text_response("first answer", response_id="r1"),
        text_response("second answer", response_id="r2"),
    )
    first = run_exec(server, workspace, "--events-json", "--history-mode", "client", "one")
    assert first.returncode == 0, first.stderr
    session_id = p.decode_event(first.stdout.splitlines()[0]).msg.session_id  # type: ignore[union-attr]
    (path,) = rollouts()
    before = whole_records(path)
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # the last line loses its end, newline included

    resumed = run_exec(server, workspace, "--resume", session_id, "two")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = whole_records(path)  # every line whole: the fragment is gone
    assert after[: len(before) - 1] == before[:-1]
    assert after[len(before) - 1]["type"] == "config"  # the first record appended, intact
    turns = [typed_input({"input": r["items"]}) for r in after if r["type"] == "turn"]
    assert [items[0]["content"][0]["text"] for items in turns] == [
        "one",
        "two",
    ]
    texts = [c["text"] for i in typed_input(model.requests[1]) for c in i.get("content", [])]
    assert texts == ["one", "first answer", "two"]


def _resume_in_process_after(path: Path, session_id: str, cwd: Path) -> list[dict[str, Any]]:
    """Resume with an engine and run one Task; the file's records, all whole."""
    import asyncio

    async def resume() -> None:
        model = ScriptedModel([text_response("after the crash")])
        async with running_engine(model, cwd) as ui:
            await ui.submit(p.ResumeSession(session_id), id="res")
            await ui.until(p.SessionConfigured, id="res")
            await ui.submit(say("again"), id="t")
            await ui.until(p.TaskComplete, id="t")

    asyncio.run(resume())
    return whole_records(path)


# The child announces each large record just before writing it.
KILL_MID_WRITE = """
import asyncio, sys
sys.path.insert(0, {repo!r})
from codexcore import Codex
from codexcore import protocol as p
from codexcore.engine import _rollout
from codexcore.testing import ScriptedModel, text_response
from tests.engine_helpers import engine_config

write = _rollout.RolloutWriter._write
def announced(self, line):
    if len(line) > 1_000_000:
        print("big", self.path.stat().st_size, flush=True)
    write(self, line)
_rollout.RolloutWriter._write = announced

async def main():
    model = ScriptedModel([text_response("small"), text_response("x" * 16_000_000)])
    async with Codex(engine_config({cwd!r}), transport=model.mock_transport()) as codex:
        for i in range(2):
            await codex.submit(p.UserInput((p.TextInput("go"),)), id=f"t{{i}}")
            async for event in codex.events():
                if event.msg.TYPE == "task_complete":
                    break

asyncio.run(main())
"""


def _kill_during_a_large_write(cwd: Path) -> Path:
    """SIGKILL a real engine process once its rollout grows during a 16 MB write."""
    script = KILL_MID_WRITE.format(repo=str(Path(__file__).parent.parent), cwd=str(cwd))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert child.stdout is not None
    try:
        announced = child.stdout.readline().split()
        assert announced[:1] == [b"big"], announced
        (path,) = rollouts()
        deadline = time.monotonic() + 10
        while path.stat().st_size <= int(announced[1]):  # the write has begun
            assert time.monotonic() < deadline, "the announced write never began"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        child.kill()
        child.wait(timeout=10)
        child.stdout.close()
    return path


def test_kill_dash_nine_mid_write_then_resume_keeps_every_line_whole(tmp_path: Path) -> None:
    """A real SIGKILL lands in the middle of a record's write; the resumed session
    cuts the fragment off and appends whole records after the last whole line."""
    path = _kill_during_a_large_write(tmp_path)
    data = path.read_bytes()
    assert not data.endswith(b"\n"), "the kill did not land mid-write"
    whole = data[: data.rfind(b"\n") + 1]
    session_id = next(read_records(path))["session_id"]
    records = _resume_in_process_after(path, session_id, tmp_path)
    assert path.read_bytes().startswith(whole)
    appended = records[whole.count(b"\n") :]
    assert appended[0]["type"] == "config"
    assert [r["type"] for r in appended].count("turn") == 1


# --- item 19: no file for a session with nothing in it --------------------------------------------


def test_a_failed_exec_records_no_session(workspace: Path, scripted: Any) -> None:
    model, server = scripted(http_error(401), text_response("fine", response_id="r1"))
    failed = run_exec(server, workspace, "hello")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert len(model.requests) == 1
    assert rollouts() == []
    listed = subprocess.run(
        [sys.executable, "-m", "codexcore", "sessions", "list"],
        capture_output=True,
        text=True,
        cwd=workspace,
        timeout=60,
        check=False,
    )
    assert listed.stdout == "no recorded sessions\n", listed.stdout + listed.stderr
    # The next run that gets an answer is recorded, with every event from its start.
    ok = run_exec(server, workspace, "--events-json", "hello again")
    assert ok.returncode == 0, ok.stderr
    (path,) = rollouts()
    printed = [p.decode_event(line) for line in ok.stdout.splitlines()]
    recorded = [r for r in whole_records(path) if r["type"] == "event"]
    assert [r["event"]["msg"]["type"] for r in recorded] == [
        e.msg.TYPE for e in printed if e.msg.TYPE != "agent_message_delta"
    ] + ["shutdown_complete"]


def test_a_failed_task_of_a_resumed_session_is_still_recorded(
    workspace: Path, scripted: Any
) -> None:
    _, server = scripted(text_response("one", response_id="r1"), http_error(401))
    first = run_exec(server, workspace, "--events-json", "hi")
    session_id = p.decode_event(first.stdout.splitlines()[0]).msg.session_id  # type: ignore[union-attr]
    (path,) = rollouts()
    size = path.stat().st_size
    failed = run_exec(server, workspace, "--resume", session_id, "again")
    assert failed.returncode == 1
    assert rollouts() == [path]
    kinds = [r["event"]["msg"]["type"] for r in whole_records(path) if r["type"] == "event"]
    assert path.stat().st_size > size
    assert kinds[-4:] == ["task_started", "user_message", "error", "shutdown_complete"]


@pytest.mark.anyio
async def test_a_session_is_written_from_its_first_answer_and_readable_before(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("hello", response_id="r1")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(p.ConfigureSession(model="gpt-5-mini"), id="c")
        configured = await ui.until(p.SessionConfigured, id="c")
        await ui.submit(p.GetHistory(), id="h")
        held = (await ui.until(p.SessionHistory, id="h")).msg
        assert held.session_id == configured.msg.session_id
        assert [e.msg for e in held.events] == [configured.msg]
        assert rollouts() == []
        await ui.submit(say("hi"), id="t")
        await ui.until(p.TaskComplete, id="t")
        (path,) = rollouts()
        assert configured.msg.session_id in path.name
