"""OpenAI's TypeScript Codex SDK (``@openai/codex-sdk``, published, unchanged) runs
``codexcore exec`` as it runs ``codex exec``: ``codexPathOverride`` is this venv's
``codexcore``, ``baseUrl`` a scripted model on 127.0.0.1.

``tests/codex_sdk/run.mjs`` calls the SDK (``thread.run()``, ``runStreamed()``,
``outputSchema``, ``resumeThread(id)``, a ``local_image`` input) and prints what it
returned or yielded; every event must have Codex's type and fields exactly.

The SDK is installed by ``.ci/install-codex-sdk`` into ``.ci/codex-sdk/``. Without it
(or without Node.js) these tests skip and say so; under CI (``CI=true``) they fail.

``CODEXCORE_SDK_TESTS_CODEX=/path/to/codex`` runs the same tests against the real
Codex CLI instead (the check that the harness is right; docs/app-server.md).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    http_error,
    shell_call,
    sse_event,
    text_response,
)

REPO = Path(__file__).resolve().parent.parent
SDK_DIR = REPO / ".ci" / "codex-sdk"
SCRIPT = Path(__file__).resolve().parent / "codex_sdk" / "run.mjs"
REAL_CODEX = os.environ.get("CODEXCORE_SDK_TESTS_CODEX")
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch\n"
# A 1x1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _sdk_or_skip() -> None:
    """Node.js and the SDK, else a skip that says how to install them (a failure in CI)."""
    problem = None
    if shutil.which("node") is None:
        problem = "Node.js is not installed (apt-get install nodejs npm)"
    elif not (SDK_DIR / "node_modules" / "@openai" / "codex-sdk" / "package.json").is_file():
        problem = f"@openai/codex-sdk is not installed in {SDK_DIR} (run .ci/install-codex-sdk)"
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(problem)
    pytest.skip(problem)


# --- the scripted model: answers for codexcore's tools, or the real Codex's -------------


def _tools(body: dict[str, Any]) -> set[str]:
    return {str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, dict)}


def command(script: str) -> Callable[[dict[str, Any]], ScriptedResponse]:
    """A call of the shell tool the client offers: codexcore's ``shell`` (an argv) or
    Codex's ``exec_command`` (a command line)."""

    def reply(body: dict[str, Any]) -> ScriptedResponse:
        if "exec_command" in _tools(body):
            return function_call_response("exec_command", {"cmd": script}, call_id="call_cmd")
        return shell_call(["bash", "-c", script], call_id="call_cmd")

    return reply


def patch(body: dict[str, Any]) -> ScriptedResponse:
    """``PATCH`` through the client's apply_patch: codexcore's function tool, or Codex's
    freeform (custom) tool."""
    tools: list[dict[str, Any]] = body.get("tools") or []
    tool = next((t for t in tools if t.get("name") == "apply_patch"), {})
    if tool.get("type") != "custom":
        return function_call_response("apply_patch", {"input": PATCH}, call_id="call_patch")
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_patch"}
    item |= {"name": "apply_patch", "input": PATCH, "status": "completed"}
    response = {"id": "resp_patch", "object": "response", "status": "completed", "output": [item]}
    usage = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    return ScriptedResponse(
        steps=[
            sse_event({"type": "response.created", "response": {**response, "output": []}}),
            sse_event({"type": "response.output_item.done", "output_index": 0, "item": item}),
            sse_event({"type": "response.completed", "response": {**response, "usage": usage}}),
        ]
    )


@pytest.fixture
def model_server(servers: list[ScriptedResponsesServer]) -> Callable[..., ScriptedModel]:
    def start(*replies: Any) -> ScriptedModel:
        model = ScriptedModel(replies)
        servers.append(ScriptedResponsesServer(model).start_in_thread())
        return model

    return start


@pytest.fixture
def sdk(
    servers: list[ScriptedResponsesServer], workspace: Path, tmp_path: Path
) -> Iterator[Callable[..., dict[str, Any]]]:
    """``sdk(scenario, **config)``: run.mjs's outcome, against the last server started."""
    _sdk_or_skip()
    codex_home = None
    if REAL_CODEX:  # Codex wants its home outside /tmp (as bench/_vs_codex_cli.py)
        codex_home = SDK_DIR / f"codex-home-{os.getpid()}"
        codex_home.mkdir(parents=True, exist_ok=True)

    def run(scenario: str, **config: Any) -> dict[str, Any]:
        base_url = servers[-1].base_url
        env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path))}
        env["CODEXCORE_HOME"] = os.environ["CODEXCORE_HOME"]
        if codex_home is not None:
            env["CODEX_HOME"] = str(codex_home)
            (codex_home / "config.toml").write_text(_codex_config(base_url))
        thread: dict[str, Any] = {"workingDirectory": str(workspace), "skipGitRepoCheck": True}
        thread |= {"sandboxMode": "danger-full-access", "approvalPolicy": "never"}
        thread |= {"model": "gpt-5.5"} if REAL_CODEX else {}
        settings: dict[str, Any] = {"sdkDir": str(SDK_DIR), "baseUrl": base_url}
        settings["apiKey"] = "sk-test"
        settings |= {"codexPath": REAL_CODEX or str(Path(sys.executable).parent / "codexcore")}
        settings |= {"env": env, "thread": thread, **config}
        done = subprocess.run(
            ["node", str(SCRIPT), scenario, json.dumps(settings)],
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
        )
        assert done.stdout, done.stderr
        outcome: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return outcome

    yield run
    if codex_home is not None:
        shutil.rmtree(codex_home, ignore_errors=True)


def _codex_config(base_url: str) -> str:
    return f"""model_provider = "scripted"
check_for_update_on_startup = false
[model_providers.scripted]
name = "scripted"
base_url = "{base_url}"
wire_api = "responses"
env_key = "CODEX_API_KEY"
[analytics]
enabled = false
"""


# --- Codex's thread events, field by field ------------------------------------------------

USAGE_FIELDS = {
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
}
ITEM_FIELDS = {
    "agent_message": {"id", "type", "text"},
    "reasoning": {"id", "type", "text"},
    "command_execution": {"id", "type", "command", "aggregated_output", "exit_code", "status"},
    "file_change": {"id", "type", "changes", "status"},
    "mcp_tool_call": {"id", "type", "server", "tool", "arguments", "result", "error", "status"},
    "web_search": {"id", "type", "query"},
    "todo_list": {"id", "type", "items"},
    "error": {"id", "type", "message"},
}


def check_item(item: dict[str, Any]) -> None:
    assert set(item) == ITEM_FIELDS[item["type"]], item
    assert item["id"].startswith("item_"), item
    if item["type"] == "command_execution":
        assert item["status"] in {"in_progress", "completed", "failed"}
        assert item["exit_code"] is None or isinstance(item["exit_code"], int)
    if item["type"] == "file_change":
        assert item["status"] in {"in_progress", "completed", "failed"}
        for change in item["changes"]:
            assert set(change) == {"path", "kind"}
            assert change["kind"] in {"add", "delete", "update"}


def check_event(event: dict[str, Any]) -> None:
    """``event`` is one of Codex's thread events, with exactly its fields."""
    kind = event["type"]
    if kind == "thread.started":
        assert set(event) == {"type", "thread_id"}
        assert event["thread_id"]
    elif kind == "turn.started":
        assert set(event) == {"type"}
    elif kind == "turn.completed":
        assert set(event) == {"type", "usage"}
        assert set(event["usage"]) == USAGE_FIELDS
        assert all(isinstance(n, int) for n in event["usage"].values())
    elif kind == "turn.failed":
        assert set(event) == {"type", "error"}
        assert set(event["error"]) == {"message"}
    elif kind == "error":
        assert set(event) == {"type", "message"}
    else:
        assert kind in {"item.started", "item.updated", "item.completed"}, event
        assert set(event) == {"type", "item"}
        check_item(event["item"])


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] + (f":{e['item']['type']}" if "item" in e else "") for e in events]


# --- the tests -----------------------------------------------------------------------------


def test_run_returns_the_turn_with_its_command_and_answer(
    model_server: Callable[..., ScriptedModel], sdk: Callable[..., dict[str, Any]]
) -> None:
    model_server(command("echo hello"), text_response("It printed hello."))
    outcome = sdk("run", prompt="Run echo hello, then tell me what it printed.")
    result = outcome["result"]
    assert result["finalResponse"] == "It printed hello."
    ran, answer = result["items"]
    for item in result["items"]:
        check_item(item)
    assert "echo hello" in ran["command"]
    assert (ran["aggregated_output"], ran["exit_code"], ran["status"]) == (
        "hello\n",
        0,
        "completed",
    )
    assert answer == {"id": answer["id"], "type": "agent_message", "text": "It printed hello."}
    assert result["usage"]["input_tokens"] == 240  # two responses of 120 (the script's)
    assert result["usage"]["output_tokens"] == 60
    assert outcome["threadId"]


def test_run_streamed_yields_every_event_of_a_command_and_a_patch(
    model_server: Callable[..., ScriptedModel],
    sdk: Callable[..., dict[str, Any]],
    workspace: Path,
) -> None:
    model_server(command("echo hello"), patch, text_response("Both done.", reasoning="Check."))
    outcome = sdk("streamed", prompt="Run echo hello, then add hello.txt.")
    events = outcome["events"]
    for event in events:
        check_event(event)
    assert kinds(events) == [
        "thread.started",
        "turn.started",
        "item.started:command_execution",
        "item.completed:command_execution",
        "item.started:file_change",
        "item.completed:file_change",
        "item.completed:reasoning",
        "item.completed:agent_message",
        "turn.completed",
    ]
    assert events[0]["thread_id"] == outcome["threadId"]
    assert events[6]["item"]["text"] == "Check."
    started, ran = events[2]["item"], events[3]["item"]
    assert started["id"] == ran["id"]
    assert (started["status"], started["exit_code"]) == ("in_progress", None)
    assert events[4]["item"]["status"] == "in_progress"
    change = events[5]["item"]
    assert change["changes"] == [{"path": str(workspace / "hello.txt"), "kind": "add"}]
    assert change["status"] == "completed"
    assert (workspace / "hello.txt").read_text() == "hi there\n"
    assert len({e["item"]["id"] for e in events if "item" in e}) == 4


def test_output_schema_constrains_the_final_response(
    model_server: Callable[..., ScriptedModel], sdk: Callable[..., dict[str, Any]]
) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    model = model_server(text_response('{"answer": 42}'))
    outcome = sdk("schema", prompt="How many?", schema=schema)
    assert json.loads(outcome["result"]["finalResponse"]) == {"answer": 42}
    sent = model.requests[0]["text"]["format"]
    assert (sent["type"], sent["schema"], sent["strict"]) == ("json_schema", schema, True)


def test_a_thread_resumed_by_id_continues_the_conversation(
    model_server: Callable[..., ScriptedModel], sdk: Callable[..., dict[str, Any]]
) -> None:
    model = model_server(text_response("Noted: blue."), text_response("You said blue."))
    outcome = sdk("resume", prompt="Remember: blue.", secondPrompt="What did I say?")
    events = outcome["events"]
    for event in events:
        check_event(event)
    assert outcome["resumedId"] == outcome["threadId"]
    assert events[0] == {"type": "thread.started", "thread_id": outcome["threadId"]}
    assert kinds(events)[1:] == ["turn.started", "item.completed:agent_message", "turn.completed"]
    assert events[2]["item"]["text"] == "You said blue."
    second = model.requests[1]
    # The earlier turn reaches the model: in the input, or by the stored response's id.
    assert "Remember: blue." in json.dumps(second["input"]) or second.get("previous_response_id")


def test_an_image_input_reaches_the_model(
    model_server: Callable[..., ScriptedModel],
    sdk: Callable[..., dict[str, Any]],
    workspace: Path,
) -> None:
    image = workspace / "pixel.png"
    image.write_bytes(PIXEL)
    model = model_server(text_response("One pixel."))
    outcome = sdk("image", prompt="What is in the image?", image=str(image))
    for event in outcome["events"]:
        check_event(event)
    assert kinds(outcome["events"])[-2:] == ["item.completed:agent_message", "turn.completed"]
    sent = json.dumps(model.requests[0]["input"])
    assert '"input_image"' in sent
    assert base64.b64encode(PIXEL).decode() in sent


def test_a_failed_turn_rejects_run_with_the_models_message(
    model_server: Callable[..., ScriptedModel], sdk: Callable[..., dict[str, Any]]
) -> None:
    # A refusal no retry changes (400), with the API's error body.
    error = {"message": "the scripted model broke", "type": "invalid_request_error"}
    model_server(http_error(400, {"error": {**error, "code": None}}))
    outcome = sdk("run", prompt="Try.")
    assert "the scripted model broke" in outcome["error"]
