"""``codexcore exec`` takes the Codex CLI's exec options (what the Codex SDK passes), and
refuses with a usage error (exit 2, naming it) what it cannot honour."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from codexcore.cli._exec_codex import with_codex_overrides
from codexcore.config import load_settings
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response


def codexcore_exec(cwd: Path, *args: str, stdin: str = "hi") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codexcore", "exec", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--thread-source", "user"], "--thread-source"),
        (["--cyber-access-program", "standard"], "--cyber-access-program"),
        (["-c", 'web_search="live"'], "web_search"),
        (["--image", "missing.png"], "missing.png"),
        (["--add-dir", "nowhere"], "nowhere"),
        (["resume"], "THREAD_ID"),
        (["two", "words"], "one prompt"),
    ],
)
def test_what_cannot_be_honoured_is_a_usage_error_naming_it(
    workspace: Path, args: list[str], named: str
) -> None:
    base = ["--json", "-c", 'openai_base_url="http://127.0.0.1:9"']
    result = codexcore_exec(workspace, *base, *args)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr
    assert result.stdout == ""


def test_the_sdk_options_are_taken_and_resume_takes_the_printed_thread_id(
    workspace: Path, servers: list[ScriptedResponsesServer]
) -> None:
    model = ScriptedModel([text_response("one"), text_response("two")])
    servers.append(server := ScriptedResponsesServer(model).start_in_thread())
    (workspace / "extra").mkdir()
    sdk_args = [
        "--experimental-json",
        "--config",
        f'openai_base_url="{server.base_url}"',
        "--sandbox",
        "workspace-write",
        "--cd",
        str(workspace),
        "--add-dir",
        str(workspace / "extra"),
        "--skip-git-repo-check",
        "--config",
        'model_reasoning_effort="low"',
        "--config",
        "sandbox_workspace_write.network_access=true",
        "--config",
        'web_search="disabled"',
        "--config",
        'approval_policy="never"',
    ]
    first = codexcore_exec(workspace, *sdk_args, stdin="first")
    assert first.returncode == 0, first.stderr
    thread_id = json.loads(first.stdout.splitlines()[0])["thread_id"]
    assert model.requests[0]["reasoning"]["effort"] == "low"
    again = codexcore_exec(workspace, *sdk_args, "resume", thread_id, stdin="second")
    assert again.returncode == 0, again.stderr
    lines = [json.loads(line) for line in again.stdout.splitlines()]
    assert lines[0] == {"type": "thread.started", "thread_id": thread_id}
    assert lines[-2]["item"]["text"] == "two"


def test_the_key_in_codex_api_key_is_used(tmp_path: Path) -> None:
    args = argparse.Namespace(add_dirs=[], thread_json=True)
    environ = {"CODEX_API_KEY": "sk-codex", "OPENAI_API_KEY": "sk-openai"}
    overrides = with_codex_overrides(args, {}, environ)
    loaded = load_settings(home=str(tmp_path), overrides=overrides, environ=environ)
    assert loaded.settings.api_key == "sk-codex"
    assert loaded.settings.approval_policy == "never"  # nobody to ask in JSON mode
    chosen = with_codex_overrides(args, {"approval_policy": "on-request"}, environ)
    assert chosen["approval_policy"] == "on-request"
