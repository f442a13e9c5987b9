"""Showing a Task's events to a person in a terminal."""

from __future__ import annotations

import asyncio
import itertools
import shlex
import sys
from typing import TextIO

from ..protocol import (
    AgentMessage,
    AgentMessageDelta,
    AgentReasoning,
    AgentReasoningDelta,
    ApplyPatchApprovalRequest,
    CompactionTrigger,
    ContextCompacted,
    ContextCompactionStarted,
    ErrorEvent,
    EventMsg,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    FileChange,
    PatchApplyBegin,
    PatchApplyEnd,
    PlanUpdate,
    ReviewDecision,
    StreamError,
    TaskComplete,
    TokenCount,
    TurnAborted,
    UpdateChange,
    ViewImageToolCall,
    WarningEvent,
)
from ._options import use_color
from ._render_mcp import approval_what, mcp_lines

DIM, BOLD, RED, GREEN, CYAN, RESET = (
    "\033[2m",
    "\033[1m",
    "\033[31m",
    "\033[32m",
    "\033[36m",
    "\033[0m",
)
SHELLS = frozenset({"bash", "sh", "zsh"})
FOLD_LINES = 12
PLAN_MARKS = {"completed": ("[x]", DIM), "in_progress": ("[>]", BOLD), "pending": ("[ ]", "")}
"""How each step of a plan is shown: its checkbox and its style."""
THINKING = frozenset(
    {
        "task_started",
        "turn_complete",
        "exec_command_end",
        "patch_apply_end",
        "context_compaction_started",
        "mcp_tool_call_end",
    }
)
UNSHOWN = frozenset({"session_configured", "user_message", "token_count"})
"""Events that show nothing and change nothing about whether the model is thinking:
``task_started`` is followed by the ``user_message`` the prompt became, and the
spinner must go on turning through it while the first request is out."""
COMPACTING: dict[CompactionTrigger, str] = {
    "manual": "compacting the conversation…",
    "auto": "compacting the conversation: it reached the auto-compact limit…",
    "context_window_exceeded": "compacting the conversation: it no longer fits the model's "
    "context window…",
}


ANSWERS: dict[str, ReviewDecision] = {
    "y": "approved",
    "a": "approved_for_session",
    "n": "denied",
    "b": "abort",
}


async def ask_decision(prompt: str, *, at_eof: ReviewDecision) -> ReviewDecision:
    """Ask on the terminal until the answer is y, a, n or b; ``at_eof`` when stdin ends."""
    print(prompt, end="", flush=True)
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            print(f"\n(no answer: {at_eof})")
            return at_eof
        answer = ANSWERS.get(line.strip().lower()[:1])
        if answer is not None:
            return answer
        print("  please answer y, a, n or b: ", end="", flush=True)


def display_command(argv: tuple[str, ...] | list[str]) -> str:
    """A command as a person reads it: ``bash -lc SCRIPT`` shows just the script."""
    if len(argv) == 3 and argv[0].rsplit("/", 1)[-1] in SHELLS and argv[1] in ("-c", "-lc"):
        return argv[2]
    return shlex.join(argv)


class TerminalRenderer:
    """Writes events as text for a person.

    Messages stream as they arrive; reasoning is dimmed; a command shows its
    first lines of output and then folds the rest; a patch shows a coloured
    diff; the Task ends with its token usage. ``user_message`` shows nothing:
    the prompt is the person's own input, on the screen already (a replay such
    as ``codexcore sessions history`` prints it itself). The spinner only on a
    terminal; colour too, unless ``--color`` or ``NO_COLOR`` says otherwise.
    Tracks whether the cursor sits mid-line so each block starts on a fresh one.
    """

    def __init__(self, out: TextIO = sys.stdout, *, color: bool | None = None) -> None:
        self._out = out
        self._tty = out.isatty()
        self._color = use_color(out) if color is None else color
        self._mid_line = False
        self._streamed_message = False
        self._shown_lines = 0
        self._folded_lines = 0
        self.tokens = TokenCount()
        self.thinking = False
        self._spinner: TextIO | None = None  # where a spinner frame is showing

    def show(self, msg: EventMsg) -> None:
        if msg.TYPE not in UNSHOWN:
            self.thinking = msg.TYPE in THINKING
        if isinstance(msg, AgentReasoningDelta):
            self._write(self._style(msg.delta, DIM))
        elif isinstance(msg, AgentReasoning):
            self._newline()
        elif isinstance(msg, AgentMessageDelta):
            self._streamed_message = True
            self._write(msg.delta)
        elif isinstance(msg, AgentMessage):
            if not self._streamed_message:
                self._write(msg.message)
            self._streamed_message = False
            self._newline()
        else:
            self._show_tool(msg)

    def _show_tool(self, msg: EventMsg) -> None:
        if isinstance(msg, ExecCommandBegin):
            self._shown_lines = self._folded_lines = 0
            self._line(self._style(f"$ {display_command(msg.command)}", BOLD))
        elif isinstance(msg, ExecCommandOutputDelta):
            self._output(msg.chunk.decode("utf-8", errors="replace"))
        elif isinstance(msg, ExecCommandEnd):
            self._end_command(msg)
        elif isinstance(msg, PatchApplyBegin):
            self._changes(msg.changes)
        elif isinstance(msg, PatchApplyEnd):
            text = msg.stdout if msg.success else f"patch failed: {msg.stderr}"
            self._line(self._style(text, DIM if msg.success else RED))
        elif isinstance(msg, PlanUpdate):
            self._plan(msg)
        elif isinstance(msg, ViewImageToolCall):
            self._line(self._style(f"viewed image {msg.path}", DIM))
        elif (lines := mcp_lines(msg)) is not None:
            styles = {"bold": BOLD, "dim": DIM, "red": RED, "green": GREEN}
            for text, style in lines:
                self._line(self._style(text, styles[style]) if style else text)
        else:
            self._show_status(msg)

    def _plan(self, msg: PlanUpdate) -> None:
        """The plan as a checklist: done steps ticked and dimmed, the current one bold."""
        done = sum(item.status == "completed" for item in msg.plan)
        self._line(self._style(f"Plan ({done}/{len(msg.plan)} done)", BOLD))
        if msg.explanation:
            self._line(self._style(f"  {msg.explanation}", DIM))
        for item in msg.plan:
            mark, style = PLAN_MARKS[item.status]
            self._line(self._style(f"  {mark} {item.step}", style))

    def _output(self, text: str) -> None:
        """Command output, indented; past FOLD_LINES lines only counted."""
        for piece in text.splitlines(keepends=True):
            if self._shown_lines < FOLD_LINES:
                self._write(("  " if not self._mid_line else "") + piece)
                if piece.endswith("\n"):
                    self._shown_lines += 1
            elif piece.endswith("\n"):
                self._folded_lines += 1

    def _end_command(self, msg: ExecCommandEnd) -> None:
        if self._folded_lines:
            self._line(self._style(f"  … {self._folded_lines} more lines", DIM))
        colour = GREEN if msg.exit_code == 0 else RED
        status = "timed out" if msg.status == "timed_out" else f"exit {msg.exit_code}"
        self._line(self._style(f"{status} in {msg.duration_ms} ms", colour))

    def _changes(self, changes: dict[str, FileChange]) -> None:
        for path, change in changes.items():
            self._line(self._style(f"{change.TYPE} {path}", BOLD))
            if isinstance(change, UpdateChange):
                self._diff(change.unified_diff)
            else:
                prefix = "+" if change.TYPE == "add" else "-"
                body = "".join(f"{prefix}{line}\n" for line in change.content.splitlines())
                self._diff(body)

    def _diff(self, diff: str) -> None:
        for line in diff.splitlines():
            if line.startswith(("+++", "---")):
                self._line(self._style(line, BOLD))
            elif line.startswith("+"):
                self._line(self._style(line, GREEN))
            elif line.startswith("-"):
                self._line(self._style(line, RED))
            elif line.startswith("@@"):
                self._line(self._style(line, CYAN))
            else:
                self._line(line)

    def _show_status(self, msg: EventMsg) -> None:
        if isinstance(msg, TokenCount):
            t = self.tokens
            self.tokens = TokenCount(
                t.input_tokens + msg.input_tokens,
                t.cached_input_tokens + msg.cached_input_tokens,
                t.output_tokens + msg.output_tokens,
                t.reasoning_output_tokens + msg.reasoning_output_tokens,
                t.total_tokens + msg.total_tokens,
            )
        elif isinstance(msg, StreamError):
            text = f"retrying ({msg.attempt}/{msg.max_attempts}): {msg.message}"
            self._line(self._style(text, DIM))
        elif isinstance(msg, ContextCompactionStarted):
            self._line(self._style(COMPACTING[msg.trigger], DIM))
        elif isinstance(msg, ContextCompacted):
            self._line(
                self._style("conversation compacted: the model goes on from a summary", GREEN)
            )
        elif isinstance(msg, WarningEvent):
            self._line(self._style(f"warning: {msg.message}", RED))
        elif isinstance(msg, ErrorEvent):
            self._line(self._style(f"error ({msg.code}): {msg.message}", RED))
        elif isinstance(msg, TurnAborted):
            self._line(self._style(f"aborted: {msg.reason}", RED))
        elif isinstance(msg, TaskComplete):
            self._line(self._style(f"done · {self.usage()}", DIM))

    def usage(self) -> str:
        t = self.tokens
        return (
            f"tokens: {t.total_tokens} total ({t.input_tokens} in, "
            f"{t.cached_input_tokens} cached, {t.output_tokens} out, "
            f"{t.reasoning_output_tokens} reasoning)"
        )

    def approval_prompt(self, request: ExecApprovalRequest | ApplyPatchApprovalRequest) -> str:
        self._newline()
        why = f" ({request.reason})" if request.reason else ""
        if isinstance(request, ExecApprovalRequest) and (call := approval_what(request.command)):
            what = self._style(call, BOLD)
        elif isinstance(request, ExecApprovalRequest):
            what = f"Run {self._style(display_command(request.command), BOLD)} in {request.cwd}"
        else:
            what = f"Apply this patch to {len(request.changes)} file(s)"
        return f"{what}{why}?\n  [y]es / [a]lways this session / [n]o / a[b]ort: "

    async def spin(self, err: TextIO = sys.stderr) -> None:
        """Show a spinner on ``err`` while the model is thinking (terminals only)."""
        if not (self._tty and err.isatty()):
            return
        frames = itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
        try:
            while True:
                if self.thinking and not self._mid_line:
                    err.write(f"\r{next(frames)} thinking")
                    err.flush()
                    self._spinner = err
                else:
                    self._clear_spinner()
                await asyncio.sleep(0.1)
        finally:
            self._clear_spinner()

    def _clear_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.write("\r\033[K")
            self._spinner.flush()
            self._spinner = None

    def _style(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self._color else text

    def _write(self, text: str) -> None:
        if text:
            self._clear_spinner()
            self._out.write(text)
            self._out.flush()
            self._mid_line = not text.endswith("\n")

    def _newline(self) -> None:
        if self._mid_line:
            self._write("\n")

    def _line(self, text: str) -> None:
        self._newline()
        self._write(text + "\n")
