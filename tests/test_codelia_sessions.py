"""Seed 000's ``session.list`` and ``session.history`` over a real ``codexcore serve --stdio``.

Sessions are recorded by real runs (``run.start``, a scripted model) in one
server process each; a new server process lists them and replays them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel, shell_call, text_response

from .test_codelia import TUI_CAPABILITIES, Ui, finish, req, serving, tui_initialize

pytestmark = pytest.mark.anyio

VARYING = ("timestamp", "duration_ms")
"""Fields of an AgentEvent that say when it was built (a replay builds it again)."""


def _steady(params: dict[str, Any]) -> dict[str, Any]:
    event = {k: v for k, v in params["event"].items() if k not in VARYING}
    return {**params, "event": event}


async def _record(tmp_path: Path, model: ScriptedModel, prompts: list[str]) -> Ui:
    """One server process, one session: a run per prompt, each to its end."""
    async with serving(tmp_path, model, "--approval-mode", "trusted") as (ui, _):
        await ui.server.send(tui_initialize(**TUI_CAPABILITIES))
        await ui.answer("1")
        for n, prompt in enumerate(prompts):
            rid = f"run-{n}"
            await ui.server.send(req(rid, "run.start", input={"type": "text", "text": prompt}))
            run_id = (await ui.answer(rid))["result"]["run_id"]
            assert await ui.run_to_end(run_id) == "completed", ui.server.seen
        await finish(ui)
        return ui


async def _two_sessions(tmp_path: Path) -> tuple[Ui, Ui]:
    first = ScriptedModel(
        [
            shell_call(["echo", "hello"], call_id="c1"),
            text_response("Said hello."),
            text_response("Second answer."),
        ]
    )
    one = await _record(tmp_path, first, ["say hello", "and again"])
    two = await _record(tmp_path, ScriptedModel([text_response("Other.")]), ["other session"])
    return one, two


def _live(ui: Ui) -> list[dict[str, Any]]:
    return [m["params"] for m in ui.server.seen if m.get("method") == "agent.event"]


async def _replay_all(ui: Ui, rid: str, **params: Any) -> tuple[list[Any], dict[str, Any]]:
    """The notifications a session.history call sent before its answer, and the answer."""
    await ui.server.send(req(rid, "session.history", **params))
    sent: list[dict[str, Any]] = []
    while True:
        message = await ui.next()
        if message.get("id") == rid:
            return sent, message
        assert message.get("method") in REPLAYED, message
        sent.append(message)


REPLAYED = ("agent.event", "run.status", "run.context")


async def _replay(ui: Ui, rid: str, **params: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The agent.events a session.history call sent before its answer, and the answer;
    each run's seq from 0, gap-free (the protocol's range)."""
    sent, answer = await _replay_all(ui, rid, **params)
    events = [m["params"] for m in sent if m["method"] == "agent.event"]
    return events, answer


def _gap_free(events: list[dict[str, Any]]) -> None:
    for run_id in dict.fromkeys(p["run_id"] for p in events):
        seqs = [p["seq"] for p in events if p["run_id"] == run_id]
        assert seqs == list(range(len(seqs))), seqs


def _prompts(sent: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    """The replayed prompts: (run_id, seq, content) of each hidden_user_message."""
    return [
        (p["run_id"], p["seq"], p["event"]["content"])
        for p in sent
        if p["event"]["type"] == "hidden_user_message"
    ]


def _as_live(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A replay as the live run sent it: without the prompts (a live Codelia UI draws
    the prompt it sent, so no event carried it), each event as it was built, its seq
    left out (the replayed prompt is counted: the events after it are one more)."""
    return [_unnumbered(p) for p in sent if p["event"]["type"] != "hidden_user_message"]


def _unnumbered(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in _steady(params).items() if k != "seq"}


async def _listed(ui: Ui) -> list[dict[str, Any]]:
    await ui.server.send(req("2", "session.list"))
    answer = await ui.answer("2")
    sessions: list[dict[str, Any]] = answer["result"]["sessions"]
    return sessions


async def test_list_then_history_replays_the_runs_as_they_were_sent(tmp_path: Path) -> None:
    one, two = await _two_sessions(tmp_path)
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize(**TUI_CAPABILITIES))
        await ui.answer("1")
        sessions = await _listed(ui)
        assert [s["last_user_message"] for s in sessions] == ["other session", "and again"]
        assert [s["message_count"] for s in sessions] == [2, 4]
        assert all(set(s) >= {"session_id", "updated_at"} for s in sessions)
        assert sessions[0]["updated_at"] >= sessions[1]["updated_at"]
        sent, answer = await _replay(ui, "3", session_id=sessions[1]["session_id"])
        assert answer["result"] == {"runs": 2, "events_sent": len(sent), "truncated": False}
        assert _as_live(sent) == [_unnumbered(p) for p in _live(one)]
        runs = list(dict.fromkeys(p["run_id"] for p in _live(one)))
        assert _prompts(sent) == [(runs[0], 1, "say hello"), (runs[1], 1, "and again")]
        _gap_free(sent)
        # Each prompt comes first in its run, after the step_start drawn as nothing.
        firsts = [i for i, p in enumerate(sent) if p["seq"] == 0]
        assert [sent[i + 1]["event"]["type"] for i in firsts] == ["hidden_user_message"] * 2
        types = [p["event"]["type"] for p in sent]
        assert "tool_call" in types
        assert "tool_result" in types
        result = next(p["event"] for p in sent if p["event"]["type"] == "tool_result")
        assert '"stdout": "hello"' in result["result"]
        finals = [p["event"]["content"] for p in sent if p["event"]["type"] == "final"]
        assert finals == ["Said hello.", "Second answer."]
        assert {p["run_id"] for p in sent} == {p["run_id"] for p in _live(one)}
        sent, answer = await _replay(ui, "4", session_id=sessions[0]["session_id"])
        assert _as_live(sent) == [_unnumbered(p) for p in _live(two)]
        assert [content for _, _, content in _prompts(sent)] == ["other session"]
        await finish(ui)


async def test_history_keeps_the_newest_runs_and_events(tmp_path: Path) -> None:
    one, _ = await _two_sessions(tmp_path)
    live = [_unnumbered(p) for p in _live(one)]
    second_run = live[-1]["run_id"]
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize())
        await ui.answer("1")
        session_id = (await _listed(ui))[1]["session_id"]
        sent, answer = await _replay(ui, "3", session_id=session_id, max_runs=1)
        assert _as_live(sent) == [p for p in live if p["run_id"] == second_run]
        assert _prompts(sent) == [(second_run, 1, "and again")]
        assert answer["result"] == {"runs": 1, "events_sent": len(sent), "truncated": True}
        sent, answer = await _replay(ui, "4", session_id=session_id, max_events=2)
        assert [_unnumbered(p) for p in sent] == live[-2:]
        last_live = [p["seq"] for p in _live(one)][-2:]
        assert [p["seq"] for p in sent] == [last_live[0] + 1, last_live[1] + 1]
        assert [p["event"]["type"] for p in sent] == ["step_complete", "final"]
        assert answer["result"] == {"runs": 2, "events_sent": 2, "truncated": True}
        await finish(ui)


async def test_unknown_and_unreadable_sessions(tmp_path: Path) -> None:
    await _two_sessions(tmp_path)
    day = Path(os.environ["CODEXCORE_HOME"]) / "sessions" / "2026" / "01" / "01"
    day.mkdir(parents=True, exist_ok=True)
    bad_id = "0193c0de-bad0-7000-8000-000000000000"
    (day / f"rollout-2026-01-01T00-00-00-{bad_id}.jsonl").write_bytes(b"not json\n")
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize())
        await ui.answer("1")
        sessions = await _listed(ui)
        assert [s["last_user_message"] for s in sessions] == ["other session", "and again"]
        await ui.server.send(req("5", "session.list", workspace_root=str(tmp_path / "else")))
        assert (await ui.answer("5"))["result"] == {
            "sessions": [],
            "current_workspace_root": str(tmp_path / "else"),
        }
        await ui.server.send(req("6", "session.list", limit=1, workspace_root=str(tmp_path)))
        assert [s["workspace_root"] for s in (await ui.answer("6"))["result"]["sessions"]] == [
            str(tmp_path)
        ]
        sent, answer = await _replay(ui, "3", session_id=bad_id)
        assert sent == []
        assert answer["error"]["code"] == -32005, answer
        assert "not JSON" in answer["error"]["message"]
        sent, answer = await _replay(ui, "4", session_id="no-such-session")
        assert (sent, answer["error"]["code"]) == ([], -32004), answer
        await finish(ui)


async def test_a_confirmed_command_replays_with_its_preflight_events(tmp_path: Path) -> None:
    model = ScriptedModel([shell_call(["touch", "made"], call_id="c1"), text_response("Made.")])
    async with serving(tmp_path, model, "--approval-mode", "minimal") as (live, _):
        await live.server.send(
            tui_initialize(**TUI_CAPABILITIES),
            req("2", "run.start", input={"type": "text", "text": "make a file"}),
        )
        run_id = (await live.answer("2"))["result"]["run_id"]
        confirm = await live.until("ui.confirm.request")
        await live.server.send({"jsonrpc": "2.0", "id": confirm["id"], "result": {"ok": True}})
        assert await live.run_to_end(run_id) == "completed"
        await finish(live)
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize(**TUI_CAPABILITIES))
        await ui.answer("1")
        session_id = (await _listed(ui))[0]["session_id"]
        sent, answer = await _replay(ui, "3", session_id=session_id)
        assert _as_live(sent) == [_unnumbered(p) for p in _live(live)]
        assert [content for _, _, content in _prompts(sent)] == ["make a file"]
        assert "permission.ready" in [p["event"]["type"] for p in sent]
        assert answer["result"] == {"runs": 1, "events_sent": len(sent), "truncated": False}
        await finish(ui)


async def test_a_replayed_prompt_is_what_the_user_typed(tmp_path: Path) -> None:
    """The UI context block the run added is left out, an image is "[image]"; for a
    codexcore_events client the replayed prompt is counted in the run's seq, as its
    live codexcore.user_message was."""
    image = "data:image/png;base64,iVBORw0KGgo="
    parts = [
        {"type": "text", "text": "what is "},
        {"type": "image_url", "image_url": {"url": image}},
    ]
    async with serving(tmp_path, ScriptedModel([text_response("A cat.")])) as (live, _):
        await live.server.send(
            tui_initialize(codexcore_events=True),
            req(
                "2",
                "run.start",
                input={"type": "parts", "parts": parts},
                ui_context={"cwd": str(tmp_path), "active_file": {"path": "a.py"}},
            ),
        )
        run_id = (await live.answer("2"))["result"]["run_id"]
        assert await live.run_to_end(run_id) == "completed"
        await finish(live)
    (said,) = [p for p in _live(live) if p["event"]["type"] == "codexcore.user_message"]
    assert said["event"]["message"].startswith("<ui_context>\n")
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize(codexcore_events=True))
        await ui.answer("1")
        (listed,) = await _listed(ui)
        assert listed["last_user_message"] == "what is "
        sent, _ = await _replay(ui, "3", session_id=listed["session_id"])
        assert [(p["seq"], p["event"]["type"]) for p in sent][:2] == [
            (0, "step_start"),
            (1, "hidden_user_message"),  # counted, as its live codexcore.user_message was
        ]
        assert _prompts(sent) == [(run_id, 1, "what is [image]")]
        assert [p["seq"] for p in sent] == list(range(len(sent)))
        await finish(ui)


async def test_history_replays_each_runs_status_and_context(tmp_path: Path) -> None:
    one, _ = await _two_sessions(tmp_path)
    live_runs = list(dict.fromkeys(p["run_id"] for p in _live(one)))
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize(**TUI_CAPABILITIES))
        await ui.answer("1")
        session_id = (await _listed(ui))[1]["session_id"]
        sent, answer = await _replay_all(ui, "3", session_id=session_id)
        await finish(ui)
    assert answer["result"]["events_sent"] == sum(m["method"] == "agent.event" for m in sent)
    for run_id in live_runs:
        mine = [m for m in sent if m["params"]["run_id"] == run_id]
        statuses = [m["params"]["status"] for m in mine if m["method"] == "run.status"]
        assert statuses == ["running", "completed"]
        assert mine[0]["method"] == "run.status"  # before its first event, as live
        assert mine[-1] == {
            "jsonrpc": "2.0",
            "method": "run.status",
            "params": {"run_id": run_id, "status": "completed"},
        }
        live_contexts = [
            m["params"]
            for m in one.server.seen
            if m.get("method") == "run.context" and m["params"]["run_id"] == run_id
        ]
        contexts = [m["params"] for m in mine if m["method"] == "run.context"]
        assert contexts == live_contexts
        assert contexts, "each model request's token count is replayed as run.context"
