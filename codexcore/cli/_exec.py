"""``codexcore exec``: run one Task in the terminal.

Human output by default: streamed message text, dimmed reasoning, each command
with its exit code and folded output, each patch as a coloured diff, a spinner
while the model thinks, token usage at the end. ``--json`` and ``--events-json``
print JSON lines instead (below). Approvals are asked at the terminal; with no terminal
a request that needs a person ends the Task with a clear message instead of
hanging. Ctrl-C interrupts the running Task; a second Ctrl-C exits.

--json (or --experimental-json) prints Codex's thread events as JSON lines, as
``codex exec --json`` does: thread.started (its thread_id is what ``resume``
takes), turn.started, item.started/updated/completed, turn.completed with the
token usage, turn.failed. OpenAI's Codex SDK (@openai/codex-sdk) runs codexcore
this way: the Codex CLI's exec options (``--config KEY=VALUE`` with TOML values,
``--add-dir``, ``--image``, ``--skip-git-repo-check``, ``resume THREAD_ID``, the key
in $CODEX_API_KEY) are taken as it passes them; with --json the approval policy
is never unless the command line says otherwise. --events-json prints
codexcore's own events (the Submission/Event protocol) instead.

With no key for a provider that needs one (OpenAI's API), nothing is sent: the
message names the variable the key is read from. When requests found no
answer, or the server refused them (400, 401, 403, 404), the last line names
the URL and where it came from.

--control-socket gives the session a Unix socket (PATH, else
$CODEXCORE_HOME/sockets/<session>.sock) where a client of the Ralph-style
session sockets follows and steers it over JSON-RPC: get_status, subscribe,
inject_prompt, checkpoint, and stop (the Task ends after its current Turn, and
exec exits 0). The socket is removed when exec exits.

--output-schema FILE constrains the final answer to the JSON Schema in FILE (an
object schema; the model's structured output, as Codex's exec --output-schema):
the answer alone, as JSON, goes to stdout, and the rest of the human output to
stderr. With --json it is the agent_message's text; with --events-json,
task_complete's last_agent_message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import SUMMARIES, plain
from ._exec_codex import add_codex_arguments, codex_usage_problem, with_codex_overrides

if TYPE_CHECKING:
    from ..adapters.host._host import Attachment
    from ..config import LoadedSettings
    from ._thread_events import ThreadEvents

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_ABORTED, EXIT_NEEDS_PERSON = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130

# The model errors that mean no usable answer came from the provider's URL, or a
# refusal that most often means the wrong URL (404) or a key for another server.
_KEY_REFUSED = frozenset({"unauthorized", "forbidden"})
_WRONG_PLACE = frozenset({"retries_exhausted", "transport_error", "bad_request", "not_found"})
_WRONG_PLACE |= _KEY_REFUSED


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "exec",
        help=SUMMARIES["exec"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""examples:
  codexcore exec "why does the test in tests/test_io.py fail?"
  git diff | codexcore exec --approval-policy never --sandbox read-only
  codexcore exec --json "list the TODOs" > thread-events.jsonl
  codexcore exec --events-json "list the TODOs" > events.jsonl
  echo "and the third?" | codexcore exec --json resume 0b6f…
  codexcore exec --resume 0b6f…  "now fix the second one"
  codexcore exec --fork 0b6f…@resp_123  "try another approach"
  codexcore exec "fix the build" --control-socket   # $CODEXCORE_HOME/sockets/<session>.sock
  codexcore exec --output-schema answer.schema.json "summarise the failures" > answer.json

exit codes: 0 task complete, 1 error, 2 usage or configuration (no key included),
            3 aborted, 4 an approval was needed with no terminal to ask, 130 Ctrl-C""",
    )
    parser.add_argument(
        "words",
        nargs="*",
        metavar="PROMPT",
        help="the prompt (default, or -: read stdin); or resume THREAD_ID [PROMPT]",
    )
    parser.add_argument(
        "--resume",
        metavar="SESSION",
        help="continue a recorded session (a unique id prefix will do)",
    )
    parser.add_argument(
        "--fork",
        metavar="SESSION@RESPONSE_ID",
        help="branch a recorded session at a response (a unique id prefix will do)",
    )
    parser.add_argument("--ephemeral", action="store_true", help="record nothing")
    parser.add_argument(
        "--control-socket",
        metavar="PATH",
        nargs="?",
        const="",
        help="serve a control socket for this session (default "
        "$CODEXCORE_HOME/sockets/<session>.sock; docs/jsonrpc.md, Ralph-style session "
        "sockets); without "
        "PATH, give the prompt before it (or after --)",
    )
    parser.add_argument(
        "--interactive",
        action="store_true",
        help="run the model's commands each in a terminal of its own (a PTY): a program "
        "that wants a terminal gets one, and a control socket's write_pty types into it "
        "(docs/sandbox.md)",
    )
    parser.add_argument(
        "--output-schema",
        metavar="FILE",
        help="a JSON Schema (an object schema) the final answer must follow; "
        "the answer is printed alone, as JSON, on stdout",
    )
    from ._control_names import add_name_arguments

    add_name_arguments(parser, "this session, with --control-socket")
    add_settings_arguments(parser)
    add_codex_arguments(parser)
    parser.set_defaults(run=run)


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every engine-running command shares; they win over config and env."""
    parser.add_argument("--profile", help="a profile from config.toml")
    parser.add_argument("-m", "--model", help="the model to use")
    parser.add_argument(
        "--approval-policy", choices=("untrusted", "on-failure", "on-request", "never")
    )
    parser.add_argument(
        "-s", "--sandbox", choices=("read-only", "workspace-write", "danger-full-access")
    )
    parser.add_argument("--history-mode", choices=("server", "client"))
    parser.add_argument("-C", "--cd", metavar="DIR", type=directory, help="the working directory")


def directory(text: str) -> str:
    """``-C``'s DIR, refused (a usage error) unless it is a directory."""
    if not os.path.isdir(text):
        problem = "does not exist" if not os.path.exists(text) else "is not a directory"
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    return text


def run(args: argparse.Namespace) -> int:
    problem = codex_usage_problem(args)
    if problem is not None:
        print(f"codexcore exec: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.resume and args.fork:
        print("codexcore exec: --resume and --fork exclude each other", file=sys.stderr)
        return EXIT_USAGE
    if args.fork and "@" not in args.fork:
        print("codexcore exec: --fork takes SESSION@RESPONSE_ID", file=sys.stderr)
        return EXIT_USAGE
    if (args.agent_id or args.session_alias) and args.control_socket is None:
        print(
            "codexcore exec: --agent-id and --session-alias name the session for control "
            "messages, which reach it on --control-socket",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        from ._control_names import session_names

        session_names(args)
    except ValueError as exc:
        print(f"codexcore exec: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        args.output_schema = read_output_schema(args.output_schema)
    except ValueError as exc:
        print(f"codexcore exec: --output-schema {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        loaded = load(args)
    except ValueError as exc:  # a configuration error names the file, key and allowed values
        print(f"codexcore: {exc}", file=sys.stderr)
        return EXIT_USAGE
    missing = loaded.missing_key()
    if missing:  # before stdin is read, and before any request could be tried
        print(f"codexcore exec: {missing}", file=sys.stderr)
        return EXIT_USAGE
    try:
        _resolve_session_ids(args, loaded.settings.home)
    except ValueError as exc:
        print(f"codexcore exec: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.prompt is None and sys.stdin.isatty():
        # Otherwise a person sees nothing happen and cannot tell why.
        print(
            "codexcore exec: reading the prompt from stdin (end it with Ctrl-D; "
            "or give it as an argument)",
            file=sys.stderr,
            flush=True,
        )
    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    if not prompt.strip():
        print("codexcore exec: no prompt (give one, or pipe it on stdin)", file=sys.stderr)
        return EXIT_USAGE
    # A person can answer only if stdin is a terminal the prompt did not come from.
    interactive = args.prompt is not None and sys.stdin.isatty() and not machine_output(args)
    return asyncio.run(_ExecRun(args, loaded, prompt, interactive).main())


def machine_output(args: argparse.Namespace) -> bool:
    """Whether stdout is JSON lines (Codex's thread events or codexcore's own)."""
    return bool(args.thread_json or args.events_json)


def _resolve_session_ids(args: argparse.Namespace, home: str | None) -> None:
    """``--resume`` and ``--fork``'s session, given as a unique prefix, in full."""
    from ._session_ids import resolve_session_id

    if args.resume:
        args.resume = resolve_session_id(home, args.resume)
    elif args.fork:
        session_id, response_id = args.fork.split("@", 1)
        args.fork = f"{resolve_session_id(home, session_id)}@{response_id}"


def read_output_schema(path: str | None) -> dict[str, Any] | None:
    """The JSON Schema in the file ``path`` (None without one); ValueError names the
    file and what is wrong with it."""
    if path is None:
        return None
    import orjson

    from ..engine._requests import output_schema_problem

    try:
        schema = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    problem = output_schema_problem(schema)
    if problem is not None:
        raise ValueError(f"{path}: {problem}")
    assert isinstance(schema, dict)
    return schema


def load(args: argparse.Namespace) -> LoadedSettings:
    """The settings for these flags, over the environment, profile and config.toml."""
    from ..config import load_settings
    from ._options import settings_overrides

    overrides = {
        "model": args.model,
        "approval_policy": args.approval_policy,
        "sandbox_mode": args.sandbox,
        "history_mode": args.history_mode,
    }
    merged = with_codex_overrides(args, settings_overrides(args, overrides), os.environ)
    loaded = load_settings(profile=args.profile, overrides=merged)
    for warning in loaded.warnings:
        print(f"codexcore: warning: {warning}", file=sys.stderr)
    return loaded


def engine_config(args: argparse.Namespace, loaded: LoadedSettings) -> Any:
    """The EngineConfig the loaded settings describe, in the directory of ``--cd``."""
    cwd = os.path.abspath(args.cd or os.getcwd())
    changes = {"ephemeral": True} if getattr(args, "ephemeral", False) else {}
    if getattr(args, "interactive", False):
        changes["pty_commands"] = True
    return loaded.settings.engine_config(cwd=cwd, **changes)


class _ExecRun:
    """One ``codexcore exec``: the engine, the renderer, approvals and Ctrl-C."""

    def __init__(
        self, args: argparse.Namespace, loaded: LoadedSettings, prompt: str, interactive: bool
    ) -> None:
        from ._render import TerminalRenderer  # the protocol: only when a command runs

        self.args, self.loaded, self.prompt, self.interactive = args, loaded, prompt, interactive
        self.config = engine_config(args, loaded)
        # With an output schema stdout is the answer's alone; the rest goes to stderr.
        self.renderer = TerminalRenderer(sys.stderr if args.output_schema else sys.stdout)
        self.interrupts = 0
        self.exit_code = EXIT_ERROR
        self.thread_events: ThreadEvents | None = None
        if args.thread_json:
            from ._thread_events import ThreadEvents

            self.thread_events = ThreadEvents()
        self._interrupting: asyncio.Future[str] | None = None

    async def main(self) -> int:
        import codexcore.model._client  # noqa: F401 - the first request needs it anyway

        from .. import Codex
        from . import imports_done

        imports_done()

        if self.args.control_socket is not None:
            await self._main_hosted()
            return self.exit_code
        async with Codex(self.config) as codex:
            self.codex = codex
            self.events = codex.events()
            await self._drive()
        return self.exit_code

    async def _main_hosted(self) -> None:
        """The session on a SessionHost, so its control socket attaches to it as any
        client does. exec watches it and submits straight to its engine, as its
        owner: a socket client that takes control never locks the terminal out."""
        from .. import Codex
        from ..adapters.host._host import HostConfig, SessionHost
        from ..adapters.session_sockets import SessionSockets, default_directory
        from ..config import default_home
        from ._control import host_control_config
        from ._control_names import session_names

        # The session socket also takes ATM-style control messages: [control]'s rules,
        # and the names --agent-id and --session-alias give the session.
        control = host_control_config(self.loaded.settings.control, os.environ)
        names = session_names(self.args)
        host = SessionHost(HostConfig(engine=self.config, control=control, session_names=names))
        await host.start()
        sockets = SessionSockets(host, default_directory(self.config.home or default_home()))
        try:
            attachment = await host.attach(token=None, control=False, lossless=True)
            hosted = host.session(attachment.session_id)
            assert hosted is not None, "a session just made is live"
            assert isinstance(hosted.codex, Codex), "a host without engines= runs Codex"
            self.codex, self.events = hosted.codex, _hosted_events(attachment)
            path = self.args.control_socket
            try:
                where = await sockets.add(attachment.session_id, Path(path) if path else None)
            except OSError as exc:
                print(f"codexcore exec: no control socket: {exc}", file=sys.stderr)
                return
            print(f"codexcore exec: control socket {where}", file=sys.stderr, flush=True)
            await self._drive()
        finally:
            await host.aclose()
            await sockets.aclose()

    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._on_interrupt)
        spin = not machine_output(self.args)
        spinner = asyncio.create_task(self.renderer.spin()) if spin else None
        try:
            if await self._open_session():
                await self._run_task()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            if spinner is not None:
                spinner.cancel()
                await asyncio.gather(spinner, return_exceptions=True)

    def _on_interrupt(self) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            from ..protocol import Interrupt

            print("\n(interrupting; press Ctrl-C again to quit)", file=sys.stderr)
            # Kept: a task nobody references may be collected before it runs.
            self._interrupting = asyncio.ensure_future(self.codex.submit(Interrupt()))
        else:
            os._exit(EXIT_INTERRUPTED)  # a person asked twice: leave now

    async def _open_session(self) -> bool:
        from ..protocol import ForkSession, ResumeSession, SessionConfigured

        if self.args.resume:
            op: Any = ResumeSession(self.args.resume)
        elif self.args.fork:
            session_id, response_id = self.args.fork.split("@", 1)
            op = ForkSession(session_id, response_id)
        else:
            return True
        sub_id = await self.codex.submit(op)
        async for event in self.events:
            self._print(event)
            if event.id == sub_id:
                return isinstance(event.msg, SessionConfigured)
        return False

    async def _run_task(self) -> None:
        from ..protocol import (
            TERMINAL_EVENT_TYPES,
            ErrorEvent,
            InputItem,
            LocalImageInput,
            TextInput,
            UserInput,
        )

        schema = self.args.output_schema
        items: tuple[InputItem, ...] = (
            TextInput(self.prompt),
            *(LocalImageInput(path) for path in self.args.images),
        )
        sub_id = await self.codex.submit(UserInput(items, output_schema=schema))
        async for event in self.events:
            self._print(event)
            await self._answer_if_asked(event.msg)
            if event.id == sub_id and event.msg.TYPE in TERMINAL_EVENT_TYPES:
                self.exit_code = self._exit_code_for(event.msg)
                if schema is not None and not machine_output(self.args):
                    self._print_answer(event.msg)
                if isinstance(event.msg, ErrorEvent) and event.msg.code in _WRONG_PLACE:
                    self._say_where_requests_went(event.msg.code)
                return

    def _print_answer(self, msg: Any) -> None:
        """The final answer alone on stdout, as the schema asked: a script reads it."""
        answer = getattr(msg, "last_agent_message", None)
        if msg.TYPE != "task_complete" or answer is None:
            return
        import orjson

        try:
            orjson.loads(answer)
        except orjson.JSONDecodeError:
            print("codexcore exec: the final answer is not JSON (a refusal?)", file=sys.stderr)
            self.exit_code = EXIT_ERROR
            return
        print(answer, flush=True)

    def _say_where_requests_went(self, code: str) -> None:
        from ..model._client import displayed_url  # loaded: the requests were sent

        # The engine knows the URL; only the configuration knows why it is that one.
        provider = self.loaded.settings.provider
        key = ""
        if code in _KEY_REFUSED:
            key = f"; the key from ${provider.api_key_env}"
        url = displayed_url(f"{provider.base_url}/responses")
        print(
            f"codexcore exec: the requests went to POST {url} "
            f"(provider.base_url from {self.loaded.origin('provider.base_url')}{key})",
            file=sys.stderr,
        )

    def _exit_code_for(self, msg: Any) -> int:
        if msg.TYPE == "task_complete":
            return EXIT_OK
        if msg.TYPE == "turn_aborted":
            if self.exit_code == EXIT_NEEDS_PERSON:
                return EXIT_NEEDS_PERSON
            return EXIT_INTERRUPTED if self.interrupts else EXIT_ABORTED
        return EXIT_ERROR

    def _print(self, event: Any) -> None:
        if self.thread_events is not None:
            import orjson

            lines = b"".join(orjson.dumps(e) + b"\n" for e in self.thread_events.map(event.msg))
            if lines:
                sys.stdout.buffer.write(lines)
                sys.stdout.buffer.flush()
        elif self.args.events_json:
            from ..protocol import encode_event

            sys.stdout.buffer.write(encode_event(event) + b"\n")
            sys.stdout.buffer.flush()
        elif event.msg.TYPE != "session_configured":
            self.renderer.show(event.msg)

    async def _answer_if_asked(self, msg: Any) -> None:
        from ..protocol import (
            ApplyPatchApprovalRequest,
            ExecApproval,
            ExecApprovalRequest,
            PatchApproval,
        )

        if not isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
            return
        if self.interactive:
            from ._render import ask_decision

            decision = await ask_decision(self.renderer.approval_prompt(msg), at_eof="abort")
        else:
            print(
                f"codexcore: approval needed ({msg.TYPE}, call {msg.call_id}) but there is no "
                "terminal to ask; rerun in a terminal or choose another --approval-policy",
                file=sys.stderr,
            )
            self.exit_code = EXIT_NEEDS_PERSON
            decision = "abort"
        reply: Any = ExecApproval if isinstance(msg, ExecApprovalRequest) else PatchApproval
        await self.codex.submit(reply(msg.call_id, decision))


async def _hosted_events(attachment: Attachment) -> AsyncIterator[Any]:
    """The session's events as exec reads them from an engine: without the host's
    ``submission_ack``, so its output is the same with or without a control socket."""
    from ..adapters.host._host import Out
    from ..protocol import SubmissionAck, decode_event

    while frames := await attachment.take():
        for frame in frames:
            if isinstance(frame, Out):
                event = decode_event(frame.data)
                if not isinstance(event.msg, SubmissionAck):
                    yield event
