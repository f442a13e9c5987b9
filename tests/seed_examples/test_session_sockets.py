"""Every example message of the Ralph-style session sockets' document, as written, sent to a
real ``codexcore serve --unix --session-sockets`` over a session's control socket, and each
answer compared field by field with the document's example answer.

Values the document could not know (ids, times, paths, counts, output lines) are compared
by type and shape only; everything else by value. What still differs is listed, per
example, in ``DIFFERENCES`` below and in the Ralph-style session sockets' section of
docs/seed-conformance.md, row for row.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from ..server_helpers import Client, ServerProcess, say, server_env
from ..test_control_socket import (
    WAIT,
    Gate,
    SeedClient,
    call,
    new_session,
    ralph_dir,
    short_home,
    state_change,
)

pytestmark = pytest.mark.anyio

# --- the document's examples, as written ------------------------------------------------

PROMPT = "Focus on fixing the type errors first before adding new features."
DOC_STATUS = {
    "task_name": "my-feature",
    "task_dir": "/path/to/tasks/my-feature",
    "iteration": 3,
    "max_iterations": 50,
    "current_story": "US-003",
    "agent": "claude",
    "status": "running",
    "interactive_mode": False,
    "started_at": "2026-01-23T10:00:00.000000",
    "updated_at": "2026-01-23T10:15:30.000000",
    "recent_output": ["line 1", "line 2", "..."],
}
DOC_NOT_FOUND = {"code": -32601, "message": "Method not found: foo"}
DOC_STATE_CHANGE = {
    "type": "state_change",
    "timestamp": "2026-01-23T10:30:00.000000",
    "data": {"iteration": 5},
}
DOC_OUTPUT = {
    "type": "output",
    "timestamp": "2026-01-23T10:15:30.123456",
    "data": {"line": "Implementing the database migration..."},
}
DOC_STORY_CHANGE = {
    "type": "state_change",
    "timestamp": "2026-01-23T10:15:30.123456",
    "data": {"iteration": 4, "current_story": "US-004"},
}
DOC_ERROR_MESSAGES = {
    -32700: "Parse error",
    -32600: "Invalid request",
    -32601: "Method not found",
    -32602: "Invalid params",
}
# The Rust example's request: serde_json::json! prints its keys sorted, compactly.
RUST_GET_STATUS = b'{"id":1,"jsonrpc":"2.0","method":"get_status","params":{}}\n'

# Fields whose values the document could not know: compared by type (and times by format).
LIVE = {
    "task_name",
    "task_dir",
    "iteration",
    "started_at",
    "updated_at",
    "recent_output",
    "timestamp",
    "line",
}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$")

# Every difference that stays, per example; docs/seed-conformance.md lists the same rows.
DIFFERENCES: dict[str, set[str]] = {
    "get_status": {
        "agent: 'claude' != 'codexcore'",
        "max_iterations: 50 != None",
        "agent_id: extra field",
    },
    "set_interactive_mode": {"interactive_mode: True != False"},
    "state_change (iteration and current_story)": {"data.iteration: missing"},
    "error -32600": {"message: 'Invalid request' != 'Invalid Request'"},
}


def differences(doc: Any, ours: Any, path: str = "") -> Iterator[str]:
    """Where ``ours`` differs from the document's ``doc``, field by field."""
    name = path.rsplit(".", 1)[-1]
    if isinstance(doc, dict) and isinstance(ours, dict):
        for key in doc:
            where = f"{path}.{key}" if path else key
            if key not in ours:
                yield f"{where}: missing"
            else:
                yield from differences(doc[key], ours[key], where)
        yield from (
            f"{path + '.' if path else ''}{key}: extra field" for key in ours if key not in doc
        )
    elif name in LIVE:
        if type(doc) is not type(ours):
            yield f"{path}: {type(ours).__name__} where the document has {type(doc).__name__}"
        elif isinstance(ours, str) and TIME.match(doc) and not TIME.match(ours):
            yield f"{path}: {ours!r} is not a time as the document writes it"
        elif isinstance(ours, list) and not all(isinstance(x, str) for x in ours):
            yield f"{path}: not a list of strings"
    elif doc != ours:
        yield f"{path}: {doc!r} != {ours!r}"


def check(example: str, doc: Any, ours: Any) -> None:
    found = set(differences(doc, ours))
    assert found == DIFFERENCES.get(example, set()), (example, ours)


def request(rid: int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def notifications(client: Client, kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]
        for m in client.seen
        if m.get("method") == "event" and m["params"]["type"] == kind
    ]


async def raw(client: Client, line: bytes) -> dict[str, Any]:
    """Send ``line`` as it is; the next answer (notifications are skipped, kept in seen)."""
    await client.send(line)
    while (answer := await client.recv(WAIT)) is not None and "method" in answer:
        pass
    assert answer is not None, f"closed after {line!r}"
    return answer


@asynccontextmanager
async def serve(home: str, workspace: Path, model: ScriptedModel) -> AsyncIterator[ServerProcess]:
    """``codexcore serve --unix PATH --session-sockets DIR``, DIR where the document's
    clients look (HOME is ``home``); the model's server in its own thread (a Gate blocks it)."""
    with ScriptedResponsesServer(model) as http:
        env = server_env(http.base_url, HOME=home, CODEXCORE_LOG="info")
        server = await ServerProcess.start(
            http.base_url,
            workspace,
            "--session-sockets",
            str(ralph_dir(home)),
            tcp=False,
            unix=Path(home) / "run" / "s.sock",
            env=env,
        )
        try:
            yield server
        finally:
            await server.kill()


def plan(*steps: tuple[str, str]) -> dict[str, Any]:
    return {"plan": [{"step": step, "status": status} for step, status in steps]}


async def test_every_example_of_the_document(tmp_path: Path) -> None:
    gates = [
        Gate(
            function_call_response(
                "update_plan",
                plan(("US-003", "in_progress"), ("US-004", "pending")),
                text="Implementing the database migration...",
            )
        ),
        Gate(
            function_call_response(
                "update_plan", plan(("US-003", "completed"), ("US-004", "in_progress"))
            )
        ),
        Gate(text_response("Done.")),
    ]
    with short_home() as home:
        async with serve(home, tmp_path, ScriptedModel(gates)) as server:
            ui, session_id, path = await new_session(server, home)
            seed: SeedClient | None = None
            try:
                await ui.send(say("t1", "migrate the database"))
                await gates[0].wait_asked()
                control = await Client.unix(path)
                # subscribe, unsubscribe: the documents' params, exactly their results.
                answer = await call(
                    control, request(1, "subscribe", {"events": ["output", "state_change"]})
                )
                check("subscribe", {"subscribed": ["output", "state_change"]}, answer)
                answer = await call(control, request(2, "unsubscribe", {"events": ["output"]}))
                check("unsubscribe", {"subscribed": ["state_change"]}, answer)
                await call(control, request(3, "subscribe", {"events": ["*"]}))
                # The Python example client, as written (HOME points its path here).
                seed = await SeedClient.start(home, session_id)
                await seed.until("its subscription", lambda: bool(seed and seed.seen))
                check(
                    "python client",
                    {"jsonrpc": "2.0", "id": 1, "result": {"subscribed": ["*"]}},
                    seed.seen[0],
                )
                # Turn 1: the plan's current step US-003, one output line.
                gates[0].open.set()
                await gates[1].wait_asked()
                await state_change(control, {"iteration": 1})
                (output, *_) = notifications(control, "output")
                check("output", DOC_OUTPUT, output)
                # get_status, the request of "JSON-RPC 2.0 Basics" as written.
                status = await call(control, request(1, "get_status", {}))
                check("get_status", DOC_STATUS, status)
                # state_change: the Basics' notification and the Events section's.
                (iteration,) = [
                    n for n in notifications(control, "state_change") if "iteration" in n["data"]
                ]
                check("state_change", DOC_STATE_CHANGE, iteration)
                gates[1].open.set()
                await gates[2].wait_asked()
                await state_change(control, {"iteration": 2})
                changes = notifications(control, "state_change")
                story = next(n for n in changes if n["data"].get("current_story") == "US-004")
                check("state_change (iteration and current_story)", DOC_STORY_CHANGE, story)
                assert {"current_story": "US-004"} in [c["data"] for c in changes]
                # The commands, their params as written.
                answer = await call(control, request(4, "inject_prompt", {"prompt": PROMPT}))
                check("inject_prompt", {"status": "prompt_injected", "prompt": PROMPT}, answer)
                answer = await call(control, request(5, "set_interactive_mode", {"enabled": True}))
                check("set_interactive_mode", {"interactive_mode": True}, answer)
                answer = await call(control, request(6, "write_pty", {"data": "ls -la\n"}))
                check(
                    "write_pty", {"status": "ignored", "reason": "not in interactive mode"}, answer
                )
                answer = await call(control, request(7, "checkpoint", {}))
                check("checkpoint", {"status": "checkpoint_requested"}, answer)
                answer = await call(control, request(8, "stop", {}))
                check("stop", {"status": "stop_requested"}, answer)
                # Errors: the Basics' error response, and the codes of the table.
                answer = await call(control, request(9, "foo", {}))
                check("error response", {"jsonrpc": "2.0", "id": 9, "error": DOC_NOT_FOUND}, answer)
                for code, line in (
                    (-32700, b"{not json\n"),
                    (-32600, b'{"id": 10, "method": "get_status"}\n'),
                    (
                        -32602,
                        b'{"jsonrpc": "2.0", "id": 11, "method": "subscribe", "params": {}}\n',
                    ),
                ):
                    error = (await raw(control, line))["error"]
                    assert error["code"] == code, error
                    ours = {"message": error["message"].split(":")[0]}
                    check(f"error {code}", {"message": DOC_ERROR_MESSAGES[code]}, ours)
                # The Rust example's request, as serde_json writes it: one line back.
                answer = await raw(control, RUST_GET_STATUS)
                assert (answer["id"], sorted(answer["result"])) == (
                    1,
                    sorted([*DOC_STATUS, "agent_id"]),
                )
                # The stop stands: the Turn ends, no further request, the Task ends stopped.
                gates[2].open.set()
                end = await ui.until("task_complete", id="t1")
                assert end["msg"]["stopped_by"] == "stop"  # the latest of the two names the end
                await state_change(control, {"status": "stopped"})
                await control.close()
                await ui.close()
            finally:
                for gate in gates:
                    gate.open.set()
                if seed is not None:
                    await seed.kill()


def test_the_conformance_page_lists_exactly_these_differences() -> None:
    page = (Path(__file__).parents[2] / "docs" / "seed-conformance.md").read_text()
    section = page.split("## Ralph-style session sockets", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = {row.split("|")[1].strip().strip("`") for row in rows}
    assert listed == set(DIFFERENCES), orjson.dumps(sorted(listed)).decode()
