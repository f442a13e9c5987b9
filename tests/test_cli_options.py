"""The command line's shared behaviour, as real processes: global options in either place,
colour, ``-c`` overrides, session id prefixes, a terminal's spinner and stdin prompt,
``-C`` checked, and shell completion (issue 27, items 10 and 11)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codexcore import protocol as p
from codexcore.engine import default_home
from codexcore.testing import (
    Hang,
    ScriptedResponse,
    ScriptedResponsesServer,
    text_response,
)

from .scripted_servers import serve
from .test_cli_sessions import _copy_as

COLOR = "\033[0m"  # the reset every coloured piece ends with


def codexcore(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codexcore", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


class Terminal:
    """A real process on a pseudo-terminal: stdin, stdout and stderr are all the tty."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "codexcore", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**os.environ, **env},
            start_new_session=True,
        )
        os.close(slave)
        self.seen = b""

    def wait_for(self, text: str, timeout: float = 20, *, start: int = 0) -> bool:
        """Read until ``text`` has appeared past ``start`` (True), or the process ended
        or time ran out."""
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen[start:]:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                return False
        return True

    def drain(self) -> int:
        """Read all the process has written so far; how much has been seen."""
        while self._read(0):
            pass
        return len(self.seen)

    def read_to_end(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(deadline - time.monotonic()):
            pass
        return self.process.wait(timeout=max(deadline - time.monotonic(), 1))

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # EIO: every writer has gone
            return False
        self.seen += chunk
        return bool(chunk)

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        os.close(self.master)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


# --- item 10: the spinner from the first request on --------------------------------------


def test_the_spinner_turns_while_the_first_request_is_out(
    workspace: Path, servers: list[ScriptedResponsesServer], terminals: list[Terminal]
) -> None:
    arrived = threading.Event()

    def first_reply(body: dict[str, Any]) -> ScriptedResponse:
        arrived.set()
        return ScriptedResponse(steps=(Hang(),))  # the reply never comes

    _, server = serve(servers, first_reply)
    terminal = Terminal(["exec", "hi"], workspace, {"OPENAI_BASE_URL": server.base_url})
    terminals.append(terminal)
    assert arrived.wait(20)
    # All written before the request was sent is in the terminal now; a frame drawn
    # after it is one drawn while the request is out.
    assert terminal.wait_for("thinking", start=terminal.drain()), terminal.seen


# --- item 11: exec on a terminal, -C -------------------------------------------------------


def test_exec_says_it_reads_the_prompt_from_a_terminal(
    workspace: Path, servers: list[ScriptedResponsesServer], terminals: list[Terminal]
) -> None:
    model, server = serve(servers, text_response("read you"))
    terminal = Terminal(["exec"], workspace, {"OPENAI_BASE_URL": server.base_url})
    terminals.append(terminal)
    assert terminal.wait_for("reading the prompt from stdin"), terminal.seen
    os.write(terminal.master, b"typed at the terminal\n\x04")  # Ctrl-D ends stdin
    assert terminal.read_to_end() == 0, terminal.seen
    assert b"read you" in terminal.seen
    assert json.dumps(model.requests[0]).count("typed at the terminal") == 1


def test_piped_stdin_gets_no_word_about_the_terminal(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(servers, text_response("ok"))
    result = codexcore(
        "exec", cwd=workspace, env={"OPENAI_BASE_URL": server.base_url}, stdin="piped"
    )
    assert result.returncode == 0, result.stderr
    assert "reading the prompt" not in result.stderr


@pytest.mark.parametrize("where", ["/nonexistent/dir", "a-file"])
def test_exec_refuses_a_directory_that_is_not_one(
    where: str, workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    (workspace / "a-file").write_text("")
    model, server = serve(servers, text_response("should not run"))
    env = {"OPENAI_BASE_URL": server.base_url}
    result = codexcore("exec", "-C", where, "hi", cwd=workspace, env=env)
    assert result.returncode == 2
    assert f"-C/--cd: {where}: " in result.stderr
    assert "does not exist" in result.stderr or "is not a directory" in result.stderr
    assert model.requests == []


# --- item 11: global options after the command, colour --------------------------------------


def test_log_level_is_taken_after_the_command_too(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(servers, text_response("one"), text_response("two"))
    env = {"OPENAI_BASE_URL": server.base_url}
    after = codexcore("exec", "hi", "--log-level", "debug", cwd=workspace, env=env)
    assert after.returncode == 0, after.stderr
    assert "model.request" in after.stderr
    # Given in both places, the one after the command wins.
    both = codexcore(
        "--log-level", "debug", "exec", "--log-level", "error", "hi", cwd=workspace, env=env
    )
    assert both.returncode == 0, both.stderr
    assert "model.request" not in both.stderr
    nested = codexcore("sessions", "list", "--log-level", "info", cwd=workspace)
    assert nested.returncode == 0, nested.stderr


@pytest.mark.parametrize(
    ("flags", "env", "coloured"),
    [
        ([], {}, True),
        ([], {"NO_COLOR": "1"}, False),
        (["--color", "never"], {}, False),
        (["--color", "always"], {"NO_COLOR": "1"}, True),
    ],
)
def test_colour_on_a_terminal(
    flags: list[str],
    env: dict[str, str],
    coloured: bool,
    workspace: Path,
    servers: list[ScriptedResponsesServer],
    terminals: list[Terminal],
) -> None:
    _, server = serve(servers, text_response("hello"))
    base = {"OPENAI_BASE_URL": server.base_url, "NO_COLOR": ""}
    terminal = Terminal(["exec", *flags, "hi"], workspace, {**base, **env})
    terminals.append(terminal)
    assert terminal.read_to_end() == 0, terminal.seen
    assert b"done \xc2\xb7 tokens" in terminal.seen
    assert (COLOR.encode() in terminal.seen) is coloured


def test_color_always_colours_a_pipe(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(servers, text_response("hello"))
    env = {"OPENAI_BASE_URL": server.base_url}
    result = codexcore("--color", "always", "exec", "hi", cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert COLOR in result.stdout


# --- item 11: -c KEY=VALUE ------------------------------------------------------------------


def test_c_overrides_a_setting_for_the_run(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    model, server = serve(servers, *(text_response("ok") for _ in range(3)))
    env = {"OPENAI_BASE_URL": server.base_url}
    first = codexcore("exec", "-c", "model=gpt-from-c", "hi", cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    both = codexcore("-c", "model=a", "exec", "-c", "model=b", "hi", cwd=workspace, env=env)
    assert both.returncode == 0, both.stderr
    flag = codexcore("-c", "model=from-c", "exec", "-m", "from-flag", "hi", cwd=workspace, env=env)
    assert flag.returncode == 0, flag.stderr
    assert [r["model"] for r in model.requests] == ["gpt-from-c", "b", "from-flag"]


def test_c_values_are_toml_and_dotted_keys_reach_tables(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    model, server = serve(servers, text_response("ok"))
    args = [
        "-c",
        f'provider.base_url="{server.base_url}"',
        "-c",
        'provider.headers={X-From-C = "yes"}',
        "-c",
        "provider.max_attempts=1",
    ]
    result = codexcore("exec", *args, "hi", cwd=workspace, env={"OPENAI_BASE_URL": ""})
    assert result.returncode == 0, result.stderr
    assert len(model.requests) == 1  # base_url came from -c alone


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("modle=gpt-5", "-c modle: no such setting (did you mean 'model'?)"),
        ("model_providers.x.base_url=http://h", "did you mean 'provider.base_url'?"),
        ("network_access=maybe", '-c network_access = "maybe": expected true or false'),
        ("provider.api_key=sk-secret", "a key never goes in configuration"),
        ("no-equals-sign", "expected KEY=VALUE"),
    ],
)
def test_a_wrong_c_is_a_usage_error_naming_it(pair: str, message: str, workspace: Path) -> None:
    for command in (["exec", "hi"], ["sessions", "list"]):
        result = codexcore(*command, "-c", pair, cwd=workspace)
        assert result.returncode == 2
        assert message in result.stderr
        assert "sk-secret" not in result.stderr
        assert "Traceback" not in result.stderr


# --- item 11: session id prefixes -------------------------------------------------------------


def record_sessions(workspace: Path, base_url: str) -> Path:
    """One session recorded by a real exec, then copied as ``abc111`` and ``abc222``."""
    result = codexcore(
        "exec", "--events-json", "first", cwd=workspace, env={"OPENAI_BASE_URL": base_url}
    )
    assert result.returncode == 0, result.stderr
    (source,) = (default_home() / "sessions").glob("*/*/*/*.jsonl")
    for session_id in ("abc111", "abc222"):
        _copy_as(source, session_id)
    return source


def test_a_unique_prefix_names_a_session(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    _, server = serve(servers, text_response("one", response_id="r1"), text_response("two"))
    record_sessions(workspace, server.base_url)
    shown = codexcore("sessions", "show", "abc1", cwd=workspace)
    assert shown.returncode == 0, shown.stderr
    assert "> first" in shown.stdout
    env = {"OPENAI_BASE_URL": server.base_url}
    resumed = codexcore(
        "exec", "--events-json", "--resume", "abc2", "again", cwd=workspace, env=env
    )
    assert resumed.returncode == 0, resumed.stderr
    configured = p.decode_event(resumed.stdout.splitlines()[0]).msg
    assert isinstance(configured, p.SessionConfigured)
    assert configured.session_id == "abc222"


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "show", "{id}"],
        ["exec", "--resume", "{id}", "x"],
        ["exec", "--fork", "{id}@r1", "x"],
        ["control", "interrupt", "--session", "{id}", "--sender", "s", "--team", "t"],
    ],
)
def test_an_ambiguous_or_unknown_prefix_is_refused_clearly(
    command: list[str], workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    model, server = serve(servers, text_response("one"))
    record_sessions(workspace, server.base_url)
    env = {"OPENAI_BASE_URL": server.base_url}
    ambiguous = codexcore(*(w.format(id="abc") for w in command), cwd=workspace, env=env)
    assert ambiguous.returncode == 2
    assert "'abc' starts 2 session ids: abc111, abc222; give more of the id" in ambiguous.stderr
    unknown = codexcore(*(w.format(id="zzz") for w in command), cwd=workspace, env=env)
    assert unknown.returncode == 2
    assert "no recorded session id starts with 'zzz'" in unknown.stderr
    assert len(model.requests) == 1  # only the recording's


def test_control_resolves_a_prefix_before_it_connects(
    workspace: Path, servers: list[ScriptedResponsesServer], tmp_path: Path
) -> None:
    _, server = serve(servers, text_response("one"))
    record_sessions(workspace, server.base_url)
    socket = str(tmp_path / "no-server.sock")
    args = ["--sender", "s", "--team", "t", "--unix", socket]
    result = codexcore("control", "interrupt", "--session", "abc1", *args, cwd=workspace)
    assert result.returncode == 1, result.stderr  # it got as far as the (absent) server
    assert "session" not in result.stderr
    # A session the server may know but this machine never recorded, its agent given.
    elsewhere = ["--session", "remote-id", "--agent", "a1"]
    result = codexcore("control", "interrupt", *elsewhere, *args, cwd=workspace)
    assert result.returncode == 1, result.stderr
    assert "session" not in result.stderr


# --- item 11: shell completion ----------------------------------------------------------------


def complete_in_bash(script: str, line: str) -> list[str]:
    """What a real bash, with ``script`` loaded, offers for ``line`` (cursor at its end)."""
    probe = (
        f"{script}\n"
        'read -ra COMP_WORDS <<< "$LINE"\n'
        '[[ "$LINE" == *" " ]] && COMP_WORDS+=("")\n'
        "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
        "complete -p codexcore >/dev/null || exit 9\n"
        '_codexcore codexcore "${COMP_WORDS[COMP_CWORD]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "LINE": line},
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_completes_commands_actions_options_and_values(tmp_path: Path) -> None:
    generated = codexcore("completion", "bash", cwd=tmp_path)
    assert generated.returncode == 0, generated.stderr
    script = generated.stdout
    assert complete_in_bash(script, "codexcore se") == ["serve", "sessions"]
    assert complete_in_bash(script, "codexcore --log-level debug sessions s") == ["show"]
    assert complete_in_bash(script, "codexcore --color n") == ["never"]
    assert complete_in_bash(script, "codexcore exec --approval-policy on-") == [
        "on-failure",
        "on-request",
    ]
    assert complete_in_bash(script, "codexcore exec --resume x --js") == ["--json"]
    assert "--color" in complete_in_bash(script, "codexcore sessions list --")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_are_generated(shell: str, tmp_path: Path) -> None:
    generated = codexcore("completion", shell, cwd=tmp_path)
    assert generated.returncode == 0, generated.stderr
    for word in ("sessions", "color", "never", "resume", "on-request"):
        assert word in generated.stdout
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed: its script's syntax is not checked")
    path = tmp_path / f"codexcore.{shell}"
    path.write_text(generated.stdout)
    check = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
