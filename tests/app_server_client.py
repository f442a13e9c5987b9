"""A published app-server client, unchanged, driving a server: one scenario, JSON out.

Run by the interpreter of ``.ci/.venv-appserver-client`` (Python 3.12, where the
PyPI package ``codex-app-server-sdk`` is installed; ``.ci/run`` makes it), never
imported by the test suite, which runs it through ``tests/app_server_harness.py``::

    python app_server_client.py SCENARIO --cwd DIR (--stdio CMD... | --ws URL [--token T])

It prints one JSON object on stdout: what the scenario saw, for the test to judge.
Scenarios: ``start`` (a thread and a first turn), ``approve`` (a command that needs
approval, approved), ``interrupt`` (a running turn cancelled), ``resume`` (the thread
``--thread`` resumed by this, a new process).
"""

# This file runs under Python 3.12 with the SDK installed; the project's type checker
# and its Python 3.11 never import it.
# mypy: ignore-errors

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from codex_app_server_sdk import (
    CodexClient,
    CodexTurnInactiveError,
    ThreadConfig,
)

FULL_ACCESS = {"approval_policy": "never", "sandbox": "danger-full-access"}
WAIT = 30.0


def connect(args: argparse.Namespace, **options: Any) -> CodexClient:
    common = {"request_timeout": WAIT, "inactivity_timeout": WAIT, **options}
    if args.ws:
        return CodexClient.connect_websocket(url=args.ws, token=args.token, **common)
    return CodexClient.connect_stdio(command=args.stdio, cwd=args.cwd, **common)


def config(args: argparse.Namespace, **fields: Any) -> ThreadConfig:
    return ThreadConfig(cwd=args.cwd, **{**FULL_ACCESS, **fields})


async def start(args: argparse.Namespace) -> dict[str, Any]:
    async with connect(args) as client:
        init = await client.initialize()
        thread = await client.start_thread(config(args))
        result = await thread.chat_once("remember: alpha")
        return {
            "server": init.server_info,
            "thread_id": thread.thread_id,
            "turn_id": result.turn_id,
            "final_text": result.final_text,
        }


async def approve(args: argparse.Namespace) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    async def decide(request: Any) -> str:
        seen.append(
            {
                "kind": type(request).__name__,
                "command": getattr(request, "command", None),
                "cwd": getattr(request, "cwd", None),
                "thread_id": getattr(request, "thread_id", None),
            }
        )
        return "accept"

    async with connect(args) as client:
        client.set_approval_handler(decide)
        thread = await client.start_thread(config(args, approval_policy="untrusted"))
        result = await thread.chat_once("run: touch approved.txt")
        return {
            "thread_id": thread.thread_id,
            "approvals": seen,
            "final_text": result.final_text,
            "made": (Path(args.cwd) / "approved.txt").exists(),
        }


async def interrupt(args: argparse.Namespace) -> dict[str, Any]:
    """The SDK's way to stop a turn: a quiet turn raises its inactivity error with a
    continuation, and ``cancel`` interrupts it and drains it to its end."""
    pid_file = Path(args.cwd) / "sleeper.pid"
    async with connect(args) as client:
        thread = await client.start_thread(config(args))
        steps = []
        try:
            async for step in thread.chat(
                f"run: echo $$ > {pid_file}; sleep 30", inactivity_timeout=3.0
            ):
                steps.append(step.step_type)
        except CodexTurnInactiveError as exc:
            cancelled = await client.cancel(exc.continuation, timeout=WAIT)
        else:
            return {"error": "the turn ended by itself", "steps": steps}
        after = await thread.chat_once("after the interrupt")
        return {
            "thread_id": thread.thread_id,
            "was_interrupted": cancelled.was_interrupted,
            "was_completed": cancelled.was_completed,
            "command_pid": int(pid_file.read_text()) if pid_file.exists() else None,
            "after": after.final_text,
        }


async def resume(args: argparse.Namespace) -> dict[str, Any]:
    async with connect(args) as client:
        thread = await client.resume_thread(args.thread)
        before = await thread.read(include_turns=True)
        result = await thread.chat_once("what did I say?")
        return {
            "thread_id": thread.thread_id,
            "turns_before": len(_turns(before)),
            "final_text": result.final_text,
        }


def _turns(read: Any) -> list[Any]:
    thread = read.get("thread", read) if isinstance(read, dict) else {}
    turns = thread.get("turns") if isinstance(thread, dict) else None
    return turns if isinstance(turns, list) else []


SCENARIOS = {"start": start, "approve": approve, "interrupt": interrupt, "resume": resume}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--thread", help="the thread id to resume")
    parser.add_argument("--ws", help="the server's ws:// URL")
    parser.add_argument("--token", help="a bearer token for --ws")
    parser.add_argument("--stdio", nargs=argparse.REMAINDER, help="the server command")
    args = parser.parse_args()
    if not args.ws and not args.stdio:
        parser.error("give --stdio CMD... or --ws URL")
    try:
        result = asyncio.run(SCENARIOS[args.scenario](args))
    except Exception as exc:  # the test reads what went wrong from the JSON
        result = {"error": f"{type(exc).__name__}: {exc}"}
    json.dump(result, sys.stdout, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
