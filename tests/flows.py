"""The seed's two diagrams as wire flows, run over every transport (stdio, TCP, Unix)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from codexcore.testing import ScriptedModel, shell_call, text_response

from .server_helpers import PY, LineLink, say, sub

STUBBORN = [
    PY,
    "-c",
    "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)",
]


def outputs_sent(request: dict[str, Any]) -> dict[str, str]:
    return {
        i["call_id"]: i["output"]
        for i in request["input"]
        if i.get("type") == "function_call_output"
    }


def basic_model() -> ScriptedModel:
    return ScriptedModel(
        [
            shell_call([PY, "-c", "print('hello')"], call_id="c1", response_id="resp_1"),
            text_response("All done.", response_id="resp_2"),
        ]
    )


async def basic_flow(ui: LineLink, model: ScriptedModel, cwd: Path) -> None:
    """configure → user_input → exec approval → command → final message (seed diagram 1)."""
    await ui.send(sub("cfg", "configure_session", approval_policy="untrusted", cwd=str(cwd)))
    configured = await ui.until("session_configured")
    assert configured["id"] == "cfg"
    assert configured["msg"]["approval_policy"] == "untrusted"
    assert configured["msg"]["cwd"] == str(cwd)

    await ui.send(say("u1", "run it"))
    request = await ui.until("exec_approval_request")
    assert request["id"] == "u1"
    assert request["msg"]["command"] == [PY, "-c", "print('hello')"]
    await ui.send(sub("a1", "exec_approval", id="c1", decision="approved"))
    done = await ui.until("task_complete")

    assert ui.types(id="u1") == [
        "submission_ack",
        "task_started",
        "user_message",
        "exec_approval_request",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
        "agent_message",
        "turn_complete",
        "task_complete",
    ]
    assert ui.of("submission_ack") == [
        {"type": "submission_ack", "id": sub_id, "duplicate": False}
        for sub_id in ("cfg", "u1", "a1")
    ]
    end = ui.of("exec_command_end")[0]
    assert (end["exit_code"], end["stdout"], end["status"]) == (0, "hello\n", "completed")
    assert ui.output() == b"hello\n"
    assert [t["response_id"] for t in ui.of("turn_complete")] == ["resp_1", "resp_2"]
    assert (done["msg"]["last_agent_message"], done["msg"]["response_id"]) == (
        "All done.",
        "resp_2",
    )
    assert "".join(d["delta"] for d in ui.of("agent_message_delta")) == "All done."
    second = model.requests[1]
    assert second["previous_response_id"] == "resp_1"
    assert orjson.loads(outputs_sent(second)["c1"])["output"] == "hello\n"


def interrupt_model() -> ScriptedModel:
    return ScriptedModel(
        [
            shell_call([PY, "-c", "print(1)"], call_id="c1", response_id="resp_1"),
            shell_call(STUBBORN, call_id="c2", response_id="resp_2"),
            shell_call([PY, "-c", "print(3)"], call_id="c3", response_id="resp_3"),
            text_response("Continued.", response_id="resp_4"),
        ]
    )


async def interrupt_flow(ui: LineLink, model: ScriptedModel, cwd: Path) -> None:
    """Interrupt a running command, then continue from the bookmark (seed diagram 2)."""
    await ui.send(sub("cfg", "configure_session", approval_policy="never", cwd=str(cwd)))
    await ui.until("session_configured")
    await ui.send(say("t1", "first"))
    bookmark = (await ui.until("turn_complete"))["msg"]["response_id"]
    await ui.until("exec_command_begin")
    await ui.until("exec_command_output_delta")  # the stubborn command is running
    started = time.monotonic()
    await ui.send(sub("i1", "interrupt"))
    aborted = await ui.until("turn_aborted")
    assert time.monotonic() - started < 2.0
    assert (aborted["id"], aborted["msg"]["reason"]) == ("t1", "interrupted")

    await ui.send(say("t2", "go on", last_response_id=bookmark))
    done = await ui.until("task_complete")
    assert done["id"] == "t2"

    assert bookmark == "resp_1"
    fork = model.requests[2]
    assert fork["previous_response_id"] == "resp_1"
    assert list(outputs_sent(fork)) == ["c1"]
    assert fork["input"][-1]["content"] == [{"type": "input_text", "text": "go on"}]
    assert ui.types(id="t2") == [
        "submission_ack",
        "task_started",
        "user_message",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
        "agent_message",
        "turn_complete",
        "task_complete",
    ]
