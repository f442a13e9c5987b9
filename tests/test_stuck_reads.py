"""A worker thread stuck on a read can starve nothing and cannot keep ``serve`` alive.

Issue 26: six Tasks whose turn diff opened a FIFO took every thread of the default
executor; the seventh session's command never started, and SIGTERM left the server
running. The reads no longer block, so to test what remains (no starvation, a
bounded exit) the server runs with the turn diff's reader put back as it was
before the fix: a plain blocking ``open``. Real ``codexcore serve --unix``, real
sessions, real FIFOs.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, shell_call, text_response

from .server_helpers import PY, Client, ServerProcess, hello, private_dir, say, server_env, sub

pytestmark = pytest.mark.anyio

SESSIONS = 7  # one more than the default executor's threads on a 2-core machine

# ``codexcore serve`` with the turn diff reading as it did before issue 26.
STUCK_SERVE = """
import os, stat, sys
import codexcore.engine._turn_diff as turn_diff

def blocking_read(path, **_):
    if stat.S_ISFIFO(os.stat(path).st_mode):
        print(f"stuck reading {path}", file=sys.stderr, flush=True)
    with open(path, "rb") as file:  # a FIFO with no writer: blocks for good
        return file.read().decode()

turn_diff._read_text = blocking_read
from codexcore.cli import main
sys.exit(main(sys.argv[1:]))
"""


async def _start(base_url: str, cwd: Path, socket_path: Path) -> ServerProcess:
    server = ServerProcess()
    argv = [PY, "-c", STUCK_SERVE, "serve", "--unix", str(socket_path)]
    await server._spawn(argv, server_env(base_url, CODEXCORE_LOG="info"), cwd)
    match = await server.wait_stderr(r"listening on unix (\S+)")
    server.unix = Path(match[1])
    return server


def _workspace(path: Path) -> Path:
    path.mkdir()
    (path / "data.txt").write_text("before\n")
    return path


async def _session(server: ServerProcess, workspace: Path) -> Client:
    """A session in ``workspace`` (holding ``data.txt``) running one Task."""
    client = await server.client(unix=True)
    await client.send(hello(token=None))
    configure = sub("cfg", "configure_session", approval_policy="never", cwd=str(workspace))
    await client.send(configure, say("t1", "go"))
    return client


async def test_sigterm_stops_serve_promptly_with_reads_stuck_in_threads(tmp_path: Path) -> None:
    swap = ["bash", "-c", "rm data.txt && mkfifo data.txt"]
    stuck = [shell_call(swap) for _ in range(SESSIONS)]
    model = ScriptedModel([*stuck, shell_call(["echo", "ok"]), text_response("done")])
    with private_dir() as run:
        async with ScriptedResponsesServer(model) as http:
            server = await _start(http.base_url, tmp_path, run / "s.sock")
            try:
                places = [_workspace(tmp_path / f"w{n}") for n in range(SESSIONS)]
                clients = [await _session(server, place) for place in places]
                for client in clients:
                    end = await client.until("exec_command_end", within=30)
                    assert end["msg"]["exit_code"] == 0, end
                for n in range(SESSIONS):
                    await server.wait_stderr(rf"stuck reading \S+/w{n}/data.txt", within=30)
                # Seven threads stuck for good: another session's Task still runs to its end.
                late = await _session(server, _workspace(tmp_path / "late"))
                clients.append(late)
                await late.until("task_complete", within=30)
                started = time.monotonic()
                code = await server.stop(within=15)
                took = time.monotonic() - started
                # Each attached client was told its session ended before the server went.
                for client in clients:
                    await client.to_end(within=5)
                    assert "shutdown_complete" in client.types(), client.summary()
            finally:
                await server.kill()
    assert took < 8, f"SIGTERM took {took:.1f} s{server.context()}"
    assert code == 0, server.context()
    assert any("left behind" in line for line in server.stderr), server.context()
