"""``codexcore demo``: one real Task, offline, against an embedded scripted model.

A scripted Responses server listens on 127.0.0.1; the engine reaches it
through the real HTTP client and SSE decoder, asks to run a real command,
waits for the user's approval, runs it, and the model's final message quotes
what the command printed. No key and no network are needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from . import SUMMARIES, plain

DEMO_COMMAND = ["bash", "-lc", "echo 'hello from a real subprocess' && uname -sm && ls"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help=SUMMARIES["demo"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  codexcore demo          # answer the approval prompt\n"
        "  codexcore demo --yes    # approve without asking",
    )
    parser.add_argument("--yes", action="store_true", help="approve the command without asking")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import tempfile  # every command builds this parser: keep its imports light

    with tempfile.TemporaryDirectory(prefix="codexcore-demo-") as workspace:
        Path(workspace, "notes.txt").write_text("a file for the demo to find\n")
        return asyncio.run(_demo(workspace, auto_approve=args.yes))


def _final_answer(body: dict[str, Any]) -> Any:
    from ..testing import text_response

    outputs = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    try:
        result = json.loads(outputs[-1]) if outputs else {}
    except json.JSONDecodeError:  # a denial comes back as plain text
        result = {}
    if result.get("metadata", {}).get("exit_code") != 0:
        return text_response("Understood: I ran nothing. Approve the command to see it run.")
    return text_response(
        "The command ran in your workspace and printed:\n\n"
        f"{result['output'].rstrip()}\n\n"
        "That was a real process, started only after you approved it.",
        chunks=12,
        reasoning="The command succeeded; summarise what it printed.",
    )


async def _demo(workspace: str, *, auto_approve: bool) -> int:
    from .. import Codex, EngineConfig, SessionConfig
    from ..protocol import (
        ExecApproval,
        ExecApprovalRequest,
        Shutdown,
        TaskComplete,
        TextInput,
        UserInput,
    )
    from ..testing import (
        DEMO_MODEL,
        ScriptedModel,
        ScriptedResponsesServer,
        demo_catalog,
        shell_call,
    )
    from . import imports_done
    from ._render import TerminalRenderer

    imports_done()

    model = ScriptedModel(
        [
            shell_call(DEMO_COMMAND, call_id="call_demo", text="Let me look around first."),
            _final_answer,
        ]
    )
    renderer = TerminalRenderer()
    completed = False
    async with ScriptedResponsesServer(model) as server:
        session = SessionConfig(
            model=DEMO_MODEL, cwd=workspace, approval_policy="untrusted", base_url=server.base_url
        )
        # api_key="": the scripted server needs none, and a real key must not travel to it.
        # Ephemeral: a demo in a throwaway workspace is not a session worth keeping.
        # The scripted model is described in the catalogue: no unknown-model warning.
        config = EngineConfig(session=session, api_key="", ephemeral=True, models=demo_catalog())
        async with Codex(config) as codex:
            await codex.submit(UserInput((TextInput("Show me what this machine is."),)))
            async for event in codex.events():
                renderer.show(event.msg)
                if isinstance(event.msg, ExecApprovalRequest):
                    decision = await _ask(renderer.approval_prompt(event.msg), auto_approve)
                    await codex.submit(ExecApproval(event.msg.call_id, decision))
                elif event.msg.TYPE in ("task_complete", "turn_aborted", "error"):
                    completed = isinstance(event.msg, TaskComplete)
                    await codex.submit(Shutdown())
    return 0 if completed else 1


async def _ask(prompt: str, auto_approve: bool) -> Any:
    from ._render import ask_decision

    if auto_approve:
        print(prompt + "y (--yes)")
        return "approved"
    return await ask_decision(prompt, at_eof="denied")  # no one to ask: the safe answer
