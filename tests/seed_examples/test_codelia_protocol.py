"""The Codelia runtime protocol's own examples (its section 10), as written, to a real server.

Each UI message is sent byte for byte as the document writes it (only the id of an
answer to the runtime's own request is made the one the runtime sent); each of the
runtime's messages is compared field by field with the document's example. A field
that differs on purpose is named in :data:`DIFFERENCES`, and listed with why in
``docs/seed-conformance.md``; every other field must be equal, or be a value the
document shows as a placeholder (an id, a time) that is valid here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codexcore import __version__
from codexcore.testing import ScriptedModel, function_call_response, text_response

from ..test_codelia import Ui, finish, serving

pytestmark = pytest.mark.anyio

# The document's section 10, line for line.
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocol_version":"0",'
    b'"client":{"name":"codelia-tui","version":"0.0.0"}}}\n'
)
INITIALIZE_ANSWER = (
    '{"jsonrpc":"2.0","id":"1","result":{"protocol_version":"0",'
    '"server":{"name":"codelia-runtime","version":"0.0.0"}}}'
)
RUN_START = (
    b'{"jsonrpc":"2.0","id":"2","method":"run.start","params":{"input":{"type":"text",'
    b'"text":"List TypeScript files"}}}\n'
)
RUN_START_ANSWER = '{"jsonrpc":"2.0","id":"2","result":{"run_id":"run_123"}}'
AGENT_EVENT = (
    '{"jsonrpc":"2.0","method":"agent.event","params":{"run_id":"run_123","seq":0,'
    '"event":{"type":"reasoning","content":"...","timestamp":1730000000000}}}'
)
CONFIRM_REQUEST = (
    '{"jsonrpc":"2.0","id":"9","method":"ui.confirm.request","params":{"run_id":"run_123",'
    '"title":"Run command?","message":"rg -n \\"AgentEvent\\" -S packages"}}'
)
CONFIRM_ANSWER = '{"jsonrpc":"2.0","id":"9","result":{"ok":true}}'

PLACEHOLDERS = {"run_id", "id", "timestamp"}
"""Fields whose example value is an id or a time: ours must be valid, not equal."""

DIFFERENCES = {
    "initialize": {"result.server.name", "result.server.version"},
    "agent.event": {"params.seq"},
    "ui.confirm.request": {"params.message"},
}
"""The fields that differ on purpose (docs/seed-conformance.md says why)."""


def compare(example: dict[str, Any], ours: dict[str, Any], allowed: set[str]) -> set[str]:
    """The paths where ``ours`` differs from ``example`` (every example field compared;
    fields the example does not show are extensions, allowed by the protocol)."""
    differ: set[str] = set()

    def walk(want: Any, got: Any, path: str) -> None:
        name = path.rsplit(".", 1)[-1]
        if isinstance(want, dict):
            assert isinstance(got, dict), (path, got)
            for key, value in want.items():
                assert key in got, f"{path}.{key} is missing: {got}"
                walk(value, got[key], f"{path}.{key}".lstrip("."))
        elif name in PLACEHOLDERS:
            assert type(got) is type(want), (path, got)
            assert got, (path, got)
        elif want != got:
            differ.add(path)

    walk(example, ours, "")
    assert differ <= allowed, f"unexpected differences {differ - allowed}: {ours}"
    return differ


async def test_initialize_as_written(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(INITIALIZE)
        answer = await ui.answer("1")
        await finish(ui)
    differ = compare(json.loads(INITIALIZE_ANSWER), answer, DIFFERENCES["initialize"])
    assert differ == DIFFERENCES["initialize"]
    assert answer["result"]["server"] == {"name": "codexcore", "version": __version__}


async def test_run_start_and_its_agent_event_as_written(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("a.ts\nb.ts", reasoning="...")])
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(INITIALIZE, RUN_START)
        await ui.answer("1")
        answer = await ui.answer("2")
        compare(json.loads(RUN_START_ANSWER), answer, set())
        run_id = answer["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        await finish(ui)
    (reasoning,) = [
        m
        for m in ui.of_run(run_id)
        if m["method"] == "agent.event" and m["params"]["event"]["type"] == "reasoning"
    ]
    differ = compare(json.loads(AGENT_EVENT), reasoning, DIFFERENCES["agent.event"])
    assert differ == {"params.seq"}  # seq 0 is the run's step_start here
    assert reasoning["params"]["seq"] == 1
    assert reasoning["params"]["run_id"] == run_id
    assert abs(reasoning["params"]["event"]["timestamp"] - _first_event_ms(ui, run_id)) < 60_000


def _first_event_ms(ui: Ui, run_id: str) -> int:
    """A time the run's events carry (epoch milliseconds, as the example's)."""
    texts = [
        m["params"]["event"]["timestamp"]
        for m in ui.of_run(run_id)
        if m["method"] == "agent.event" and "timestamp" in m["params"]["event"]
    ]
    return int(texts[-1])


async def test_the_confirm_as_written(tmp_path: Path) -> None:
    # A read-only search runs without asking in every mode: the model asks to run it
    # outside the sandbox, which is asked of the UI (with no justification to show).
    command = {
        "command": ["bash", "-lc", 'rg -n "AgentEvent" -S packages'],
        "with_escalated_permissions": True,
    }
    model = ScriptedModel(
        [function_call_response("shell", command, call_id="c1"), text_response("Done.")]
    )
    async with serving(tmp_path, model, "--approval-mode", "trusted") as (ui, http):
        await ui.server.send(INITIALIZE, RUN_START)
        run_id = (await ui.answer("2"))["result"]["run_id"]
        request = await ui.until("ui.confirm.request")
        differ = compare(json.loads(CONFIRM_REQUEST), request, DIFFERENCES["ui.confirm.request"])
        # The command line is the example's; a second line says where it runs.
        assert request["params"]["message"] == f'rg -n "AgentEvent" -S packages\nin {tmp_path}'
        assert differ == {"params.message"}
        answer = CONFIRM_ANSWER.replace('"id":"9"', json.dumps({"id": request["id"]})[1:-1])
        await ui.server.send(answer.encode() + b"\n")
        assert await ui.run_to_end(run_id) == "completed"
        await finish(ui)
    outputs = [
        i for i in http.model.requests[1]["input"] if i.get("type") == "function_call_output"
    ]
    assert "denied" not in outputs[0]["output"]  # approved: the command ran
