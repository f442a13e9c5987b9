"""Each example in ``examples/`` runs as a real subprocess, offline, and exits 0.

Given ``--base-url``, an example talks to a scripted server of this test,
whose script differs from the examples' own: the marker proves the example
used that server, and the recorded requests prove it answered the approval.
Without it, the example must work standalone with its own scripted model.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    shell_call,
    text_response,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUNNABLE = ("ide_plugin.py", "asyncio_embedding.py", "ndjson_client.py")
MARKER = "scripted-by-the-test-3c9e"
TIMEOUT = 45


def quote_output(body: dict[str, Any]) -> ScriptedResponse:
    outputs = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    result = json.loads(outputs[-1])
    return text_response(f"The test model saw: {result['output'].strip()}")


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedModel, str]]:
    model = ScriptedModel(
        [
            shell_call(["bash", "-c", f"echo {MARKER} > marker.txt && cat marker.txt"]),
            quote_output,
        ]
    )
    with ScriptedResponsesServer(model) as server:
        yield model, server.base_url


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    # conftest has cleared OPENAI_* and CODEXCORE_* and pointed CODEXCORE_HOME at a
    # temporary directory; the examples must not need anything else.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, (
        f"{name} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result


@pytest.mark.parametrize("name", RUNNABLE)
def test_example_against_a_scripted_server(name: str, scripted: tuple[ScriptedModel, str]) -> None:
    model, base_url = scripted
    out = run_example(name, "--base-url", base_url).stdout
    # The command's output, streamed, then the model quoting it back.
    assert out.count(MARKER) >= 2, out
    assert f"The test model saw: {MARKER}" in out, out
    assert model.remaining == 0
    assert len(model.requests) == 2
    # The approval was answered "approved": the command ran, exit code 0.
    outputs = [
        json.loads(item["output"])
        for item in model.requests[1]["input"]
        if item.get("type") == "function_call_output"
    ]
    assert outputs[-1]["metadata"]["exit_code"] == 0, outputs


@pytest.mark.parametrize("name", RUNNABLE)
def test_example_standalone(name: str) -> None:
    out = run_example(name).stdout
    assert "hello from a real subprocess" in out, out
    assert "Done. The command printed:" in out, out


def test_ide_plugin_shows_streaming_approval_and_a_clean_close() -> None:
    out = run_example("ide_plugin.py").stdout
    lines = out.splitlines()
    assert "[approval] the user clicks: approved" in lines
    assert any(line.startswith("$ bash -c ") for line in lines), out
    assert "[task complete]" in lines
    assert lines[-1] == "[engine closed]", out


def test_ide_plugin_shows_no_unknown_model_warning() -> None:
    # Issue 27.5: the example's first line was "[warning] model 'demo-model' is not in
    # the model catalogue ...": its scripted model is in its catalogue.
    result = run_example("ide_plugin.py")
    assert "model catalogue" not in result.stdout + result.stderr, result.stdout


def test_ide_plugin_tool_is_called_on_the_ui_thread_and_its_answer_reaches_the_model() -> None:
    out = run_example("ide_plugin.py").stdout
    lines = out.splitlines()
    # The model's call reached the plugin's function, on the plugin's UI thread ...
    assert "[plugin] editor_selection runs on the UI thread" in lines, out
    assert "[tool] codexcore.editor_selection({})" in lines, out
    # ... and the function's answer reached the model, which quotes it.
    assert any(
        line.startswith("codex: Your editor shows {") and '"path":"notes.txt"' in line
        for line in lines
    ), out


def test_ide_plugin_denied() -> None:
    out = run_example("ide_plugin.py", "--decision", "denied").stdout
    assert "[approval] the user clicks: denied" in out
    assert not any(line.startswith("$ ") for line in out.splitlines()), out  # nothing ran
    assert "Understood: I ran nothing." in out


def test_ndjson_client_needs_only_the_standard_library() -> None:
    tree = ast.parse((EXAMPLES / "ndjson_client.py").read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported


def test_remote_tui_reconnects_and_shows_every_event_once() -> None:
    out = run_example("remote_tui.py").stdout
    lines = out.splitlines()
    assert any(line.startswith("[connection lost: ") for line in lines), out
    assert any(line.startswith("[reconnected to session ") for line in lines), out
    assert "hello from a real subprocess" in out, out
    assert "Done. The command printed:" in out, out
    assert out.count("$ bash -c ") == 1, out  # the approved command ran once
    assert "[task_complete]" in lines, out
    assert lines[-1] == "[server exited 0]", out


def test_remote_tui_against_a_scripted_server(scripted: tuple[ScriptedModel, str]) -> None:
    model, base_url = scripted
    out = run_example("remote_tui.py", "--base-url", base_url).stdout
    assert f"The test model saw: {MARKER}" in out, out
    assert "[reconnected to session " in out, out
    assert len(model.requests) == 2
    assert model.remaining == 0
