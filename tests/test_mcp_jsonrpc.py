"""Seed 000's ``mcp.list``, and MCP tool calls in a run, over a real ``codexcore serve
--stdio`` whose config.toml names real MCP servers (``tests/mcp_server.py``)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel, function_call_response, text_response

from .test_codelia import Ui, check_run, finish, req, serving, tui_initialize
from .test_mcp import SERVER

pytestmark = pytest.mark.anyio


def configure_servers() -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    python, server = sys.executable, SERVER
    (home / "config.toml").write_text(
        f"""
[mcp_servers.demo]
command = "{python}"
args = ["{server}"]

[mcp_servers.stuck]
command = "{python}"
args = ["{server}", "--hang"]
startup_timeout_sec = 1

[mcp_servers.off]
command = "{python}"
args = ["{server}"]
enabled = false
"""
    )


async def mcp_list(ui: Ui, rid: str, **params: Any) -> dict[str, dict[str, Any]]:
    await ui.server.send(req(rid, "mcp.list", **params))
    answer = await ui.answer(rid)
    return {server["id"]: server for server in answer["result"]["servers"]}


async def settled(ui: Ui) -> dict[str, dict[str, Any]]:
    """mcp.list until no server is connecting (bounded), the last answer."""
    seen: list[Any] = []
    async with asyncio.timeout(30):
        for n in range(10_000):
            servers = await mcp_list(ui, f"poll-{n}", scope="configured")
            seen.append(servers)
            if all(s["state"] != "connecting" for s in servers.values()):
                return servers
            await asyncio.sleep(0.1)
    raise AssertionError(f"still connecting: {seen[-1:]}")


async def test_mcp_list_reports_states_and_a_run_calls_a_tool(tmp_path: Path) -> None:
    configure_servers()
    model = ScriptedModel(
        [function_call_response("demo__add", {"a": 4, "b": 5}, call_id="c1"), text_response("9")]
    )
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(tui_initialize())
        capabilities = (await ui.answer("1"))["result"]["server_capabilities"]
        assert capabilities["supports_mcp_list"] is True
        first = await mcp_list(ui, "2", scope="configured")
        assert first["demo"]["state"] == "connecting"
        assert first["off"] == {
            "id": "off",
            "transport": "stdio",
            "source": "global",
            "enabled": False,
            "state": "disabled",
            "tools": 0,
        }
        servers = await settled(ui)
        assert servers["demo"]["state"] == "ready"
        assert servers["demo"]["tools"] == 8
        assert "last_connected_at" in servers["demo"]
        assert servers["stuck"]["state"] == "error"
        assert "did not start within 1 s" in servers["stuck"]["last_error"]
        loaded = await mcp_list(ui, "3")
        assert set(loaded) == {"demo", "stuck"}  # the disabled one is not loaded

        await ui.server.send(req("4", "run.start", input={"type": "text", "text": "add"}))
        run_id = (await ui.answer("4"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        check_run(ui, run_id)
        events = [e["event"] for e in ui.events(run_id)]
        call = next(e for e in events if e["type"] == "tool_call")
        assert call == {
            "type": "tool_call",
            "tool": "demo__add",
            "args": {"a": 4, "b": 5},
            "tool_call_id": "c1",
        }
        result = next(e for e in events if e["type"] == "tool_result")
        assert result["is_error"] is False
        assert '"structuredContent": {"result": 9}' in result["result"]
        await finish(ui)
