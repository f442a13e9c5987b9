"""Running a published app-server client (PyPI's ``codex-app-server-sdk``, unchanged) against
a server, from the tests: the server under test, the scripted model behind it, and the
client's scenarios (``tests/app_server_client.py``) in their own Python 3.12.

A server is an :class:`AppServer`: how to start it over stdio (the client spawns it)
and over WebSocket (started here; the client connects to its URL). ``codex`` is the
real Codex CLI of the pinned version (``bench/_vs_codex_cli.py`` installs it); the
lead adds ``codexcore app-server`` beside it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    function_call_response,
    shell_call,
    text_response,
)

from .server_helpers import _Process

REPO = Path(__file__).resolve().parent.parent
CLIENT_SCRIPT = Path(__file__).resolve().parent / "app_server_client.py"
CLIENT_VENV = REPO / ".ci" / ".venv-appserver-client"
SDK_VERSION = "0.4.1"
"""The ``codex-app-server-sdk`` that ``.ci/run`` installs there (the one these tests ran)."""
RUN_MARK = "run: "
"""What, in a user message, asks the harness model for a shell command."""


def client_python() -> Path | None:
    """The client's interpreter, if ``.ci/run`` (or a developer) made its venv."""
    python = CLIENT_VENV / "bin" / "python"
    return python if python.is_file() else None


# --- the model ------------------------------------------------------------------------


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class HarnessModel(ScriptedModel):
    """A model that answers by what each request holds, so any server can drive it:
    after a tool output, ``Ran it.``; after ``run: CMD``, a call of whichever shell tool
    the server offers (Codex: ``exec_command`` with a string, codexcore: ``shell`` with
    an argv); after anything else, ``Noted: TEXT``.

    As the Responses API does, a request naming a ``previous_response_id`` continues
    that response's conversation (Codex sends the whole history each time; codexcore,
    by default, only what is new): :meth:`user_texts` sees the whole conversation
    either way."""

    def __init__(self) -> None:
        super().__init__()
        self._conversations: list[list[dict[str, Any]]] = []
        self._by_response: dict[str, list[dict[str, Any]]] = {}

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        items = [item for item in body.get("input") or [] if isinstance(item, dict)]
        with self._lock:
            self.requests.append(body)
            earlier = self._by_response.get(str(body.get("previous_response_id")), [])
            conversation = [*earlier, *items]
            self._conversations.append(conversation)
            response_id = f"resp_harness_{len(self.requests)}"
            self._by_response[response_id] = conversation
        return self._answer(body, items, response_id)

    def _answer(
        self, body: dict[str, Any], items: list[dict[str, Any]], response_id: str
    ) -> ScriptedResponse:
        for item in reversed(items):
            if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                return text_response("Ran it.", response_id=response_id)
            if item.get("role") == "user":
                text = _text_of(item)
                if text.startswith(RUN_MARK):
                    return self._command(body, text.removeprefix(RUN_MARK), response_id)
                return text_response(f"Noted: {text}", response_id=response_id)
        return text_response("Nothing asked.", response_id=response_id)

    @staticmethod
    def _command(body: dict[str, Any], command: str, response_id: str) -> ScriptedResponse:
        tools = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
        if "exec_command" in tools:
            return function_call_response("exec_command", {"cmd": command}, response_id=response_id)
        if "shell" in tools:
            return shell_call(["bash", "-c", command], response_id=response_id)
        return text_response(f"no shell tool among {sorted(map(str, tools))}")

    def user_texts(self) -> list[list[str]]:
        """Per request, the user messages of its whole conversation (what it sent, and
        what its ``previous_response_id`` chain holds)."""
        with self._lock:
            return [
                [_text_of(i) for i in conversation if i.get("role") == "user"]
                for conversation in self._conversations
            ]


# --- the servers ----------------------------------------------------------------------


@attrs.frozen
class AppServer:
    """A server the client drives: ``stdio`` and ``ws`` are its argv on each transport
    (``ws`` listens on a free loopback port and prints its URL), ``env`` its environment
    for a model at a base URL and a home folder."""

    name: str
    stdio: Callable[[], list[str]]
    ws: Callable[[], list[str]]
    env: Callable[[str, Path], dict[str, str]]
    available: Callable[[], str | None]
    """None when it can run here, else why not."""


def _load_bench(name: str) -> ModuleType:
    path = REPO / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def codex_binary() -> Path | None:
    """The pinned Codex CLI's native binary, where ``bench/_vs_codex_cli.py`` installs it."""
    cli = _load_bench("_vs_codex_cli")
    found: Path | None = cli.find_codex(cli.CLI_DIR)
    return found


def _codex_env(base_url: str, home: Path) -> dict[str, str]:
    cli = _load_bench("_vs_codex_cli")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(cli.codex_config(base_url))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX"))}
    return {**env, "CODEX_HOME": str(home), cli.KEY_VARIABLE: "sk-harness-dummy"}


def _codex_argv(*extra: str) -> Callable[[], list[str]]:
    def argv() -> list[str]:
        binary = codex_binary()
        assert binary is not None
        return [str(binary), "app-server", *extra]

    return argv


CODEX = AppServer(
    name="codex",
    stdio=_codex_argv(),
    ws=_codex_argv("--listen", "ws://127.0.0.1:0"),
    env=_codex_env,
    available=lambda: None if codex_binary() else "the pinned Codex CLI is not installed",
)


def _codexcore_env(base_url: str, home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))}
    return {
        **env,
        "CODEXCORE_HOME": str(home),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-harness-dummy",
        "PYTHONUNBUFFERED": "1",
    }


CODEXCORE = AppServer(
    name="codexcore",
    stdio=lambda: [sys.executable, "-m", "codexcore", "app-server"],
    ws=lambda: [sys.executable, "-m", "codexcore", "app-server", "--listen", "ws://127.0.0.1:0"],
    env=_codexcore_env,
    available=lambda: None,
)
"""``codexcore app-server`` (its WebSocket face prints ``listening on ws://HOST:PORT``)."""


@contextmanager
def server_home() -> Iterator[Path]:
    """A home folder for a server's state, outside /tmp (Codex declines to put its
    helper links under the system's temporary folder)."""
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    path = Path(tempfile.mkdtemp(prefix="app-server-home-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class WsServerProcess(_Process):
    """A server listening on WebSocket, in a subprocess; ``url`` once it said where."""

    url = ""

    async def start(self, argv: list[str], env: dict[str, str], cwd: Path) -> str:
        await self._spawn(argv, env, cwd, stdout=asyncio.subprocess.DEVNULL)
        match = await self.wait_stderr(r"listening on:? (ws://\S+)", within=30.0)
        self.url = match[1]
        return self.url


@asynccontextmanager
async def listening(server: AppServer, env: dict[str, str], cwd: Path) -> AsyncIterator[str]:
    """``server`` on WebSocket for the time of the block; its URL."""
    process = WsServerProcess()
    try:
        yield await process.start(server.ws(), env, cwd)
    finally:
        await process.kill()


# --- the client -----------------------------------------------------------------------


async def run_client(
    scenario: str,
    cwd: Path,
    env: dict[str, str],
    *,
    stdio: list[str] | None = None,
    ws: str | None = None,
    thread: str | None = None,
    within: float = 50.0,
) -> dict[str, Any]:
    """Run one scenario of the published client; what it printed (``error`` if it failed)."""
    python = client_python()
    assert python is not None, f"no client venv at {CLIENT_VENV} (.ci/run makes it)"
    argv = [str(python), str(CLIENT_SCRIPT), scenario, "--cwd", str(cwd)]
    if thread is not None:
        argv += ["--thread", thread]
    if ws is not None:
        argv += ["--ws", ws]
    else:
        assert stdio is not None
        argv += ["--stdio", *stdio]
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(within):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        raise AssertionError(
            f"{scenario}: no answer in {within} s\n{err.decode()[-3000:]}"
        ) from None
    lines = out.decode().strip().splitlines()
    assert lines, f"{scenario}: printed nothing (exit {process.returncode})\n{err.decode()[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    result.setdefault("stderr", err.decode()[-3000:])
    return result


def processes_in(folder: Path) -> list[int]:
    """The processes whose working directory is ``folder`` (what a command left running)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == folder:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def shows(pattern: str, text: str | None) -> bool:
    return text is not None and re.search(pattern, text) is not None


__all__ = [
    "CODEX",
    "CODEXCORE",
    "SDK_VERSION",
    "AppServer",
    "HarnessModel",
    "alive",
    "client_python",
    "listening",
    "processes_in",
    "run_client",
    "server_home",
    "shows",
]
