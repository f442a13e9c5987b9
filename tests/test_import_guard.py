"""The import guard: each entry point, started as users start it, loads only what its path uses.

Every row of :data:`ENTRY_POINTS` starts a fresh interpreter running the real
entry code (``codexcore.cli.main``, what the ``codexcore`` script calls, or
``import codexcore``), drives it as a client would (a first frame on stdin and
its answer read back, or a whole ``exec`` Task against a scripted model), and
reads the modules it had loaded: a server's when it wrote its first answer
(what it loads after that is deferred work, off the client's wait), anything
else's at exit. A module matching one of the row's forbidden patterns fails
the test, naming the module and the chain of imports that brought it in
(recorded by an import hook of the wrapper).

Optional packages (``mcp``, ``acp``, ``redis``, ``openai``) and the other
dialects' modules must stay off every path that does not ask for them: a new
dialect or dependency imported at the top of a shared module then fails here,
by name, instead of slowing every start. When a dialect or a command lands,
extend the table: its modules go into the rows that must not load them, and
its own entry point gets a row (see :data:`JSONRPC`, :data:`COMMAND_MODULES`).
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from codexcore.cli import COMMANDS
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

OPTIONAL = ("mcp", "acp", "redis", "openai")
"""Optional or foreign packages: loaded only on the path that uses them."""

RPC_SEEDS = (
    "codexcore.adapters.jsonrpc.codelia",
    "codexcore.adapters.jsonrpc.chat",
    "codexcore.adapters.jsonrpc.session_socket",
    "codexcore.adapters.control._jsonrpc",
    "codexcore.adapters.jsonrpc._openrpc",
)
"""The protocols on the JSON-RPC dialect (the Codelia runtime protocol, the chat protocol,
the session socket's and the control messages' methods) and the OpenRPC document: each
module is loaded at the first call of one of its methods, so never before ``initialize``
is answered (``MethodGroup`` in ``adapters/jsonrpc/_methods.py``)."""

JSONRPC = (
    "codexcore.adapters.jsonrpc._machine",
    "codexcore.adapters.jsonrpc._errors",
    "codexcore.adapters.jsonrpc._methods",
    "codexcore.adapters.jsonrpc._server*",
    "codexcore.adapters.jsonrpc._schemas",
    *RPC_SEEDS,
)
"""The JSON-RPC dialect's machinery and protocols: loaded by a JSON-RPC first frame only
(``jsonrpc._options``, how a server serves JSON-RPC, is every server's)."""

SOCKETS = (
    "codexcore.adapters.tcp",
    "codexcore.adapters.unix",
    "codexcore.adapters.servers._listener",
    "codexcore.adapters.session_sockets",
    "codexcore.adapters.client",
    "codexcore.adapters.threads",
    "codexcore.adapters.host._deltas",
)
"""Socket servers, the client library, and the host's merging of deltas for a slow socket
connection (a stdio attachment holds the engine instead): not a stdio server's, nor
``exec``'s."""

ACP = ("codexcore.adapters.acp", "codexcore.cli._acp")
"""The ACP agent (``codexcore acp``) and its SDK (``acp``, in :data:`OPTIONAL`)."""

APP_SERVER = ("codexcore.adapters.app_server", "codexcore.cli._app_server")
"""Codex's app-server protocol (``codexcore app-server``): no other path loads it."""

REDIS = ("codexcore.adapters.redis_pool",)
"""The worker pool behind Redis (``serve --redis``) and its client (``redis``)."""

CONTROL_CLIENT = ("codexcore.adapters.control._sender", "codexcore.adapters.control._rpc_sender")
"""The sending side of control messages (``codexcore control``)."""

CONTROL_RECEIVER = (
    "codexcore.adapters.control._receiver",
    "codexcore.adapters.control._wire",
    "codexcore.adapters.control._store",
    "sqlite3",
)
"""The receiving side of control messages (the envelopes, the dedupe store): loaded with
the first control request, not by every server."""

RECORDED = ("codexcore.engine._rollout_reader", "codexcore.engine._recorded_sessions")
"""Reading recorded sessions back: loaded by a resume, a fork or a listing only."""

MCP = ("codexcore.engine._mcp_client",)
"""The MCP client: only for a session with MCP servers configured (``mcp`` too)."""

FUNCTION_TOOLS = (
    "codexcore.tools.functions",
    "codexcore.tools.function_schema",
    "codexcore.engine._function_registry",
    "codexcore.engine._function_calls",
)
"""Function tools (the embedding program's Python functions): only for a program that
registers some, so never on a server's or ``exec``'s path, not even in a Task."""

ENGINE = ("codexcore.engine", "codexcore.model", "codexcore.tools", "httpx", "janus")
"""The engine and its stack: not for ``import codexcore`` or help texts."""

TOOLS = (
    "codexcore.engine._tools",
    "codexcore.engine._user_shell",
    "codexcore.tools.sandbox",
    "codexcore.tools._seccomp",
    "codexcore.tools.exec",
    "codexcore.tools._reaper",
    "codexcore.tools.apply_patch",
    "codexcore.tools._patch*",
    "codexcore.tools.safety",
    "codexcore.engine._mcp",
)
"""The tool stack (sandbox helpers, commands, patches, the MCP servers' manager): needed
when a Task starts, so never before a server's first answer."""

TASK = (
    "codexcore.engine._task",
    "codexcore.engine._task_lifecycle",
    "codexcore.engine._compact",
    "codexcore.engine._turn_diff",
    "codexcore.engine._turn_context",
    "codexcore.engine._requests",
)
"""The Task machinery (the Task and its Turns, compaction, starting and steering a Task,
per-turn settings): loaded with the first Task, never before a server's first answer."""

FIRST_TURN = ("codexcore.model", "httpx", "httpcore", "anyio", "h11", "html", *TASK, *TOOLS)
"""What a server loads once its first answer is out (the first Turn needs it: the model
client on httpx's own transport, httpcore over anyio; ``html`` escapes the environment
context)."""


def command_modules(*allowed: str) -> tuple[str, ...]:
    """The CLI modules of every command but ``allowed`` (one command's, not the whole CLI's)."""
    return tuple(
        f"codexcore.cli._{name.replace('-', '_')}" for name in COMMANDS if name not in allowed
    )


COMMAND_MODULES = command_modules()
STDIO_SERVER = (
    "codexcore.adapters.stdio",
    "codexcore.adapters.servers",
    "codexcore.adapters.host",
    "codexcore.adapters.native",
    *CONTROL_RECEIVER,
)
"""The stdio server's host and dialects, and the control store: ``acp`` speaks through its SDK."""
SERVE_MODULES = ("serve", "control")
"""``serve`` builds its host's control settings with ``codexcore.cli._control``'s helper."""

NATIVE_CONFIGURE = (
    b'{"id":"configure","op":{"type":"configure_session","approval_policy":"never",'
    b'"sandbox_policy":{"type":"danger-full-access","writable_roots":[],"network_access":false}}}\n'
)
ACP_START = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientCapabilities":{}}}\n'
    b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'
)
JSONRPC_INITIALIZE = (
    b'{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocol_version":"0",'
    b'"client":{"name":"guard","version":"0"}}}\n'
)


@dataclass(frozen=True)
class Entry:
    """One entry point: how it is started and fed, what it must answer, what it must not load."""

    name: str
    argv: Sequence[str] | None
    """``codexcore ARGV`` (through ``codexcore.cli.main``); None: ``import codexcore`` only."""
    forbidden: Sequence[str]
    """Module names; ``pkg`` also covers ``pkg.*``, a trailing ``*`` is any suffix."""
    stdin: bytes = b""
    answer: bytes = b""
    """What stdout must hold: the proof that the path was really taken."""
    model: bool = False
    """Run against a scripted model (``OPENAI_BASE_URL``)."""
    at_exit: bool = False
    """Read the modules at exit even with a first frame (ready takes more than one answer,
    as ``codexcore acp``'s ``initialize`` then ``session/new``)."""


ENTRY_POINTS = [
    Entry("import codexcore", None, (*OPTIONAL, *ENGINE, "codexcore.adapters", "codexcore.cli")),
    Entry(
        "codexcore --help",
        ["--help"],
        (*OPTIONAL, *ENGINE, *ACP, *APP_SERVER, *REDIS, *COMMAND_MODULES),
        answer=b"COMMAND",
    ),
    Entry(
        "codexcore exec --help",
        ["exec", "--help"],
        (
            *OPTIONAL,
            *ENGINE,
            *JSONRPC,
            *SOCKETS,
            *ACP,
            *APP_SERVER,
            *REDIS,
            *CONTROL_CLIENT,
            *command_modules("exec"),
        ),
        answer=b"usage: codexcore exec",
    ),
    Entry(
        "codexcore exec (one Task)",
        ["exec", "--ephemeral", "say hi"],
        (
            *OPTIONAL,
            *JSONRPC,
            *SOCKETS,
            *ACP,
            *APP_SERVER,
            *REDIS,
            *CONTROL_CLIENT,
            *CONTROL_RECEIVER,
            *RECORDED,
            *MCP,
            *FUNCTION_TOOLS,
            *command_modules("exec"),
        ),
        answer=b"Hi there.",
        model=True,
    ),
    Entry(
        "codexcore serve --stdio, native first frame",
        ["serve", "--stdio"],
        (
            *OPTIONAL,
            *JSONRPC,
            *SOCKETS,
            *ACP,
            *APP_SERVER,
            *REDIS,
            *CONTROL_CLIENT,
            *CONTROL_RECEIVER,
            *RECORDED,
            *MCP,
            *FUNCTION_TOOLS,
            *FIRST_TURN,
            *command_modules(*SERVE_MODULES),
        ),
        stdin=NATIVE_CONFIGURE,
        answer=b'"type":"session_configured"',
    ),
    Entry(
        "codexcore serve --stdio, JSON-RPC first frame",
        ["serve", "--stdio"],
        (
            *OPTIONAL,
            *RPC_SEEDS,
            *SOCKETS,
            *ACP,
            *APP_SERVER,
            *REDIS,
            *CONTROL_CLIENT,
            *CONTROL_RECEIVER,
            *RECORDED,
            *MCP,
            *FUNCTION_TOOLS,
            *FIRST_TURN,
            *command_modules(*SERVE_MODULES),
        ),
        stdin=JSONRPC_INITIALIZE,
        answer=b'"server_capabilities"',
    ),
    Entry(
        "codexcore acp, initialize and session/new",
        ["acp"],
        (
            "mcp",
            "redis",
            "openai",
            *JSONRPC,
            *SOCKETS,
            *REDIS,
            *CONTROL_CLIENT,
            *MCP,
            *FUNCTION_TOOLS,
            *STDIO_SERVER,
            *command_modules("acp"),
        ),
        stdin=ACP_START,
        answer=b'"sessionId"',
        at_exit=True,
    ),
]

# Runs the real entry code and writes every module loaded, each with the module whose
# code imported it ("-" for those loaded before the hook). A finder first on
# sys.meta_path sees each import (lazy ones inside functions too) and finds nothing
# itself. With --at-answer (a server), the list is the one at its first answer: the
# first os.write to a descriptor other than stderr (asyncio's pipe transport and
# the server's plain writes both go through os.write); otherwise the one at exit
# (atexit runs last-registered first: after everything else the process did).
_WRAPPER = """
import atexit, os, sys
_BY = {}
class _Witness:
    @staticmethod
    def find_spec(name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(
            ("importlib", "_frozen_importlib")
        ):
            frame = frame.f_back
        _BY.setdefault(name, "?" if frame is None else frame.f_globals.get("__name__", "?"))
        return None
sys.meta_path.insert(0, _Witness)
def _dump():
    with open(sys.argv[1], "x") as file:
        file.write("\\n".join(f"{name}\\t{_BY.get(name, '-')}" for name in sorted(sys.modules)))
if sys.argv[2] == "--at-answer":
    _write = os.write
    def _first_answer(fd, data):
        if fd != 2 and not os.path.exists(sys.argv[1]):
            _dump()
        return _write(fd, data)
    os.write = _first_answer
else:
    atexit.register(_dump)
argv = sys.argv[3:]
if argv == ["--import-only"]:
    import codexcore
else:
    from codexcore.cli import main
    sys.exit(main(argv))
"""


def matches(module: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return module.startswith(pattern[:-1])
    return module == pattern or module.startswith(pattern + ".")


def chain(module: str, importer: dict[str, str]) -> str:
    """``module <- its importer <- that one's importer ...``, up to the entry code."""
    links = [module]
    while importer.get(links[-1], "-") not in ("-", "?", "__main__") and len(links) < 30:
        links.append(importer[links[-1]])
    return " <- ".join([*links, importer.get(links[-1], "-")])


def offences(loaded: dict[str, str], forbidden: Sequence[str]) -> list[str]:
    """One line per loaded module that ``forbidden`` rules out: the module, the pattern,
    and who imported it."""
    return [
        f"{module} (forbidden by {pattern!r}), imported by: {chain(module, loaded)}"
        for module in loaded
        for pattern in forbidden
        if matches(module, pattern)
    ]


@pytest.fixture
def scripted_model() -> Iterator[ScriptedResponsesServer]:
    server = ScriptedResponsesServer(ScriptedModel([text_response("Hi there.")])).start_in_thread()
    yield server
    server.stop()


def run_entry(
    entry: Entry, tmp_path: Path, server: ScriptedResponsesServer
) -> tuple[subprocess.CompletedProcess[bytes], dict[str, str]]:
    """Run ``entry``: the finished process, and each module it had loaded with its importer
    (a server: at its first answer; anything else: at exit)."""
    dump = tmp_path / "modules.txt"
    argv = ["--import-only"] if entry.argv is None else list(entry.argv)
    env = {**os.environ, "OPENAI_API_KEY": "sk-guard", "HOME": str(tmp_path)}
    if entry.model:
        env["OPENAI_BASE_URL"] = server.base_url
    when = "--at-answer" if entry.stdin and not entry.at_exit else "--at-exit"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, str(dump), when, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    watchdog = threading.Timer(120, proc.kill)  # a hung entry point fails, with its output
    watchdog.start()
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        said = b""
        if entry.stdin:  # a client: its frames, then the answer read back, then the end
            proc.stdin.write(entry.stdin)
            proc.stdin.flush()
            while entry.answer not in said and (line := proc.stdout.readline()):
                said += line
        out, err = proc.communicate()
    finally:
        watchdog.cancel()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, said + out, err)
    lines = dump.read_text().split("\n") if dump.exists() else []
    return done, dict(line.split("\t", 1) for line in lines if "\t" in line)


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda entry: entry.name)
def test_entry_point_loads_only_what_its_path_uses(
    entry: Entry, tmp_path: Path, scripted_model: ScriptedResponsesServer
) -> None:
    done, loaded = run_entry(entry, tmp_path, scripted_model)
    said = done.stdout.decode(errors="replace")[-2000:]
    logs = done.stderr.decode(errors="replace")[-2000:]
    assert done.returncode == 0, f"{entry.name} exited {done.returncode}:\n{said}\n{logs}"
    assert entry.answer in done.stdout, f"{entry.name} did not answer {entry.answer!r}:\n{said}"
    assert loaded, f"{entry.name} wrote no module list at exit:\n{logs}"
    found = offences(loaded, entry.forbidden)
    assert not found, f"{entry.name} loaded what its path does not use:\n" + "\n".join(found)


def test_the_guard_names_a_forbidden_module_and_its_importer(
    tmp_path: Path, scripted_model: ScriptedResponsesServer
) -> None:
    """The guard itself: a path that does load the JSON-RPC stack is caught, by name and
    importer (here the JSON-RPC first frame, checked as if it had to stay native)."""
    rpc = next(entry for entry in ENTRY_POINTS if entry.name.endswith("JSON-RPC first frame"))
    _, loaded = run_entry(rpc, tmp_path, scripted_model)
    found = offences(loaded, JSONRPC)
    server = [line for line in found if line.startswith("codexcore.adapters.jsonrpc._server ")]
    assert server == [
        "codexcore.adapters.jsonrpc._server (forbidden by 'codexcore.adapters.jsonrpc._server*'), "
        "imported by: codexcore.adapters.jsonrpc._server <- codexcore.adapters.servers._dialect "
        "<- codexcore.adapters.stdio <- codexcore.cli._serve <- codexcore.cli <- __main__"
    ], found
    assert not offences(loaded, OPTIONAL)


@pytest.mark.anyio
async def test_serve_stdio_defers_its_work_until_the_first_answer_is_out() -> None:
    """``serve --stdio`` loads the model client's stack after its first answer: the hook
    runs once, when that answer already waits in the client's pipe (nothing reads it
    until the end), and the session goes on."""
    from codexcore.adapters.host._host import HostConfig
    from codexcore.adapters.stdio import serve_stdio
    from codexcore.engine import EngineConfig

    to_server, from_client = os.pipe()
    to_client, from_server = os.pipe()
    seen: list[bool] = []
    ran = asyncio.Event()

    def hook() -> None:
        readable, _, _ = select.select([to_client], [], [], 0)
        seen.append(bool(readable))
        ran.set()

    config = HostConfig(engine=EngineConfig(ephemeral=True))
    served = asyncio.create_task(
        serve_stdio(to_server, from_server, config, after_first_answer=hook)
    )
    os.write(from_client, NATIVE_CONFIGURE)
    await asyncio.wait_for(ran.wait(), 30)
    os.close(from_client)  # end of input: the session shuts down in order
    assert await asyncio.wait_for(served, 30) == 0
    output = b""
    while chunk := os.read(to_client, 65536):
        output += chunk
    os.close(to_client)
    assert b"session_configured" in output, output
    assert b"shutdown_complete" in output, output
    assert seen == [True], (seen, output)
