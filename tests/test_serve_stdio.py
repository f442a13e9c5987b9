"""``codexcore serve --stdio`` as a real subprocess, against a real scripted HTTP model."""

from __future__ import annotations

import base64
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, shell_call, text_response

from .flows import basic_flow, basic_model, interrupt_flow, interrupt_model
from .server_helpers import PY, StdioServer, hello, say, server_env, sub

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def stdio_server(
    model: ScriptedModel, cwd: Path, *args: str, argv: list[str] | None = None
) -> AsyncIterator[StdioServer]:
    async with ScriptedResponsesServer(model) as http:
        server = await StdioServer.start(http.base_url, cwd, *args, argv=argv)
        try:
            yield server
        finally:
            await server.kill()


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


async def finish(server: StdioServer) -> None:
    """Close stdin; the stream must end with shutdown_complete and the process exit 0."""
    await server.close_stdin()
    await server.to_end()
    assert server.types()[-1] == "shutdown_complete"
    assert await server.wait_exit() == 0, server.context()
    server.check_invariants()


async def test_basic_flow(tmp_path: Path) -> None:
    model = basic_model()
    async with stdio_server(model, tmp_path) as ui:
        await basic_flow(ui, model, tmp_path)
        await finish(ui)


async def test_interrupt_and_continue(tmp_path: Path) -> None:
    model = interrupt_model()
    async with stdio_server(model, tmp_path) as ui:
        await interrupt_flow(ui, model, tmp_path)
        await finish(ui)


async def test_every_malformed_line_gets_an_error_and_the_session_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("still here")])
    async with stdio_server(model, tmp_path, "--max-line-bytes", "2000") as ui:
        await ui.send(
            b"x" * 5000 + b"\n",
            b"\xff\xfe\n",
            b'{"id": "a",\n',
            b"[1, 2, 3]\n",
            b'{"id": "v1", "op": {"type": "exec_approval", "id": "c", "decision": "yes"}}\n',
            b"   \n",
            say("t1", "ok?"),
        )
        await ui.until("task_complete", id="t1")
        errors = [(e["id"], e["msg"]["code"]) for e in ui.events() if e["msg"]["type"] == "error"]
        assert errors == [
            ("", "line_too_long"),
            ("", "invalid_utf8"),
            ("", "invalid_json"),
            ("", "not_an_object"),
            ("v1", "bad_submission"),
        ]
        messages = [m["message"] for m in ui.of("error")]
        assert "longer than 2000 bytes" in messages[0]
        assert "op.decision: 'yes' is not one of" in messages[4]
        await finish(ui)


async def test_a_line_over_the_default_megabyte_is_refused_without_harm(tmp_path: Path) -> None:
    async with stdio_server(ScriptedModel([]), tmp_path) as ui:
        big = say("big", "x" * (1024 * 1024))
        await ui.send(big, sub("cfg", "configure_session", cwd=str(tmp_path)))
        await ui.until("session_configured")
        assert [
            (e["id"], e["msg"]["code"]) for e in ui.events() if e["msg"]["type"] == "error"
        ] == [("", "line_too_long")]
        await finish(ui)


async def test_end_of_input_shuts_down_and_leaves_no_child(tmp_path: Path) -> None:
    sleeper = [PY, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(60)"]
    model = ScriptedModel([shell_call(sleeper, call_id="c1")])
    async with stdio_server(model, tmp_path) as ui:
        await ui.send(
            sub(
                "cfg",
                "configure_session",
                approval_policy="never",
                sandbox_policy={"type": "danger-full-access"},
            ),
            say("t1", "sleep"),
        )
        delta = await ui.until("exec_command_output_delta")
        pid = int(base64.b64decode(delta["msg"]["chunk"]))
        assert alive(pid)
        await ui.close_stdin()
        await ui.to_end()
        assert await ui.wait_exit() == 0, ui.context()
    types = ui.types()
    # The shutdown is acknowledged, the killed command ends (its output so far,
    # as run and stopped), then the Task, then the session.
    assert types[-4:] == [
        "submission_ack",
        "exec_command_end",
        "turn_aborted",
        "shutdown_complete",
    ]
    assert ui.of("exec_command_end")[0]["exit_code"] != 0
    assert ui.of("turn_aborted")[0]["reason"] == "shutdown"
    assert ui.events()[-1]["id"].startswith("eof-")
    assert not alive(pid)
    ui.check_invariants()


async def test_end_of_input_at_once(tmp_path: Path) -> None:
    async with stdio_server(ScriptedModel([]), tmp_path) as ui:
        await finish(ui)
    assert ui.types() == ["submission_ack", "shutdown_complete"]


NOISY = """
import os, subprocess, sys
import codexcore.adapters.stdio as stdio

real = stdio.serve_stdio

async def noisy(*args, **kwargs):
    print("a stray print from some library")
    sys.__stdout__.write("a write to the original sys.stdout\\n")
    sys.__stdout__.flush()
    os.write(1, b"a raw write to fd 1\\n")
    child = "import os, sys; print('a child on fd 1', flush=True); print(repr(sys.stdin.read()))"
    subprocess.run([sys.executable, "-c", child], check=True)
    return await real(*args, **kwargs)

stdio.serve_stdio = noisy
from codexcore.cli import main
sys.exit(main(["serve", "--stdio"]))
"""


async def test_stray_writes_to_stdout_go_to_stderr(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("fine")])
    async with stdio_server(model, tmp_path, argv=[PY, "-c", NOISY]) as ui:
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "hi"))
        await ui.until("task_complete")  # every stdout line so far parsed as JSON
        await finish(ui)
    stderr = "\n".join(ui.stderr)
    for stray in (
        "a stray print from some library",
        "a write to the original sys.stdout",
        "a raw write to fd 1",
        "a child on fd 1",
    ):
        assert stray in stderr
    assert "''" in ui.stderr  # the child read /dev/null, not the UI's submissions


async def test_an_optional_hello_is_answered(tmp_path: Path) -> None:
    async with stdio_server(ScriptedModel([]), tmp_path) as ui:
        await ui.send(hello(token=None))
        welcome = await ui.recv()
        assert welcome is not None
        assert welcome["type"] == "welcome"
        assert (welcome["resumed"], welcome["control"], welcome["replay_from"]) == (False, True, 0)
        assert welcome["limits"]["max_line_bytes"] == 1024 * 1024
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
        await ui.until("session_configured")
        await finish(ui)


async def test_a_hello_of_another_version_is_refused(tmp_path: Path) -> None:
    async with stdio_server(ScriptedModel([]), tmp_path) as ui:
        await ui.send({**hello(), "protocol_version": 99})
        await ui.to_end()
        assert await ui.wait_exit() == 2
    assert [m["type"] for m in ui.seen] == ["refused"]
    assert ui.seen[0]["code"] == "unsupported_version"
    assert ui.seen[0]["protocol_versions"] == [1]


async def test_no_event_is_dropped_on_stdio(tmp_path: Path) -> None:
    """stdio never merges or drops: a flood arrives whole, in order, even with a tiny buffer."""
    model = ScriptedModel([text_response("y" * 20_000, chunks=10_000)])
    async with stdio_server(model, tmp_path, "--send-buffer-bytes", "4096") as ui:
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "flood"))
        await ui.until("task_complete", within=30)
        assert len(ui.of("agent_message_delta")) == 10_000
        await finish(ui)


def test_stdio_refuses_company() -> None:
    import subprocess

    result = subprocess.run(
        [PY, "-m", "codexcore", "serve", "--stdio", "--tcp", ":0"],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    assert result.returncode == 2
    assert "--stdio serves alone" in result.stderr
    assert result.stdout == ""


async def test_sigterm_shuts_down_in_order(tmp_path: Path) -> None:
    sleeper = [PY, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    model = ScriptedModel([shell_call(sleeper, call_id="c1")])
    async with stdio_server(model, tmp_path) as ui:
        await ui.send(
            sub("cfg", "configure_session", approval_policy="never", cwd=str(tmp_path)),
            say("t1", "sleep"),
        )
        await ui.until("exec_command_output_delta")
        assert ui.process is not None
        ui.process.send_signal(signal.SIGTERM)
        await ui.to_end()
        assert await ui.wait_exit() == 0, ui.context()
    assert ui.types()[-2:] == ["turn_aborted", "shutdown_complete"]
    ui.check_invariants()


def test_files_and_dev_null_as_stdin_and_stdout(tmp_path: Path) -> None:
    """Regular files and /dev/null cannot be watched by the event loop; they still work."""
    import subprocess

    requests = tmp_path / "in.ndjson"
    requests.write_bytes(b'{"id": "c", "op": {"type": "configure_session"}}\n{"id": "x"')
    replies = tmp_path / "out.ndjson"
    argv = [PY, "-m", "codexcore", "serve", "--stdio"]
    env = server_env(None)
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        subprocess.run(argv, stdin=stdin, stdout=stdout, env=env, cwd=tmp_path, check=True)
    types = [orjson.loads(line)["msg"]["type"] for line in replies.read_bytes().splitlines()]
    assert types == [
        "submission_ack",
        "session_configured",
        "error",  # the unterminated last line is still read, and is not valid JSON
        "submission_ack",
        "shutdown_complete",
    ]
    for stdout_target in (subprocess.DEVNULL, subprocess.PIPE):
        result = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=stdout_target, env=env, cwd=tmp_path, check=True
        )
        assert result.returncode == 0


async def test_sessions_start_from_config_toml_and_the_chosen_profile(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "config.toml").write_text(
        'model = "model-from-config"\napproval_policy = "never"\n\n'
        '[profiles.fast]\nmodel = "model-from-profile"\n'
    )
    model = ScriptedModel([text_response("ok")])
    async with stdio_server(model, tmp_path, "--profile", "fast", "--ephemeral") as ui:
        await ui.send(sub("cfg", "configure_session"), say("u1", "hi"))
        configured = await ui.until("session_configured")
        assert configured["msg"]["model"] == "model-from-profile"
        assert configured["msg"]["approval_policy"] == "never"  # from the file's top level
        await ui.until("task_complete")
        await finish(ui)
    assert model.requests[0]["model"] == "model-from-profile"
    assert not (home / "sessions").exists()  # --ephemeral: nothing recorded


async def test_a_bad_config_toml_is_named_and_nothing_is_served(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    (home / "config.toml").write_text('approval_policy = "sometimes"\n')
    async with stdio_server(ScriptedModel([]), tmp_path) as server:
        assert await server.wait_exit() == 2
        await server.to_end()
        assert server.events() == []
        problem = (await server.wait_stderr(r"config\.toml.*")).group(0)
        assert "approval_policy" in problem
        assert "sometimes" in problem
