"""The user's own shell: ``run_user_shell_command`` through the public queue pair.

A scripted model stands in for the provider; commands are real processes, and the
sandbox test runs real bubblewrap (skipped with the probe's reason where there is
none). Where a test must catch a command mid-run, the command announces itself on
its output and the test waits for that delta.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codexcore import protocol as p
from codexcore.engine._rollout_reader import find_rollout, load_session, read_events
from codexcore.engine._user_shell import user_shell_argv
from codexcore.protocol import (
    ConfigureSession,
    Interrupt,
    RunUserShellCommand,
    SandboxPolicy,
    Shutdown,
    TextInput,
    UserInput,
)
from codexcore.testing import ScriptedModel, shell_call, text_response
from codexcore.tools.sandbox import probe_sandbox

from .engine_helpers import Recorder, running_engine
from .test_engine_stop import CommandGate, home, user_texts

pytestmark = pytest.mark.anyio

UNCONFINED = SandboxPolicy("danger-full-access")
needs_bwrap = pytest.mark.skipif(
    probe_sandbox().kind != "bwrap", reason=f"no working bubblewrap: {probe_sandbox().reason}"
)


@pytest.fixture(autouse=True)
def clean_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The login shell reads its profile from HOME: an empty one keeps these tests
    off the real user's profile (whose start-up a killed shell could leave half done)."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def gate(tmp_path_factory: pytest.TempPathFactory) -> CommandGate:
    return CommandGate(tmp_path_factory.mktemp("gate"))


def say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_for_output(ui: Recorder, sub_id: str, needle: bytes) -> None:
    seen = b""
    while needle not in seen:
        delta = await ui.until(p.ExecCommandOutputDelta, id=sub_id)
        seen += delta.msg.chunk


def shell_records(request: dict[str, Any]) -> list[str]:
    return [t for t in user_texts(request) if t.startswith("<user_shell_command>")]


async def test_output_streams_as_user_shell_and_the_next_request_carries_it(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("You listed it.")])
    command = "echo hello; echo oops >&2; exit 3"
    async with running_engine(model, tmp_path, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(RunUserShellCommand(command), id="u1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
        await ui.submit(say("what did I run?"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
    begin = ui.of(p.ExecCommandBegin)[0]
    assert (begin.command, begin.cwd, begin.source) == (
        user_shell_argv(command),
        str(tmp_path),
        "user_shell",
    )
    assert {d.source for d in ui.of(p.ExecCommandOutputDelta)} == {"user_shell"}
    assert (end.msg.exit_code, end.msg.stdout, end.msg.stderr) == (3, "hello\n", "oops\n")
    assert (end.msg.status, end.msg.source) == ("failed", "user_shell")
    assert "task_started" not in ui.types(id="u1")  # no Task: nothing for the model yet
    [record] = shell_records(model.requests[0])
    assert record.startswith(f"<user_shell_command>\n<command>\n{command}\n</command>\n<result>\n")
    assert "Exit code: 3\n" in record
    assert "hello\n" in record
    assert "oops\n" in record


async def test_record_false_keeps_it_from_the_model(tmp_path: Path) -> None:
    # A UI that hands the result to the model itself (the Codelia TUI) asks for this.
    model = ScriptedModel([text_response("Nothing seen.")])
    async with running_engine(model, tmp_path, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(RunUserShellCommand("echo private", record=False), id="u1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
        await ui.submit(say("anything?"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
    assert end.msg.stdout == "private\n"
    assert shell_records(model.requests[0]) == []


def test_the_users_shell_is_a_login_shell_of_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHELL", "/bin/sh")
    assert user_shell_argv("ls") == ("/bin/sh", "-lc", "ls")
    monkeypatch.setenv("SHELL", "not-a-path")
    assert user_shell_argv("ls") == ("/bin/bash", "-lc", "ls")


async def test_interrupt_kills_it_and_leaves_no_process(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("ok")])
    command = "sleep 600 & echo $! > child.pid; echo $$ > shell.pid; echo ready; wait"
    async with running_engine(model, tmp_path, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(RunUserShellCommand(command), id="u1")
        await wait_for_output(ui, "u1", b"ready")
        pids = [int((tmp_path / f).read_text()) for f in ("shell.pid", "child.pid")]
        assert all(alive(pid) for pid in pids)
        await ui.submit(Interrupt(), id="i1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
        assert [pid for pid in pids if alive(pid)] == []
        await ui.submit(say("and?"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
    assert (end.msg.exit_code, end.msg.stderr) == (-1, "command aborted by user")
    [record] = shell_records(model.requests[0])
    assert "Exit code: -1\n" in record
    assert "command aborted by user" in record


async def test_shutdown_kills_it_before_shutdown_complete(tmp_path: Path) -> None:
    model = ScriptedModel([])
    command = "echo $$ > shell.pid; echo ready; exec sleep 600"
    async with running_engine(model, tmp_path, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(RunUserShellCommand(command), id="u1")
        await wait_for_output(ui, "u1", b"ready")
        pid = int((tmp_path / "shell.pid").read_text())
        await ui.submit(Shutdown(), id="bye")
        await ui.drain()
    assert not alive(pid)
    assert ui.types()[-2:] == ["exec_command_end", "shutdown_complete"]


async def test_it_runs_beside_a_task_whose_next_request_carries_it(
    tmp_path: Path, gate: CommandGate
) -> None:
    model = ScriptedModel([shell_call(gate.argv, call_id="c1"), text_response("done")])
    async with running_engine(model, tmp_path, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(say("run the long one"), id="t1")
        await wait_for_output(ui, "t1", b"ready")
        await ui.submit(RunUserShellCommand("echo beside"), id="u1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
        assert "task_complete" not in ui.types(id="t1")  # the Task was not disturbed
        gate.open()
        done = await ui.until(p.TaskComplete, id="t1")
    assert (end.msg.stdout, end.msg.source) == ("beside\n", "user_shell")
    assert done.msg.last_agent_message == "done"
    assert len(model.requests) == 2  # the record asked for no extra request
    [record] = shell_records(model.requests[1])
    assert "<command>\necho beside\n</command>" in record
    agent_end = next(e for e in ui.of(p.ExecCommandEnd) if e.call_id == "c1")
    assert agent_end.source == "agent"


async def test_a_timeout_kills_it(tmp_path: Path) -> None:
    async with running_engine(ScriptedModel([]), tmp_path, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(RunUserShellCommand("exec sleep 600", timeout_ms=200), id="u1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
    assert (end.msg.status, end.msg.exit_code) == ("timed_out", 124)


async def test_the_rollout_keeps_its_events_and_the_resumed_history_its_record(
    tmp_path: Path,
) -> None:
    async with running_engine(ScriptedModel([]), tmp_path, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(ConfigureSession(), id="c0")
        configured = await ui.until(p.SessionConfigured, id="c0")
        await ui.submit(RunUserShellCommand("echo kept"), id="u1")
        await ui.until(p.ExecCommandEnd, id="u1")
        await ui.submit(Shutdown())
        await ui.drain()
    session_id = configured.msg.session_id
    recorded = [e.msg for e in read_events(find_rollout(home(), session_id)) if e.id == "u1"]
    assert [m.TYPE for m in recorded] == ["exec_command_begin", "exec_command_end"]
    assert all(isinstance(m, p.ExecCommandBegin | p.ExecCommandEnd) for m in recorded)
    assert {getattr(m, "source", None) for m in recorded} == {"user_shell"}
    items = load_session(home(), session_id).history.items()
    texts = [part["text"] for item in items for part in item["content"]]
    assert any("<command>\necho kept\n</command>" in t and "kept\n" in t for t in texts)


@needs_bwrap
async def test_under_workspace_write_it_cannot_write_outside(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cwd, outside = tmp_path_factory.mktemp("work"), tmp_path_factory.mktemp("outside")
    command = f"echo in > inside.txt; echo out > {outside}/escaped.txt"
    policy = SandboxPolicy("workspace-write")
    async with running_engine(ScriptedModel([]), cwd, sandbox_policy=policy) as ui:
        await ui.submit(RunUserShellCommand(command), id="u1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
    assert ui.of(p.SessionConfigured)[0].sandbox == "bwrap"
    assert (cwd / "inside.txt").read_text() == "in\n"
    assert not (outside / "escaped.txt").exists()
    assert end.msg.exit_code != 0
    assert "escaped.txt" in end.msg.stderr


async def test_it_runs_in_a_cwd_inside_the_sessions_and_refuses_one_outside(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cwd, outside = tmp_path_factory.mktemp("work"), tmp_path_factory.mktemp("outside")
    (cwd / "sub").mkdir()
    (cwd / "escape").symlink_to(outside)
    async with running_engine(ScriptedModel([]), cwd, sandbox_policy=UNCONFINED) as ui:
        await ui.submit(RunUserShellCommand("pwd", cwd="sub"), id="u1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
        refused = {}
        for sub_id, where in (("u2", str(outside)), ("u3", "escape"), ("u4", "../")):
            await ui.submit(RunUserShellCommand("touch ran", cwd=where), id=sub_id)
            refused[where] = (await ui.until(p.ErrorEvent, id=sub_id)).msg
    assert end.msg.stdout == f"{cwd / 'sub'}\n"
    for where, error in refused.items():
        assert error.code == "bad_cwd"
        assert f"cwd {where!r} is outside the sandbox root" in error.message
    assert not (outside / "ran").exists()
    assert [e.call_id for e in ui.of(p.ExecCommandBegin)] == [ui.of(p.ExecCommandEnd)[0].call_id]


async def test_it_never_runs_unconfined_where_the_policy_confines_and_no_sandbox_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEXCORE_SANDBOX", "none")
    policy = SandboxPolicy("workspace-write")
    async with running_engine(ScriptedModel([]), tmp_path, sandbox_policy=policy) as ui:
        await ui.submit(RunUserShellCommand("touch ran"), id="u1")
        end = await ui.until(p.ExecCommandEnd, id="u1")
    assert ui.of(p.SessionConfigured)[0].sandbox == "none"
    assert not (tmp_path / "ran").exists()
    assert end.msg.exit_code == -1
    assert "no sandbox is available here (disabled by CODEXCORE_SANDBOX=none)" in end.msg.stderr
