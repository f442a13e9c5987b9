"""``codexcore sessions`` as a real process over sessions recorded by a real engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.engine import default_home
from codexcore.testing import ScriptedModel, text_response

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
    missing = sessions("show", "no-such-id", cwd=tmp_path)
    assert missing.returncode == 1
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
