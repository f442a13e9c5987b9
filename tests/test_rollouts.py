"""Sessions that last: recording, listing, resuming, forking, replaying, pruning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore import Codex
from codexcore import protocol as p
from codexcore.engine._codex import UNRECORDED
from codexcore.engine._rollout import default_home
from codexcore.engine._rollout_reader import (
    list_sessions,
    prune_sessions,
    read_events,
    read_records,
)
from codexcore.testing import ScriptedModel, shell_call, text_response

from .engine_helpers import Recorder, engine_config, running_engine, typed_input
from .test_engine import say

pytestmark = pytest.mark.anyio


def rollouts() -> list[Path]:
    return sorted((default_home() / "sessions").glob("*/*/*/rollout-*.jsonl"))


def texts(request: dict[str, Any]) -> list[str]:
    items = typed_input(request)
    return [c.get("text") for i in items for c in i.get("content", []) if "text" in c]


async def test_every_event_is_recorded_before_the_ui_sees_it(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello", response_id="r1")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("hi"), id="t1")
        configured = await ui.until(p.SessionConfigured)
        # The file is made with the session's first content (the model's answer).
        turn = await ui.until(p.TurnComplete)
        (path,) = rollouts()
        assert configured.msg.session_id in path.name
        # Already on disk by the time the UI reads it, everything before it included.
        shown = [e.msg for e in ui.events if e.seq < turn.seq and e.msg.TYPE not in UNRECORDED]
        assert [e.msg for e in read_events(path)] == [*shown, turn.msg]
        await ui.until(p.TaskComplete)
    records = list(read_records(path))
    assert [r["type"] for r in records[:2]] == ["session_meta", "config"]
    assert records[0]["cwd"] == str(tmp_path)
    assert [r["type"] for r in records if r["type"] in ("turn", "tool_outputs")] == ["turn"]
    recorded = [e.msg for e in read_events(path)]
    shown = [e.msg for e in ui.events if e.msg.TYPE not in UNRECORDED]
    assert recorded == [*shown, p.ShutdownComplete()]
    # Deltas are left out, but the complete message carries their text.
    assert p.AgentMessage("hello") in recorded
    assert path.stat().st_mode & 0o777 == 0o600
    for directory in (default_home(), *path.relative_to(default_home()).parents):
        here = default_home() / directory
        assert here.stat().st_mode & 0o777 == 0o700, here


async def test_ephemeral_sessions_write_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello")])
    config = attrs.evolve(engine_config(tmp_path), ephemeral=True)
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        await ui.submit(say("hi"))
        await ui.until(p.TaskComplete)
    assert rollouts() == []


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_resume_continues_the_history(tmp_path: Path, mode: str) -> None:
    first = ScriptedModel(
        [
            shell_call([sys.executable, "-c", "print(1)"], call_id="c1", response_id="r1"),
            text_response("ran it", response_id="r2"),
        ]
    )
    async with running_engine(first, tmp_path, history_mode=mode, approval_policy="never") as ui:
        await ui.submit(say("run"))
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete)

    second = ScriptedModel([text_response("remembered", response_id="r3")])
    async with running_engine(second, tmp_path, history_mode=mode) as ui:
        await ui.submit(p.ResumeSession(session_id), id="res")
        resumed = await ui.until(p.SessionConfigured, id="res")
        assert resumed.msg.session_id == session_id
        assert resumed.msg.history_mode == mode
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    request = second.requests[0]
    if mode == "server":
        assert request["previous_response_id"] == "r2"
        assert texts(request) == ["again"]
    else:
        assert texts(request) == ["run", "ran it", "again"]
        assert [i["call_id"] for i in request["input"] if i["type"] == "function_call_output"] == [
            "c1"
        ]
    (path,) = rollouts()  # resumed sessions append to their own rollout
    assert sum(r["type"] == "turn" for r in read_records(path)) == 3


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_fork_at_a_bookmark_starts_a_new_session(tmp_path: Path, mode: str) -> None:
    first = ScriptedModel(
        [text_response("one", response_id="r1"), text_response("two", response_id="r2")]
    )
    async with running_engine(first, tmp_path, history_mode=mode) as ui:
        await ui.submit(say("first"), id="a")
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete, id="a")
        await ui.submit(say("second"), id="b")
        await ui.until(p.TaskComplete, id="b")

    second = ScriptedModel([text_response("branched", response_id="r3")])
    async with running_engine(second, tmp_path, history_mode=mode) as ui:
        await ui.submit(p.ForkSession(session_id, "r1"), id="fork")
        forked = await ui.until(p.SessionConfigured, id="fork")
        assert forked.msg.session_id != session_id
        await ui.submit(say("instead"), id="c")
        await ui.until(p.TaskComplete, id="c")
    request = second.requests[0]
    if mode == "server":
        assert request["previous_response_id"] == "r1"
    else:
        assert texts(request) == ["first", "one", "instead"]
    summaries = {s.session_id: s for s in list_sessions(default_home())}
    assert summaries[forked.msg.session_id].forked_from == session_id


async def test_fork_and_resume_refuse_what_does_not_exist_without_harm(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("one", response_id="r1")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("first"), id="a")
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete, id="a")
        await ui.submit(p.ResumeSession("no-such-session"), id="r")
        error = await ui.until(p.ErrorEvent, id="r")
        assert error.msg.code == "unknown_session"
        await ui.submit(p.ForkSession(session_id, "r404"), id="f")
        error = await ui.until(p.ErrorEvent, id="f")
        assert error.msg.code == "unknown_response_id"
    assert "session_configured" not in ui.types(id="r") + ui.types(id="f")


async def test_list_sessions_newest_first_with_messages(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for cwd, words in [(tmp_path, ["alpha", "beta"]), (other, ["gamma"])]:
        model = ScriptedModel([text_response("ok") for _ in words])
        async with running_engine(model, cwd) as ui:
            for i, word in enumerate(words):
                await ui.submit(say(word), id=f"t{i}")
                await ui.until(p.TaskComplete, id=f"t{i}")
        for path in rollouts():  # age what exists, so the next session is clearly newer
            old = path.stat().st_mtime - 60
            os.utime(path, (old, old))
    async with running_engine(ScriptedModel([]), tmp_path) as ui:
        await ui.submit(p.ListSessions(), id="all")
        listed = (await ui.until(p.SessionList)).msg.sessions
        await ui.submit(p.ListSessions(cwd=str(tmp_path)), id="here")
        here = (await ui.until(p.SessionList, id="here")).msg.sessions
    assert [s.first_user_message for s in listed] == ["gamma", "alpha"]
    only = here[0]
    assert (only.first_user_message, only.last_user_message, only.message_count) == (
        "alpha",
        "beta",
        4,
    )
    assert len(here) == 1


async def test_get_history_replays_recorded_events(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello there", chunks=5)])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("hi"), id="t1")
        await ui.until(p.TaskComplete)
        await ui.submit(p.GetHistory(offset=2, limit=3), id="h")
        page = (await ui.until(p.SessionHistory, id="h")).msg
    # Recorded when get_history read the file: all but the deltas and its own answer.
    recorded = [e for e in ui.events if e.msg.TYPE not in {*UNRECORDED, "session_history"}]
    assert page.offset == 2
    assert page.total == len(recorded)
    assert page.events == tuple(recorded[2:5])


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    good = {"type": "event", "event": {"id": "a", "seq": 0, "msg": {"type": "task_started"}}}
    path.write_bytes(json.dumps(good).encode() + b"\n" + b'{"type": "event", "ev')
    assert [e.msg for e in read_events(path)] == [p.TaskStarted()]


def test_kill_dash_nine_loses_at_most_the_line_being_written(tmp_path: Path) -> None:
    """A real process streaming a long Task is killed with SIGKILL mid-stream."""
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        from codexcore import Codex
        from codexcore import protocol as p
        from codexcore.testing import ScriptedModel, text_response
        from tests.engine_helpers import engine_config

        async def main():
            model = ScriptedModel([text_response(f"answer {{i}}") for i in range(10_000)])
            async with Codex(engine_config({str(tmp_path)!r}),
                             transport=model.mock_transport()) as codex:
                for i in range(10_000):
                    await codex.submit(p.UserInput((p.TextInput("go"),)), id=f"t{{i}}")
                    async for event in codex.events():
                        if event.seq >= 2_000:
                            print("ready", flush=True)
                        if event.msg.TYPE == "task_complete":
                            break

        asyncio.run(main())
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, env=os.environ.copy()
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"  # well into the run
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    (path,) = rollouts()
    events = read_events(path)
    assert len(events) > 500
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))  # nothing torn or repeated, in order
    lines = path.read_bytes().split(b"\n")
    assert sum(1 for line in lines if line) - len(list(read_records(path))) <= 1


def test_prune_removes_old_rollouts_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = home / "sessions/2026/01/01/rollout-2026-01-01T00-00-00-old.jsonl"
    new = home / "sessions/2026/11/22/rollout-2026-11-22T00-00-00-new.jsonl"
    for path in (old, new):
        path.parent.mkdir(parents=True)
        path.write_text("{}\n")
    now = time.time()
    os.utime(old, (now - 40 * 86400, now - 40 * 86400))
    assert prune_sessions(home, older_than_days=30, now=now) == [old]
    assert new.exists()
    assert not (home / "sessions/2026/01").exists()


def _write_rollout(home: Path, session_id: str, *records: dict[str, Any]) -> Path:
    from codexcore.engine._config import SessionConfig
    from codexcore.engine._rollout import config_record

    path = home / "sessions/2026/11/25" / f"rollout-2026-11-25T00-00-00-{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"type": "session_meta", "session_id": session_id, "created_at": "x", "cwd": "/"}
    lines = [meta, config_record(SessionConfig(cwd="/")), *records]
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in lines))
    return path


def test_loading_answers_every_kind_of_call_left_open_where_it_was_made(tmp_path: Path) -> None:
    """A rollout an old resume continued past unanswered calls: each call gets its
    aborted output right after its Turn, in the shape its type needs."""
    from codexcore.engine._rollout_reader import load_session

    calls = [
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "x", "input": ""},
        {"type": "local_shell_call", "call_id": "c3", "action": {}},
    ]
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]}
    _write_rollout(
        tmp_path,
        "s1",
        {"type": "turn", "items": [user, *calls], "response_id": "r1"},
        {"type": "turn", "items": [user], "response_id": "r2"},
    )
    items = load_session(tmp_path, "s1").history.items()
    assert [(i["type"], i.get("call_id")) for i in items[4:7]] == [
        ("function_call_output", "c1"),
        ("custom_tool_call_output", "c2"),
        ("function_call_output", "c3"),
    ]
    assert all(i["output"].startswith("aborted: ") for i in items[4:7])
    assert items[7] == user


async def test_resume_takes_only_a_whole_session_id(tmp_path: Path) -> None:
    """Part of an id, or a glob pattern, names no session (it used to resume one
    under the wrong id)."""
    model = ScriptedModel([text_response("one", response_id="r1")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("first"), id="a")
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete, id="a")
        for i, partial in enumerate([session_id.split("-")[-1], "*", session_id[:-1] + "?"]):
            await ui.submit(p.ResumeSession(partial), id=f"r{i}")
            error = await ui.until(p.ErrorEvent, id=f"r{i}")
            assert error.msg.code == "unknown_session", partial
        await ui.submit(p.ResumeSession(session_id), id="whole")
        assert (await ui.until(p.SessionConfigured, id="whole")).msg.session_id == session_id
