"""The model both sides of ``bench_vs_codex.py`` talk to: a stateless scripted model on a
local Responses server that adds up the time it spends answering (the model's share)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

PROMPT = "Run `echo hello` in the shell, then tell me what it printed."
COMMAND_MARK = "run `echo hello`"
"""What, in a user message, asks the scripted model for the command (case aside)."""
FINAL = "It printed hello."


# --- the scripted model -----------------------------------------------------------------


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class BenchModel(ScriptedModel):
    """A stateless scripted model that both clients can talk to, run after run.

    It answers by what the request holds, so it needs no script: after a tool
    output, the final message; after a user message asking for the command,
    a call of whatever shell tool the client offers (Codex offers
    ``exec_command`` with a ``cmd`` string, codexcore ``shell`` with an argv);
    after any other user message, a short answer. It counts tool outputs that
    carry the command's output, to check the command really ran.
    """

    def __init__(self) -> None:
        super().__init__()
        self.outputs_seen = 0
        self.unexpected: collections.Counter[str] = collections.Counter()

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        reply = self._decide(body)
        with self._lock:
            del self.requests[:-2]  # keep the last requests only, for a look when in doubt
            self.requests.append(body)
        return reply

    def _decide(self, body: dict[str, Any]) -> ScriptedResponse:
        items = [item for item in body.get("input") or [] if isinstance(item, dict)]
        for item in reversed(items):
            if item.get("type") == "function_call_output":
                if "hello" in json.dumps(item.get("output")):
                    with self._lock:
                        self.outputs_seen += 1
                return text_response(FINAL)
            if item.get("role") == "user":
                if COMMAND_MARK in _text_of(item).lower():
                    return self._command(body)
                return text_response("Noted.")
        with self._lock:
            self.unexpected["no user message"] += 1
        return text_response("No user message?")

    def _command(self, body: dict[str, Any]) -> ScriptedResponse:
        tools = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
        if "exec_command" in tools:  # Codex's unified exec tool
            return function_call_response("exec_command", {"cmd": "echo hello"})
        if "shell" in tools:  # codexcore's (and older Codex's) shell tool
            return shell_call(["echo", "hello"])
        with self._lock:
            self.unexpected[f"no shell tool among {sorted(map(str, tools))}"] += 1
        return text_response("I have no shell tool.")


class TimedServer(ScriptedResponsesServer):
    """The scripted server, adding up the time it spends answering: the model's share.

    An answer's time runs from the request fully read to the last byte of the
    response written; ``spans`` keeps the last answers' (start, end). ``paths``
    counts every request by method and path, to show that a client asked for
    nothing but ``/responses``.
    """

    def __init__(self, model: ScriptedModel) -> None:
        super().__init__(model)
        self._began: dict[asyncio.Task[Any], float] = {}
        self._stats_lock = threading.Lock()
        self.busy = 0.0
        self.answered = 0
        self.in_flight = 0
        self.spans: collections.deque[tuple[float, float]] = collections.deque(maxlen=64)
        self.paths: collections.Counter[str] = collections.Counter()

    async def _reply(self, request: Any) -> ScriptedResponse:
        task = asyncio.current_task()
        if task is not None:
            self._began[task] = time.perf_counter()
        with self._stats_lock:
            self.paths[f"{request.method} {request.path}"] += 1
            self.answered += 1
            self.in_flight += 1
        return await super()._reply(request)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            return await super()._exchange(reader, writer)
        finally:
            task = asyncio.current_task()
            began = self._began.pop(task, None) if task is not None else None
            if began is not None:
                ended = time.perf_counter()
                with self._stats_lock:
                    self.busy += ended - began
                    self.in_flight -= 1
                    self.spans.append((began, ended))

    def spans_since(self, moment: float) -> list[tuple[float, float]]:
        """The (start, end) of the answers started since ``moment`` (call after ``snapshot``)."""
        with self._stats_lock:
            return [span for span in self.spans if span[0] >= moment]

    def snapshot(self) -> tuple[float, int]:
        """(seconds spent answering, requests answered or being answered) so far.

        First waits (a second at most) for answers under way to end: a client
        may have read the last byte before the server thread counts it.
        """
        deadline = time.perf_counter() + 1.0
        while True:
            with self._stats_lock:
                if self.in_flight == 0 or time.perf_counter() > deadline:
                    return self.busy, self.answered
            time.sleep(0.0002)


@contextlib.contextmanager
def scripted_server(model: BenchModel | None = None) -> Iterator[tuple[TimedServer, BenchModel]]:
    """``model`` (default :class:`BenchModel`) on a timed local Responses server, in a
    thread of this process."""
    model = model or BenchModel()
    server = TimedServer(model)
    server.start_in_thread()
    try:
        yield server, model
    finally:
        server.stop()
