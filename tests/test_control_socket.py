"""Seed 004's per-session control socket, against real processes: ``codexcore exec
--control-socket`` running a scripted multi-Turn Task, and ``codexcore serve
--session-sockets``. The seed's own Python example client (tests/seed004_client.py)
follows the session; HOME is set so that its socket path is the control socket."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    shell_call,
)

from .server_helpers import PY, Client, LineLink, ServerProcess, _Process, server_env, sub
from .test_serve_jsonrpc import NOBODY_RPC_CLIENT

pytestmark = pytest.mark.anyio

SEED_CLIENT = Path(__file__).with_name("seed004_client.py")
SEED_PROMPT = "Focus on fixing the type errors first before adding new features."
SEED_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$")
WAIT = 30.0


def rpc(rid: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


class Gate:
    """A scripted reply held back until the test opens the gate; tells when it is asked."""

    def __init__(self, reply: ScriptedResponse) -> None:
        self.reply = reply
        self.asked = threading.Event()
        self.open = threading.Event()

    def __call__(self, body: dict[str, Any]) -> ScriptedResponse:
        self.asked.set()
        self.open.wait(WAIT)  # the scripted server's thread waits: the Turn is in flight
        return self.reply

    async def wait_asked(self) -> None:
        assert await asyncio.to_thread(self.asked.wait, WAIT), "the request never came"


class SeedClient:
    """tests/seed004_client.py in a process of its own; each message it prints, parsed."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.seen: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, home: str, task_name: str) -> SeedClient:
        env = {"HOME": home, "PYTHONUNBUFFERED": "1", "PATH": os.environ["PATH"]}
        process = await asyncio.create_subprocess_exec(
            PY, str(SEED_CLIENT), task_name, env=env, stdout=asyncio.subprocess.PIPE
        )
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.seen.append(ast.literal_eval(line.decode()))  # the client print()s dicts
            self._changed.set()
        self._changed.set()

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [
            m["params"]["data"]
            for m in self.seen
            if m.get("method") == "event" and m["params"]["type"] == kind
        ]

    def lines(self) -> list[str]:
        return [data["line"] for data in self.events("output")]

    async def until(self, what: str, check: Callable[[], bool]) -> None:
        try:
            async with asyncio.timeout(WAIT):
                while not check():
                    if self._reader.done():
                        raise AssertionError(f"the client ended before {what}: {self.seen}")
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {what} within {WAIT} s; the client saw {self.seen}") from None

    async def wait_exit(self) -> int:
        async with asyncio.timeout(WAIT):
            await self._reader
            return await self.process.wait()

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await asyncio.gather(self._reader, return_exceptions=True)


@contextlib.contextmanager
def short_home() -> Iterator[str]:
    """A HOME short enough for Unix socket paths (108 bytes) under .local/share/ralph."""
    home = tempfile.mkdtemp(prefix="cxh-", dir="/tmp")
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def ralph_dir(home: str) -> Path:
    return Path(home) / ".local/share/ralph/sockets"


async def call(client: Client, message: dict[str, Any]) -> Any:
    """Send a request; its answer (notifications before it stay in ``client.seen``)."""
    await client.send(message)
    while (answer := await client.recv(WAIT)) is not None and "id" not in answer:
        pass
    assert answer is not None, f"closed before answering {message}"
    assert answer["id"] == message["id"], answer
    return answer.get("result", answer)


@asynccontextmanager
async def exec_run(
    gates: list[Gate], home: str, workspace: Path, *flags: str
) -> AsyncIterator[tuple[_Process, ScriptedModel]]:
    """``codexcore exec --events-json --control-socket ...`` on a scripted Task; the gates'
    replies, then one reply that a stopped Task must never ask for."""
    never = shell_call(["echo", "a request after the stop"])
    model = ScriptedModel([*gates, never])
    with ScriptedResponsesServer(model) as http:
        process = _Process()
        argv = [PY, "-m", "codexcore", "exec", "--events-json", "--approval-policy", "never"]
        argv += ["--sandbox", "danger-full-access", *flags, "fix the build"]
        env = server_env(http.base_url, HOME=home, CODEXCORE_HOME=f"{home}/cx")
        await process._spawn(argv, env, workspace, stdout=asyncio.subprocess.PIPE)
        try:
            yield process, model
        finally:
            for gate in gates:
                gate.open.set()  # a failed test must not leave the server thread waiting
            await process.kill()


async def state_change(client: LineLink, data: dict[str, Any]) -> None:
    """Read until a ``state_change`` notification with exactly ``data`` (or find it seen)."""

    def found() -> bool:
        return any(
            m.get("method") == "event" and m["params"] == {**m["params"], "data": data}
            for m in client.seen
        )

    while not found():
        if await client.recv(WAIT) is None:
            raise AssertionError(f"closed before state_change {data}; saw {client.seen}")


async def json_events(process: _Process) -> list[dict[str, Any]]:
    assert process.process is not None
    assert process.process.stdout is not None
    return [orjson.loads(line) for line in (await process.process.stdout.read()).splitlines()]


async def test_exec_control_socket_with_the_seeds_client(tmp_path: Path) -> None:
    gates = [
        Gate(shell_call(["printf", "alpha\\nbeta\\n"], text="Looking around.")),
        Gate(shell_call(["printf", "gamma\\n"])),
        Gate(shell_call(["printf", "delta\\n"])),
    ]
    with short_home() as home:
        path = ralph_dir(home) / "build.sock"
        async with exec_run(gates, home, tmp_path, "--control-socket", str(path)) as (
            process,
            model,
        ):
            await process.wait_stderr(r"control socket")
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            await gates[0].wait_asked()  # the first Turn is in flight
            seed = await SeedClient.start(home, "build")
            try:
                await seed.until("the subscription", lambda: bool(seed.seen))
                assert seed.seen[0] == {"jsonrpc": "2.0", "id": 1, "result": {"subscribed": ["*"]}}
                control = await Client.unix(path)
                status = await call(control, rpc(1, "get_status"))
                assert re.fullmatch(r"[0-9a-f-]{36}", status.pop("task_name"))
                assert re.fullmatch(r"codexcore:[0-9a-f]{12}", status.pop("agent_id"))
                for field in ("started_at", "updated_at"):
                    assert SEED_TIMESTAMP.match(status.pop(field)), field
                assert status == {
                    "task_dir": str(tmp_path),
                    "iteration": 0,
                    "max_iterations": None,
                    "current_story": None,
                    "agent": "codexcore",
                    "status": "running",
                    "interactive_mode": False,
                    "recent_output": [],
                }
                # Turn 1: the agent's text and the command's output, line by line.
                gates[0].open.set()
                await gates[1].wait_asked()
                await seed.until("turn 1", lambda: {"iteration": 1} in seed.events("state_change"))
                assert seed.lines() == ["Looking around.", "alpha", "beta"]
                status = await call(control, rpc(2, "get_status"))
                assert (status["iteration"], status["recent_output"]) == (1, seed.lines())
                # The seed's inject_prompt, as written: it reaches the next model request.
                injected = await call(control, rpc(3, "inject_prompt", prompt=SEED_PROMPT))
                assert injected == {"status": "prompt_injected", "prompt": SEED_PROMPT}
                gates[1].open.set()
                await gates[2].wait_asked()
                assert SEED_PROMPT not in orjson.dumps(model.requests[1]).decode()
                assert SEED_PROMPT in orjson.dumps(model.requests[2]["input"]).decode()
                # stop: the current Turn finishes, no further request, exec exits 0.
                assert await call(control, rpc(4, "stop")) == {"status": "stop_requested"}
                assert (await call(control, rpc(5, "get_status")))["status"] == "stopping"
                await seed.until(
                    "stopping", lambda: {"status": "stopping"} in seed.events("state_change")
                )
                gates[2].open.set()
                assert await process.wait_exit(WAIT) == 0, process.context()
                assert (len(model.requests), model.remaining) == (3, 1)
                assert await seed.wait_exit() == 0  # the server closed the connection
                assert seed.lines() == ["Looking around.", "alpha", "beta", "gamma", "delta"]
                changes = seed.events("state_change")
                assert changes[-1] == {"status": "stopped"}, changes
                assert [c["iteration"] for c in changes if "iteration" in c] == [1, 2, 3]
                assert not path.exists()
                ends = [
                    e["msg"]
                    for e in await json_events(process)
                    if e["msg"]["type"] == "task_complete"
                ]
                assert [end["stopped_by"] for end in ends] == ["stop"]
                await control.close()
            finally:
                await seed.kill()


def stale_socket(path: Path) -> None:
    """A socket file nobody listens on, as a killed server leaves it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))


async def test_exec_checkpoint_ends_the_task_after_its_turn_and_a_stale_socket_is_replaced(
    tmp_path: Path,
) -> None:
    gates = [Gate(shell_call(["printf", "one\\n"]))]
    with short_home() as home:
        path = Path(home) / "s" / "ctl.sock"
        stale_socket(path)
        async with exec_run(gates, home, tmp_path, "--control-socket", str(path)) as (
            process,
            model,
        ):
            await process.wait_stderr(r"control socket")
            await gates[0].wait_asked()
            control = await Client.unix(path)
            await call(control, rpc(1, "subscribe", events=["state_change"]))
            answer = await call(control, rpc(2, "checkpoint"))
            assert answer == {"status": "checkpoint_requested"}
            gates[0].open.set()
            assert await process.wait_exit(WAIT) == 0, process.context()
            assert (len(model.requests), model.remaining) == (1, 1)
            ends = [
                e["msg"] for e in await json_events(process) if e["msg"]["type"] == "task_complete"
            ]
            assert [end["stopped_by"] for end in ends] == ["checkpoint"]
            await control.to_end(WAIT)
            changes = [m["params"]["data"] for m in control.seen if m.get("method") == "event"]
            assert {"status": "stopping"} in changes
            assert changes[-1] == {"status": "stopped"}  # the session ended with exec
            assert all(m["params"]["type"] == "state_change" for m in control.seen if "method" in m)
            assert not path.exists()
            await control.close()


@asynccontextmanager
async def serve(
    home: str, workspace: Path, model: ScriptedModel | None = None
) -> AsyncIterator[ServerProcess]:
    """``codexcore serve --unix PATH --session-sockets DIR`` (no token: the peer checks)."""
    async with ScriptedResponsesServer(model or ScriptedModel([])) as http:
        env = server_env(http.base_url, HOME=home, CODEXCORE_LOG="info")
        server = await ServerProcess.start(
            http.base_url,
            workspace,
            "--session-sockets",
            str(ralph_dir(home)),
            tcp=False,
            unix=Path(home) / "run" / "s.sock",
            env=env,
        )
        try:
            yield server
        finally:
            await server.kill()


async def new_session(server: ServerProcess, home: str) -> tuple[Client, str, Path]:
    """A native client that creates a session; the session's control socket."""
    client = await server.client(unix=True)
    welcome = await client.greet(token=None)
    session_id = welcome["session_id"]
    await server.wait_stderr(rf"control socket session='{session_id}'")
    return client, session_id, ralph_dir(home) / f"{session_id}.sock"


async def test_serve_gives_every_session_a_socket_removed_when_it_ends(tmp_path: Path) -> None:
    with short_home() as home:
        async with serve(home, tmp_path) as server:
            first, first_id, first_path = await new_session(server, home)
            assert stat.S_IMODE(first_path.stat().st_mode) == 0o600
            assert stat.S_IMODE(first_path.parent.stat().st_mode) == 0o700
            seed = await SeedClient.start(home, first_id)  # the seed's client, by task name
            try:
                await seed.until("the subscription", lambda: bool(seed.seen))
                control = await Client.unix(first_path)
                status = await call(control, rpc(7, "get_status"))
                assert (status["task_name"], status["task_dir"]) == (first_id, str(tmp_path))
                assert (status["status"], status["iteration"]) == ("idle", 0)
                # Subscriptions: "*" spelled out when part of it is removed; names checked.
                assert await call(control, rpc(8, "subscribe", events="*")) == {"subscribed": ["*"]}
                assert await call(control, rpc(9, "unsubscribe", events=["output"])) == {
                    "subscribed": ["state_change"]
                }
                bad = await call(control, rpc(10, "subscribe", events=["output", "story"]))
                assert bad["error"]["code"] == -32602
                assert "params.events[1]" in bad["error"]["message"]
                second, second_id, second_path = await new_session(server, home)
                assert second_id != first_id
                assert second_path.exists()
                # A socket serves its own session only: naming another is refused.
                other = {"type": "text", "text": "hi"}
                stray = await call(control, rpc(11, "run.start", input=other, session_id=second_id))
                assert stray["error"]["code"] == -32602, stray
                assert first_id in stray["error"]["message"]
                # The first session ends: its socket goes, its clients are closed.
                await first.send(sub("bye", "shutdown"))
                await first.until("shutdown_complete")
                assert await seed.wait_exit() == 0
                assert seed.events("state_change")[-1] == {"status": "stopped"}
                await control.to_end(WAIT)
                notified = [m["params"] for m in control.seen if m.get("method") == "event"]
                assert notified[-1]["data"] == {"status": "stopped"}
                assert {n["type"] for n in notified} == {"state_change"}  # output unsubscribed
                await server.wait_stderr(rf"control socket removed session='{first_id}'")
                assert not first_path.exists()
                assert second_path.exists()
                await control.close()
                await second.close()
            finally:
                await seed.kill()
            assert await server.stop() == 0
            assert not second_path.exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
    reason="needs root, to run a client as another user (nobody)",
)
async def test_a_session_socket_refuses_another_user(tmp_path: Path) -> None:
    with short_home() as home:
        async with serve(home, tmp_path) as server:
            _client, _session_id, path = await new_session(server, home)
            # Loosened permissions: only the peer check stands between the socket and nobody.
            os.chmod(home, 0o755)
            for directory in (*reversed(path.parents[:4]),):
                os.chmod(directory, 0o755)
            os.chmod(path, 0o666)
            process = await asyncio.create_subprocess_exec(
                "/usr/bin/python3",
                "-c",
                NOBODY_RPC_CLIENT,
                str(path),
                user=65534,
                group=65534,
                extra_groups=[],
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={},
            )
            stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
            assert process.returncode == 0, stderr.decode()
            refusal = orjson.loads(stdout)
            assert refusal["id"] is None
            assert refusal["error"]["code"] == -32011
            assert "uid 65534" in refusal["error"]["message"]
            assert await server.stop() == 0


# Stdlib only: it runs inside the sandbox as the model's command would.
STEER_FROM_INSIDE = r"""
import json, socket, sys
try:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(sys.argv[1])
except OSError as exc:
    print("attack: no connection:", repr(exc), flush=True)
    raise
request = {"jsonrpc": "2.0", "id": 1, "method": "inject_prompt", "params": {"prompt": sys.argv[2]}}
sock.sendall(json.dumps(request).encode() + b"\n")
print("attack: answer", sock.makefile("rb").readline().decode().strip(), flush=True)
"""
INJECTED = "INJECTED-FROM-THE-SANDBOX"


def user_texts(body: dict[str, Any]) -> str:
    items = body.get("input") or []
    return orjson.dumps([i for i in items if i.get("role") == "user"]).decode()


@pytest.mark.parametrize("wall", ["peer check", "syscall filter"])
async def test_a_sandboxed_command_cannot_steer_its_own_session(tmp_path: Path, wall: str) -> None:
    from codexcore.testing import text_response
    from codexcore.tools.sandbox import SandboxSpec, probe_sandbox, wrap_command

    sandbox = probe_sandbox()
    if sandbox.kind != "bwrap" or sandbox.executable is None:
        pytest.skip(f"no working bubblewrap here: {sandbox.reason}")
    with short_home() as home:
        path = Path(home) / "s" / "ctl.sock"
        attack = [PY, "-c", STEER_FROM_INSIDE, str(path), INJECTED]
        if wall == "peer check":
            # The filter left out on purpose: only the socket's peer check stands between
            # this command and the session. The session runs it unconfined.
            attack = wrap_command(
                attack,
                SandboxSpec(mode="read-only"),
                str(tmp_path),
                bwrap=sandbox.executable,
                seccomp_fd=None,
            )
        sandbox_flag = "danger-full-access" if wall == "peer check" else "workspace-write"
        model = ScriptedModel([shell_call(attack), text_response("done")])
        with ScriptedResponsesServer(model) as http:
            process = _Process()
            argv = [PY, "-m", "codexcore", "exec", "--events-json", "--approval-policy", "never"]
            argv += ["--sandbox", sandbox_flag, "--control-socket", str(path), "go"]
            env = server_env(http.base_url, HOME=home, CODEXCORE_HOME=f"{home}/cx")
            await process._spawn(argv, env, tmp_path, stdout=asyncio.subprocess.PIPE)
            try:
                assert await process.wait_exit(WAIT) == 0, process.context()
                events = await json_events(process)
            finally:
                await process.kill()
    (end,) = [e["msg"] for e in events if e["msg"]["type"] == "exec_command_end"]
    output = end["aggregated_output"]
    if wall == "peer check":
        answer = orjson.loads(output.split("attack: answer", 1)[1].splitlines()[0])
        assert answer["id"] is None
        assert answer["error"]["code"] == -32011
        assert "sandboxes" in answer["error"]["message"], answer
    else:
        assert "attack: no connection: PermissionError(1, 'Operation not permitted')" in output
    assert len(model.requests) == 2
    assert all(INJECTED not in user_texts(body) for body in model.requests)


async def test_exec_prints_the_same_events_with_a_control_socket(tmp_path: Path) -> None:
    """The host under exec adds acknowledgements and a pump; neither reaches exec's output."""
    from codexcore.testing import text_response

    async def types(*flags: str) -> list[str]:
        model = ScriptedModel([shell_call(["printf", "x\\n"]), text_response("done")])
        with short_home() as home, ScriptedResponsesServer(model) as http:
            process = _Process()
            argv = [PY, "-m", "codexcore", "exec", "--events-json", "--approval-policy", "never"]
            # The prompt first: a bare --control-socket would take it for its PATH.
            argv += ["--sandbox", "danger-full-access", "go", *flags]
            env = server_env(http.base_url, HOME=home, CODEXCORE_HOME=f"{home}/cx")
            await process._spawn(argv, env, tmp_path, stdout=asyncio.subprocess.PIPE)
            try:
                events = await json_events(process)
                assert await process.wait_exit(WAIT) == 0, process.context()
            finally:
                await process.kill()
            assert not list((Path(home) / "cx" / "sockets").glob("*.sock"))  # removed
        return [e["msg"]["type"] for e in events]

    plain = await types()
    assert "exec_command_end" in plain
    assert await types("--control-socket") == plain


async def test_stop_while_an_approval_waits_takes_control_and_ends_the_task(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([shell_call(["touch", "x"]), shell_call(["echo", "never asked"])])
    with short_home() as home:
        async with serve(home, tmp_path, model) as server:
            ui, session_id, path = await new_session(server, home)
            await ui.send(
                sub("cfg", "configure_session", approval_policy="untrusted"),
                sub("t1", "user_input", items=[{"type": "text", "text": "touch x"}]),
            )
            control = await Client.unix(path)
            await call(control, rpc(0, "subscribe", events=["state_change"]))
            await ui.until("exec_approval_request")
            await state_change(control, {"status": "awaiting_approval"})
            status = await call(control, rpc(1, "get_status"))
            assert (status["task_name"], status["status"]) == (session_id, "awaiting_approval")
            assert await call(control, rpc(2, "stop")) == {"status": "stop_requested"}
            # The command was never approved: it does not run, and no request follows.
            end = await ui.until("task_complete", id="t1")
            assert end["msg"]["stopped_by"] == "stop"
            assert "exec_command_begin" not in ui.types()
            assert ui.of("control_changed") == [
                {"type": "control_changed", "control": False, "reason": "taken_over"}
            ]
            await state_change(control, {"status": "stopped"})
            assert (await call(control, rpc(3, "get_status")))["status"] == "stopped"
            assert len(model.requests) == 1
            assert not (tmp_path / "x").exists()
            await control.close()
            await ui.close()


async def test_a_resumed_session_s_socket_takes_the_recorded_id(tmp_path: Path) -> None:
    from codexcore.testing import text_response

    gate = Gate(text_response("resumed"))
    model = ScriptedModel([text_response("first"), gate])
    with short_home() as home, ScriptedResponsesServer(model) as http:
        env = server_env(http.base_url, HOME=home, CODEXCORE_HOME=f"{home}/cx")
        sockets = Path(home) / "cx" / "sockets"
        base = [PY, "-m", "codexcore", "exec", "--events-json"]
        first = _Process()
        await first._spawn([*base, "hello"], env, tmp_path, stdout=asyncio.subprocess.PIPE)
        try:
            events = await json_events(first)
            assert await first.wait_exit(WAIT) == 0, first.context()
        finally:
            await first.kill()
        (configured,) = [e["msg"] for e in events if e["msg"]["type"] == "session_configured"]
        recorded = configured["session_id"]
        second = _Process()
        argv = [*base, "--resume", recorded, "again", "--control-socket"]
        await second._spawn(argv, env, tmp_path, stdout=asyncio.subprocess.PIPE)
        try:
            await gate.wait_asked()  # resumed: the session has its recorded id now
            path = sockets / f"{recorded}.sock"
            control = await Client.unix(path)
            status = await call(control, rpc(1, "get_status"))
            assert (status["task_name"], status["status"]) == (recorded, "running")
            assert [p.name for p in sockets.iterdir()] == [path.name]  # renamed, not copied
            gate.open.set()
            assert await second.wait_exit(WAIT) == 0, second.context()
            await control.to_end(WAIT)
            await control.close()
            assert not path.exists()
        finally:
            gate.open.set()
            await second.kill()
