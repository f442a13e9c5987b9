"""A FIFO (or a link to /dev/zero) named like a session file (issue 26, item 6).

``sessions list``, ``sessions show``, ``doctor`` and ``exec --resume`` as real
processes, and the Codelia runtime protocol's ``session.list`` over a real
``serve --stdio``: each ends promptly, skipping and naming the file (a listing)
or refusing it (a read of that session), never hanging on it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codexcore.engine import default_home
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

from .test_cli_sessions import _no_traceback, _record, sessions
from .test_codelia import TUI_CAPABILITIES, req, serving, tui_initialize

FIFO = "is a FIFO (named pipe), not a regular file"
DEVICE = "is a character device, not a regular file"


def _plant(tmp_path: Path) -> tuple[str, dict[str, tuple[Path, str]]]:
    """One good recorded session, and beside it a FIFO and a link to /dev/zero named
    like session files: {session id: (path, problem)}."""
    good = asyncio.run(_record(tmp_path, "alpha"))
    folder = next((default_home() / "sessions").glob("*/*/*/*.jsonl")).parent
    fifo = folder / "rollout-2026-01-01T00-00-00-fifo-id.jsonl"
    os.mkfifo(fifo)
    zero = folder / "rollout-2026-01-01T00-00-00-zero-id.jsonl"
    zero.symlink_to("/dev/zero")
    return good, {"fifo-id": (fifo, FIFO), "zero-id": (zero, DEVICE)}


def test_special_session_files_are_skipped_by_listings_and_refused_by_reads(
    tmp_path: Path,
) -> None:
    good, planted = _plant(tmp_path)

    listed = sessions("list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    _no_traceback(listed)
    assert good in listed.stdout
    for session_id, (path, problem) in planted.items():
        assert session_id not in listed.stdout
        assert f"{path}: {problem}" in listed.stderr

    for session_id, (path, problem) in planted.items():
        shown = sessions("show", session_id, cwd=tmp_path)
        assert shown.returncode == 1
        _no_traceback(shown)
        assert f"{path}: {problem}" in shown.stderr
        resumed = subprocess.run(
            [sys.executable, "-m", "codexcore", "exec", "--resume", session_id, "go on"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=30,
            check=False,
            env={**os.environ, "OPENAI_API_KEY": "sk-unused"},
        )
        assert resumed.returncode == 1
        _no_traceback(resumed)
        (error,) = [line for line in resumed.stdout.splitlines() if "bad_session" in line]
        assert f"{path}: {problem}" in error

    with ScriptedResponsesServer(ScriptedModel([text_response("pong")])) as server:
        doctor = subprocess.run(
            [sys.executable, "-m", "codexcore", "doctor", "--timeout", "5"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "OPENAI_BASE_URL": server.base_url},
            timeout=30,
            check=False,
        )
    _no_traceback(doctor)
    for path, problem in planted.values():
        (line,) = [line for line in doctor.stdout.splitlines() if str(path) in line]
        assert line.startswith("warn")
        assert problem in line
    assert "ok    sessions: 1 recorded" in doctor.stdout


@pytest.mark.anyio
async def test_jsonrpc_session_list_skips_a_fifo_session_file(tmp_path: Path) -> None:
    good, planted = await asyncio.to_thread(_plant, tmp_path)
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize(**TUI_CAPABILITIES))
        await ui.answer("1")
        await ui.server.send(req("2", "session.list"))
        answer = await ui.answer("2")
    assert [s["session_id"] for s in answer["result"]["sessions"]] == [good]
    assert not set(planted) & {s["session_id"] for s in answer["result"]["sessions"]}
