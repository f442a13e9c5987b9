"""``auth.logout``, ``tui.theme`` and ``theme.set`` over a real ``codexcore serve --stdio``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from codexcore._config_settings import TUI_THEMES
from codexcore.adapters.jsonrpc.codelia._account import THEMES
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

from .server_helpers import StdioServer
from .test_codelia import SEED_000_INITIALIZE, Ui, finish, req, serving

pytestmark = pytest.mark.anyio

CONFIG = """# my settings
model = "gpt-5-codex"
tui_theme = "ocean"

[models.local]
context_window = 8000
"""


def config_file() -> Path:
    return Path(os.environ["CODEXCORE_HOME"]) / "config.toml"


async def initialized(ui: Ui, *messages: Any) -> dict[str, Any]:
    await ui.server.send(SEED_000_INITIALIZE, *messages)
    return await ui.answer("1")


def test_the_config_and_the_method_take_the_same_themes() -> None:
    assert tuple(TUI_THEMES) == THEMES


async def test_the_configured_theme_is_told_and_theme_set_writes_it(tmp_path: Path) -> None:
    config_file().write_text(CONFIG)
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        first = await initialized(ui, req("2", "theme.set", name="Forest"))
        assert first["result"]["tui"] == {"theme": "ocean"}
        assert first["result"]["server_capabilities"]["supports_theme_set"] is True
        answer = await ui.answer("2")
        assert answer["result"] == {"name": "forest", "scope": "global", "path": str(config_file())}
        await ui.server.send(req("3", "theme.set", name="neon"))
        bad = await ui.answer("3")
        assert bad["error"]["code"] == -32602
        assert "neon" in bad["error"]["message"]
        await finish(ui)
    text = config_file().read_text()
    assert text == CONFIG.replace('tui_theme = "ocean"', 'tui_theme = "forest"')
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):  # the next start reads it
        assert (await initialized(ui))["result"]["tui"] == {"theme": "forest"}
        await finish(ui)


async def test_no_theme_configured_no_tui_field(tmp_path: Path) -> None:
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        result = (await initialized(ui, req("2", "theme.set", name="rose")))["result"]
        assert "tui" not in result
        assert (await ui.answer("2"))["result"]["name"] == "rose"
        await finish(ui)
    assert config_file().read_text() == 'tui_theme = "rose"\n'
    assert config_file().stat().st_mode & 0o777 == 0o600


async def _logout(tmp_path: Path, answer: dict[str, Any]) -> tuple[Ui, Any, dict[str, Any]]:
    """A run, a logout answered with ``answer``, a second run; the UI, http, the result."""
    model = ScriptedModel([text_response("One."), text_response("Two.")])
    async with ScriptedResponsesServer(model) as http:
        server = await StdioServer.start(
            http.base_url, tmp_path, env={"OPENAI_API_KEY": "sk-test-key"}
        )
        ui = Ui(server)
        try:
            await ui.server.send(
                SEED_000_INITIALIZE, req("2", "run.start", input={"type": "text", "text": "a"})
            )
            run_id = (await ui.answer("2"))["result"]["run_id"]
            assert await ui.run_to_end(run_id) == "completed"
            await ui.server.send(req("3", "auth.logout"))
            confirm = await ui.until("ui.confirm.request")
            assert confirm["params"]["title"] == "Confirm logout"
            await ui.server.send({"jsonrpc": "2.0", "id": confirm["id"], **answer})
            result = await ui.answer("3")
            await ui.server.send(req("4", "run.start", input={"type": "text", "text": "b"}))
            second = (await ui.answer("4"))["result"]["run_id"]
            assert await ui.run_to_end(second) == "completed"
            await finish(ui)
        finally:
            await server.kill()
        return ui, http, result


async def test_logout_forgets_the_key_for_later_requests(tmp_path: Path) -> None:
    _, http, result = await _logout(tmp_path, {"result": {"ok": True}})
    assert result["result"] == {"ok": True, "auth_cleared": True, "session_cleared": False}
    assert http.authorizations == ["Bearer sk-test-key", None]


@pytest.mark.parametrize(
    "answer",
    [{"result": {"ok": False}}, {"error": {"code": -32003, "message": "user cancelled"}}],
)
async def test_a_declined_logout_keeps_the_key(tmp_path: Path, answer: dict[str, Any]) -> None:
    _, http, result = await _logout(tmp_path, answer)
    assert result["result"] == {
        "ok": False,
        "auth_cleared": False,
        "session_cleared": False,
        "cancelled": True,
    }
    assert http.authorizations == ["Bearer sk-test-key", "Bearer sk-test-key"]
