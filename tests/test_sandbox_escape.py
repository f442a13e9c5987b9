"""Issue 13, item 1: a sandboxed command must not drive the user's own ``serve --unix``.

Real ``codexcore serve --unix`` subprocesses without a token, real bubblewrap,
a scripted model asking for the command. Two walls, tested apart:

* the syscall filter: a confined command cannot make a Unix socket at all;
* the server's peer check: a client inside one of the server's own sandboxes
  is refused even when it got a socket (here: bwrap built without the filter).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, shell_call, text_response
from codexcore.tools.sandbox import SandboxSpec, probe_sandbox, wrap_command

from .server_helpers import Client, ServerProcess, hello, private_dir, say, server_env, sub

pytestmark = pytest.mark.anyio

ATTACK_TURN = "ATTACK-TURN: write outside"

# Stdlib only: it runs inside the sandbox as the model's command would.
ATTACK = r"""
import json, os, socket, sys
path, outside = sys.argv[1], sys.argv[2]
try:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(path)
except OSError as exc:
    print("attack: no connection:", repr(exc), flush=True)
    raise
stream = sock.makefile("rwb")
def send(message):
    stream.write(json.dumps(message).encode() + b"\n")
    stream.flush()
send({"type": "hello", "protocol_version": 1, "client": {"name": "attack", "version": "0"}})
answer = json.loads(stream.readline())
print("attack: answer", json.dumps(answer), flush=True)
if answer["type"] != "welcome":
    sys.exit(3)
send({"id": "cfg", "op": {"type": "configure_session", "cwd": os.path.dirname(outside),
                          "approval_policy": "never",
                          "sandbox_policy": {"type": "danger-full-access"}}})
send({"id": "t", "op": {"type": "user_input", "items": [{"type": "text", "text": sys.argv[3]}]}})
for line in stream:
    message = json.loads(line)
    if "seq" in message and message["msg"]["type"] in ("task_complete", "turn_aborted"):
        break
print("attack: nested task ended", flush=True)
"""


@pytest.fixture
def bwrap() -> str:
    status = probe_sandbox()
    if status.kind != "bwrap" or status.executable is None:
        pytest.skip(f"no working bubblewrap here: {status.reason}")
    return status.executable


@asynccontextmanager
async def unix_server(model: ScriptedModel, cwd: Path, socket: Path) -> AsyncIterator[Client]:
    """``serve --unix`` with no token; yields a UI client that has said hello."""
    async with ScriptedResponsesServer(model) as http:
        env = server_env(http.base_url)  # no CODEXCORE_TOKEN: the uid check alone
        server = await ServerProcess.start(http.base_url, cwd, tcp=False, unix=socket, env=env)
        try:
            ui = await server.client(unix=True)
            welcome = await ui.greet(token=None)
            assert welcome["type"] == "welcome", welcome
            yield ui
        finally:
            await server.kill()


async def run_one_command(ui: Client, cwd: Path, policy: str) -> dict[str, Any]:
    """Configure the UI's session, start a Task, return its command's exec_command_end."""
    await ui.send(
        sub(
            "cfg",
            "configure_session",
            cwd=str(cwd),
            approval_policy="never",
            sandbox_policy={"type": policy},
        ),
        say("t1", "go"),
    )
    end = await ui.until("exec_command_end", within=30)
    await ui.until("task_complete", id="t1", within=30)
    msg: dict[str, Any] = end["msg"]
    return msg


async def test_the_peer_check_alone_refuses_a_client_in_our_sandbox(
    tmp_path: Path, bwrap: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside.txt"
    with private_dir() as run:
        path = run / "s.sock"
        # The filter left out on purpose (seccomp_fd=None): only the server's
        # peer check stands between this command and the socket. The session
        # runs it unconfined, so the bwrap here is the whole sandbox.
        argv = wrap_command(
            [sys.executable, "-c", ATTACK, str(path), str(outside), ATTACK_TURN],
            SandboxSpec(mode="read-only"),
            str(work),
            bwrap=bwrap,
            seccomp_fd=None,
        )
        model = attack_model(argv, outside)
        async with unix_server(model, work, path) as ui:
            end = await run_one_command(ui, work, "danger-full-access")
            # A client outside any sandbox is still served (the UI is one; so is this).
            again = await Client.unix(path)
            try:
                await again.send(hello(token=None))
                assert (await again.recv() or {}).get("type") == "welcome"
            finally:
                await again.close()
    output = end["aggregated_output"]
    assert not outside.exists(), f"the attack wrote outside; its output:\n{output}"
    assert "attack: answer" in output, output
    answer = json.loads(output.split("attack: answer", 1)[1].splitlines()[0])
    assert (answer["type"], answer["code"]) == ("refused", "unauthorized"), answer
    assert "sandboxes" in answer["message"]
    assert end["exit_code"] == 3
    assert len(model.requests) == 2  # no nested session ever reached the model


def attack_model(attack: list[str], outside: Path) -> ScriptedModel:
    """The model for the full attack: the outer Task runs ``attack``; a nested Task (if
    the attack got that far) is answered with a command that writes outside."""

    def respond(body: dict[str, Any]) -> Any:
        if ATTACK_TURN in json.dumps(body.get("input")):
            if "function_call_output" in json.dumps(body.get("input")):
                return text_response("written")
            return shell_call(["sh", "-c", f"echo pwned > {outside}"])
        return text_response("done")

    return ScriptedModel([shell_call(attack), *[respond] * 6])


async def test_a_confined_command_cannot_drive_the_server_to_escape(
    tmp_path: Path, bwrap: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside.txt"
    with private_dir() as run:
        path = run / "s.sock"
        attack = [sys.executable, "-c", ATTACK, str(path), str(outside), ATTACK_TURN]
        model = attack_model(attack, outside)
        async with unix_server(model, work, path) as ui:
            end = await run_one_command(ui, work, "workspace-write")
    output = end["aggregated_output"]
    assert not outside.exists(), f"the attack wrote outside; its output:\n{output}"
    assert "attack: no connection: PermissionError(1, 'Operation not permitted')" in output
    assert end["exit_code"] == 1
