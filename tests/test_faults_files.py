"""The fault suite, files (issue 26): special files swapped in mid-Task, and a read
stuck in a worker thread when the server gets SIGTERM.

After each: the Task ends with exactly one terminal event, the session file
parses and the session resumes; a server exits within a few seconds of SIGTERM.
Real servers, real FIFOs, real sandboxed commands. See docs/faults.md.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, shell_call, text_response

from .fault_helpers import STUCK_SERVE, RecordingModel, held_command, seed_note, wait_no_orphans
from .server_helpers import (
    PY,
    Client,
    ServerProcess,
    StdioServer,
    hello,
    private_dir,
    say,
    server_env,
    sub,
)
from .test_faults import (
    POLICIES,
    TERMINAL,
    _needs,
    check_session_file,
    configure,
    marker,
    resume_and_continue,
)

pytestmark = pytest.mark.anyio
__all__ = ["marker"]  # the fixture, used by name

SWAPS = {"fifo": "a FIFO (named pipe)", "dev_zero": "a character device"}


def _swap(path: Path, swap: str) -> None:
    path.unlink()
    if swap == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("policy", [_needs(p) for p in POLICIES])
@pytest.mark.parametrize("swap", sorted(SWAPS))
async def test_a_special_file_swapped_in_mid_task(
    swap: str, policy: str, tmp_path: Path, marker: str
) -> None:
    """While a command runs, a workspace file becomes a FIFO or a link to /dev/zero;
    the Task's turn diff must not open the one nor read the other without end."""
    data = tmp_path / "data.txt"
    data.write_text("before\n")
    release = tmp_path / f"release-{marker}"
    held = shell_call(held_command(marker, release), call_id="c1")
    model = RecordingModel([held, text_response("done")], next_reply=text_response("resumed"))
    context = f"{policy}, {swap}{seed_note()}"
    async with ScriptedResponsesServer(model) as http:
        server = await StdioServer.start(http.base_url, tmp_path)
        try:
            await server.send(configure(policy, "never", tmp_path, "server"))
            session_id = (await server.until("session_configured"))["msg"]["session_id"]
            await server.send(say("t1", "first"))
            await server.until("exec_command_begin")
            _swap(data, swap)
            release.touch()
            await server.until("task_complete", within=20)
            await server.close_stdin()
            await server.to_end()
            assert await server.wait_exit() == 0, server.context()
        finally:
            await server.kill()
        server.check_invariants()  # gap-free seq; each task_started has one terminal event
        assert [t for t in server.types(id="t1") if t in TERMINAL] == ["task_complete"], context
        warnings = [m["message"] for m in server.of("warning")]
        removed = (
            f"data.txt is {SWAPS[swap]}, not a regular file: the turn diff shows it as removed"
        )
        assert removed in warnings, f"{warnings} {context}"
        await wait_no_orphans(marker)
        check_session_file(session_id)
        await resume_and_continue(http.base_url, tmp_path, session_id, model, context)


# --- SIGTERM with a read stuck in a worker thread ------------------------------------------

SESSIONS = 7  # one more than the stock executor's threads on a 2-core machine


def _workspace(path: Path) -> Path:
    path.mkdir()
    (path / "data.txt").write_text("before\n")
    return path


async def _session(server: ServerProcess, workspace: Path) -> Client:
    """A session in ``workspace`` running one Task."""
    client = await server.client(unix=True)
    await client.send(hello(token=None))
    configure_it = sub("cfg", "configure_session", approval_policy="never", cwd=str(workspace))
    await client.send(configure_it, say("t1", "go"))
    return client


async def test_sigterm_stops_serve_promptly_with_reads_stuck_in_threads(tmp_path: Path) -> None:
    """Issue 26: six Tasks whose turn diff opened a FIFO took every thread of the stock
    executor, the seventh session's command never started, and SIGTERM left the
    server running. With the old blocking read put back (``STUCK_SERVE``): seven
    threads stuck for good, another session still completes, SIGTERM ends it all."""
    swap = ["bash", "-c", "rm data.txt && mkfifo data.txt"]
    stuck = [shell_call(swap) for _ in range(SESSIONS)]
    model = ScriptedModel([*stuck, shell_call(["echo", "ok"]), text_response("done")])
    with private_dir() as run:
        async with ScriptedResponsesServer(model) as http:
            server = ServerProcess()
            argv = [PY, "-c", STUCK_SERVE, "serve", "--unix", str(run / "s.sock")]
            await server._spawn(argv, server_env(http.base_url, CODEXCORE_LOG="info"), tmp_path)
            try:
                server.unix = Path((await server.wait_stderr(r"listening on unix (\S+)"))[1])
                places = [_workspace(tmp_path / f"w{n}") for n in range(SESSIONS)]
                clients = [await _session(server, place) for place in places]
                for n in range(SESSIONS):
                    await server.wait_stderr(rf"stuck reading \S+/w{n}/data.txt", within=30)
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
