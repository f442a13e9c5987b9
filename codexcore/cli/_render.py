"""Showing a Task's events to a person in a terminal."""

from __future__ import annotations

import shlex
import sys
from typing import TextIO

from ..protocol import (
    AgentMessage,
    AgentMessageDelta,
    AgentReasoning,
    AgentReasoningDelta,
    ErrorEvent,
    EventMsg,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    StreamError,
    TaskComplete,
    TokenCount,
    TurnAborted,
    WarningEvent,
)

DIM, BOLD, RED, GREEN, RESET = "\033[2m", "\033[1m", "\033[31m", "\033[32m", "\033[0m"


SHELLS = frozenset({"bash", "sh", "zsh"})


def display_command(argv: tuple[str, ...] | list[str]) -> str:
    """A command as a person reads it: ``bash -lc SCRIPT`` shows just the script."""
    if len(argv) == 3 and argv[0].rsplit("/", 1)[-1] in SHELLS and argv[1] in ("-c", "-lc"):
        return argv[2]
    return shlex.join(argv)


class TerminalRenderer:
    """Writes events as text: messages stream, reasoning is dimmed, commands show output.

    Colour only when the stream is a terminal. Keeps track of whether the
    cursor sits mid-line so that blocks start on a fresh line.
    """

    def __init__(self, out: TextIO = sys.stdout, *, color: bool | None = None) -> None:
        self._out = out
        self._color = out.isatty() if color is None else color
        self._mid_line = False
        self._streamed_message = False
        self.tokens = 0

    def show(self, msg: EventMsg) -> None:
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
        elif isinstance(msg, ExecCommandBegin):
            self._line(self._style(f"$ {display_command(msg.command)}", BOLD))
        elif isinstance(msg, ExecCommandOutputDelta):
            self._write(msg.chunk.decode("utf-8", errors="replace"))
        elif isinstance(msg, ExecCommandEnd):
            colour = GREEN if msg.exit_code == 0 else RED
            self._line(self._style(f"exit {msg.exit_code} in {msg.duration_ms} ms", colour))
        else:
            self._show_status(msg)

    def _show_status(self, msg: EventMsg) -> None:
        if isinstance(msg, TokenCount):
            self.tokens += msg.total_tokens
        elif isinstance(msg, StreamError):
            self._line(
                self._style(f"retrying ({msg.attempt}/{msg.max_attempts}): {msg.message}", DIM)
            )
        elif isinstance(msg, WarningEvent):
            self._line(self._style(f"warning: {msg.message}", RED))
        elif isinstance(msg, ErrorEvent):
            self._line(self._style(f"error ({msg.code}): {msg.message}", RED))
        elif isinstance(msg, TurnAborted):
            self._line(self._style(f"aborted: {msg.reason}", RED))
        elif isinstance(msg, TaskComplete):
            self._line(self._style(f"task complete ({self.tokens} tokens)", DIM))

    def approval_prompt(self, request: ExecApprovalRequest) -> str:
        self._newline()
        why = f" ({request.reason})" if request.reason else ""
        return (
            f"Run {self._style(display_command(request.command), BOLD)} in {request.cwd}{why}?\n"
            "  [y]es / [a]lways this session / [n]o / a[b]ort: "
        )

    def _style(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self._color else text

    def _write(self, text: str) -> None:
        if text:
            self._out.write(text)
            self._out.flush()
            self._mid_line = not text.endswith("\n")

    def _newline(self) -> None:
        if self._mid_line:
            self._write("\n")

    def _line(self, text: str) -> None:
        self._newline()
        self._write(text + "\n")
