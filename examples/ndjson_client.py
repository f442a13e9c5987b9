"""A client of the native NDJSON protocol in plain Python: no codexcore import.

It is written for authors of UIs in other languages: everything it does is
spawning a process and reading and writing lines of JSON. It starts
``python -m codexcore serve --stdio`` (``codexcore serve --stdio`` once
installed), then:

1. sends ``configure_session`` (approval policy ``untrusted``, so the engine
   asks before running a command that is not known to be read-only);
2. sends a ``user_input``;
3. prints the events as they come, answering the ``exec_approval_request``
   with an ``exec_approval``;
4. after ``task_complete``, sends ``shutdown`` and reads to
   ``shutdown_complete``, the last line; the server then exits 0.

On stdio, each line in is a Submission ``{"id", "op"}`` and each line out is
an Event ``{"id", "seq", "msg"}``. A line with a top-level ``type`` and no
``seq`` is a connection message, not an Event. No handshake is needed on
stdio. The whole wire, sockets included, is described in ``docs/adapters.md``;
every message type, with its fields, in the protocol reference of the docs.

    python examples/ndjson_client.py                  # offline: starts a scripted model
    python examples/ndjson_client.py --base-url URL   # a scripted server you run

Without ``--base-url`` it starts ``examples/scripted_model.py``, a scripted
Responses server in a process of its own, and reads its URL from that
process's first line. The server gets no API key, and this client approves
what the model asks: point ``--base-url`` only at a scripted server.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

PROMPT = "Leave a greeting in this folder and show me what is there."


def send(server: subprocess.Popen[bytes], sub_id: str, op: dict[str, Any]) -> None:
    """Write one Submission as one line of JSON."""
    assert server.stdin is not None
    server.stdin.write(json.dumps({"id": sub_id, "op": op}).encode() + b"\n")
    server.stdin.flush()


def lines(stream: IO[bytes]) -> Iterator[dict[str, Any]]:
    """Each line the server writes, decoded; ends when the server closes its stdout."""
    for line in stream:
        if line.strip():
            yield json.loads(line)


def converse(server: subprocess.Popen[bytes]) -> bool:
    """Drive one Task; True when it ended with ``task_complete``."""
    assert server.stdout is not None
    send(server, "config", {"type": "configure_session", "approval_policy": "untrusted"})
    send(server, "task-1", {"type": "user_input", "items": [{"type": "text", "text": PROMPT}]})
    print(f"you: {PROMPT}")
    completed = False
    for message in lines(server.stdout):
        if "seq" not in message:  # a connection message, not an Event
            print(f"[{message['type']}] {message.get('message', '')}")
            continue
        msg = message["msg"]
        kind = msg["type"]
        if kind == "session_configured":
            print(f"[session {msg['session_id'][:8]}: sandbox {msg['sandbox']}, cwd {msg['cwd']}]")
        elif kind == "agent_message_delta":
            print(msg["delta"], end="", flush=True)
        elif kind == "agent_message":
            print()
        elif kind == "exec_approval_request":
            print(f"approve? {msg['command']} -> yes")
            send(
                server,
                "approval-1",
                {"type": "exec_approval", "id": msg["call_id"], "decision": "approved"},
            )
        elif kind == "exec_command_output_delta":  # chunks are base64: commands print bytes
            sys.stdout.write(base64.b64decode(msg["chunk"]).decode("utf-8", errors="replace"))
        elif kind == "exec_command_end":
            print(f"[exit {msg['exit_code']}]")
        elif kind in ("task_complete", "turn_aborted", "error") and message["id"] == "task-1":
            completed = kind == "task_complete"
            print(f"[{kind}]")
            send(server, "bye", {"type": "shutdown"})
        elif kind == "error":  # an error under another id: that submission was rejected
            print(f"[error {msg['code']}] {msg['message']}")
        elif kind == "shutdown_complete":
            print("[shutdown_complete]")
        # Everything else (task_started, token_count, submission_ack, ...) is not shown.
        # A UI ignores the event types it does not know.
    return completed


@contextlib.contextmanager
def scripted_model(base_url: str | None) -> Iterator[str]:
    """``base_url``, or that of a scripted model we start in a helper process."""
    if base_url is not None:
        yield base_url
        return
    helper = Path(__file__).with_name("scripted_model.py")
    with subprocess.Popen(
        [sys.executable, str(helper)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as model:
        assert model.stdout is not None
        assert model.stdin is not None
        try:
            yield model.stdout.readline().strip()
        finally:
            model.stdin.close()  # the helper stops when its stdin closes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", help="a scripted Responses server (default: start one)")
    args = parser.parse_args()
    with (
        scripted_model(args.base_url) as url,
        tempfile.TemporaryDirectory() as workspace,
        tempfile.TemporaryDirectory() as home,
    ):
        Path(workspace, "notes.txt").write_text("a file for the example to find\n")
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # no key to send
        env["OPENAI_BASE_URL"] = url
        env["CODEXCORE_HOME"] = home  # the session is recorded here, and deleted with it
        with subprocess.Popen(
            [sys.executable, "-m", "codexcore", "serve", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=workspace,
            env=env,
        ) as server:
            completed = converse(server)
            assert server.stdin is not None
            server.stdin.close()
            code = server.wait(timeout=30)
    print(f"[server exited {code}]")
    return 0 if completed and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
