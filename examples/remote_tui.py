"""A remote terminal UI: a codexcore server over TCP, driven with the client library.

The UI holds no protocol code: ``RemoteCodex`` gives it the faces of the
in-process engine (``submit``, ``events()``), and keeps the session alive
across a dropped connection. To show that, the UI drops its connection once
on purpose, mid-task, right after answering the approval request: the client
reconnects by itself, reattaches to the session with the last ``seq`` it saw,
resends the approval if the server had not acknowledged it yet, and the
transcript goes on with nothing missed and nothing shown twice.

    python examples/remote_tui.py                         # offline: starts everything itself
    python examples/remote_tui.py --base-url URL          # a scripted Responses server you run
    python examples/remote_tui.py --port 8765 --token T   # a `codexcore serve --tcp` you run

Without ``--port`` it starts ``codexcore serve --tcp 127.0.0.1:0`` itself (with
a fresh token), pointed at ``--base-url`` or at a scripted model of its own,
and stops it at the end. The server gets no API key, and this UI approves
every command the model asks for: use it with a scripted model only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import shlex
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from scripted_model import PROMPT, demo_model

from codexcore.adapters.client import (
    ControlChange,
    Disconnected,
    EventsLost,
    Notice,
    Reconnected,
    RemoteCodex,
    RemoteError,
    SubmissionRefused,
)
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    AgentMessage,
    AgentMessageDelta,
    ConfigureSession,
    ErrorEvent,
    ExecApproval,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    SessionConfigured,
    Shutdown,
    ShutdownComplete,
    TaskComplete,
    TextInput,
    UserInput,
)
from codexcore.testing import ScriptedResponsesServer


def show_notice(notice: Notice) -> None:
    """What happened to the connection, as a UI would show it in its status line."""
    if isinstance(notice, Disconnected):
        print(f"[connection lost: {notice.reason}; reconnecting]")
    elif isinstance(notice, Reconnected):
        resent = ", ".join(notice.resent) or "nothing"
        welcome = notice.welcome
        print(
            f"[reconnected to session {welcome.session_id[:8]}, replaying from seq "
            f"{welcome.replay_from}; resent: {resent}]"
        )
    elif isinstance(notice, EventsLost):
        print(f"[events {notice.first_seq}..{notice.last_seq} are lost]")
    elif isinstance(notice, ControlChange):
        print(f"[control {'gained' if notice.control else 'lost'}: {notice.reason}]")
    elif isinstance(notice, SubmissionRefused):
        print(f"[submission {notice.id} refused: {notice.message}]")


async def converse(host: str, port: int, token: str, workspace: str) -> bool:
    """One Task from prompt to ``task_complete``, with one dropped connection on the way."""
    completed = False
    dropped = False
    async with RemoteCodex.connect_tcp(host, port, token=token, on_notice=show_notice) as codex:
        print(f"[connected to {host}:{port}, session {codex.session_id[:8]}]")
        configure = ConfigureSession(approval_policy="untrusted", cwd=workspace)
        await codex.submit(configure, id="config")
        task_id = await codex.submit(UserInput((TextInput(PROMPT),)), id="task-1")
        print(f"you: {PROMPT}")
        async for event in codex.events():
            msg = event.msg
            if isinstance(msg, SessionConfigured):
                print(f"[sandbox: {msg.sandbox}; cwd: {msg.cwd}]")
            elif isinstance(msg, AgentMessageDelta):
                print(msg.delta, end="", flush=True)
            elif isinstance(msg, AgentMessage):
                print()  # the deltas already showed the text
            elif isinstance(msg, ExecApprovalRequest):
                print(f"approve? {shlex.join(msg.command)} -> yes")
                approval = ExecApproval(msg.call_id, "approved")
                await codex.submit(approval, id=f"approval-{event.seq}")
                if not dropped:  # now, mid-task, as a flaky network would
                    dropped = True
                    await codex.reconnect()
            elif isinstance(msg, ExecCommandBegin):
                print(f"$ {shlex.join(msg.command)}")
            elif isinstance(msg, ExecCommandOutputDelta):
                print(msg.chunk.decode(errors="replace"), end="", flush=True)
            elif isinstance(msg, ExecCommandEnd):
                print(f"[exit {msg.exit_code}]")
            elif msg.TYPE in TERMINAL_EVENT_TYPES and event.id == task_id:
                completed = isinstance(msg, TaskComplete)
                print(
                    f"[{msg.TYPE}: {msg.message}]"
                    if isinstance(msg, ErrorEvent)
                    else f"[{msg.TYPE}]"
                )
                await codex.submit(Shutdown(), id="bye")
            elif isinstance(msg, ShutdownComplete):
                print(f"[session ended at seq {event.seq}]")
    return completed and dropped


@contextlib.asynccontextmanager
async def model_url(base_url: str | None) -> AsyncIterator[str]:
    """``base_url``, or the URL of a scripted model running in this event loop."""
    if base_url is not None:
        yield base_url
        return
    async with ScriptedResponsesServer(demo_model()) as server:
        yield server.base_url


@contextlib.asynccontextmanager
async def tcp_server(base_url: str, home: str) -> AsyncIterator[tuple[str, int, str]]:
    """``codexcore serve --tcp`` in a child process: yields its host, port and token."""
    token = secrets.token_urlsafe(32)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))}
    env.update(OPENAI_BASE_URL=base_url, CODEXCORE_TOKEN=token, CODEXCORE_HOME=home)
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "codexcore", "serve", "--tcp", "127.0.0.1:0"),
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    assert server.stderr is not None
    stderr = server.stderr
    found: re.Match[str] | None = None
    try:
        async with asyncio.timeout(30):
            while line := (await stderr.readline()).decode():
                if found := re.search(r"listening on tcp ([\d.]+):(\d+)", line):
                    break
                print(f"server: {line}", end="", file=sys.stderr)
        if not found:
            raise RuntimeError("the server exited before listening")

        async def pass_on() -> None:  # keep the server's stderr flowing
            while line := await stderr.readline():
                print(f"server: {line.decode()}", end="", file=sys.stderr)

        logger = asyncio.create_task(pass_on())
        yield found[1], int(found[2]), token
        server.terminate()  # SIGTERM: the server ends every session in order and exits 0
        code = await server.wait()
        await logger
        print(f"[server exited {code}]")
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()


async def main(args: argparse.Namespace, workspace: str, home: str) -> int:
    if args.port is not None:
        try:
            completed = await converse(args.host, args.port, args.token or "", workspace)
        except (RemoteError, OSError) as exc:  # a wrong token, no server there …
            print(f"cannot use the server at {args.host}:{args.port}: {exc}", file=sys.stderr)
            return 2
    else:
        async with model_url(args.base_url) as url, tcp_server(url, home) as (host, port, token):
            completed = await converse(host, port, token, workspace)
    return 0 if completed else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", help="a scripted Responses server (default: our own)")
    parser.add_argument("--host", default="127.0.0.1", help="with --port: the server's host")
    parser.add_argument("--port", type=int, help="a running `codexcore serve --tcp` server")
    parser.add_argument("--token", default=os.environ.get("CODEXCORE_TOKEN"), help="its token")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as workspace, tempfile.TemporaryDirectory() as home:
        Path(workspace, "notes.txt").write_text("a file for the example to find\n")
        sys.exit(asyncio.run(main(arguments, workspace, home)))
