"""Interactive mode of the Ralph-style session sockets, against a real ``codexcore serve``:
a user shell command run in a terminal (``run_user_shell_command`` with ``pty``), a monitor
that turns interactive mode on, types into the command with ``write_pty`` and reads its
output as ``output`` events; an interrupt kills the command and what it started."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel

from .seed_examples.test_session_sockets import serve
from .server_helpers import PY, Client, sub
from .test_control_socket import WAIT, call, new_session, rpc, short_home, state_change
from .test_pty import TERMINAL_CHILD, gone

pytestmark = pytest.mark.anyio


async def output_line(client: Client, wanted: str) -> str:
    """Read until an ``output`` event whose line contains ``wanted``; that line."""

    def found() -> str | None:
        for message in client.seen:
            params = message.get("params") or {}
            if params.get("type") == "output" and wanted in params["data"]["line"]:
                return str(params["data"]["line"])
        return None

    while (line := found()) is None:
        assert await client.recv(WAIT) is not None, f"closed before {wanted!r}: {client.seen}"
    return line


def shell(command: str, **fields: Any) -> dict[str, Any]:
    return sub("sh", "run_user_shell_command", command=command, pty=True, **fields)


async def test_write_pty_types_into_a_command_running_in_a_terminal(tmp_path: Path) -> None:
    with short_home() as home:
        async with serve(home, tmp_path, ScriptedModel([])) as server:
            ui, _session_id, path = await new_session(server, home)
            control = await Client.unix(path)
            await call(control, rpc(1, "subscribe", events="*"))
            # No command in a terminal: the mode cannot be on, keystrokes are ignored.
            assert await call(control, rpc(2, "set_interactive_mode", enabled=True)) == {
                "interactive_mode": False
            }
            ignored = {"status": "ignored", "reason": "not in interactive mode"}
            assert await call(control, rpc(3, "write_pty", data="early\n")) == ignored
            # The user's command in a terminal (in the session's sandbox): the mode is on.
            await ui.send(shell(f"{PY} -c {shlex.quote(TERMINAL_CHILD)}"))
            await state_change(control, {"interactive_mode": True})
            begin = await ui.until("exec_command_begin")
            assert begin["msg"]["pty"] is True
            assert "isatty True True" in await output_line(control, "isatty")
            await output_line(control, "ready")
            status = await call(control, rpc(4, "get_status"))
            assert status["interactive_mode"] is True
            answer = await call(control, rpc(5, "write_pty", data="hello\n"))
            assert answer == {"status": "forwarded"}
            assert await output_line(control, "got:") == "got:hello"
            end = await ui.until("exec_command_end")
            assert end["msg"]["exit_code"] == 0, end
            assert "got:hello" in end["msg"]["aggregated_output"]
            await state_change(control, {"interactive_mode": False})
            assert await call(control, rpc(6, "write_pty", data="late\n")) == ignored
            await control.close()
            await ui.close()


async def test_interrupt_kills_the_terminal_command_and_its_children(tmp_path: Path) -> None:
    with short_home() as home:
        async with serve(home, tmp_path, ScriptedModel([])) as server:
            ui, _session_id, path = await new_session(server, home)
            # Unconfined, so the pids it prints are this machine's.
            policy = {"type": "danger-full-access"}
            await ui.send(sub("cfg", "configure_session", sandbox_policy=policy))
            await ui.until("session_configured")
            control = await Client.unix(path)
            await call(control, rpc(1, "subscribe", events=["output"]))
            await ui.send(shell("sleep 300 & echo child=$! shell=$$; wait"))
            line = await output_line(control, "child=")
            pids = [int(part.split("=")[1]) for part in line.split()]
            assert not any(gone(pid) for pid in pids)
            await ui.send(sub("int", "interrupt"))
            end = await ui.until("exec_command_end")
            assert end["msg"]["exit_code"] == -1
            assert end["msg"]["stderr"] == "command aborted by user"
            assert all(gone(pid) for pid in pids), "a process of the command outlived it"
            await control.close()
            await ui.close()


async def test_exec_interactive_runs_the_models_command_in_a_terminal(tmp_path: Path) -> None:
    from codexcore.testing import ScriptedResponsesServer, shell_call, text_response

    from .server_helpers import _Process, server_env
    from .test_control_socket import json_events

    model = ScriptedModel([shell_call([PY, "-c", TERMINAL_CHILD]), text_response("done")])
    with short_home() as home, ScriptedResponsesServer(model) as http:
        path = Path(home) / "s" / "ctl.sock"
        process = _Process()
        argv = [PY, "-m", "codexcore", "exec", "--events-json", "--approval-policy", "never"]
        argv += ["--interactive", "--control-socket", str(path), "run it"]
        env = server_env(http.base_url, HOME=home, CODEXCORE_HOME=f"{home}/cx")
        await process._spawn(argv, env, tmp_path, stdout=asyncio.subprocess.PIPE)
        try:
            await process.wait_stderr(r"control socket")
            control = await Client.unix(path)
            await call(control, rpc(1, "subscribe", events="*"))
            await call(control, rpc(2, "set_interactive_mode", enabled=True))
            await state_change(control, {"interactive_mode": True})
            assert "isatty True True" in await output_line(control, "isatty")
            await output_line(control, "ready")
            answer = await call(control, rpc(3, "write_pty", data="typed\n"))
            assert answer == {"status": "forwarded"}
            assert await output_line(control, "got:") == "got:typed"
            assert await process.wait_exit(WAIT) == 0, process.context()
            events = [e["msg"] for e in await json_events(process)]
            (begin,) = [e for e in events if e["type"] == "exec_command_begin"]
            (end,) = [e for e in events if e["type"] == "exec_command_end"]
            assert begin["pty"] is True
            assert (end["exit_code"], "got:typed" in end["aggregated_output"]) == (0, True)
            await control.to_end(WAIT)
            await control.close()
        finally:
            await process.kill()
