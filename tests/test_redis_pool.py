"""``codexcore serve --redis``: gateways and workers as real processes on a real redis-server."""

from __future__ import annotations

from pathlib import Path

import pytest

from codexcore.testing import ScriptedModel, text_response

from .redis_helpers import open_session, pool
from .server_helpers import say

pytestmark = pytest.mark.anyio


async def test_a_task_runs_on_a_worker_through_a_gateway(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello from the pool")])
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await running.worker("w1")
        ui, session_id = await open_session(gateway)
        await ui.send(say("u1", "hi"))
        await ui.until("task_complete", id="u1", within=20)
        assert ui.of("agent_message")[-1]["message"] == "hello from the pool"
        assert await running.owner(session_id) == "w1"
        ui.check_invariants()
