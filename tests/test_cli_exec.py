"""``codexcore exec`` as a real process against a real scripted server."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
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

from .engine_helpers import typed_input

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
    assert "count and greet" not in out  # the user_message is the person's own prompt


def test_json_prints_native_events(
    workspace: Path, stop_servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(text_response("hello"))
    stop_servers.append(server)
    result = exec_process(server, workspace, "--events-json", "hi")
    assert result.returncode == 0, result.stderr
    events = [p.decode_event(line) for line in result.stdout.splitlines()]
    assert [e.msg.TYPE for e in events][:3] == [
        "session_configured",
        "task_started",
        "user_message",
    ]
    assert [e.msg.message for e in events if isinstance(e.msg, p.UserMessage)] == ["hi"]
    assert isinstance(events[-1].msg, p.TaskComplete)
    assert [e.seq for e in events] == list(range(len(events)))


def test_prompt_from_stdin(workspace: Path, stop_servers: list[ScriptedResponsesServer]) -> None:
    model, server = serve(text_response("read it"))
    stop_servers.append(server)
    result = exec_process(server, workspace, stdin="summarise this\n")
    assert result.returncode == 0, result.stderr
    text = typed_input(model.requests[0])[0]["content"][0]["text"]
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
    first = exec_process(server, workspace, "--events-json", "--history-mode", "client", "one")
    session_id = p.decode_event(first.stdout.splitlines()[0]).msg.session_id  # type: ignore[union-attr]
    resumed = exec_process(server, workspace, "--resume", session_id, "two")
    assert resumed.returncode == 0, resumed.stderr
    forked = exec_process(server, workspace, "--fork", f"{session_id}@r1", "three")
    assert forked.returncode == 0, forked.stderr

    def texts(i: int) -> list[str]:
        return [c["text"] for m in typed_input(model.requests[i]) for c in m.get("content", [])]

    assert texts(1) == ["one", "first answer", "two"]
    assert texts(2) == ["one", "first answer", "three"]


def test_usage_errors(workspace: Path, stop_servers: list[ScriptedResponsesServer]) -> None:
    _, server = serve()
    stop_servers.append(server)
    result = exec_process(server, workspace, "--fork", "no-at-sign", "x")
    assert result.returncode == 2
    assert "SESSION@RESPONSE_ID" in result.stderr
    result = exec_process(server, workspace, "--resume", "nope", "x")
    assert result.returncode == 2  # refused before the engine starts
    assert "no recorded session id starts with 'nope'" in result.stderr


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


# --- no key, and where requests went (issue 13, item 18) ---------------------------------


class ConnectionRecorder:
    """A real listening socket on 127.0.0.1 that records what each connection sends
    first, then closes it. As HTTPS_PROXY it sees every request to api.openai.com."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.heads: list[bytes] = []
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed by stop()
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.heads.append(conn.recv(4096))
                except OSError:
                    self.heads.append(b"")
            self.connected.set()

    def stop(self) -> None:
        # shutdown() wakes the blocked accept(); close() alone may not.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive()


@pytest.fixture
def recorder() -> Iterator[ConnectionRecorder]:
    running = ConnectionRecorder()
    yield running
    running.stop()


def run_exec(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codexcore", "exec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )


def through_proxy(url: str) -> dict[str, str]:
    """Variables that send HTTPS through ``url`` whatever proxy the developer's shell sets."""
    names = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
    return {**dict.fromkeys(names, url), "NO_PROXY": "", "no_proxy": ""}


def write_config(text: str) -> Path:
    home = Path(os.environ["CODEXCORE_HOME"])  # conftest: a fresh directory per test
    (home / "config.toml").write_text(text)
    return home / "config.toml"


def test_no_key_for_openai_stops_before_any_connection(
    workspace: Path, recorder: ConnectionRecorder
) -> None:
    write_config("[provider]\nmax_attempts = 1\n")
    proxy = through_proxy(recorder.url)
    result = run_exec(workspace, "hi", env=proxy)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        "codexcore exec: no API key: $OPENAI_API_KEY is not set, and "
        "https://api.openai.com/v1 needs one (provider.base_url from the default). "
        "The key is read from the environment variable named by provider.api_key_env: "
        "OPENAI_API_KEY (from the default)."
    ), result.stderr
    assert "retrying" not in result.stdout + result.stderr
    # The control: the same command with a key does reach the (proxied) provider, so the
    # recorder would have seen a request above had one been tried.
    with_key = run_exec(workspace, "hi", env={**proxy, "OPENAI_API_KEY": "sk-test-only"})
    assert recorder.connected.wait(10), with_key.stdout + with_key.stderr
    assert recorder.heads[0].startswith(b"CONNECT api.openai.com:443 "), recorder.heads
    assert len(recorder.heads) == 1, recorder.heads  # none from the keyless run


def test_no_key_names_the_variable_a_profile_chose(workspace: Path) -> None:
    path = write_config('[profiles.work.provider]\napi_key_env = "WORK_KEY"\n')
    result = run_exec(
        workspace, "--profile", "work", "hi", env={"OPENAI_API_KEY": "sk-not-for-work"}
    )
    assert result.returncode == 2
    assert "$WORK_KEY is not set" in result.stderr
    assert f"provider.api_key_env: WORK_KEY (from profile 'work' in {path})" in result.stderr
    assert "sk-not-for-work" not in result.stdout + result.stderr


def test_a_local_provider_needs_no_key(
    workspace: Path, stop_servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(text_response("no key needed"))
    stop_servers.append(server)
    # A profile pointing at localhost, chosen by name; no variable holds a key.
    base_url = server.base_url.replace("127.0.0.1", "localhost")
    write_config(f'[profiles.local.provider]\nbase_url = "{base_url}"\n')
    result = run_exec(workspace, "--profile", "local", "hi", env={})
    assert result.returncode == 0, result.stderr
    assert "no key needed" in result.stdout


@pytest.mark.parametrize("origin", ["env", "profile", "default"])
def test_a_refused_connection_names_the_url_and_where_it_came_from(
    workspace: Path, origin: str
) -> None:
    # Nothing listens on the port: bound, then closed.
    with socket.create_server(("127.0.0.1", 0)) as sock:
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    args: tuple[str, ...] = ("hi",)
    env: dict[str, str] = {}
    if origin == "env":
        url, said = f"{closed}/v1", "$OPENAI_BASE_URL"
        env["OPENAI_BASE_URL"] = url
    elif origin == "profile":
        url = f"{closed}/v1"
        path = write_config(f'[profiles.dead.provider]\nbase_url = "{url}"\n')
        said, args = f"profile 'dead' in {path}", ("--profile", "dead", "hi")
    else:  # the default URL, reached through a proxy that refuses (no network in tests)
        url, said = "https://api.openai.com/v1", "the default"
        env.update(through_proxy(closed), OPENAI_API_KEY="sk-test-only")
    started = time.monotonic()
    result = run_exec(workspace, *args, env=env)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error (retries_exhausted): model request failed after 5 attempts" in result.stdout
    assert result.stderr.endswith(
        f"codexcore exec: the requests went to POST {url}/responses "
        f"(provider.base_url from {said})\n"
    ), result.stderr
    print(f"refused connection, {origin}: exec took {elapsed:.2f} s (5 attempts)")
