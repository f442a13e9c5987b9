"""``codexcore exec`` as a real process against a real scripted server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def serve(*responses: ScriptedResponse) -> tuple[ScriptedModel, ScriptedResponsesServer]:
    model = ScriptedModel(responses)
    return model, ScriptedResponsesServer(model).start_in_thread()


def exec_process(
    server: ScriptedResponsesServer, cwd: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    return subprocess.run(
        [sys.executable, "-m", "codexcore", "exec", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture
def stop_servers() -> Iterator[list[ScriptedResponsesServer]]:
    servers: list[ScriptedResponsesServer] = []
    yield servers
    for server in servers:
        server.stop()


def test_human_output(workspace: Path, stop_servers: list[ScriptedResponsesServer]) -> None:
    _, server = serve(
        shell_call(["seq", "1", "30"], call_id="c1", text="Counting."),
        function_call_response("apply_patch", {"input": PATCH}, call_id="p1"),
        text_response("All done.", reasoning="Wrap up."),
    )
    stop_servers.append(server)
    result = exec_process(server, workspace, "--approval-policy", "never", "count and greet")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "$ seq 1 30\n" in out
    assert "  12\n" in out
    assert "  13\n" not in out  # folded after 12 lines
    assert "… 18 more lines" in out
    assert "exit 0 in" in out
    assert "add " in out
    assert "+hi there" in out
    assert "All done." in out
    assert "done · tokens: 450 total" in out
    assert (workspace / "hello.txt").read_text() == "hi there\n"
    assert "\033[" not in out  # no colour when stdout is not a terminal


def test_json_prints_native_events(
    workspace: Path, stop_servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(text_response("hello"))
    stop_servers.append(server)
    result = exec_process(server, workspace, "--json", "hi")
    assert result.returncode == 0, result.stderr
    events = [p.decode_event(line) for line in result.stdout.splitlines()]
    assert [e.msg.TYPE for e in events][:2] == ["session_configured", "task_started"]
    assert isinstance(events[-1].msg, p.TaskComplete)
    assert [e.seq for e in events] == list(range(len(events)))


def test_prompt_from_stdin(workspace: Path, stop_servers: list[ScriptedResponsesServer]) -> None:
    model, server = serve(text_response("read it"))
    stop_servers.append(server)
    result = exec_process(server, workspace, stdin="summarise this\n")
    assert result.returncode == 0, result.stderr
    text = model.requests[0]["input"][0]["content"][0]["text"]
    assert text == "summarise this\n"


def test_an_approval_with_no_terminal_fails_clearly(
    workspace: Path, stop_servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(shell_call([sys.executable, "-c", "pass"], call_id="c1"))
    stop_servers.append(server)
    started = time.monotonic()
    result = exec_process(server, workspace, "--approval-policy", "untrusted", "go")
    assert time.monotonic() - started < 30
    assert result.returncode == 4
    assert "approval needed" in result.stderr
    assert "no terminal" in result.stderr


def test_resume_and_fork(workspace: Path, stop_servers: list[ScriptedResponsesServer]) -> None:
    model, server = serve(
        text_response("first answer", response_id="r1"),
        text_response("resumed", response_id="r2"),
        text_response("forked", response_id="r3"),
    )
    stop_servers.append(server)
    first = exec_process(server, workspace, "--json", "--history-mode", "client", "one")
    session_id = p.decode_event(first.stdout.splitlines()[0]).msg.session_id  # type: ignore[union-attr]
    resumed = exec_process(server, workspace, "--resume", session_id, "two")
    assert resumed.returncode == 0, resumed.stderr
    forked = exec_process(server, workspace, "--fork", f"{session_id}@r1", "three")
    assert forked.returncode == 0, forked.stderr

    def texts(i: int) -> list[str]:
        return [c["text"] for m in model.requests[i]["input"] for c in m.get("content", [])]

    assert texts(1) == ["one", "first answer", "two"]
    assert texts(2) == ["one", "first answer", "three"]


def test_usage_errors(workspace: Path, stop_servers: list[ScriptedResponsesServer]) -> None:
    _, server = serve()
    stop_servers.append(server)
    result = exec_process(server, workspace, "--fork", "no-at-sign", "x")
    assert result.returncode == 2
    assert "SESSION@RESPONSE_ID" in result.stderr
    result = exec_process(server, workspace, "--resume", "nope", "x")
    assert result.returncode == 1
    assert "unknown_session" in result.stdout


def test_ctrl_c_interrupts_then_exits(
    workspace: Path, stop_servers: list[ScriptedResponsesServer]
) -> None:
    sleeper = [sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(60)"]
    _, server = serve(shell_call(sleeper, call_id="c1"))
    stop_servers.append(server)
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
    child = subprocess.Popen(
        [sys.executable, "-m", "codexcore", "exec", "--approval-policy", "never", "sleep"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workspace,
        env=env,
        text=True,
    )
    assert child.stdout is not None
    for line in child.stdout:
        if "sleeping" in line:
            break
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=10)
    assert child.returncode == 130
    assert "aborted: interrupted" in out
    assert "interrupting" in err
