"""The Codex core protocol overview, statement by statement, against a real
``codexcore serve --stdio`` (the overview's own transport for a separate process:
newline-delimited JSON on stdin and stdout).

The overview's two sequence diagrams run over every transport in ``tests/flows.py``
(from ``test_serve_stdio.py``, ``test_serve_sockets.py`` and ``test_client.py``);
this file covers the rest of what it says a Task, a Session and an Event do.
The differences that remain are listed in ``docs/seed-conformance.md``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from codexcore.engine._compact import LOSES_DETAIL
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    http_error,
    shell_call,
    text_response,
)

from ..server_helpers import PY, StdioServer, say, sub

pytestmark = pytest.mark.anyio

# Says it runs, then waits; the token in its command line finds it in /proc (the
# sandbox gives it a pid namespace of its own, so its own pid says nothing here).
TOKEN = f"codex-core-waiter-{uuid.uuid4().hex}"
WAITER = [PY, "-c", "import time; print('ready', flush=True); time.sleep(60)", TOKEN]


@asynccontextmanager
async def stdio_server(model: ScriptedModel, cwd: Path) -> AsyncIterator[StdioServer]:
    async with ScriptedResponsesServer(model) as http:
        server = await StdioServer.start(http.base_url, cwd)
        try:
            yield server
        finally:
            await server.kill()


async def running_waiter(ui: StdioServer, cwd: Path) -> None:
    """Configure, start Task ``t1`` whose command is the waiter; return once it runs."""
    await ui.send(sub("cfg", "configure_session", approval_policy="never", cwd=str(cwd)))
    await ui.until("session_configured")
    await ui.send(say("t1", "wait"))
    await ui.until("exec_command_output_delta")
    assert waiters(), "the waiter should be running"


def waiters() -> list[int]:
    """The pids of this module's waiter processes still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and TOKEN.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def waiter_model(*after: ScriptedResponse) -> ScriptedModel:
    return ScriptedModel([shell_call(WAITER, call_id="w1", response_id="resp_w"), *after])


async def test_reconfiguring_the_session_aborts_the_running_execution(tmp_path: Path) -> None:
    """ "Any running execution is aborted when the session is reconfigured.\""""
    async with stdio_server(waiter_model(), tmp_path) as ui:
        await running_waiter(ui, tmp_path)
        await ui.send(sub("cfg2", "configure_session", approval_policy="never", cwd=str(tmp_path)))
        aborted = await ui.until("turn_aborted")
        assert (aborted["id"], aborted["msg"]["reason"]) == ("t1", "reconfigured")
        assert (await ui.until("session_configured"))["id"] == "cfg2"
        assert waiters() == []
        ui.check_invariants()


async def test_a_second_user_input_aborts_the_task_and_starts_a_new_one(tmp_path: Path) -> None:
    """ "Additional Op::UserInput aborts the current task and starts a new one.\""""
    model = waiter_model(text_response("Second task done.", response_id="resp_2"))
    async with stdio_server(model, tmp_path) as ui:
        await running_waiter(ui, tmp_path)
        await ui.send(say("t2", "something else"))
        done = await ui.until("task_complete")
        assert done["id"] == "t2"
        assert done["msg"]["last_agent_message"] == "Second task done."
        assert [(e["id"], e["msg"]["type"]) for e in ui.events() if e["msg"]["type"] in TASKS] == [
            ("t1", "task_started"),
            ("t1", "turn_aborted"),
            ("t2", "task_started"),
            ("t2", "task_complete"),
        ]
        assert ui.of("turn_aborted")[0]["reason"] == "replaced"
        assert waiters() == []
        ui.check_invariants()


TASKS = {"task_started", "turn_aborted", "task_complete", "error"}


async def test_a_model_that_fails_past_the_retry_limit_ends_the_task_with_an_error(
    tmp_path: Path,
) -> None:
    """ "Fatal errors are encountered, eg. Model connection exceeding retry limits."""
    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "config.toml").write_text("[provider]\nmax_attempts = 2\nretry_base_delay = 0\n")
    model = ScriptedModel([http_error(500), http_error(500), text_response("Back again.")])
    async with stdio_server(model, tmp_path) as ui:
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
        await ui.until("session_configured")
        await ui.send(say("t1", "hello"))
        error = await ui.until("error")
        assert error["id"] == "t1"
        assert "500" in error["msg"]["message"]
        assert len(ui.of("stream_error")) == 1  # the one retry, shown as it happened
        assert len(model.requests) == 2
        # The Session survives a failed Task: the next input runs.
        await ui.send(say("t2", "again"))
        assert (await ui.until("task_complete"))["id"] == "t2"
        ui.check_invariants()


async def test_compaction_sends_a_warning_the_ui_should_surface(tmp_path: Path) -> None:
    """EventMsg::Warning, "a non-fatal warning", as Codex sends it on compaction."""
    model = ScriptedModel([text_response("Hi."), text_response("Summary of the talk.")])
    async with stdio_server(model, tmp_path) as ui:
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
        await ui.send(say("t1", "hello"))
        await ui.until("task_complete")
        await ui.send(sub("c1", "compact"))
        done = await ui.until("task_complete")
        assert done["id"] == "c1"
        warnings = [e for e in ui.events() if e["msg"]["type"] == "warning"]
        assert [w["id"] for w in warnings] == ["c1"]
        assert warnings[0]["msg"]["message"] == LOSES_DETAIL
        ui.check_invariants()


async def test_a_response_id_resumes_the_thread_in_a_later_session(tmp_path: Path) -> None:
    """ "The response_id ... can be stored and used in future Sessions to resume threads.\""""
    first = ScriptedModel([text_response("Noted: the answer is 42.", response_id="resp_42")])
    async with stdio_server(first, tmp_path) as ui:
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
        session_id = (await ui.until("session_configured"))["msg"]["session_id"]
        await ui.send(say("t1", "remember 42"))
        bookmark = (await ui.until("task_complete"))["msg"]["response_id"]
    assert bookmark == "resp_42"

    later = ScriptedModel([text_response("It was 42.", response_id="resp_43")])
    async with stdio_server(later, tmp_path) as ui:
        await ui.send(sub("r1", "resume_session", session_id=session_id))
        await ui.until("session_configured")
        await ui.send(say("t2", "what was it?", last_response_id=bookmark))
        assert (await ui.until("task_complete"))["msg"]["last_agent_message"] == "It was 42."
        ui.check_invariants()
    assert later.requests[0]["previous_response_id"] == "resp_42"
