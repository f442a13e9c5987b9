"""MCP servers through the engine: real servers written with the SDK's ``MCPServer``
(``tests/mcp_server.py``), over stdio and streamable HTTP on 127.0.0.1, driven by a
scripted model through the public queue pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from codexcore import Codex, McpServerConfig
from codexcore import protocol as p
from codexcore.config import ConfigError, load_settings
from codexcore.engine._approvals import mcp_call_needs_approval
from codexcore.engine._mcp import qualified_names
from codexcore.protocol import ApprovalPolicy, ExecApproval, Shutdown, TextInput, UserInput
from codexcore.testing import ScriptedModel, function_call_response, text_response

from .engine_helpers import Recorder, engine_config

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).with_name("mcp_server.py"))
ENTRY = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def stdio(*extra: str, **fields: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=(SERVER, *extra), **fields)


def say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def running_in(directory: Path) -> list[int]:
    """The live processes (zombies aside) whose working directory is ``directory``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/cwd") == str(directory):
                    found.append(int(entry))
    return found


def outputs(request: dict[str, Any]) -> list[str]:
    return [i["output"] for i in request["input"] if i.get("type") == "function_call_output"]


@contextlib.asynccontextmanager
async def engine(
    tmp_path: Path,
    model: ScriptedModel,
    servers: dict[str, McpServerConfig],
    policy: ApprovalPolicy = "on-request",
) -> AsyncIterator[Recorder]:
    config = engine_config(tmp_path, approval_policy=policy)
    config = type(config)(**{**_fields(config), "mcp_servers": servers, "ephemeral": True})
    async with Codex(config, transport=model.mock_transport()) as codex:
        ui = Recorder(codex)
        yield ui
        await ui.submit(Shutdown())
        await ui.drain()
        ui.check_invariants()


def _fields(config: Any) -> dict[str, Any]:
    import attrs

    return {f.name: getattr(config, f.name) for f in attrs.fields(type(config))}


async def test_a_stdio_servers_read_only_tool_runs_in_a_task_without_asking(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [function_call_response("demo__add", {"a": 2, "b": 3}, call_id="c1"), text_response("5")]
    )
    async with engine(tmp_path, model, {"demo": stdio()}) as ui:
        await ui.submit(say("add 2 and 3"), id="t1")
        end = await ui.until(p.McpToolCallEnd, within=30)
        await ui.until(p.TaskComplete)
    begin = ui.of(p.McpToolCallBegin)[0]
    assert begin.invocation == p.McpInvocation("demo", "add", {"a": 2, "b": 3})
    assert end.msg.call_id == "c1"
    assert end.msg.result["Ok"]["content"] == [{"type": "text", "text": "5"}]
    assert not ui.of(p.ExecApprovalRequest)
    # The first request waited for the startup, and offers the tools with their schemas.
    tools = {t["name"]: t for t in model.requests[0]["tools"]}
    assert {"shell", "apply_patch", "demo__add", "demo__erase", "demo__nap"} <= set(tools)
    assert tools["demo__add"]["parameters"]["required"] == ["a", "b"]
    assert tools["demo__add"]["description"] == "Add two numbers."
    assert all(ENTRY.match(name) for name in tools)
    assert outputs(model.requests[1]) == ["5"]
    updates = [(u.server, u.status.state) for u in ui.of(p.McpStartupUpdate)]
    assert updates == [("demo", "starting"), ("demo", "ready")]
    assert ui.of(p.McpStartupComplete) == [p.McpStartupComplete(("demo",), (), ())]


async def test_a_server_that_never_answers_initialize_fails_alone_and_the_task_goes_on(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [function_call_response("demo__echo", {"text": "hi"}), text_response("ok")]
    )
    servers = {
        "demo": stdio(),
        "stuck": stdio("--hang", startup_timeout_sec=1.5),
        "ghost": McpServerConfig(command=str(tmp_path / "no-such-server")),
    }
    async with engine(tmp_path, model, servers, policy="never") as ui:
        started = time.monotonic()
        await ui.submit(say("go"))
        complete = await ui.until(p.McpStartupComplete, within=30)
        waited = time.monotonic() - started
        await ui.until(p.TaskComplete, within=30)
    assert complete.msg.ready == ("demo",)
    failures = {f.server: f.error for f in complete.msg.failed}
    assert "did not start within 1.5 s" in failures["stuck"]
    assert failures["ghost"].startswith("cannot start")
    assert waited < 15  # bounded by the startup timeouts, not by the stuck server
    names = [t["name"] for t in model.requests[0]["tools"]]
    assert "demo__echo" in names
    assert not any(name.startswith("stuck__") for name in names)
    assert outputs(model.requests[1]) == ["hi"]


async def test_untrusted_asks_even_for_a_read_only_tool_and_a_denial_reaches_the_model(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            function_call_response("demo__add", {"a": 1, "b": 1}, call_id="c1"),
            function_call_response("demo__add", {"a": 2, "b": 2}, call_id="c2"),
            function_call_response("demo__add", {"a": 3, "b": 3}, call_id="c3"),
            text_response("done"),
        ]
    )
    async with engine(tmp_path, model, {"demo": stdio()}, policy="untrusted") as ui:
        await ui.submit(say("add"))
        asked = await ui.until(p.ExecApprovalRequest, within=30)
        assert asked.msg.command[:3] == ("mcp", "demo", "add")
        assert "MCP server 'demo'" in (asked.msg.reason or "")
        await ui.submit(ExecApproval("c1", "denied", "not now"))
        asked = await ui.until(p.ExecApprovalRequest)
        assert asked.msg.call_id == "c2"
        await ui.submit(ExecApproval("c2", "approved_for_session"))
        await ui.until(p.TaskComplete, within=30)
    # c3 ran unasked: the tool was approved for the session.
    assert [a.call_id for a in ui.of(p.ExecApprovalRequest)] == ["c1", "c2"]
    ends = {e.call_id: e.result for e in ui.of(p.McpToolCallEnd)}
    assert ends["c1"] == {"Err": "the user denied this call: not now"}
    assert ends["c3"]["Ok"]["structuredContent"] == {"result": 6}
    assert "denied" in outputs(model.requests[1])[0]
    assert "not now" in outputs(model.requests[1])[0]


async def test_on_request_asks_for_a_destructive_tool_only(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            function_call_response("demo__erase", {"path": "notes"}, call_id="c1"),
            function_call_response("demo__add", {"a": 1, "b": 2}, call_id="c2"),
            text_response("done"),
        ]
    )
    async with engine(tmp_path, model, {"demo": stdio()}, policy="on-request") as ui:
        await ui.submit(say("erase"))
        asked = await ui.until(p.ExecApprovalRequest, within=30)
        await ui.submit(ExecApproval(asked.msg.call_id, "approved"))
        await ui.until(p.TaskComplete, within=30)
    assert [a.call_id for a in ui.of(p.ExecApprovalRequest)] == ["c1"]
    assert outputs(model.requests[1]) == ["erased notes"]
    assert outputs(model.requests[2]) == ["3"]


async def test_interrupt_stops_a_call_and_the_server_serves_the_next_task(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            function_call_response("demo__nap", {"seconds": 60}, call_id="c1"),
            function_call_response("demo__add", {"a": 1, "b": 1}, call_id="c2"),
            text_response("2"),
        ]
    )
    async with engine(tmp_path, model, {"demo": stdio()}) as ui:
        await ui.submit(say("nap"))
        await ui.until(p.McpToolCallBegin, within=30)
        started = time.monotonic()
        await ui.submit(p.Interrupt())
        await ui.until(p.TurnAborted)
        assert time.monotonic() - started < 5
        await ui.submit(say("add"))
        end = await ui.until(p.McpToolCallEnd, within=30)
        await ui.until(p.TaskComplete)
    assert end.msg.call_id == "c2"
    assert end.msg.result["Ok"]["structuredContent"] == {"result": 2}
    # The interrupted call was answered as aborted for the model.
    assert outputs(model.requests[1])[0].startswith("aborted")


def test_the_approval_rule_follows_the_policy_and_the_annotations() -> None:
    read_only = {"readOnlyHint": True}
    assert not mcp_call_needs_approval("on-request", read_only)
    assert mcp_call_needs_approval("untrusted", read_only)
    assert not mcp_call_needs_approval("never", {"destructiveHint": True})
    assert mcp_call_needs_approval("on-request", {"destructiveHint": True, "readOnlyHint": True})
    assert mcp_call_needs_approval("on-request", {})  # MCP's defaults: destructive, open-world
    closed = {"destructiveHint": False, "openWorldHint": False}
    assert not mcp_call_needs_approval("on-failure", closed)


async def test_a_server_that_crashes_mid_call_becomes_an_error_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            function_call_response("demo__crash", {}, call_id="c1"),
            function_call_response("demo__add", {"a": 1, "b": 2}, call_id="c2"),
            text_response("the server is gone"),
            text_response("still here"),
        ]
    )
    async with engine(tmp_path, model, {"demo": stdio()}) as ui:
        await ui.submit(say("crash it"))
        await ui.until(p.TaskComplete, within=30)
        listed = await _list(ui)
        await ui.submit(say("and now?"))
        done = await ui.until(p.TaskComplete, within=30)
    ends = {e.call_id: e.result for e in ui.of(p.McpToolCallEnd)}
    assert "Err" in ends["c1"]
    first, second = outputs(model.requests[1]), outputs(model.requests[2])
    assert first[0].startswith("error: the call failed")
    # The crashed server's tools are gone from the next request: the call is unknown.
    assert "unknown tool 'demo__add'" in second[0]
    assert not any(t["name"].startswith("demo__") for t in model.requests[2]["tools"])
    (status,) = listed.servers
    assert status.state == "failed"
    assert "exited with code 3" in (status.last_error or "")
    assert done.msg.last_agent_message == "still here"


async def test_a_tool_that_does_not_answer_in_time_is_an_error_for_the_model(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [function_call_response("demo__nap", {"seconds": 30}, call_id="c1"), text_response("ok")]
    )
    servers = {"demo": stdio(tool_timeout_sec=0.5)}
    async with engine(tmp_path, model, servers) as ui:
        await ui.submit(say("nap"))
        end = await ui.until(p.McpToolCallEnd, within=30)
        await ui.until(p.TaskComplete)
    assert end.msg.result == {"Err": "the tool did not answer within 0.5 s"}
    assert end.msg.duration.secs < 5
    assert outputs(model.requests[1]) == ["error: the tool did not answer within 0.5 s"]


async def test_a_stdio_server_inherits_nothing_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-for-mcp-servers-0123456789")
    monkeypatch.setenv("SOME_OTHER_SECRET", "x")
    model = ScriptedModel([function_call_response("demo__environment", {}), text_response("ok")])
    servers = {"demo": stdio(env={"DEMO_SETTING": "on"})}
    async with engine(tmp_path, model, servers) as ui:
        await ui.submit(say("env"))
        end = await ui.until(p.McpToolCallEnd, within=30)
        await ui.until(p.TaskComplete)
    names = end.msg.result["Ok"]["structuredContent"]["result"]
    assert "DEMO_SETTING" in names
    assert "PATH" in names
    assert "OPENAI_API_KEY" not in names
    assert "SOME_OTHER_SECRET" not in names


async def test_a_tools_own_error_and_filters(tmp_path: Path) -> None:
    model = ScriptedModel([function_call_response("demo__fail", {}), text_response("ok")])
    servers = {"demo": stdio(enabled_tools=("fail", "add", "erase"), disabled_tools=("erase",))}
    async with engine(tmp_path, model, servers) as ui:
        await ui.submit(say("fail"))
        end = await ui.until(p.McpToolCallEnd, within=30)
        await ui.until(p.TaskComplete)
    assert end.msg.result["Ok"]["isError"] is True
    assert outputs(model.requests[1])[0].startswith("error: the tool reported a failure")
    names = sorted(t["name"] for t in model.requests[0]["tools"])
    assert names == ["apply_patch", "demo__add", "demo__fail", "shell", "update_plan", "view_image"]


async def _list(ui: Recorder) -> p.McpListToolsResponse:
    sub_id = await ui.submit(p.ListMcpTools())
    return (await ui.until(p.McpListToolsResponse, id=sub_id)).msg


async def test_list_mcp_tools_answers_at_once_while_a_task_runs(tmp_path: Path) -> None:
    model = ScriptedModel(
        [function_call_response("demo__nap", {"seconds": 3}, call_id="c1"), text_response("ok")]
    )
    servers = {"demo": stdio(), "off": stdio(enabled=False)}
    async with engine(tmp_path, model, servers) as ui:
        await ui.submit(say("nap"))
        await ui.until(p.McpToolCallBegin, within=30)
        listed = await _list(ui)
        assert not ui.of(p.McpToolCallEnd)  # answered while the call still ran
        await ui.until(p.TaskComplete, within=30)
    states = {s.name: (s.state, s.enabled, s.transport) for s in listed.servers}
    assert states == {"demo": ("ready", True, "stdio"), "off": ("disabled", False, "stdio")}
    demo = listed.servers[0]
    assert demo.tools == len(listed.tools) == 8
    assert listed.tools["demo__add"]["annotations"] == {"readOnlyHint": True}
    assert listed.auth_statuses == {"demo": "unsupported", "off": "unsupported"}


async def test_shutdown_kills_the_servers_whole_process_group(tmp_path: Path) -> None:
    model = ScriptedModel([function_call_response("demo__spawn", {}), text_response("ok")])
    async with engine(tmp_path, model, {"demo": stdio()}) as ui:
        await ui.submit(say("spawn"))
        end = await ui.until(p.McpToolCallEnd, within=30)
        await ui.until(p.TaskComplete)
        child = int(end.msg.result["Ok"]["structuredContent"]["result"])
        assert alive(child)
    # The engine's shutdown_complete came after the group was killed.
    assert not alive(child)
    assert "shutdown_complete" in ui.types()


# --- streamable HTTP ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    """A real MCP server over streamable HTTP on 127.0.0.1 that wants a bearer token."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port), "--token", "t0ken"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the HTTP server did not listen: {process.stderr}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()
        assert process.stderr is not None
        process.stderr.close()


async def test_a_streamable_http_server_with_a_bearer_token_and_one_without(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOD_TOKEN", "t0ken")
    monkeypatch.setenv("BAD_TOKEN", "nope")
    model = ScriptedModel(
        [function_call_response("web__echo", {"text": "over http"}), text_response("ok")]
    )
    servers = {
        "web": McpServerConfig(url=http_server, bearer_token_env_var="GOOD_TOKEN"),
        "denied": McpServerConfig(url=http_server, bearer_token_env_var="BAD_TOKEN"),
    }
    async with engine(tmp_path, model, servers, policy="never") as ui:
        await ui.submit(say("echo"))
        end = await ui.until(p.McpToolCallEnd, within=30)
        await ui.until(p.TaskComplete)
        listed = await _list(ui)
    assert end.msg.result["Ok"]["content"] == [{"type": "text", "text": "over http"}]
    states = {s.name: s for s in listed.servers}
    assert states["web"].state == "ready"
    assert states["web"].transport == "http"
    assert states["denied"].state == "auth_required"
    assert "401" in (states["denied"].last_error or "")
    assert listed.auth_statuses["web"] == "bearer_token"


# --- names and configuration ---------------------------------------------------------------


def test_qualified_names_fit_the_api_and_stay_distinct() -> None:
    long = "x" * 80
    names = qualified_names(
        [("docs", "search"), ("docs", "read.file"), ("docs", "read_file"), ("srv", long)]
    )
    assert names["docs", "search"] == "docs__search"
    assert names["docs", "read.file"] == "docs__read_file"
    # Made alike by the API's alphabet: the second is told apart by a hash of its raw name.
    assert names["docs", "read_file"].startswith("docs__read_file_")
    assert len({*names.values()}) == 4
    assert all(ENTRY.match(name) for name in names.values())
    assert len(names["srv", long]) == 64
    assert qualified_names([("srv", long)]) == {("srv", long): names["srv", long]}


def _write_config(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)


def test_config_reads_stdio_and_http_servers(tmp_path: Path) -> None:
    _write_config(
        tmp_path,
        """
[mcp_servers.docs]
command = "docs-server"
args = ["--stdio"]
env = { DOCS_TOKEN = "secret-value" }
cwd = "/srv/docs"
startup_timeout_sec = 5
tool_timeout_sec = 30
enabled_tools = ["search"]

[mcp_servers.web]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "WEB_TOKEN"
http_headers = { "X-Team" = "core" }
enabled = false
""",
    )
    loaded = load_settings(home=str(tmp_path), environ={})
    servers = loaded.settings.engine_config().mcp_servers
    assert servers["docs"] == McpServerConfig(
        command="docs-server",
        args=("--stdio",),
        env={"DOCS_TOKEN": "secret-value"},
        cwd="/srv/docs",
        startup_timeout_sec=5.0,
        tool_timeout_sec=30.0,
        enabled_tools=("search",),
    )
    assert servers["web"].transport == "http"
    assert servers["web"].enabled is False
    assert "secret-value" not in repr(servers)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('command = "a"\nurl = "http://x/mcp"', "either command"),
        ("enabled = true", "either command"),
        ('url = "http://x/mcp"\nargs = ["a"]', "args does not apply"),
        ('command = "a"\nstartup_timeout_sec = 0', "startup_timeout_sec = 0: expected a number"),
        ('command = "a"\nenv = { K = 1 }', "env: expected a table"),
        ('url = "http://x/mcp"\nhttp_headers = { Authorization = "Bearer s" }', "credentials"),
        ('url = "http://x/mcp"\nbearer_token_env_var = "not a name"', "NAME of an environment"),
    ],
)
def test_a_bad_server_table_is_an_error_naming_the_key(
    tmp_path: Path, table: str, problem: str
) -> None:
    _write_config(tmp_path, f"[mcp_servers.docs]\n{table}\n")
    with pytest.raises(ConfigError, match=r"mcp_servers\.docs") as caught:
        load_settings(home=str(tmp_path), environ={})
    assert problem in str(caught.value)
    assert "Bearer s" not in str(caught.value)


def test_a_server_name_outside_the_tool_alphabet_is_refused(tmp_path: Path) -> None:
    _write_config(tmp_path, '[mcp_servers."my docs"]\ncommand = "a"\n')
    with pytest.raises(ConfigError, match="letters, digits"):
        load_settings(home=str(tmp_path), environ={})


def test_a_session_without_servers_never_loads_the_sdk() -> None:
    script = (
        "import asyncio, sys\n"
        "from codexcore import Codex\n"
        "from codexcore.engine import EngineConfig\n"
        "from codexcore.protocol import ListMcpTools, Shutdown\n"
        "async def main():\n"
        "    async with Codex(EngineConfig(ephemeral=True, api_key='')) as codex:\n"
        "        await codex.submit(ListMcpTools())\n"
        "        await codex.submit(Shutdown())\n"
        "        async for _ in codex.events(): pass\n"
        "asyncio.run(main())\n"
        "print('mcp' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "False"


async def test_every_server_wait_is_bounded(tmp_path: Path) -> None:
    """Shutting down while a server still starts ends it at once (cancelled, killed)."""
    model = ScriptedModel([])
    async with engine(tmp_path, model, {"stuck": stdio("--hang")}) as ui:
        await ui.submit(p.ListMcpTools())
        await ui.until(p.McpStartupUpdate, within=10)
        for _ in range(500):  # up to 10 s, until the server's process runs in the cwd
            if running_in(tmp_path):
                break
            await asyncio.sleep(0.02)  # nothing signals another process's start: poll
        assert running_in(tmp_path), "the server never started"
        started = time.monotonic()
    assert time.monotonic() - started < 10
    assert not ui.of(p.McpStartupComplete)
    assert running_in(tmp_path) == []  # the server (started in the session's cwd) is gone


def test_exec_shows_mcp_calls_and_a_server_that_failed(tmp_path: Path) -> None:
    from .test_cli_exec import exec_process, serve

    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "config.toml").write_text(
        f'[mcp_servers.demo]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n\n'
        f'[mcp_servers.stuck]\ncommand = "{sys.executable}"\nargs = ["{SERVER}", "--hang"]\n'
        "startup_timeout_sec = 1\n"
    )
    _, server = serve(
        function_call_response("demo__add", {"a": 20, "b": 22}, call_id="c1"),
        function_call_response("demo__fail", {}, call_id="c2"),
        text_response("The answer is 42."),
    )
    try:
        result = exec_process(server, tmp_path, "--approval-policy", "never", "add")
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert '⚙ demo.add({"a": 20, "b": 22})\n  42\n  ok in ' in out
    assert "⚙ demo.fail({})\n" in out
    assert "tool error in " in out
    assert "MCP server stuck failed to start: did not start within 1 s" in out
    assert "The answer is 42." in out
