"""The fault suite: real processes killed, real files torn, a real disk filled, a model that fails.

After each fault: no process outlives what it belonged to, the session file
parses, the session resumes, and the next Task completes with exactly one
terminal event. Random choices come from one seed per run (printed in every
failure; ``CODEXCORE_FAULT_SEED`` replays a run). Every kill waits for the
event that marks its phase, never for time to pass. See docs/faults.md.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

from codexcore.protocol import TERMINAL_EVENT_TYPES
from codexcore.testing import (
    Hang,
    Pause,
    ScriptedResponse,
    ScriptedResponsesServer,
    Step,
    idle,
    shell_call,
    text_response,
    truncated,
)
from codexcore.tools.sandbox import probe_sandbox

from .fault_helpers import (
    CuttingServer,
    RecordingModel,
    fault_env,
    held_command,
    http_bytes,
    kill_marked,
    malformed_requests,
    new_marker,
    parse_lines,
    rng,
    run_exec,
    seed_note,
    session_file,
    wait_no_orphans,
    write_config,
)
from .server_helpers import PY, TOKEN, ServerProcess, StdioServer, hello, say, sub

pytestmark = pytest.mark.anyio

PHASES = ("before_answer", "mid_stream", "mid_command", "awaiting_approval", "after_completion")
TERMINAL = frozenset(TERMINAL_EVENT_TYPES)
POLICIES = ("danger-full-access", "workspace-write")
ANSWER = "All of it, word by word, as streamed."


def _bwrap_missing() -> str | None:
    status = probe_sandbox()
    return None if status.kind == "bwrap" else f"no working bubblewrap: {status.reason}"


def _needs(policy: str) -> Any:
    reason = _bwrap_missing() if policy == "workspace-write" else None
    skip = pytest.mark.skipif(reason is not None, reason=reason or "")
    return pytest.param(policy, marks=skip, id=policy)


def usable_policies() -> list[str]:
    return [p for p in POLICIES if p != "workspace-write" or _bwrap_missing() is None]


def home() -> Path:
    return Path(os.environ["CODEXCORE_HOME"])


@pytest.fixture
def marker() -> Iterator[str]:
    mark = new_marker()
    yield mark
    kill_marked(mark)  # whatever a failing test left behind


def configure(policy: str, approval: str, cwd: Path, history_mode: str) -> dict[str, Any]:
    return sub(
        "cfg",
        "configure_session",
        approval_policy=approval,
        sandbox_policy={"type": policy},
        cwd=str(cwd),
        history_mode=history_mode,
    )


# --- one scripted Task per phase ----------------------------------------------------------


class Scenario:
    """The first Task's script for a phase, and how to reach the phase's kill point.

    The random part: where in the phase to kill (after which delta, at the
    command's start or once it printed, at the approval request or after it
    was sent), and the history mode. ``gap`` is where the model's reply
    stops: a ``Hang`` when the server is killed, a short ``Pause`` when the
    client is (the Task must finish while nobody is attached).
    """

    def __init__(
        self, phase: str, marker: str, cwd: Path, name: str, gap: Step, *, warm_up: bool = False
    ) -> None:
        self.phase, self.random = phase, rng(name)
        self.release = cwd / f"release-{marker}"
        self.history_mode = self.random.choice(("server", "client"))
        held = shell_call(held_command(marker, self.release), call_id="c1")
        stream = text_response(ANSWER, chunks=6)
        deltas = [
            i for i, s in enumerate(stream.steps) if isinstance(s, bytes) and b"text.delta" in s
        ]
        self.delta = self.random.randrange(len(deltas))
        steps, cut = stream.steps, deltas[self.delta] + 1
        first: dict[str, list[ScriptedResponse]] = {
            "before_answer": [attrs.evolve(stream, steps=(gap, *stream.steps))],
            "mid_stream": [attrs.evolve(stream, steps=(*steps[:cut], gap, *steps[cut:]))],
            "mid_command": [held, text_response("done")],
            "awaiting_approval": [held, text_response("done")],
            "after_completion": [shell_call(["bash", "-c", "echo quick"]), text_response("done")],
        }
        # A warm-up Task gives the session its first answer, so its file exists
        # before the faulty Task (a session with no answer yet is not recorded).
        self.warm_up = [text_response("warm")] if warm_up else []
        replies = [*self.warm_up, *first[phase]]
        self.model = RecordingModel(replies, next_reply=text_response("resumed"))
        self.approval = "untrusted" if phase == "awaiting_approval" else "never"
        self.choice = self.random.random() < 0.5

    def describe(self) -> str:
        return f"phase {self.phase}, history {self.history_mode}, choice {self.choice}"

    async def reach(self, ui: Any) -> None:
        """Wait for the event that marks the kill point."""
        if self.phase == "before_answer":
            await ui.until("task_started")
            if self.choice:  # or once the request has reached the model
                await wait_for(
                    lambda: len(self.model.requests) == len(self.warm_up) + 1,
                    "the model's request",
                )
        elif self.phase == "mid_stream":
            for _ in range(self.delta + 1):
                await ui.until("agent_message_delta")
        elif self.phase == "mid_command":
            await ui.until("exec_command_output_delta" if self.choice else "exec_command_begin")
        elif self.phase == "awaiting_approval":
            request = await ui.until("exec_approval_request")
            if self.choice:  # the decision sent, the command starting
                await ui.send(
                    sub("a1", "exec_approval", id=request["msg"]["call_id"], decision="approved")
                )
                await ui.until("exec_command_begin")
        else:
            await ui.until("task_complete")


async def wait_for(condition: Any, what: str, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no {what} within {within} s{seed_note()}")
        await asyncio.sleep(0.01)


def check_session_file(session_id: str, *, torn_allowed: int = 0) -> list[dict[str, Any]]:
    records, bad = parse_lines(session_file(home(), session_id))
    assert len(bad) <= torn_allowed, f"unreadable lines in the session file: {bad}{seed_note()}"
    assert records, "the session file is empty"
    assert records[0]["type"] == "session_meta", records[:2]
    return records


async def resume_and_continue(
    base_url: str, cwd: Path, session_id: str, model: RecordingModel, context: str
) -> None:
    """``exec --resume`` runs the next Task to completion, over a well-formed request."""
    code, events, stderr = await run_exec(base_url, cwd, "--resume", session_id, "next")
    types = [e["msg"]["type"] for e in events]
    where = f"{context}{seed_note()}\nevents: {types}\nstderr: {stderr[-3000:]}"
    assert code == 0, where
    terminal = [e for e in events if e["msg"]["type"] in TERMINAL]
    assert [t["msg"]["type"] for t in terminal] == ["task_complete"], where
    assert terminal[0]["msg"]["last_agent_message"] == "resumed", where
    assert malformed_requests(model) == [], where


# --- SIGKILL of the server ------------------------------------------------------------------


@pytest.mark.parametrize("policy", [_needs(p) for p in POLICIES])
@pytest.mark.parametrize("phase", PHASES)
async def test_sigkill_of_the_server(
    phase: str, policy: str, tmp_path: Path, marker: str, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(phase, marker, tmp_path, request.node.name, Hang(), warm_up=True)
    context = f"{policy}, {scenario.describe()}"
    async with ScriptedResponsesServer(scenario.model) as http:
        server = await StdioServer.start(http.base_url, tmp_path)
        try:
            await server.send(configure(policy, scenario.approval, tmp_path, scenario.history_mode))
            session_id = (await server.until("session_configured"))["msg"]["session_id"]
            await server.send(say("t0", "warm up"))
            await server.until("task_complete")
            await server.send(say("t1", "first"))
            await scenario.reach(server)
            server.process.kill()  # type: ignore[union-attr]
            await server.wait_exit()
        finally:
            await server.kill()
        await wait_no_orphans(marker)
        check_session_file(session_id)
        await resume_and_continue(http.base_url, tmp_path, session_id, scenario.model, context)
        check_session_file(session_id)


# --- SIGKILL of the client ------------------------------------------------------------------

CLIENT = """
import socket, sys, threading
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
sock.sendall(b"".join(line.encode() + b"\\n" for line in sys.argv[2:]))
def forward():
    for line in sys.stdin.buffer:
        sock.sendall(line)
threading.Thread(target=forward, daemon=True).start()
for line in sock.makefile("rb"):
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""
"""A UI as a process of its own: its argv lines go to the server first, then its
stdin; everything the server sends comes out on its stdout."""


@pytest.mark.parametrize("phase", PHASES)
async def test_sigkill_of_the_client(
    phase: str, tmp_path: Path, marker: str, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(phase, marker, tmp_path, request.node.name, Pause(0.3))
    policy = scenario.random.choice(usable_policies())
    context = f"{policy}, {scenario.describe()}{seed_note()}"
    async with ScriptedResponsesServer(scenario.model) as http:
        env = fault_env(http.base_url, CODEXCORE_TOKEN=TOKEN)
        server = await ServerProcess.start(
            http.base_url, tmp_path, tcp=False, unix=tmp_path / "s.sock", env=env
        )
        try:
            first = [hello(), configure(policy, scenario.approval, tmp_path, scenario.history_mode)]
            first.append(say("t1", "first"))
            argv = [PY, "-c", CLIENT, str(server.unix), *(orjson.dumps(m).decode() for m in first)]
            client = await StdioServer.start(None, tmp_path, argv=argv)
            try:
                session_id = (await client.until("welcome"))["session_id"]
                # The session file is named by the engine's id (the welcome's
                # differed from it before issue 13's item 9).
                recorded = (await client.until("session_configured"))["msg"]["session_id"]
                await scenario.reach(client)
                client.process.kill()  # type: ignore[union-attr]
                await client.wait_exit()
            finally:
                await client.kill()
            await finish_after_reattach(server, session_id, scenario, context)
            assert server.process.returncode is None, f"the server died{server.context()}"  # type: ignore[union-attr]
            assert await server.stop() == 0, server.context()
        finally:
            await server.kill()
    await wait_no_orphans(marker)
    check_session_file(recorded)
    assert malformed_requests(scenario.model) == [], context


async def finish_after_reattach(
    server: ServerProcess, session_id: str, scenario: Scenario, context: str
) -> None:
    """A new client takes the session over; the first Task ends, and the next completes."""
    ui = await server.client(unix=True)
    welcome = await ui.greet(session_id=session_id, last_seq=None, control=True)
    assert welcome["type"] == "welcome", f"{welcome} {context}"
    assert welcome["control"], f"{welcome} {context}"
    if scenario.phase == "awaiting_approval" and not scenario.choice:
        request = await ui.until("exec_approval_request")
        await ui.send(sub("a2", "exec_approval", id=request["msg"]["call_id"], decision="approved"))
    scenario.release.touch()
    done = await ui.until("task_complete", id="t1", within=15)
    assert done["msg"]["last_agent_message"] in (ANSWER, "done"), f"{done} {context}"
    await ui.send(say("t2", "next"))
    done = await ui.until("task_complete", id="t2")
    assert done["msg"]["last_agent_message"] == "resumed", context
    ui.check_invariants()


# --- a full disk ----------------------------------------------------------------------------


@pytest.fixture
def small_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 64 KiB tmpfs as CODEXCORE_HOME, so the disk really fills up."""
    mount = tmp_path / "home"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {done.stderr.strip() or done.returncode}")
    monkeypatch.setenv("CODEXCORE_HOME", str(mount))
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def fill(directory: Path) -> Path:
    """Take every free byte of ``directory``'s file system; returns the file to delete."""
    ballast = directory / "ballast"
    block = b"\0" * 4096
    with open(ballast, "wb", buffering=0) as file:
        while _written(file, block):
            pass
    return ballast


def _written(file: Any, block: bytes) -> bool:
    """Whether ``block`` went in; False once the disk is full (ENOSPC), else raise."""
    try:
        return bool(file.write(block))
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        return False


@pytest.mark.parametrize("when", ["before_the_session", "during_the_session"])
async def test_a_full_disk_warns_and_the_tasks_go_on(
    when: str, small_home: Path, tmp_path: Path
) -> None:
    # Records longer than a page: the first one the disk cannot take is written in
    # part (what the session file's last page has left), and must be cut off again.
    first = "first answer " * 400
    model = RecordingModel(
        [text_response(first, chunks=4), text_response("second answer")],
        next_reply=text_response("resumed"),
    )
    async with ScriptedResponsesServer(model) as http:
        ballast = fill(small_home) if when == "before_the_session" else None
        server = await StdioServer.start(http.base_url, tmp_path)
        try:
            await server.send(configure("danger-full-access", "never", tmp_path, "server"))
            session_id = (await server.until("session_configured"))["msg"]["session_id"]
            ballast = ballast or fill(small_home)
            await server.send(say("t1", "first"))
            done = await server.until("task_complete", id="t1")
            assert done["msg"]["last_agent_message"] == first
            warnings = [w["message"] for w in server.of("warning")]
            assert any(
                "cannot record the session" in w and "No space left" in w for w in warnings
            ), f"{warnings}{server.context()}"
            ballast.unlink()
            await server.send(say("t2", "second"))
            await server.until("task_complete", id="t2")
            assert "session recording works again" in server.of("warning")[-1]["message"]
            await server.close_stdin()
            await server.to_end()
            assert await server.wait_exit() == 0, server.context()
            server.check_invariants()
        finally:
            await server.kill()
        records = check_session_file(session_id)
        assert records[1]["type"] == "config"
        said = [r["event"]["id"] for r in records if r["type"] == "event"]
        assert said.count("t2") >= 4, said  # the second Task was recorded
        await resume_and_continue(http.base_url, tmp_path, session_id, model, when)


# --- a model that stalls, cuts the stream or answers garbage --------------------------------

IDLE_TIMEOUT = 1.0
HTML = "<html><body><h1>502 Bad Gateway</h1></body></html>"
STALL = r"stream idle: no data for 1 s"
MODEL_FAULTS: dict[str, tuple[ScriptedResponse, str]] = {
    # fault: (the reply, what the error must say)
    "stall_before_any_event": (ScriptedResponse(steps=(Hang(),)), STALL),
    "stall_mid_stream": (idle(text_response(ANSWER, chunks=4)), STALL),
    "body_ends_early": (
        truncated(text_response(ANSWER, chunks=4)),
        r"stream closed before response.completed",
    ),
    "invalid_json_in_data": (
        ScriptedResponse(steps=(b"event: response.created\ndata: {not json at all\n\n",)),
        r"event whose data is not JSON: '\{not json at all'",
    ),
    "noise_as_event_stream": (
        ScriptedResponse(steps=(b"\x00\xff\xfe binary noise \x01\n\n\x02",)),
        r"not an event stream \(content-type: text/event-stream\); it began: '.*binary noise",
    ),
    "json_instead_of_events": (
        ScriptedResponse(200, {"content-type": "application/json"}, (b'{"id": "resp_1"}',)),
        r"not an event stream \(content-type: application/json\); it began: '\{\"id\"",
    ),
    "html_with_200": (
        ScriptedResponse(200, {"content-type": "text/html"}, (HTML.encode(),)),
        r"not an event stream \(content-type: text/html\); it began: '<html><body><h1>502",
    ),
}
"""A failure that may pass is tried twice (``retries_exhausted``); a reply that is no
event stream at all is not asked again (``bad_response``)."""
NOT_RETRIED = frozenset({"noise_as_event_stream", "json_instead_of_events", "html_with_200"})


async def run_model_fault(base_url: str, cwd: Path) -> tuple[dict[str, Any], StdioServer]:
    """First Task against the faulty reply, then a second one: (the first's terminal event, ui)."""
    write_config(home(), stream_idle_timeout=IDLE_TIMEOUT, max_attempts=2, retry_base_delay=0.01)
    server = await StdioServer.start(base_url, cwd)
    await server.send(configure("danger-full-access", "never", cwd, "server"))
    await server.send(say("t1", "first"))
    terminal = await until_terminal(server, "t1")
    await server.send(say("t2", "again"))
    done = await server.until("task_complete", id="t2")
    assert done["msg"]["last_agent_message"] == "recovered", server.context()
    await server.close_stdin()
    await server.to_end()
    assert await server.wait_exit() == 0, server.context()
    server.check_invariants()  # one terminal event per Task
    return terminal, server


async def until_terminal(ui: StdioServer, sub_id: str, within: float = 10.0) -> dict[str, Any]:
    while True:
        message = await ui.recv(within)
        assert message is not None, f"the stream ended before {sub_id} did{ui.context()}"
        if message.get("id") == sub_id and message["msg"]["type"] in TERMINAL:
            return message


@pytest.mark.parametrize("fault", MODEL_FAULTS)
async def test_a_faulty_model_ends_the_task_with_one_clear_error(
    fault: str, tmp_path: Path
) -> None:
    reply, expected = MODEL_FAULTS[fault]
    attempts = 1 if fault in NOT_RETRIED else 2
    model = RecordingModel([*[reply] * attempts, text_response("recovered")])
    async with ScriptedResponsesServer(model) as http:
        terminal, ui = await run_model_fault(http.base_url, tmp_path)
        await ui.kill()
    error = terminal["msg"]
    assert error["type"] == "error", terminal
    assert error["code"] == ("bad_response" if attempts == 1 else "retries_exhausted"), error
    assert re.search(expected, error["message"]), error
    assert len(model.requests) == attempts + 1, f"{len(model.requests)} requests"


async def test_a_connection_cut_mid_chunk_ends_the_task_with_one_clear_error(
    tmp_path: Path,
) -> None:
    whole = http_bytes(text_response(ANSWER, chunks=4))
    then = http_bytes(text_response("recovered"))
    async with CuttingServer(whole[: len(whole) * 2 // 3], then, cuts=2) as http:
        terminal, ui = await run_model_fault(http.base_url, tmp_path)
        await ui.kill()
    assert terminal["msg"]["type"] == "error", terminal
    assert terminal["msg"]["code"] == "retries_exhausted", terminal
    assert "stream closed before response.completed" in terminal["msg"]["message"], terminal
    assert http.requests == 3


# --- a torn session file ----------------------------------------------------------------------


async def test_a_torn_last_line_loses_only_itself_after_a_resume(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A crash mid-write leaves a line without its end; the resume's records must not be
    glued onto it (issue 13, item 6)."""
    random = rng(request.node.name)
    model = RecordingModel([text_response("first answer")], next_reply=text_response("resumed"))
    async with ScriptedResponsesServer(model) as http:
        code, events, stderr = await run_exec(http.base_url, tmp_path, "first")
        assert code == 0, stderr
        session_id = events[0]["msg"]["session_id"]
        path = session_file(home(), session_id)
        data = path.read_bytes()
        starts = [0, *(i + 1 for i, byte in enumerate(data[:-1]) if byte == ord("\n"))]
        line = random.randrange(max(0, len(starts) - 3), len(starts))  # one of the last three
        end = starts[line + 1] if line + 1 < len(starts) else len(data)
        cut = random.randrange(starts[line] + 1, end)  # inside it: a torn line remains
        fragment = data[starts[line] : cut]
        path.write_bytes(data[:cut])
        context = f"cut at byte {cut} of {len(data)}, in line {line}: ...{fragment[-60:]!r}"

        await resume_and_continue(http.base_url, tmp_path, session_id, model, context)
    records, bad = parse_lines(path)
    assert bad in ([], [fragment]), f"{context}\nunreadable: {bad}{seed_note()}"
    resumed = [r for r in records if r["type"] == "config"]
    assert len(resumed) == 2, f"{context}: the resume's config record was lost{seed_note()}"
    after = records[records.index(resumed[-1]) :]
    said = [r["event"]["msg"]["type"] for r in after if r["type"] == "event"]
    assert "task_complete" in said, f"{context}: the resumed Task was not recorded: {said}"


# --- poison entries in the worker pool's streams -------------------------------------------

SESSION_POISON = [{"foo": b"bar"}, {"session": b"{x} y"}, {"session": b"\xff"}]
INPUT_POISON = [{"r": b"not json"}, {"r": b'{"id": "x"}'}, {"s": b"[]"}, {"foo": b"bar"}]


async def test_poison_redis_entries_mid_task_are_passed_over(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Bad entries written into the sessions stream, a session's submission stream and its
    event stream, at random moments of its Tasks: every Task still ends once, each bad
    submission is one ``error`` event, and each entry lands in the dead-letter stream."""
    from redis.asyncio import Redis

    from codexcore.adapters.redis_pool import Keys
    from codexcore.testing import ScriptedModel

    from .redis_helpers import open_session, pool

    random, keys, tasks = rng(request.node.name), Keys(), 3
    slow = text_response("a b c d", chunks=4)
    slow = attrs.evolve(slow, steps=(*truncated(slow).steps, Pause(0.3), *slow.steps[2:]))
    async with pool(ScriptedModel([slow] * tasks + [text_response("after")]), tmp_path) as running:
        gateway = await running.gateway()
        await asyncio.gather(running.worker("w1"), running.worker("w2"))
        ui, session_id = await open_session(gateway)
        redis: Any = Redis.from_url(running.redis.url)
        written: list[bytes] = []
        inputs = 0
        try:
            for n in range(tasks):
                await ui.send(say(f"u{n}", "go"))
                await ui.until(random.choice(["task_started", "agent_message_delta"]), id=f"u{n}")
                for _ in range(random.randint(1, 3)):
                    if random.random() < 0.5:
                        entry = random.choice(SESSION_POISON)
                        written.append(await redis.xadd(keys.sessions, entry))
                    else:
                        written.append(
                            await redis.xadd(keys.inbox(session_id), random.choice(INPUT_POISON))
                        )
                        inputs += 1
                await ui.until("task_complete", id=f"u{n}", within=20)
                last = (await redis.xrevrange(keys.events(session_id), count=1))[0][0]
                # Between two events' ids, or ahead of the numbering (an id of now).
                forged = random.choice([last.split(b"-")[0] + b"-9", b"*"])
                written.append(await redis.xadd(keys.events(session_id), {"e": b"{"}, id=forged))
            await ui.send(say("last", "go"))
            await ui.until("task_complete", id="last", within=20)
            letters = await _dead_letter_ids(redis, keys, len(written))
            assert sorted(letters) == sorted(written), seed_note()
        finally:
            await redis.aclose()
        ui.check_invariants()
        errors = ui.of("error")
        assert len(errors) == inputs, f"{errors}{seed_note()}"
        assert all(e["code"] == "bad_submission" for e in errors), errors


async def _dead_letter_ids(redis: Any, keys: Any, count: int) -> list[bytes]:
    """The ids of the dead letters, once there are ``count`` (within 15 s)."""
    async with asyncio.timeout(15):
        while True:
            found = [fields[b"id"] for _, fields in await redis.xrange(keys.dead_letter)]
            if len(found) >= count:
                return found
            await asyncio.sleep(0.05)
