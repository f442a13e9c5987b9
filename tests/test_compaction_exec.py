"""Compaction in real ``codexcore exec`` processes: how it is shown, and a session killed
with SIGKILL in the middle of one resumes with the History it had before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.engine import default_home
from codexcore.engine._compact import SUMMARIZATION_PROMPT, SUMMARY_PREFIX
from codexcore.engine._instructions import is_contextual
from codexcore.engine._rollout_reader import load_session, read_records
from codexcore.model import Usage
from codexcore.testing import (
    Hang,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from .scripted_servers import serve
from .test_session_recovery import JsonEvents

# Above 90% of gpt-5-codex's 400 000-token window: the default auto-compact limit.
NEARLY_FULL = Usage(
    input_tokens=380_000, cached_input_tokens=0, output_tokens=10_000, total_tokens=390_000
)


def run_exec(workspace: Path, server: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """``codexcore exec ARGS`` in ``workspace`` against the scripted model ``server``."""
    return subprocess.run(
        exec_argv(*args),
        capture_output=True,
        text=True,
        cwd=workspace,
        env=env_for(server),
        timeout=60,
        check=False,
    )


def exec_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "codexcore", "exec", "--approval-policy", "never", *args]


def env_for(server: ScriptedResponsesServer) -> dict[str, str]:
    return {**os.environ, "OPENAI_BASE_URL": server.base_url}


def full_call(text: str) -> ScriptedResponse:
    return function_call_response(
        "shell", {"command": ["echo", text]}, usage=NEARLY_FULL, response_id="r1"
    )


def test_exec_shows_an_auto_compaction(workspace: Path, servers: Any) -> None:
    model, server = serve(
        servers,
        full_call("big"),
        text_response("Echoed big; nothing else done."),
        text_response("Finished after compacting."),
    )
    result = run_exec(workspace, server, "--history-mode", "client", "echo big")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "compacting the conversation: it reached the auto-compact limit…\n" in out
    assert "conversation compacted: the model goes on from a summary\n" in out
    assert "warning: Heads up: long conversations" in out
    assert out.index("conversation compacted") < out.index("Finished after compacting.")
    # The summary is not shown as an answer.
    assert "Echoed big" not in out
    last = model.requests[-1]["input"]
    assert last[-1]["content"][0]["text"].startswith(SUMMARY_PREFIX)


def compacting(event: dict[str, Any]) -> bool:
    return bool(event["msg"]["type"] == "context_compaction_started")


@pytest.mark.parametrize("mode", ["client", "server"])
def test_sigkill_mid_compaction_resumes_the_history_from_before(
    workspace: Path, servers: Any, mode: str
) -> None:
    asked = threading.Event()

    def summary_never_comes(_: dict[str, Any]) -> ScriptedResponse:
        asked.set()
        return ScriptedResponse(steps=(Hang(),))

    model, server = serve(
        servers,
        full_call("one"),
        summary_never_comes,
        text_response("resumed fine", response_id="r2"),
    )
    child = subprocess.Popen(
        exec_argv("--events-json", "--history-mode", mode, "echo one"),
        stdout=subprocess.PIPE,
        cwd=workspace,
        env=env_for(server),
    )
    try:
        events = JsonEvents(child)
        events.until(compacting)
        # The kill lands once the summary was asked for: mid-compaction, not before it.
        assert asked.wait(timeout=30), "the summary request never came"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait(timeout=10)
        assert child.stdout is not None
        child.stdout.close()
    assert model.requests[1]["input"][-1]["content"][0]["text"] == SUMMARIZATION_PROMPT
    session_id = str(events.first("session_configured")["session_id"])
    (path,) = (default_home() / "sessions").glob("*/*/*/rollout-*.jsonl")
    records = list(read_records(path))
    assert not any(r["type"] == "compacted" for r in records)
    started = [r for r in records if r["type"] == "event"][-1]["event"]["msg"]
    assert started == {"type": "context_compaction_started", "trigger": "auto"}
    before = load_session(default_home(), session_id).history.items()
    assert [i["type"] for i in before if not is_contextual(i)] == [
        "message",
        "function_call",
        "function_call_output",
    ]

    resumed = run_exec(workspace, server, "--resume", session_id, "--history-mode", mode, "go on")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resumed fine" in resumed.stdout
    request = model.requests[2]
    sent = [i["type"] for i in request["input"] if not is_contextual(i)]
    if mode == "client":
        assert sent == ["message", "function_call", "function_call_output", "message"]
    else:
        assert request["previous_response_id"] == "r1"
        assert sent == ["function_call_output", "message"]
    # A resumed session does not know how full the context was: no compaction first.
    assert "compacting" not in resumed.stdout
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert all(orjson.loads(line) for line in lines[:-1])


def test_a_torn_compacted_record_resumes_the_history_from_before(
    workspace: Path, servers: Any
) -> None:
    """A kill during the compacted record's one write leaves at most a torn last line:
    it is cut off, and the session is what it was before the compaction."""
    model, server = serve(
        servers,
        full_call("one"),
        text_response("the summary"),
        text_response("done"),
        text_response("after the tear"),
    )
    first = run_exec(workspace, server, "--history-mode", "client", "echo one")
    assert first.returncode == 0, first.stdout + first.stderr
    (path,) = (default_home() / "sessions").glob("*/*/*/rollout-*.jsonl")
    data = path.read_bytes()
    compacted_at = data.index(b'{"type":"compacted"')
    path.write_bytes(data[: compacted_at + 40])  # torn in the middle of the record
    session_id = next(r for r in read_records(path) if r["type"] == "session_meta")["session_id"]
    resumed = run_exec(
        workspace, server, "--resume", session_id, "--history-mode", "client", "again"
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    sent = model.requests[-1]["input"]
    assert [i["type"] for i in sent if not is_contextual(i)] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert not any(SUMMARY_PREFIX in str(i) for i in sent)
