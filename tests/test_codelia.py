"""Seed 000's run flow over a real ``codexcore serve --stdio``, as the Codelia TUI drives it.

The UI side writes the seed's own example lines where the seed has them, and
Codelia's shapes (its TUI's ``initialize``, its confirm answers with
``reason: null``) elsewhere. The model is scripted.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.adapters.jsonrpc.codelia._events import AGENT_EVENT_TYPES
from codexcore.testing import (
    Hang,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    http_error,
    shell_call,
    text_response,
)

from .server_helpers import ServerProcess, StdioServer, server_env

pytestmark = pytest.mark.anyio

SEED_000_INITIALIZE = (
    b'{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocol_version":"0",'
    b'"client":{"name":"codelia-tui","version":"0.0.0"}}}\n'
)
SEED_000_RUN_START = (
    b'{"jsonrpc":"2.0","id":"2","method":"run.start","params":{"input":{"type":"text",'
    b'"text":"List TypeScript files"}}}\n'
)
TUI_CAPABILITIES = {
    "supports_confirm": True,
    "supports_prompt": True,
    "supports_pick": True,
    "supports_permission_preflight_events": True,
}


def req(rid: str, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def tui_initialize(**capabilities: Any) -> dict[str, Any]:
    """What the Codelia TUI sends first (crates/tui/src/app/runtime/client.rs)."""
    return req(
        "1",
        "initialize",
        protocol_version="0",
        client={"name": "codelia-tui", "version": "0.1.0"},
        ui_capabilities=capabilities,
    )


class Ui:
    """A UI's view of the server: every line read, by kind."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server

    async def next(self, within: float = 15.0) -> dict[str, Any]:
        message = await self.server.recv(within)
        assert message is not None, f"stream ended; saw {self.server.seen}{self.server.context()}"
        return message

    async def answer(self, rid: str) -> dict[str, Any]:
        while True:
            message = await self.next()
            if message.get("id") == rid and "method" not in message:
                return message

    async def until(self, method: str, **match: Any) -> dict[str, Any]:
        while True:
            message = await self.next()
            params = message.get("params") or {}
            if message.get("method") == method and all(
                params.get(k) == v for k, v in match.items()
            ):
                return message

    async def run_to_end(self, run_id: str) -> str:
        terminal = await self.until("run.status", run_id=run_id, status=_ANY_TERMINAL)
        return str(terminal["params"]["status"])

    def of_run(self, run_id: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.server.seen
            if (m.get("params") or {}).get("run_id") == run_id and "id" not in m
        ]

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return [m["params"] for m in self.of_run(run_id) if m["method"] == "agent.event"]


class _AnyTerminal:
    def __eq__(self, other: object) -> bool:
        return other in ("completed", "error", "cancelled")

    __hash__ = None  # type: ignore[assignment]


_ANY_TERMINAL = _AnyTerminal()


@asynccontextmanager
async def serving(
    tmp_path: Path, model: ScriptedModel, *args: str
) -> AsyncIterator[tuple[Ui, ScriptedResponsesServer]]:
    async with ScriptedResponsesServer(model) as http:
        server = await StdioServer.start(http.base_url, tmp_path, *args)
        try:
            yield Ui(server), http
        finally:
            await server.kill()


async def finish(ui: Ui) -> None:
    await ui.server.close_stdin()
    await ui.server.to_end()
    assert await ui.server.wait_exit() == 0, ui.server.context()


def check_run(ui: Ui, run_id: str) -> None:
    """seq from 0, gap-free; only Codelia's event types; one terminal status, last."""
    events = ui.events(run_id)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert {e["event"]["type"] for e in events} <= AGENT_EVENT_TYPES
    statuses = [m["params"]["status"] for m in ui.of_run(run_id) if m["method"] == "run.status"]
    terminal = [s for s in statuses if s in ("completed", "error", "cancelled")]
    assert len(terminal) == 1, statuses
    assert ui.of_run(run_id)[-1]["method"] == "run.status", "something of the run after its end"


# --- tests ------------------------------------------------------------------------------------


async def test_plain_answer_with_the_seeds_own_lines(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("Found 3 files.", reasoning="Look for *.ts")])
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(SEED_000_INITIALIZE, SEED_000_RUN_START)
        assert (await ui.answer("1"))["result"]["server_capabilities"]["supports_run_cancel"]
        run_id = (await ui.answer("2"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        check_run(ui, run_id)
        types = [e["event"]["type"] for e in ui.events(run_id)]
        assert types == ["step_start", "reasoning", "text", "step_complete", "final"]
        events = [e["event"] for e in ui.events(run_id)]
        assert events[2]["content"] == "Found 3 files."
        assert events[-1] == {"type": "final", "content": "Found 3 files."}
        statuses = [m["params"]["status"] for m in ui.of_run(run_id) if m["method"] == "run.status"]
        assert statuses == ["running", "completed"]
        meta = ui.events(run_id)[2]["meta"]["codexcore"]
        assert (meta["id"], meta["msg"]["type"]) == (run_id, "agent_message")
        contexts = [m for m in ui.of_run(run_id) if m["method"] == "run.context"]
        assert [c["params"]["context_left_percent"] for c in contexts] == [100]  # 150 of 400k
        await finish(ui)


async def test_a_command_confirmed_in_codelias_order(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call(["touch", "made"], call_id="c1"), text_response("Made it.")])
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (ui, _):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "make a file"}, tools=[]),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        confirm = await ui.until("ui.confirm.request")
        assert isinstance(confirm["id"], str)
        assert confirm["params"]["run_id"] == run_id
        assert confirm["params"]["title"] == "Run command?"
        assert confirm["params"]["message"].startswith("touch made")
        assert confirm["params"]["allow_remember"]
        assert confirm["params"]["allow_reason"]
        assert not (tmp_path / "made").exists()
        await ui.server.send(
            {
                "jsonrpc": "2.0",
                "id": confirm["id"],
                "result": {"ok": True, "remember": False, "reason": None},
            }
        )
        assert await ui.run_to_end(run_id) == "completed"
        assert (tmp_path / "made").exists()
        check_run(ui, run_id)
        order = [
            m["params"]["event"]["type"]
            if m["method"] == "agent.event"
            else m["params"].get("status", m["method"])
            for m in ui.server.seen
            if m.get("method") in ("agent.event", "run.status", "ui.confirm.request")
        ]
        assert order[:5] == [
            "running",
            "step_start",
            "tool_call",
            "permission.ready",
            "awaiting_ui",
        ]
        assert order[5:10] == [
            "ui.confirm.request",
            "running",
            "tool_result",
            "step_complete",
            "step_start",
        ]
        assert order[-2:] == ["final", "completed"]
        call = next(e["event"] for e in ui.events(run_id) if e["event"]["type"] == "tool_call")
        assert call["tool"] == "shell"
        assert call["args"]["command"] == "touch made"
        result = next(e["event"] for e in ui.events(run_id) if e["event"]["type"] == "tool_result")
        assert (result["tool_call_id"], result["is_error"]) == ("c1", False)
        await finish(ui)


async def test_a_denial_with_a_reason_reaches_the_model(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call(["touch", "nope"], call_id="c1"), text_response("OK.")])
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (ui, http):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "make a file"}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        confirm = await ui.until("ui.confirm.request")
        await ui.server.send(
            {
                "jsonrpc": "2.0",
                "id": confirm["id"],
                "result": {"ok": False, "remember": False, "reason": "not that file"},
            }
        )
        assert await ui.run_to_end(run_id) == "completed"
        assert not (tmp_path / "nope").exists()
        check_run(ui, run_id)
        result = next(e["event"] for e in ui.events(run_id) if e["event"]["type"] == "tool_result")
        assert result["is_error"]
        assert "not that file" in result["result"]
        outputs = [
            i for i in http.model.requests[1]["input"] if i.get("type") == "function_call_output"
        ]
        assert "not that file" in outputs[0]["output"]
        await finish(ui)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_run_cancel_mid_command_leaves_no_process(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = f"echo $$ > {pidfile}; exec sleep 60"
    model = ScriptedModel([shell_call(["bash", "-c", script], call_id="c1")])
    async with serving(tmp_path, model, "--approval-mode", "full-access") as (ui, _):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "sleep"}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        await ui.until("agent.event", run_id=run_id)  # the run is under way
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await asyncio.sleep(0.05)
        pid = int(pidfile.read_text())
        assert _alive(pid)
        await ui.server.send(req("3", "run.cancel", run_id=run_id, reason="user"))
        # Codelia's order: the cancel is answered at once, the terminal status follows.
        assert (await ui.answer("3"))["result"] == {"ok": True, "status": "running"}
        assert await ui.run_to_end(run_id) == "cancelled"
        check_run(ui, run_id)
        assert not _alive(pid)
        await ui.server.send(req("4", "run.cancel", run_id=run_id))
        assert (await ui.answer("4"))["result"] == {"ok": False, "status": "cancelled"}
        await ui.server.send(req("5", "run.cancel", run_id="run-nope"))
        assert (await ui.answer("5"))["error"]["code"] == -32002
        await finish(ui)


async def test_a_second_run_start_while_one_runs_is_busy(tmp_path: Path) -> None:
    model = ScriptedModel([ScriptedResponse(steps=[Hang()])])
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(SEED_000_INITIALIZE, SEED_000_RUN_START)
        run_id = (await ui.answer("2"))["result"]["run_id"]
        await ui.server.send(req("3", "run.start", input={"type": "text", "text": "again"}))
        error = (await ui.answer("3"))["error"]
        assert error["code"] == -32001
        assert run_id in error["message"]
        await ui.server.send(req("4", "run.cancel", run_id=run_id))
        assert (await ui.answer("4"))["result"] == {"ok": True, "status": "running"}
        assert await ui.run_to_end(run_id) == "cancelled"
        check_run(ui, run_id)
        await finish(ui)


async def test_an_error_from_the_model_ends_the_run_in_error(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                status=400,
                headers={"content-type": "application/json"},
                steps=[b'{"error":{"message":"bad model"}}'],
            )
        ]
    )
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(SEED_000_INITIALIZE, SEED_000_RUN_START)
        run_id = (await ui.answer("2"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "error"
        check_run(ui, run_id)
        status = ui.of_run(run_id)[-1]["params"]
        assert "bad model" in status["message"]
        await finish(ui)


async def test_model_list_and_model_set(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hi")])
    async with serving(tmp_path, model, "--model", "gpt-5-codex") as (ui, http):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES), req("2", "model.list", include_details=False)
        )
        listed = (await ui.answer("2"))["result"]
        assert listed["provider"] == "openai"
        assert listed["current"] == "gpt-5-codex"
        assert listed["reasoning"] == "medium"  # none configured: the model's default
        assert listed["models"][0] == "gpt-5.1-codex"
        assert "gpt-4o" in listed["models"]
        assert "details" not in listed
        await ui.server.send(req("3", "model.list", include_details=True))
        details = (await ui.answer("3"))["result"]["details"]["gpt-5-codex"]
        assert details["context_window"] == 400_000
        assert set(details) >= {
            "context_window",
            "max_input_tokens",
            "max_output_tokens",
            "cost_per_1m_input_tokens_usd",
            "cost_per_1m_output_tokens_usd",
        }
        await ui.server.send(req("4", "model.list", provider="anthropic"))
        assert (await ui.answer("4"))["error"]["code"] == -32602
        await ui.server.send(req("4b", "model.set", name="gpt-4o"))
        assert "reasoning" not in (await ui.answer("4b"))["result"]  # none given, none used
        await ui.server.send(req("5", "model.set", name="gpt-5-mini", reasoning="xhigh"))
        assert (await ui.answer("5"))["result"] == {
            "provider": "openai",
            "name": "gpt-5-mini",
            "source": "session",
            "reasoning": "high",
        }
        await ui.server.send(req("6", "run.start", input={"type": "text", "text": "hello"}))
        run_id = (await ui.answer("6"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        assert http.model.requests[0]["model"] == "gpt-5-mini"
        assert http.model.requests[0]["reasoning"]["effort"] == "high"
        await finish(ui)


async def test_a_patch_is_previewed_with_its_diff_before_its_confirm(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch\n"
    model = ScriptedModel(
        [
            function_call_response("apply_patch", {"input": patch}, call_id="p1"),
            text_response("Done."),
        ]
    )
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (ui, _):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "edit a.txt"}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        confirm = await ui.until("ui.confirm.request")
        assert confirm["params"]["title"] == "Apply patch?"
        seen = [e["event"] for e in ui.events(run_id)]
        assert [e["type"] for e in seen][-3:] == [
            "tool_call",
            "permission.preview",
            "permission.ready",
        ]
        preview = seen[-2]
        assert (preview["tool"], preview["tool_call_id"]) == ("apply_patch", "p1")
        assert "-old" in preview["diff"]
        assert "+new" in preview["diff"]
        assert preview["file_path"].endswith("a.txt")
        answer = {"ok": True, "remember": True, "reason": None}
        await ui.server.send({"jsonrpc": "2.0", "id": confirm["id"], "result": answer})
        assert await ui.run_to_end(run_id) == "completed"
        check_run(ui, run_id)
        assert (tmp_path / "a.txt").read_text() == "new\n"
        result = next(e["event"] for e in ui.events(run_id) if e["event"]["type"] == "tool_result")
        assert json.loads(result["result"])["diff"] == preview["diff"]
        await finish(ui)


async def test_the_engines_stop_ends_the_run_completed_and_codexcore_events_on_request(
    tmp_path: Path,
) -> None:
    """A native client stops the session's Task (as seed 004's stop does): the run
    ends completed after its Turn. The JSON-RPC client asked for every EventMsg."""
    script = "until [ -e go ]; do sleep 0.02; done; echo went"
    model = ScriptedModel([shell_call(["bash", "-c", script], call_id="c1")])
    with tempfile.TemporaryDirectory(prefix="cxc-") as run_dir:
        async with ScriptedResponsesServer(model) as http:
            env = server_env(http.base_url)
            sock = Path(run_dir) / "s.sock"
            server = await ServerProcess.start(
                http.base_url,
                tmp_path,
                "--approval-mode",
                "full-access",
                tcp=False,
                unix=sock,
                env=env,
            )
            try:
                ui = await server.client(unix=True)
                await ui.send(
                    tui_initialize(codexcore_events=True),
                    req("2", "run.start", input={"type": "text", "text": "wait"}),
                )
                configured = await _until_event(ui, "codexcore.session_configured")
                run_id = configured["run_id"]
                await _until_event(ui, "tool_call")
                native = await server.client(unix=True)
                welcome = await native.greet(session_id=configured["event"]["session_id"])
                assert welcome["type"] == "welcome", welcome
                await native.send({"id": "s1", "op": {"type": "stop"}})
                await native.until("submission_ack", id="s1")
                (tmp_path / "go").write_text("")
                final = await _until_event(ui, "final")
                status = await ui.recv()
                assert status is not None
                assert status["params"] == {
                    "run_id": run_id,
                    "status": "completed",
                }
                assert final["meta"]["codexcore"]["msg"]["stopped_by"] == "stop"
                types = [
                    m["params"]["event"]["type"]
                    for m in ui.seen
                    if m.get("method") == "agent.event"
                ]
                assert "codexcore.agent_message_delta" not in types  # no message in this run
                assert "codexcore.exec_command_output_delta" in types
                assert "codexcore.token_count" in types
                seqs = [m["params"]["seq"] for m in ui.seen if m.get("method") == "agent.event"]
                assert seqs == list(range(len(seqs)))
            finally:
                await server.kill()


async def _until_status(link: Any, status: str) -> None:
    while True:
        message = await link.recv(15)
        assert message is not None, f"ended before run.status {status}: {link.seen}"
        if message.get("method") == "run.status" and message["params"]["status"] == status:
            return


async def _until_event(link: Any, kind: str) -> dict[str, Any]:
    while True:
        message = await link.recv(15)
        assert message is not None, f"ended before {kind}: {link.seen}"
        if message.get("method") == "agent.event" and message["params"]["event"]["type"] == kind:
            return dict(message["params"])


async def test_run_start_with_a_live_sessions_id_attaches_to_it(tmp_path: Path) -> None:
    """A socket client leaves; the next one names the session in run.start and goes on
    with its conversation (the model sees the first answer's response id)."""
    model = ScriptedModel(
        [
            text_response("first", response_id="resp_1"),
            text_response("second", response_id="resp_2"),
        ]
    )
    with tempfile.TemporaryDirectory(prefix="cxc-") as run_dir:
        async with ScriptedResponsesServer(model) as http:
            sock = Path(run_dir) / "s.sock"
            server = await ServerProcess.start(
                http.base_url, tmp_path, tcp=False, unix=sock, env=server_env(http.base_url)
            )
            try:
                first = await server.client(unix=True)
                await first.send(
                    tui_initialize(codexcore_events=True),
                    req("2", "run.start", input={"type": "text", "text": "one"}),
                )
                session_id = (await _until_event(first, "codexcore.session_configured"))["event"][
                    "session_id"
                ]
                await _until_event(first, "final")
                await first.close()
                second = await server.client(unix=True)
                await second.send(
                    tui_initialize(),
                    req(
                        "2",
                        "run.start",
                        input={"type": "text", "text": "two"},
                        session_id=session_id,
                    ),
                )
                final = await _until_event(second, "final")
                assert final["event"]["content"] == "second"
                assert model.requests[1]["previous_response_id"] == "resp_1"
                third = await server.client(unix=True)  # has a session of its own
                await third.send(
                    tui_initialize(), req("2", "run.start", input={"type": "text", "text": "x"})
                )
                own = await _answer(third, "2")
                await third.send(req("3", "run.cancel", run_id=own["result"]["run_id"]))
                assert (await _answer(third, "3"))["result"]["ok"] is True
                await _until_status(third, "cancelled")
                await third.send(
                    req(
                        "4", "run.start", input={"type": "text", "text": "y"}, session_id=session_id
                    )
                )
                error = (await _answer(third, "4"))["error"]
                assert error["code"] == -32005
                assert "a new connection can attach" in error["message"]
            finally:
                await server.kill()


async def _answer(link: Any, rid: str) -> dict[str, Any]:
    while True:
        message = await link.recv(15)
        assert message is not None, f"ended before the answer to {rid}: {link.seen}"
        if message.get("id") == rid and "method" not in message:
            return dict(message)


async def test_a_confirm_left_by_a_ui_that_disconnected_is_asked_of_the_next(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([shell_call(["touch", "made"], call_id="c1"), text_response("Made.")])
    with tempfile.TemporaryDirectory(prefix="cxc-") as run_dir:
        async with ScriptedResponsesServer(model) as http:
            sock = Path(run_dir) / "s.sock"
            server = await ServerProcess.start(
                http.base_url,
                tmp_path,
                "--approval-mode",
                "minimal",
                tcp=False,
                unix=sock,
                env=server_env(http.base_url),
            )
            try:
                first = await server.client(unix=True)
                await first.send(
                    tui_initialize(codexcore_events=True, supports_confirm=True),
                    req("2", "run.start", input={"type": "text", "text": "make"}),
                )
                configured = await _until_event(first, "codexcore.session_configured")
                while (await first.recv(15) or {}).get("method") != "ui.confirm.request":
                    pass
                await first.close()  # gone without answering
                second = await server.client(unix=True)
                await second.send(
                    tui_initialize(**TUI_CAPABILITIES),
                    req(
                        "2",
                        "run.start",
                        input={"type": "text", "text": "again"},
                        session_id=configured["event"]["session_id"],
                    ),
                )
                busy = await _answer(second, "2")
                assert busy["error"]["code"] == -32001, busy
                confirm = await _request(second, "ui.confirm.request")
                assert confirm["params"]["run_id"] == configured["run_id"]
                assert confirm["params"]["message"].startswith("touch made")
                assert not (tmp_path / "made").exists()
                answer = {"ok": True, "remember": False, "reason": None}
                await second.send({"jsonrpc": "2.0", "id": confirm["id"], "result": answer})
                final = await _until_event(second, "final")
                assert final["event"]["content"] == "Made."
                assert (tmp_path / "made").exists()
                status = await second.recv(15)
                assert status is not None
                assert status["params"]["status"] == "completed"
            finally:
                await server.kill()


async def _request(link: Any, method: str) -> dict[str, Any]:
    for message in link.seen:
        if message.get("method") == method:
            return dict(message)
    while True:
        message = await link.recv(15)
        assert message is not None, f"ended before {method}: {link.seen}"
        if message.get("method") == method:
            return dict(message)


async def test_parts_input_and_force_compaction(tmp_path: Path) -> None:
    model = ScriptedModel(
        [text_response("A cat."), text_response("The user showed a cat."), text_response("Yes.")]
    )
    image = "data:image/png;base64,iVBORw0KGgo="
    parts = [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": image}},
    ]
    async with serving(tmp_path, model) as (ui, http):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "parts", "parts": parts}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        sent = str(http.model.requests[0]["input"])
        assert image in sent
        assert "what is it?" in sent
        await ui.server.send(
            req("3", "run.start", input={"type": "text", "text": "/compact"}, force_compaction=True)
        )
        compaction = (await ui.answer("3"))["result"]["run_id"]
        assert await ui.run_to_end(compaction) == "completed"
        check_run(ui, compaction)
        events = [e["event"] for e in ui.events(compaction)]
        assert [e["type"] for e in events] == [
            "step_start",
            "compaction_start",
            "compaction_complete",
            "step_complete",
            "final",
        ]
        assert events[2]["compacted"] is True
        assert events[-1] == {"type": "final", "content": "Compaction run completed."}
        assert abs(events[1]["timestamp"] / 1000 - time.time()) < 60  # epoch milliseconds
        # The model summarised (the "/compact" input is not sent), and the next run goes
        # on from the summary: the earlier answer is no longer sent.
        summarise = http.model.requests[1]
        assert "/compact" not in str(summarise["input"])
        await ui.server.send(req("4", "run.start", input={"type": "text", "text": "sure?"}))
        after = (await ui.answer("4"))["result"]["run_id"]
        assert await ui.run_to_end(after) == "completed"
        sent_after = str(http.model.requests[2]["input"])
        assert "The user showed a cat." in sent_after
        assert "previous_response_id" not in http.model.requests[2]
        bad = {"type": "parts", "parts": [{"type": "audio"}]}
        await ui.server.send(req("5", "run.start", input=bad))
        error = (await ui.answer("5"))["error"]
        assert (error["code"], error["message"]) == (
            -32602,
            "Invalid params: params.input.parts[0]: expected a text or image_url part",
        )
        await finish(ui)


async def test_a_failed_force_compaction_says_compacted_false(tmp_path: Path) -> None:
    too_long = {"error": {"message": "too long", "code": "context_length_exceeded"}}
    # The summary request does not fit, nor with the older items left out one by one.
    model = ScriptedModel([text_response("Hello."), *(http_error(400, too_long) for _ in range(3))])
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "hi"}),
        )
        first = (await ui.answer("2"))["result"]["run_id"]
        assert await ui.run_to_end(first) == "completed"
        await ui.server.send(
            req("3", "run.start", input={"type": "text", "text": ""}, force_compaction=True)
        )
        run_id = (await ui.answer("3"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "error"
        check_run(ui, run_id)
        events = [e["event"] for e in ui.events(run_id)]
        assert [e["type"] for e in events] == [
            "step_start",
            "compaction_start",
            "compaction_complete",
            "step_complete",
        ]
        assert events[2]["compacted"] is False
        meta = ui.events(run_id)[-1]["meta"]["codexcore"]["msg"]
        assert meta["codex_error_info"] == "context_window_exceeded"
        assert model.remaining == 0
        await finish(ui)


async def test_a_confirm_answered_with_an_error_denies(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call(["touch", "nope"], call_id="c1"), text_response("OK.")])
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (ui, http):
        await ui.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "make a file"}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        confirm = await ui.until("ui.confirm.request")
        error = {"code": -32000, "message": "dialog failed"}
        await ui.server.send({"jsonrpc": "2.0", "id": confirm["id"], "error": error})
        assert await ui.run_to_end(run_id) == "completed"
        assert not (tmp_path / "nope").exists()
        outputs = [
            i for i in http.model.requests[1]["input"] if i.get("type") == "function_call_output"
        ]
        assert "the UI could not confirm: dialog failed" in outputs[0]["output"]
        await finish(ui)
