"""The app-server protocol's tests: the pinned Codex CLI's own JSON Schema, and a client
that runs ``codexcore app-server`` as a real subprocess and validates every message the
server sends against that schema.

The schema comes from the Codex CLI itself (``codex app-server generate-json-schema``),
pinned at :data:`CODEX_VERSION` and installed with npm into ``bench/.codex-cli`` (``.ci/run``
installs it: ``python bench/_vs_codex_cli.py``). ``CODEXCORE_CODEX_CLI`` names another
binary. Without it the tests skip and say how to install it; under ``CI=true`` they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parent.parent
CLI_DIR = REPO / "bench" / ".codex-cli"
CODEX_VERSION = "0.169.0"
INSTALL_HINT = (
    f"the Codex CLI {CODEX_VERSION} is not installed: run `python bench/_vs_codex_cli.py` "
    "(npm installs it into bench/.codex-cli), or set CODEXCORE_CODEX_CLI to its binary"
)
WAIT = 30.0

RESPONSES = {
    "initialize": "v1/InitializeResponse.json",
    "thread/start": "v2/ThreadStartResponse.json",
    "thread/resume": "v2/ThreadResumeResponse.json",
    "thread/fork": "v2/ThreadForkResponse.json",
    "thread/list": "v2/ThreadListResponse.json",
    "thread/read": "v2/ThreadReadResponse.json",
    "thread/archive": "v2/ThreadArchiveResponse.json",
    "turn/start": "v2/TurnStartResponse.json",
    "turn/interrupt": "v2/TurnInterruptResponse.json",
    "model/list": "v2/ModelListResponse.json",
}


def find_codex_cli() -> Path | None:
    named = os.environ.get("CODEXCORE_CODEX_CLI")
    if named:
        return Path(named)
    manifest = CLI_DIR / "node_modules" / "@openai" / "codex" / "package.json"
    try:
        if json.loads(manifest.read_text())["version"] != CODEX_VERSION:
            return None
    except (OSError, ValueError, KeyError):
        return None
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "")
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system(), "")
    package = CLI_DIR / "node_modules" / "@openai" / f"codex-{system}-{arch}" / "vendor"
    found = sorted(package.glob("*/bin/codex"))
    return found[0] if found else None


class Schema:
    """The pinned CLI's schema bundle, as validators by message kind."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._validators: dict[str, jsonschema.Draft7Validator] = {}
        self.checked = 0

    def _validator(self, name: str) -> jsonschema.Draft7Validator:
        found = self._validators.get(name)
        if found is None:
            schema = json.loads((self.folder / name).read_text())
            found = self._validators[name] = jsonschema.Draft7Validator(schema)
        return found

    def check(self, message: dict[str, Any], method_of: Callable[[Any], str | None]) -> None:
        """Validate one message the server sent; raises AssertionError naming what is wrong."""
        assert "jsonrpc" not in message, f"Codex's app-server omits jsonrpc: {message}"
        if "method" in message and "id" in message:
            self._validate("JSONRPCRequest.json", message)
            self._validate_method("ServerRequest.json", message)
        elif "method" in message:
            self._validate("JSONRPCNotification.json", message)
            self._validate_method("ServerNotification.json", message)
        elif "error" in message:
            self._validate("JSONRPCError.json", message)
        else:
            self._validate("JSONRPCResponse.json", message)
            method = method_of(message["id"])
            assert method is not None, f"a response to no request of ours: {message}"
            self._validate(RESPONSES[method], message["result"])
        self.checked += 1

    def _validate_method(self, name: str, message: dict[str, Any]) -> None:
        """Against the branch of the ``oneOf`` for its method: the error then names the
        field, where the union could only say that no branch matched."""
        key = f"{name}#{message['method']}"
        if key not in self._validators:
            union = json.loads((self.folder / name).read_text())
            branches = [
                b for b in union["oneOf"] if message["method"] in b["properties"]["method"]["enum"]
            ]
            assert branches, f"{name} has no method {message['method']!r}"
            schema = {"definitions": union["definitions"], **branches[0]}
            self._validators[key] = jsonschema.Draft7Validator(schema)
        self._validate(key, message)

    def _validate(self, name: str, value: Any) -> None:
        error = jsonschema.exceptions.best_match(self._validator(name).iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise AssertionError(
                f"{name} rejects what codexcore sent at {where!r}: {error.message}\n"
                f"{json.dumps(value)[:2000]}"
            )


def generate_schema(folder: Path) -> Schema:
    """The pinned CLI's schema in ``folder`` (skips, or fails under CI, when it is missing)."""
    cli = find_codex_cli()
    if cli is None or not cli.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    subprocess.run(
        [str(cli), "app-server", "generate-json-schema", "--out", str(folder)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return Schema(folder)


class AppServer:
    """``codexcore app-server`` as a client spawns it, every message it sends validated."""

    def __init__(self, process: asyncio.subprocess.Process, schema: Schema) -> None:
        self.process = process
        self.schema = schema
        self.next_id = 1
        self.sent: dict[Any, str] = {}  # our request id -> its method
        self.answers: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notes: list[dict[str, Any]] = []
        self.requests: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.changed = asyncio.Event()
        self.failure: BaseException | None = None
        self.stderr: list[str] = []
        self.reader = asyncio.create_task(self._read())
        self.stderr_reader = asyncio.create_task(self._read_stderr())

    @classmethod
    async def start(cls, schema: Schema, env: dict[str, str], cwd: Path, *args: str) -> AppServer:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "codexcore",
            "app-server",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            limit=64 * 1024 * 1024,
        )
        return cls(process, schema)

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr.append(line.decode("utf-8", "replace"))
            self.changed.set()

    async def logged(self, text: str) -> str:
        """The first stderr line holding ``text``, waited for."""
        async with asyncio.timeout(WAIT):
            while True:
                for line in self.stderr:
                    if text in line:
                        return line
                self.changed.clear()
                await self.changed.wait()

    async def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            while line := await self.process.stdout.readline():
                message = json.loads(line)
                self.schema.check(message, self.sent.get)
                if "method" in message and "id" in message:
                    await self.requests.put(message)
                elif "method" in message:
                    self.notes.append(message)
                else:
                    future = self.answers.pop(message["id"], None)
                    if future is not None and not future.done():
                        future.set_result(message)
                self.changed.set()
        except BaseException as exc:  # a schema failure: every waiter sees it
            self.failure = exc
            for future in self.answers.values():
                if not future.done():
                    future.set_exception(exc)
            self.changed.set()
            raise

    def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    async def send(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request; its whole answer (``result`` or ``error``)."""
        rid = self.next_id
        self.next_id += 1
        self.sent[rid] = method
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.answers[rid] = future
        message: dict[str, Any] = {"id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.write(message)
        async with asyncio.timeout(WAIT):
            return await future

    async def call(self, method: str, params: Any = None) -> Any:
        answer = await self.send(method, params)
        assert "error" not in answer, f"{method} failed: {answer['error']}"
        return answer["result"]

    async def initialize(self) -> Any:
        result = await self.call("initialize", {"clientInfo": {"name": "tests", "version": "1"}})
        self.write({"method": "initialized"})
        return result

    async def note(
        self, method: str, where: Callable[[dict[str, Any]], bool] = lambda p: True
    ) -> dict[str, Any]:
        """The params of the first notification ``method`` (matching ``where``), waited for."""
        async with asyncio.timeout(WAIT):
            while True:
                for message in self.notes:
                    if message["method"] == method and where(message["params"]):
                        return message["params"]  # type: ignore[no-any-return]
                if self.failure is not None:
                    raise self.failure
                self.changed.clear()
                await self.changed.wait()

    def methods(self) -> list[str]:
        return [message["method"] for message in self.notes]

    async def server_request(self) -> dict[str, Any]:
        async with asyncio.timeout(WAIT):
            return await self.requests.get()

    async def close(self) -> int:
        """End input; the exit code (waits for the process to end on its own)."""
        assert self.process.stdin is not None
        with contextlib.suppress(ConnectionError):
            self.process.stdin.close()
        async with asyncio.timeout(WAIT):
            code = await self.process.wait()
            await self.reader
            await self.stderr_reader
        return code

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()
        for task in (self.reader, self.stderr_reader):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@contextlib.asynccontextmanager
async def app_servers(
    schema: Schema, workspace: Path
) -> AsyncIterator[Callable[..., Awaitable[AppServer]]]:
    """``start(base_url, *args)``: a ``codexcore app-server`` process against the model at
    ``base_url``; at the end every one still running is killed, and each must have had
    its messages checked against the schema."""
    from .server_helpers import server_env

    started: list[AppServer] = []

    async def starter(base_url: str, *args: str) -> AppServer:
        env = server_env(base_url, OPENAI_API_KEY="sk-test")
        server = await AppServer.start(schema, env, workspace, *args)
        started.append(server)
        return server

    yield starter
    for server in started:
        if server.process.returncode is None:
            await server.kill()
        assert server.schema.checked > 0
