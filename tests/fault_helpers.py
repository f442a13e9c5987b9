"""Tools for the fault suite: processes found by a marker, well-formed requests, session files.

Every wait has a timeout and says what it saw when it runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from codexcore.testing import ScriptedModel, ScriptedResponse

from .server_helpers import PY, server_env

SEED = int(os.environ.get("CODEXCORE_FAULT_SEED") or random.SystemRandom().randrange(1 << 32))
"""One seed per run (set ``CODEXCORE_FAULT_SEED`` to replay a run); every
random choice of the suite derives from it, and every failure prints it."""


def rng(name: str) -> random.Random:
    """A generator for one test: the run's seed and the test's name fix its choices."""
    return random.Random(f"{SEED}:{name}")


def seed_note() -> str:
    return f" (fault seed {SEED}: rerun with CODEXCORE_FAULT_SEED={SEED})"


# --- commands that can be found again ---------------------------------------------------


def new_marker() -> str:
    return f"fault-{uuid.uuid4().hex}"


def held_command(marker: str, release: Path) -> list[str]:
    """A shell command that prints ``ready`` and runs until ``release`` exists (or ~30 s).

    ``marker`` is in the shell's argv and, exported, in the environment of
    every process the shell starts (its ``sleep`` children), so a survivor is
    found whichever of them it is.
    """
    script = (
        f"export FAULT_MARK={marker}; echo ready; i=0; "
        f'while [ ! -e "{release}" ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done; '
        f"echo released # {marker}"
    )
    return ["bash", "-c", script]


def marked_processes(marker: str) -> dict[int, str]:
    """Live processes whose argv or environment holds ``marker``: pid -> argv."""
    needle = marker.encode()
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes()
            environ = Path(entry.path, "environ").read_bytes()
            state = Path(entry.path, "stat").read_bytes().rpartition(b")")[2].split()[0]
        except OSError:
            continue  # gone meanwhile
        if state != b"Z" and (needle in argv or needle in environ):
            found[int(entry.name)] = argv.replace(b"\0", b" ").decode(errors="replace")
    return found


async def wait_no_orphans(marker: str, within: float = 5.0) -> None:
    """Wait until no process carries ``marker``; fail naming the survivors."""
    deadline = asyncio.get_running_loop().time() + within
    while found := marked_processes(marker):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(
                f"{len(found)} process(es) outlived their server by {within} s: "
                f"{found}{seed_note()}"
            )
        await asyncio.sleep(0.05)


def kill_marked(marker: str) -> None:
    """Teardown: kill whatever a failed test left running."""
    for pid in marked_processes(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --- the model side ---------------------------------------------------------------------


class RecordingModel(ScriptedModel):
    """A ScriptedModel that also keeps each reply, to check requests as the real API would.

    A request whose last user message is ``next`` gets ``next_reply`` (when
    given) whatever is left of the script: a kill may land before the first
    Task's request was sent, and the resumed Task must not get its reply.
    """

    def __init__(
        self, responses: Iterable[Any] = (), next_reply: ScriptedResponse | None = None
    ) -> None:
        super().__init__(responses)
        self.next_reply = next_reply
        self.replies: list[ScriptedResponse] = []

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        if self.next_reply is not None and _last_user_text(body) == "next":
            self.requests.append(body)
            reply = self.next_reply
        else:
            reply = super().respond(body)
        self.replies.append(reply)
        return reply


def _last_user_text(body: dict[str, Any]) -> str | None:
    users = [i for i in body.get("input") or [] if i.get("role") == "user"]
    parts = users[-1].get("content") or [] if users else []
    return " ".join(str(p.get("text")) for p in parts if isinstance(p, dict)) or None


def _stored_output(reply: ScriptedResponse) -> tuple[str, list[dict[str, Any]]] | None:
    """(response id, output items) of a reply the real API would have stored: one
    that streamed to ``response.completed``; None for a cut, hung or failed one."""
    for step in reply.steps:
        if isinstance(step, bytes) and step.startswith(b"event: response.completed\n"):
            data = orjson.loads(step.partition(b"\ndata: ")[2])
            response = data["response"]
            return response["id"], list(response["output"])
    return None


def malformed_requests(model: RecordingModel) -> list[str]:
    """What the real Responses API would reject: a ``function_call`` whose
    ``call_id`` has no ``function_call_output`` in the conversation the request
    makes (its own input plus, through ``previous_response_id``, every stored
    response it chains on), or a chain onto a response never stored."""
    stored: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
    problems = []
    for number, (body, reply) in enumerate(zip(model.requests, model.replies, strict=True), 1):
        items, previous = list(body.get("input") or []), body.get("previous_response_id")
        chain = previous
        while chain is not None:
            if chain not in stored:
                problems.append(f"request #{number} chains on {chain!r}, never stored")
                break
            earlier, chain = stored[chain]
            items = earlier + items
        calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
        answered = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
        if calls - answered:
            problems.append(f"request #{number}: no output for {sorted(calls - answered)}")
        if (output := _stored_output(reply)) is not None:
            stored[output[0]] = (items + output[1], None)
    return problems


# --- processes ----------------------------------------------------------------------------


def fault_env(base_url: str, **extra: str) -> dict[str, str]:
    """A server's or exec's environment: the test's CODEXCORE_HOME, the scripted model."""
    return server_env(base_url, OPENAI_API_KEY="sk-fault-suite", **extra)


async def run_exec(
    base_url: str, cwd: Path, *args: str, within: float = 30.0
) -> tuple[int, list[dict[str, Any]], str]:
    """``codexcore exec --events-json ARGS``: (exit code, events, stderr)."""
    process = await asyncio.create_subprocess_exec(
        PY,
        "-m",
        "codexcore",
        "exec",
        "--events-json",
        *args,
        env=fault_env(base_url),
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
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
            f"exec {args} did not finish in {within} s\nstdout: {out[-2000:]!r}\n"
            f"stderr: {err[-2000:]!r}{seed_note()}"
        ) from None
    events = [orjson.loads(line) for line in out.splitlines() if line.strip()]
    assert process.returncode is not None
    return process.returncode, events, err.decode(errors="replace")


# --- session files ----------------------------------------------------------------------


def session_file(home: Path, session_id: str) -> Path:
    matches = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{session_id}.jsonl"))
    assert len(matches) == 1, f"session files for {session_id}: {matches}"
    return matches[0]


def parse_lines(path: Path) -> tuple[list[dict[str, Any]], list[bytes]]:
    """(records, lines that are not a JSON object) of a session file."""
    records: list[dict[str, Any]] = []
    bad: list[Any] = []
    for line in path.read_bytes().splitlines():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            bad.append(line)
            continue
        (records if isinstance(record, dict) else bad).append(record)
    return records, bad


def write_config(home: Path, **provider: float | int) -> None:
    """``HOME/config.toml`` with these ``[provider]`` settings."""
    lines = ["[provider]", *(f"{key} = {value}" for key, value in provider.items())]
    (home / "config.toml").write_text("\n".join(lines) + "\n")


class CuttingServer:
    """An HTTP server that answers the first ``cuts`` requests with a head and part
    of a body, then resets the connection; later requests get ``then``, whole.

    The scripted server always ends a body cleanly; a proxy or a network that
    dies mid-chunk does not.
    """

    def __init__(self, head_and_part: bytes, then: bytes, cuts: int = 1) -> None:
        self._part, self._then, self._cuts = head_and_part, then, cuts
        self._server: asyncio.Server | None = None
        self.requests = 0

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def __aenter__(self) -> CuttingServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        await reader.readexactly(length)
        cut = self.requests < self._cuts
        reply = self._part if cut else self._then
        self.requests += 1
        writer.write(reply)
        await writer.drain()
        if cut:
            writer.transport.abort()
        else:
            writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def http_bytes(response: ScriptedResponse) -> bytes:
    """``response`` as one HTTP/1.1 reply whose body ends when the connection closes."""
    head = [f"HTTP/1.1 {response.status} OK", *(f"{k}: {v}" for k, v in response.headers)]
    body = b"".join(step for step in response.steps if isinstance(step, bytes))
    return ("\r\n".join([*head, "connection: close"]) + "\r\n\r\n").encode() + body


# --- a read stuck in a worker thread ------------------------------------------------------

STUCK_SERVE = """
import os, stat, sys
import codexcore.engine._turn_diff as turn_diff

def blocking_read(path, **_):
    if stat.S_ISFIFO(os.stat(path).st_mode):
        print(f"stuck reading {path}", file=sys.stderr, flush=True)
    with open(path, "rb") as file:  # a FIFO with no writer: blocks for good
        return file.read().decode()

turn_diff._read_text = blocking_read
from codexcore.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``python -c STUCK_SERVE serve ...``: ``codexcore serve`` whose turn diff reads as
it did before issue 26 (a plain blocking ``open``), so a Task whose command leaves
a FIFO in place of a file has a worker thread stuck for good."""
