"""``codexcore sessions`` as a real process over sessions recorded by a real engine."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.engine import default_home, list_sessions
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

from .engine_helpers import running_engine
from .test_engine import say


def sessions(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codexcore", "sessions", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.anyio
async def test_list_show_prune(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("The answer is 42.")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("what is the answer?"))
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete)

    listed = sessions("list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert session_id in listed.stdout
    assert "what is the answer?" in listed.stdout
    as_json = [
        json.loads(line) for line in sessions("list", "--json", cwd=tmp_path).stdout.splitlines()
    ]
    assert [s["session_id"] for s in as_json] == [session_id]

    shown = sessions("show", session_id, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "The answer is 42." in shown.stdout
    assert shown.stdout.count("what is the answer?") == 1  # the recorded user_message
    assert "> what is the answer?" in shown.stdout
    missing = sessions("show", "no-such-id", cwd=tmp_path)
    assert missing.returncode == 2  # refused before the engine is asked
    assert "no recorded session" in missing.stderr

    (path,) = (default_home() / "sessions").glob("*/*/*/*.jsonl")
    old = time.time() - 10 * 86400
    os.utime(path, (old, old))
    assert (
        "would delete 1" in sessions("prune", "--older-than", "7", "--dry-run", cwd=tmp_path).stdout
    )
    assert path.exists()
    assert "deleted 1" in sessions("prune", "--older-than", "7", cwd=tmp_path).stdout
    assert not path.exists()


# --- item 7: bad session files are skipped, named, and refused clearly --------------------------


def _copy_as(source: Path, session_id: str, *, insert: bytes | None = None) -> Path:
    """``source`` recorded again under ``session_id``, with ``insert`` as its third line."""
    lines = source.read_bytes().splitlines(keepends=True)
    meta = json.loads(lines[0])
    meta["session_id"] = session_id
    lines[0] = json.dumps(meta).encode() + b"\n"
    if insert is not None:
        lines.insert(2, insert)
    target = source.with_name(f"rollout-2026-01-01T00-00-00-{session_id}.jsonl")
    target.write_bytes(b"".join(lines))
    return target


def _no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr


async def _record(cwd: Path, word: str) -> str:
    async with running_engine(ScriptedModel([text_response("ok")]), cwd) as ui:
        await ui.submit(say(word))
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete)
    return session_id


def test_bad_session_files_are_skipped_named_and_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = [asyncio.run(_record(tmp_path, word)) for word in ("alpha", "beta")]
    source = next((default_home() / "sessions").glob("*/*/*/*.jsonl"))
    torn = _copy_as(source, "torn-ok")
    torn.write_bytes(torn.read_bytes()[:-9])  # a crash's result: still a session
    bad = {
        "bad-shape": _copy_as(source, "bad-shape", insert=b'{"type": "turn", "items": "x"}\n'),
        "bad-json": _copy_as(source, "bad-json", insert=b'{"type": "turn", "items": [\n'),
        "bad-empty": _copy_as(source, "bad-empty"),
        "bad-dir": source.with_name("rollout-2026-01-01T00-00-00-bad-dir.jsonl"),
    }
    bad["bad-empty"].write_bytes(b"")
    bad["bad-dir"].mkdir()
    if os.geteuid() != 0:  # root reads a mode-000 file anyway
        bad["bad-perm"] = _copy_as(source, "bad-perm")
        bad["bad-perm"].chmod(0)
    problems = {
        "bad-shape": "line 3 is a turn record whose 'items' is missing or of the wrong type",
        "bad-json": "line 3 is not JSON",
        "bad-empty": "is empty",
        "bad-dir": "is a directory",
        "bad-perm": "permission denied",
    }

    listed = sessions("list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    _no_traceback(listed)
    for session_id in [*good, "torn-ok"]:
        assert session_id in listed.stdout
    for session_id, path in bad.items():
        assert session_id not in listed.stdout
        assert f"{path}: {problems[session_id]}" in listed.stderr

    caplog.set_level("WARNING", logger="codexcore")
    summaries = list_sessions(default_home())
    assert {s.session_id for s in summaries} == {*good, "torn-ok"}
    warned = "\n".join(r.getMessage() for r in caplog.records)
    for path in bad.values():
        assert str(path) in warned

    for session_id, path in bad.items():
        shown = sessions("show", session_id, cwd=tmp_path)
        assert shown.returncode == 1
        _no_traceback(shown)
        (line,) = shown.stderr.splitlines()
        assert str(path) in line
        assert problems[session_id] in line
        resumed = subprocess.run(
            [sys.executable, "-m", "codexcore", "exec", "--resume", session_id, "go on"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
            check=False,
            # A key, so exec gets as far as loading the session (no request is sent).
            env={**os.environ, "OPENAI_API_KEY": "sk-unused"},
        )
        assert resumed.returncode == 1
        _no_traceback(resumed)
        (error,) = [line for line in resumed.stdout.splitlines() if "error" in line]
        assert "bad_session" in error
        assert str(path) in error
        assert problems[session_id] in error
    assert sessions("show", "torn-ok", cwd=tmp_path).returncode == 0

    with ScriptedResponsesServer(ScriptedModel([text_response("pong")])) as server:
        doctor = subprocess.run(
            [sys.executable, "-m", "codexcore", "doctor", "--timeout", "5"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "OPENAI_BASE_URL": server.base_url},
            timeout=60,
            check=False,
        )
    _no_traceback(doctor)
    for session_id, path in bad.items():
        (line,) = [line for line in doctor.stdout.splitlines() if str(path) in line]
        assert line.startswith("warn")
        assert problems[session_id] in line
    assert "ok    sessions: 3 recorded" in doctor.stdout
