"""The asyncio face: ``async with Codex(...)``, ``await codex.submit``, ``async for event``.

One coroutine drives the whole conversation: it submits the user's input,
reads the event stream, answers the approval request when it comes, and
after the Task's terminal event submits ``shutdown`` and reads on to the end
of the stream (``shutdown_complete`` is its last event).

    python examples/asyncio_embedding.py                 # offline, its own scripted model
    python examples/asyncio_embedding.py --base-url URL  # a scripted server you run

``--base-url`` is meant for a scripted Responses server (``codexcore.testing``):
no API key is sent, and every command the model asks for is approved.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from scripted_model import PROMPT, demo_model

from codexcore import Codex, EngineConfig, SessionConfig
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    AgentMessage,
    AgentMessageDelta,
    ExecApproval,
    ExecApprovalRequest,
    ExecCommandEnd,
    Shutdown,
    TaskComplete,
    TextInput,
    TokenCount,
    UserInput,
)
from codexcore.testing import DEMO_MODEL, ScriptedResponsesServer, demo_catalog


async def converse(base_url: str, workspace: str) -> bool:
    """One Task from prompt to ``task_complete``; True if it completed."""
    session = SessionConfig(
        model=DEMO_MODEL, cwd=workspace, approval_policy="untrusted", base_url=base_url
    )
    # api_key="": a scripted server needs none, and a real key must not travel to it.
    # ephemeral: the example records no session in ~/.codexcore.
    # demo_catalog(): the scripted model is one the engine knows (no unknown-model warning).
    config = EngineConfig(session=session, api_key="", ephemeral=True, models=demo_catalog())
    completed = False
    async with Codex(config) as codex:
        task_id = await codex.submit(UserInput((TextInput(PROMPT),)))
        print(f"you: {PROMPT}")
        async for event in codex.events():
            msg = event.msg
            if isinstance(msg, AgentMessageDelta):
                print(msg.delta, end="", flush=True)
            elif isinstance(msg, AgentMessage):
                print()  # the deltas already showed the text; end its line
            elif isinstance(msg, ExecApprovalRequest):
                print(f"approving: {shlex.join(msg.command)}")
                await codex.submit(ExecApproval(msg.call_id, "approved"))
            elif isinstance(msg, ExecCommandEnd):
                print(f"command exited {msg.exit_code}; its output:")
                print(msg.aggregated_output, end="")
            elif isinstance(msg, TokenCount):
                print(f"[{msg.total_tokens} tokens]")
            elif msg.TYPE in TERMINAL_EVENT_TYPES and event.id == task_id:
                completed = isinstance(msg, TaskComplete)
                print(f"[{msg.TYPE}]")
                await codex.submit(Shutdown())
            elif msg.TYPE == "shutdown_complete":
                print("[shutdown_complete: the stream ends here]")
        # The loop ended with the stream; leaving the block releases the engine.
    return completed


@contextlib.asynccontextmanager
async def model_url(base_url: str | None) -> AsyncIterator[str]:
    """``base_url``, or the URL of a scripted server running in this event loop."""
    if base_url is not None:
        yield base_url
        return
    async with ScriptedResponsesServer(demo_model()) as server:
        yield server.base_url


async def main(base_url: str | None, workspace: str) -> int:
    async with model_url(base_url) as url:
        completed = await converse(url, workspace)
    return 0 if completed else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", help="a scripted Responses server (default: our own)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workspace:
        Path(workspace, "notes.txt").write_text("a file for the example to find\n")
        sys.exit(asyncio.run(main(args.base_url, workspace)))
