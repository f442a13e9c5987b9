"""Compaction: a 200-Turn Task that crosses the auto-compact limit twice, against a
20-Turn Task, by peak memory.

Each Turn of the scripted Task (``codexcore.testing``'s model, in process, ``client``
history mode so every request resends the whole conversation) is one call of a tool
with 12 KiB of arguments, about 3 000 tokens, as a model writing code makes; the
engine answers it and the Task goes on. The model reports as usage the size of what
it was sent, so the context fills as it would for real. The auto-compact limit is
set to about a third of the 200-Turn conversation, so that Task compacts twice (the
table says how many times it did). Each Task runs in a fresh child process:

- **peak RSS** is the child's high-water mark (``VmHWM``) as it exits: interpreter,
  engine, and the Task;
- **traced peak** is the peak of ``tracemalloc`` over the Task alone (another child
  run): the Python memory the Task itself held at its fullest.

The bare comparison is the same 200-Turn Task with compaction off (a limit never
reached): what the conversation alone would cost.

Run ``.venv/bin/python bench/bench_compaction.py`` (``--quick``: 60 and 6 Turns).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
from _common import Table, fmt_bytes, fmt_ratio, header, parse_args, verdict

from codexcore import Codex, EngineConfig, SessionConfig
from codexcore.engine._compact import SUMMARIZATION_PROMPT
from codexcore.model import Usage
from codexcore.protocol import (
    ContextCompacted,
    SandboxPolicy,
    TaskComplete,
    TextInput,
    UserInput,
)
from codexcore.protocol import ErrorEvent as Error
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    function_call_response,
    text_response,
)

PAYLOAD = "x" * (12 * 1024)
TOKENS_PER_TURN = 3_200  # what one Turn adds to the context, about: 12 KiB of arguments
NEVER = 10**12  # a limit no Task reaches: compaction off


class TaskModel:
    """The scripted model of one Task: ``turns`` tool calls, then an answer; a summary
    whenever the engine asks for one."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.done = 0
        self.scripted = ScriptedModel([self.respond] * (2 * turns + 10))

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        # The scripted model keeps every request for tests' assertions; here that would
        # be the model's memory, growing with the square of the conversation, not ours.
        self.scripted.requests.clear()
        sent = body["input"]
        usage = _usage(len(orjson.dumps(sent)) // 4)
        last = sent[-1]
        if last.get("role") == "user" and last["content"][0]["text"] == SUMMARIZATION_PROMPT:
            return text_response(f"Made {self.done} notes so far; keep going.", usage=usage)
        if self.done < self.turns:
            self.done += 1
            return function_call_response("note", {"text": PAYLOAD}, usage=usage)
        return text_response("All notes made.", usage=usage)


def _usage(tokens: int) -> Usage:
    return Usage(
        input_tokens=tokens, cached_input_tokens=0, output_tokens=100, total_tokens=tokens + 100
    )


async def run_task(turns: int, limit: int, trace: bool) -> dict[str, Any]:
    model = TaskModel(turns)
    with tempfile.TemporaryDirectory() as cwd:
        config = EngineConfig(
            session=SessionConfig(
                cwd=cwd,
                history_mode="client",
                approval_policy="never",
                sandbox_policy=SandboxPolicy("danger-full-access"),
            ),
            ephemeral=True,
            model_auto_compact_token_limit=limit,
        )
        async with Codex(config, transport=model.scripted.mock_transport()) as codex:
            if trace:
                tracemalloc.start()
            clock = time.perf_counter()
            await codex.submit(UserInput((TextInput("make the notes"),)))
            compactions, ending = 0, None
            async for event in codex.events():
                if isinstance(event.msg, ContextCompacted):
                    compactions += 1
                if isinstance(event.msg, TaskComplete | Error):
                    ending = event.msg.TYPE
                    break
            seconds = time.perf_counter() - clock
            peak = tracemalloc.get_traced_memory()[1] if trace else 0
            tracemalloc.stop()
    return {
        "turns": model.done,
        "compactions": compactions,
        "ending": ending,
        "seconds": seconds,
        "traced_peak": peak,
    }


def vm_hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def child(argv: list[str]) -> None:
    turns, limit, trace = int(argv[0]), int(argv[1]), argv[2] == "trace"
    result = asyncio.run(run_task(turns, limit, trace))
    result["peak_rss"] = vm_hwm()
    print(json.dumps(result))


def measure(turns: int, limit: int) -> dict[str, Any]:
    """The Task in two fresh children: one for the RSS high-water mark, one traced."""

    def run(mode: str) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(turns), str(limit), mode],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))

    plain, traced = run("plain"), run("trace")
    return {**plain, "traced_peak": traced["traced_peak"]}


def main() -> None:
    args = parse_args("compaction: a long Task's peak memory")
    long_turns, short_turns = (60, 6) if args.quick else (200, 20)
    # Compacts when the context holds about a third of the long Task: twice in it.
    limit = TOKENS_PER_TURN * (long_turns // 3 + 1)
    header("bench_compaction", args.quick, f"auto-compact limit {limit} tokens")
    rows = [
        (f"{short_turns} Turns", measure(short_turns, limit)),
        (f"{long_turns} Turns, compacting", measure(long_turns, limit)),
        (f"{long_turns} Turns, compaction off (bare)", measure(long_turns, NEVER)),
    ]
    table = Table(
        "A long Task that compacts, against a short one",
        ["Task", "Turns run", "compactions", "ended", "time", "peak RSS", "traced peak"],
    )
    for name, r in rows:
        table.add(
            name,
            r["turns"],
            r["compactions"],
            r["ending"],
            f"{r['seconds']:.2f} s",
            fmt_bytes(r["peak_rss"]),
            fmt_bytes(r["traced_peak"]),
        )
    short, long_, bare = (r for _, r in rows)
    rss_ratio = long_["peak_rss"] / short["peak_rss"]
    goal = long_["compactions"] == 2 and long_["ending"] == "task_complete" and rss_ratio <= 1.5
    table.note(
        f"goal: the {long_turns}-Turn Task finishes, compacting twice, within 1.5x the peak "
        f"RSS of the {short_turns}-Turn one: {fmt_ratio(rss_ratio)}, {verdict(goal)}"
    )
    table.note(
        f"traced peak, compacting vs {short_turns} Turns: "
        f"{fmt_ratio(long_['traced_peak'] / short['traced_peak'])}; "
        f"compaction off vs compacting: {fmt_ratio(bare['traced_peak'] / long_['traced_peak'])}"
    )
    table.print()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        main()
