"""An IDE plugin's embedding: the engine on a background thread, the UI on its own.

``CodexThread`` runs the engine's event loop on a thread of its own, so the
plugin never touches asyncio. Events reach ``on_event`` on a delivery thread;
like a real plugin, this one does no UI work there but posts each event to
the UI thread (here the main thread and a ``queue.Queue``; in an IDE,
``invokeLater`` or the toolkit's equivalent). The UI thread shows the
streaming text and the command's output, and answers approval requests with
what the (simulated) user clicks.

The plugin also gives the agent one of its own abilities, a function tool:
``editor_selection``, the open editor's path and selection. Editor state
belongs to the UI thread, so the tool runs there: its ``CallbackExecutor``
posts each call to the same queue as the events (see ``docs/tools.md``).

    python examples/ide_plugin.py                      # offline, its own scripted model
    python examples/ide_plugin.py --decision denied    # the user says no
    python examples/ide_plugin.py --base-url URL       # a scripted server you run

``--base-url`` is meant for a scripted Responses server (``codexcore.testing``):
no API key is sent, and the simulated user approves what the model asks.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from scripted_model import COMMAND, PROMPT, final_answer

from codexcore import CallbackExecutor, EngineConfig, FunctionTool, SessionConfig
from codexcore.adapters.threads import CodexThread
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    AgentMessage,
    AgentMessageDelta,
    AgentReasoning,
    AgentReasoningDelta,
    ErrorEvent,
    Event,
    ExecApproval,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    McpToolCallBegin,
    McpToolCallEnd,
    ReviewDecision,
    SessionConfigured,
    TaskComplete,
    TextInput,
    TurnAborted,
    UserInput,
    WarningEvent,
)
from codexcore.testing import (
    DEMO_MODEL,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    demo_catalog,
    function_call_response,
    shell_call,
)

UI_TIMEOUT = 60.0  # seconds the UI waits for the next event before giving up


def plugin_model() -> ScriptedModel:
    """The example's own script: look at the editor, then the command, then the answer."""

    def command(body: dict[str, Any]) -> ScriptedResponse:
        outputs = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
        seen = outputs[-1] if outputs else "nothing"
        text = f"Your editor shows {seen}. I'll write the file, then list."
        return shell_call(COMMAND, call_id="call_greeting", text=text)

    return ScriptedModel(
        [
            function_call_response("editor_selection", {}, call_id="call_selection"),
            command,
            final_answer,
        ]
    )


class PluginUI:
    """Everything the user sees. Only :meth:`post` runs on the engine's delivery thread."""

    def __init__(self, decision: ReviewDecision) -> None:
        # Events, and the calls of the plugin's tools (callables), for the UI thread.
        self.inbox: queue.Queue[Event | Callable[[], None]] = queue.Queue()
        self.decision = decision
        self.completed = False
        self._ui_thread = threading.get_ident()
        self._open_line = ""  # the stream being printed ("codex", "thinking"), if any

    def post(self, event: Event) -> None:
        """The ``on_event`` callback: hand the event to the UI thread, do nothing else."""
        self.inbox.put(event)

    def tools(self) -> list[FunctionTool]:
        """The plugin's abilities the agent may use, each run on the UI thread."""
        on_ui_thread = CallbackExecutor(self.inbox.put)
        return [FunctionTool.of(self.editor_selection, executor=on_ui_thread)]

    def editor_selection(self) -> dict[str, Any]:
        """The file open in the editor, and the selected lines and text."""
        where = "the UI thread" if threading.get_ident() == self._ui_thread else "another thread"
        self.say(f"[plugin] editor_selection runs on {where}")
        return {"path": "notes.txt", "lines": [1, 1], "text": "a file for the example to find"}

    def run(self, codex: CodexThread) -> None:
        """The UI thread's loop: send the prompt, show events until the Task ends."""
        codex.submit(UserInput((TextInput(PROMPT),)))
        self.say(f"you: {PROMPT}")
        while True:
            try:
                event = self.inbox.get(timeout=UI_TIMEOUT)
            except queue.Empty:
                raise SystemExit(f"no event within {UI_TIMEOUT} s") from None
            if callable(event):
                event()  # a call of one of the plugin's tools: run it here
                continue
            self.show(codex, event.msg)
            if event.msg.TYPE in TERMINAL_EVENT_TYPES:
                return  # every task_started gets exactly one of these

    def show(self, codex: CodexThread, msg: object) -> None:
        match msg:
            case SessionConfigured():
                self.say(
                    f"[session {msg.session_id[:8]}: model {msg.model}, "
                    f"approval {msg.approval_policy}, sandbox {msg.sandbox}]"
                )
            case AgentReasoningDelta(delta=delta):
                self.stream("codex (thinking)", delta)
            case AgentMessageDelta(delta=delta):
                self.stream("codex", delta)
            case AgentMessage() | AgentReasoning():
                self.end_stream()  # the whole text: already shown delta by delta
            case ExecApprovalRequest():
                decision = self.ask_user(msg)
                codex.submit(ExecApproval(msg.call_id, decision))
            case ExecCommandBegin(command=command):
                self.say(f"$ {shlex.join(command)}")
            case ExecCommandOutputDelta(chunk=chunk):
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
            case McpToolCallBegin(invocation=called):
                self.say(f"[tool] {called.server}.{called.tool}({called.arguments or {}})")
            case McpToolCallEnd(result=result):
                self.say(f"[tool] answered: {'Ok' in result}")
            case ExecCommandEnd(exit_code=code, duration_ms=ms):
                self.say(f"[exit {code} after {ms} ms]")
            case WarningEvent(message=message):
                self.say(f"[warning] {message}")
            case TaskComplete():
                self.completed = True
                self.say("[task complete]")
            case TurnAborted(reason=reason):
                self.say(f"[task aborted: {reason}]")
            case ErrorEvent(code=code, message=message):
                self.say(f"[error {code}] {message}")
            case _:
                pass  # token counts, turn boundaries, acks: nothing to show

    def ask_user(self, request: ExecApprovalRequest) -> ReviewDecision:
        """A modal dialog in a real plugin; here the simulated user clicks ``self.decision``."""
        self.say(f"[approval] codex wants to run: {shlex.join(request.command)}")
        reason = f" ({request.reason})" if request.reason else ""
        self.say(f"[approval] in {request.cwd}{reason}")
        self.say(f"[approval] the user clicks: {self.decision}")
        return self.decision

    def stream(self, who: str, delta: str) -> None:
        if self._open_line != who:
            self.end_stream()
            sys.stdout.write(f"{who}: ")
            self._open_line = who
        sys.stdout.write(delta)
        sys.stdout.flush()

    def end_stream(self) -> None:
        if self._open_line:
            sys.stdout.write("\n")
            self._open_line = ""

    def say(self, line: str) -> None:
        self.end_stream()
        print(line, flush=True)


@contextlib.contextmanager
def model_url(base_url: str | None) -> Iterator[str]:
    """``base_url``, or the URL of a scripted server of our own for as long as we need it."""
    if base_url is not None:
        yield base_url
        return
    with ScriptedResponsesServer(plugin_model()) as server:  # in a thread of its own
        yield server.base_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", help="a scripted Responses server (default: our own)")
    parser.add_argument(
        "--decision",
        choices=("approved", "approved_for_session", "denied", "abort"),
        default="approved",
        help="what the simulated user clicks when asked (default: approved)",
    )
    args = parser.parse_args()
    with model_url(args.base_url) as url, tempfile.TemporaryDirectory() as workspace:
        ui = PluginUI(args.decision)
        Path(workspace, "notes.txt").write_text("a file for the example to find\n")
        session = SessionConfig(
            model=DEMO_MODEL, cwd=workspace, approval_policy="untrusted", base_url=url
        )
        # api_key="": a scripted server needs none, and a real key must not travel to it.
        # ephemeral: the example records no session in ~/.codexcore.
        # demo_catalog(): the scripted model is one the engine knows (no unknown-model warning).
        config = EngineConfig(session=session, api_key="", ephemeral=True, models=demo_catalog())
        with CodexThread(config, on_event=ui.post, tools=ui.tools()) as codex:
            ui.run(codex)
        # Leaving the block closed the engine (as a plugin does when it is
        # deactivated): no thread, task or child process is left behind.
        ui.say("[engine closed]")
    return 0 if ui.completed else 1


if __name__ == "__main__":
    sys.exit(main())
