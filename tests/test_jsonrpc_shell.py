"""Seed 000's ``shell.exec`` over a real ``codexcore serve --stdio``.

The commands are real processes in the user's login shell (an empty HOME, so no
real profile is read); the confinement test runs real bubblewrap, skipped with
the probe's reason where there is none. The others run under danger-full-access
(set in the test's config.toml) so they hold on a machine without bubblewrap.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.adapters.jsonrpc._machine import RpcError
from codexcore.testing import ScriptedModel, ScriptedResponsesServer
from codexcore.tools.sandbox import probe_sandbox

from .server_helpers import StdioServer

pytestmark = pytest.mark.anyio

SEED_000_INITIALIZE = (
    b'{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocol_version":"0",'
    b'"client":{"name":"codelia-tui","version":"0.0.0"}}}\n'
)
needs_bwrap = pytest.mark.skipif(
    probe_sandbox().kind != "bwrap", reason=f"no working bubblewrap: {probe_sandbox().reason}"
)


@pytest.fixture(autouse=True)
def clean_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


def sandbox_mode(mode: str) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "config.toml").write_text(f'sandbox_mode = "{mode}"\n')


@asynccontextmanager
async def serving(cwd: Path) -> AsyncIterator[StdioServer]:
    async with ScriptedResponsesServer(ScriptedModel([])) as http:
        server = await StdioServer.start(http.base_url, cwd)
        try:
            await server.send(SEED_000_INITIALIZE)
            init = await answer(server, "1")
            assert init["result"]["server_capabilities"]["supports_shell_exec"] is True
            yield server
            await server.close_stdin()
            await server.to_end()
            assert await server.wait_exit() == 0, server.context()
        finally:
            await server.kill()


async def answer(server: StdioServer, rid: str, within: float = 20.0) -> dict[str, Any]:
    """The response to ``rid`` (notifications before it are skipped)."""
    while True:
        message = await server.recv(within)
        assert message is not None, f"no answer to {rid}{server.context()}"
        if message.get("id") == rid:
            return message


async def shell_exec(server: StdioServer, rid: str, **params: Any) -> dict[str, Any]:
    await server.send({"jsonrpc": "2.0", "id": rid, "method": "shell.exec", "params": params})
    return await answer(server, rid)


async def test_a_commands_result_fields(tmp_path: Path) -> None:
    sandbox_mode("danger-full-access")
    (tmp_path / "sub").mkdir()
    command = "  pwd; printf err >&2; exit 7  "
    async with serving(tmp_path) as ui:
        reply = await shell_exec(ui, "2", command=command, cwd="sub")
    result = reply["result"]
    assert result.pop("duration_ms") >= 0
    assert result == {
        "command_preview": command.strip(),
        "exit_code": 7,
        "signal": None,
        "stdout": f"{tmp_path / 'sub'}\n",
        "stderr": "err",
        "truncated": {"stdout": False, "stderr": False, "combined": False},
    }


async def test_a_timeout_kills_the_command(tmp_path: Path) -> None:
    sandbox_mode("danger-full-access")
    async with serving(tmp_path) as ui:
        reply = await shell_exec(ui, "2", command="echo started; exec sleep 60", timeout_seconds=1)
    result = reply["result"]
    assert (result["exit_code"], result["signal"]) == (None, "SIGKILL")
    assert result["stdout"] == "started\n"
    assert 1000 <= result["duration_ms"] < 10_000


async def test_a_cwd_outside_the_sandbox_root_is_refused(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    sandbox_mode("danger-full-access")
    cwd, outside = tmp_path_factory.mktemp("work"), tmp_path_factory.mktemp("outside")
    async with serving(cwd) as ui:
        refused = await shell_exec(ui, "2", command="touch ran", cwd=str(outside))
        no_command = await shell_exec(ui, "3", command="   ")
        bad_timeout = await shell_exec(ui, "4", command="true", timeout_seconds=0)
    assert refused["error"]["code"] == -32602
    assert str(outside) in refused["error"]["message"]
    assert "outside the sandbox root" in refused["error"]["message"]
    assert not (outside / "ran").exists()
    assert no_command["error"]["code"] == -32602
    assert bad_timeout["error"]["code"] == -32602
    assert "timeout_seconds" in bad_timeout["error"]["message"]


async def test_output_beyond_the_inline_bound_is_cut_and_flagged(tmp_path: Path) -> None:
    sandbox_mode("danger-full-access")
    command = "head -c 100000 /dev/zero | tr '\\0' a; printf end; printf small >&2"
    async with serving(tmp_path) as ui:
        reply = await shell_exec(ui, "2", command=command)
    result = reply["result"]
    assert result["truncated"] == {"stdout": True, "stderr": False, "combined": True}
    stdout = result["stdout"]
    assert len(stdout.encode()) <= 64 * 1024
    assert stdout.startswith("aaaa")
    assert stdout.endswith("aend")
    assert "...[truncated by size]..." in stdout
    assert result["stderr"] == "small"
    assert "stderr_cache_id" not in result  # not cut: nothing cached
    assert result["stdout_cache_id"].startswith("out_")


async def tool_call(server: StdioServer, rid: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": "tool_output_cache", "arguments": arguments}
    await server.send({"jsonrpc": "2.0", "id": rid, "method": "tool.call", "params": params})
    return await answer(server, rid)


async def test_cut_output_is_read_back_whole_by_its_cache_id(tmp_path: Path) -> None:
    sandbox_mode("danger-full-access")
    async with serving(tmp_path) as ui:
        reply = await shell_exec(ui, "2", command="seq 1 20000 | sed 's/^/line /'")
        ref = reply["result"]["stdout_cache_id"]
        assert reply["result"]["truncated"]["stdout"] is True
        head = await tool_call(ui, "3", ref_id=ref, limit=3)
        tail = await tool_call(ui, "4", ref_id=ref, offset=19998)
        unknown = await tool_call(ui, "5", ref_id="out_0000")
    assert head["result"] == {
        "ok": True,
        "result": {
            "ref_id": ref,
            "content": "line 1\nline 2\nline 3\n",
            "offset": 0,
            "total_lines": 20000,
            "next_offset": 3,
        },
    }
    assert tail["result"]["result"]["content"] == "line 19999\nline 20000\n"
    assert tail["result"]["result"]["next_offset"] is None
    assert unknown["error"]["code"] == -32602
    assert "no cached output 'out_0000'" in unknown["error"]["message"]


@needs_bwrap
async def test_the_sandbox_confines_it(tmp_path_factory: pytest.TempPathFactory) -> None:
    sandbox_mode("workspace-write")
    cwd, outside = tmp_path_factory.mktemp("work"), tmp_path_factory.mktemp("outside")
    command = f"echo in > inside.txt; echo out > {outside}/escaped.txt"
    async with serving(cwd) as ui:
        reply = await shell_exec(ui, "2", command=command)
    result = reply["result"]
    assert (cwd / "inside.txt").read_text() == "in\n"
    assert not (outside / "escaped.txt").exists()
    assert result["exit_code"] != 0
    assert "escaped.txt" in result["stderr"]


def test_the_output_cache_is_bounded_oldest_first() -> None:
    from codexcore.adapters.jsonrpc.codelia._output_cache import MAX_ENTRIES, OutputCache

    cache = OutputCache()
    ids = [cache.keep(f"output {n}\n") for n in range(MAX_ENTRIES + 2)]
    with pytest.raises(RpcError, match="forgotten"):
        cache.read(ids[0], 0, 10)
    assert cache.read(ids[-1], 0, 10)["content"] == f"output {MAX_ENTRIES + 1}\n"
    big = cache.keep("x" * (40 * 1024 * 1024))  # over the byte bound: the others go
    assert cache.read(big, 0, 1)["total_lines"] == 1
    with pytest.raises(RpcError):
        cache.read(ids[-1], 0, 10)
