"""The engine through httpx's real transport against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from codexcore import Codex
from codexcore import protocol as p
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    idle,
    shell_call,
    text_response,
)

from .engine_helpers import Recorder, engine_config

pytestmark = pytest.mark.anyio


async def test_a_task_over_real_http(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            shell_call([sys.executable, "-c", "print('over the wire')"], call_id="c1"),
            text_response("Finished over HTTP.", chunks=7, reasoning="Summarise."),
        ]
    )
    async with ScriptedResponsesServer(model) as server:
        config = engine_config(tmp_path, approval_policy="untrusted", base_url=server.base_url)
        async with Codex(config) as codex:
            ui = Recorder(codex)
            await ui.submit(p.UserInput((p.TextInput("go"),)), id="t1")
            request = await ui.until(p.ExecApprovalRequest)
            await ui.submit(p.ExecApproval(request.msg.call_id, "approved"))
            done = await ui.until(p.TaskComplete)
    assert done.msg.last_agent_message == "Finished over HTTP."
    assert "".join(d.delta for d in ui.of(p.AgentMessageDelta)) == "Finished over HTTP."
    assert ui.of(p.AgentReasoning) == [p.AgentReasoning("Summarise.")]
    assert ui.of(p.ExecCommandEnd)[0].stdout == "over the wire\n"
    assert ui.of(p.TokenCount)
    assert model.requests[1]["previous_response_id"] == ui.of(p.TurnComplete)[0].response_id
    ui.check_invariants()


async def test_interrupt_closes_the_http_stream(tmp_path: Path) -> None:
    model = ScriptedModel([idle(text_response("never finishes"))])
    async with ScriptedResponsesServer(model) as server:
        config = engine_config(tmp_path, base_url=server.base_url)
        async with Codex(config) as codex:
            ui = Recorder(codex)
            await ui.submit(p.UserInput((p.TextInput("go"),)), id="t1")
            await ui.until(p.AgentMessageDelta)
            assert server.open_connections == 1
            await ui.submit(p.Interrupt())
            aborted = await ui.until(p.TurnAborted)
            assert aborted.msg.reason == "interrupted"
            async with asyncio.timeout(2):
                await server.wait_disconnected()
