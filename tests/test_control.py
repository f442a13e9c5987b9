"""Seed 003's control messages, received by a session host in-process: every result code,
idempotency, content_ref, authorisation, the replay window and the audit."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import orjson
import pytest

from codexcore import SessionConfig
from codexcore.adapters.control._receiver import receiver
from codexcore.adapters.control._wire import (
    ContentRef,
    ControlConfig,
    ControlSender,
    Credential,
    InterruptRequest,
    StdinRequest,
    ack_schema,
    parse_request,
)
from codexcore.adapters.host._host import Attachment, HostConfig, SessionHost, host_engine_config
from codexcore.protocol import SandboxPolicy
from codexcore.testing import (
    Hang,
    Pause,
    ScriptedModel,
    ScriptedResponse,
    shell_call,
    text_response,
)

from .control_helpers import (
    ME,
    SEED_EXAMPLES,
    SENDER,
    SENDER_TOKEN,
    TEAM,
    control_config,
    interrupt_request,
    sent_at,
    stdin_request,
)

pytestmark = pytest.mark.anyio

WAIT = 10.0


# --- the host and a watcher of its events ----------------------------------------------------


class Events:
    """A watching attachment's events, recorded; waits say what was seen."""

    def __init__(self, attachment: Attachment) -> None:
        self.seen: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._attachment = attachment
        self._task = asyncio.create_task(self._read(attachment))

    async def _read(self, attachment: Attachment) -> None:
        while frames := await attachment.take():
            for frame in frames:
                data = getattr(frame, "data", None)
                if data is not None:
                    self.seen.append(orjson.loads(data))
            self._changed.set()

    def types(self) -> list[str]:
        return [event["msg"]["type"] for event in self.seen]

    async def until(self, kind: str, count: int = 1) -> dict[str, Any]:
        try:
            async with asyncio.timeout(WAIT):
                while True:
                    found = [e for e in self.seen if e["msg"]["type"] == kind]
                    if len(found) >= count:
                        return found[count - 1]
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {kind} (#{count}); saw {self.types()}") from None

    async def close(self) -> None:
        self._attachment.detach()  # a lossless reader that stops would hold the session
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def hosted(
    tmp_path: Path, model: ScriptedModel, control: ControlConfig | None = None, **host: Any
) -> AsyncIterator[tuple[SessionHost, str, str, Events]]:
    """A host with one session (created by a client that stays attached); yields the host,
    the session id, its agent id and the session's events."""
    engine = host_engine_config(
        session=SessionConfig(
            cwd=str(tmp_path),
            approval_policy="never",
            sandbox_policy=SandboxPolicy(type="danger-full-access"),
        ),
        home=str(tmp_path / "home"),
        retry_base_delay=0.01,
    )
    config = HostConfig(engine=engine, control=control or control_config(), **host)
    async with SessionHost(config, transport=model.mock_transport()) as server:
        attachment = await server.attach(token=None, lossless=True)  # reads all, drops none
        events = Events(attachment)
        try:
            yield server, attachment.session_id, attachment.session.agent_id, events
        finally:
            await events.close()


def paused(response: ScriptedResponse, seconds: float) -> ScriptedResponse:
    """``response`` held after its first event for ``seconds`` (the Task is running)."""
    return attrs.evolve(response, steps=(response.steps[0], Pause(seconds), *response.steps[1:]))


async def requested(model: ScriptedModel, count: int) -> None:
    """Wait until the model has received ``count`` requests."""
    deadline = time.monotonic() + WAIT
    while len(model.requests) < count:
        assert time.monotonic() < deadline, f"{len(model.requests)} requests, not {count}"
        await asyncio.sleep(0.01)


def hanging() -> ScriptedResponse:
    return attrs.evolve(text_response("never"), steps=(text_response("x").steps[0], Hang()))


def sent_text(body: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for item in body["input"]
        if item.get("role") == "user"
        for part in item["content"]
        if part.get("type") == "input_text"
    ]


# --- the seed's examples ---------------------------------------------------------------------


def test_the_seeds_four_example_payloads_parse_unchanged() -> None:
    config = ControlConfig(team=TEAM)
    stdin = parse_request(json.loads(SEED_EXAMPLES["8.1"]), config)
    assert isinstance(stdin, StdinRequest)
    envelope = stdin.envelope
    assert (envelope.request_id, envelope.session_id, envelope.agent_id) == (
        "req_01HZY8QJ8R7G6K2YJ7V2M9A1P3",
        "claude-session-uuid",
        "codex:abc123",
    )
    assert (envelope.team, envelope.sender, envelope.thread_id) == (TEAM, SENDER, "thread-xyz789")
    assert envelope.sent_at.isoformat() == "2026-02-20T21:15:00+00:00"
    assert (stdin.content, stdin.content_encoding, stdin.interrupt) == (
        "single payload text",
        "utf-8",
        False,
    )
    assert envelope.meta == {"ui_source": "tui", "retry_count": 0}

    interrupt = parse_request(json.loads(SEED_EXAMPLES["8.3"]), config)
    assert isinstance(interrupt, InterruptRequest)
    assert (interrupt.signal, interrupt.envelope.request_id) == (
        "interrupt",
        "req_01HZY8R2N2S5CXK3Y8E1B4M7T0",
    )

    oversize = parse_request(json.loads(SEED_EXAMPLES["8.4"]), config)
    assert isinstance(oversize, StdinRequest)
    assert oversize.content is None
    assert oversize.content_ref == ContentRef(
        "/Users/randlee/.config/atm/share/atm-dev/input/req_01HZY8S9Q6P4W8F2M1K7R3D5N9.txt",
        143201,
        "e3b0c44298fc1c149afbf4c8996fb924...",
        "text/plain; charset=utf-8",
    )
    assert oversize.content_preview == "first 240 chars for diagnostics..."
    assert oversize.envelope.meta["oversize_strategy"] == "content_ref"

    # The ack example is what the receiver's acks look like, key for key.
    example_ack = json.loads(SEED_EXAMPLES["8.2"])
    jsonschema.validate(example_ack, ack_schema("control.stdin.ack"))


async def test_stdin_to_an_idle_session_starts_a_task_with_the_text(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("done")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        text = "line one\nline two\n\nline four"  # multiline: one payload
        request = stdin_request(session_id, agent_id, text, thread_id="thread-1")
        answer = await receiver(host).handle(request, ME)
        await events.until("task_complete")
    assert answer["result"] == "ok", answer
    assert answer["detail"] == "accepted: started a task"
    assert answer["duplicate"] is False
    assert answer["type"] == "control.stdin.ack"
    for name in ("request_id", "session_id", "agent_id", "team"):
        assert answer[name] == request[name]
    jsonschema.validate(answer, ack_schema("control.stdin.ack"))
    assert sent_text(model.requests[0])[-1] == text


async def test_stdin_to_a_running_task_is_injected_into_its_next_request(tmp_path: Path) -> None:
    model = ScriptedModel([paused(text_response("first"), 1.0), text_response("second")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        first = await receiver(host).handle(stdin_request(session_id, agent_id, "start"), ME)
        await events.until("task_started")
        await requested(model, 1)  # injected into the running Task, not into its first request
        injected = await receiver(host).handle(stdin_request(session_id, agent_id, "also this"), ME)
        await events.until("task_complete")
    assert (first["result"], injected["result"]) == ("ok", "ok")
    assert injected["detail"] == "accepted: injected"
    assert len(model.requests) == 2
    assert sent_text(model.requests[1])[-1] == "also this"
    assert events.types().count("task_started") == 1  # the same Task went on


async def test_stdin_with_interrupt_ends_the_running_task_and_starts_one(tmp_path: Path) -> None:
    model = ScriptedModel([hanging(), text_response("fresh")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        await receiver(host).handle(stdin_request(session_id, agent_id, "slow"), ME)
        first = await events.until("task_started")
        await requested(model, 1)  # the Task hangs in its request, not before it
        answer = await receiver(host).handle(
            stdin_request(session_id, agent_id, "instead", interrupt=True), ME
        )
        aborted = await events.until("turn_aborted")
        second = await events.until("task_started", 2)
        await events.until("task_complete")
    assert answer["result"] == "ok", answer
    assert answer["detail"] == "accepted: interrupted the running task and started one"
    assert (aborted["id"], aborted["msg"]["reason"]) == (first["id"], "interrupted")
    assert second["id"] != first["id"]
    assert sent_text(model.requests[1])[-1] == "instead"


async def test_interrupt_of_a_running_command_leaves_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; exec sleep 300"
    model = ScriptedModel([shell_call(["sh", "-c", script], call_id="c1")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        await receiver(host).handle(stdin_request(session_id, agent_id, "sleep"), ME)
        await events.until("exec_command_begin")
        deadline = time.monotonic() + WAIT
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, f"the command never started; saw {events.types()}"
            await asyncio.sleep(0.02)
        pid = int(pid_file.read_text())
        started = time.monotonic()
        answer = await receiver(host).handle(interrupt_request(session_id, agent_id), ME)
        elapsed = time.monotonic() - started
        # Ok only once the Task has ended: its terminal event is already out.
        assert "turn_aborted" in events.types() or (await events.until("turn_aborted"))
    assert answer["result"] == "ok", answer
    assert answer["detail"] == "interrupted"
    assert answer["type"] == "control.interrupt.ack"
    assert elapsed < 2.0
    assert not _alive(pid), f"pid {pid} (sleep 300) survived the interrupt"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def test_interrupt_of_an_idle_session_is_ok_with_detail_idle(tmp_path: Path) -> None:
    async with hosted(tmp_path, ScriptedModel()) as (host, session_id, agent_id, _events):
        answer = await receiver(host).handle(interrupt_request(session_id, agent_id), ME)
    assert (answer["result"], answer["detail"]) == ("ok", "idle")


# --- idempotency -----------------------------------------------------------------------------


async def test_a_duplicate_within_the_ttl_is_acked_ok_and_never_runs_again(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("once"), text_response("twice")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        request = stdin_request(session_id, agent_id, "do it once")
        first = await receiver(host).handle(request, ME)
        await events.until("task_complete")
        retry = {**request, "meta": {"retry_count": 1}, "sent_at": sent_at()}
        second = await receiver(host).handle(retry, ME)
        await asyncio.sleep(0)  # anything the retry started would be queued by now
        tasks = events.types().count("task_started")
    assert (first["duplicate"], second["duplicate"]) == (False, True)
    assert second["result"] == "ok"
    assert second["detail"] == first["detail"]
    assert (tasks, len(model.requests)) == (1, 1)


async def test_concurrent_copies_of_one_request_run_once(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("once"), text_response("twice")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        request = stdin_request(session_id, agent_id, "only once")
        answers = await asyncio.gather(*(receiver(host).handle(request, ME) for _ in range(5)))
        await events.until("task_complete")
    assert sorted(answer["duplicate"] for answer in answers) == [False, True, True, True, True]
    assert {answer["result"] for answer in answers} == {"ok"}
    assert len(model.requests) == 1


async def test_a_rejected_request_is_not_remembered_so_its_retry_is_judged_afresh(
    tmp_path: Path,
) -> None:
    async with hosted(tmp_path, ScriptedModel([text_response("ok")])) as (
        host,
        session_id,
        agent_id,
        events,
    ):
        request = stdin_request(session_id, "codexcore:not-this-one", "hi")
        first = await receiver(host).handle(request, ME)
        fixed = {**request, "agent_id": agent_id}
        second = await receiver(host).handle(fixed, ME)
        await events.until("task_complete")
    assert first["result"] == "not_found"
    assert (second["result"], second["duplicate"]) == ("ok", False)


# --- every result code -----------------------------------------------------------------------


async def test_not_found_for_an_unknown_session_and_not_live_for_a_recorded_one(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("recorded")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        await receiver(host).handle(stdin_request(session_id, agent_id, "record me"), ME)
        await events.until("task_complete")
        unknown = await receiver(host).handle(stdin_request("no-such-session", agent_id, "x"), ME)
        host.end_session(session_id)
        await events.until("shutdown_complete")
        ended = await receiver(host).handle(stdin_request(session_id, agent_id, "x"), ME)
        interrupted = await receiver(host).handle(interrupt_request(session_id, agent_id), ME)
    assert unknown["result"] == "not_found", unknown
    assert ended["result"] == "not_live", ended
    assert interrupted["result"] == "not_live", interrupted
    assert "not live" in ended["detail"]


async def test_busy_and_timeout_while_the_engine_does_not_confirm(tmp_path: Path) -> None:
    """A stalled session (a lossless watcher that never reads holds its pump): the first
    input is not confirmed within the deadline (timeout); with it still pending and a
    bound of one, the next is busy; once the session moves again, input is ok."""
    control = control_config(ack_timeout=0.3, max_pending=1)
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with hosted(tmp_path, model, control, send_buffer_bytes=1) as (
        host,
        session_id,
        agent_id,
        events,
    ):
        staller = await host.attach(token=None, session_id=session_id, control=False, lossless=True)
        await receiver(host).handle(interrupt_request(session_id, agent_id), ME)  # fills it
        one = stdin_request(session_id, agent_id, "one")
        timed_out = await receiver(host).handle(one, ME)
        busy = await receiver(host).handle(stdin_request(session_id, agent_id, "two"), ME)
        staller.detach()  # the pump goes on: the first input is confirmed
        await events.until("task_started")
        retried = await receiver(host).handle({**one, "sent_at": sent_at()}, ME)
        later = await receiver(host).handle(stdin_request(session_id, agent_id, "three"), ME)
        await events.until("task_complete", 2)
    assert timed_out["result"] == "timeout", timed_out
    assert "0.3 s" in timed_out["detail"]
    assert busy["result"] == "busy", busy
    assert "pending" in busy["detail"]
    assert later["result"] == "ok", later
    # The timed-out input ran once; its retry is a duplicate that says how it went.
    assert (retried["result"], retried["duplicate"]) == ("ok", True), retried
    assert retried["detail"] == "accepted: started a task"
    assert sent_text(model.requests[0])[-1] == "one"
    assert len(model.requests) == 2


async def test_internal_error_when_the_receiver_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with hosted(tmp_path, ScriptedModel()) as (host, session_id, agent_id, _events):
        the_receiver = receiver(host)

        def broken(*_: Any) -> None:
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(the_receiver, "_target", broken)
        answer = await the_receiver.handle(stdin_request(session_id, agent_id, "x"), ME)
        retry = await the_receiver.handle(stdin_request(session_id, agent_id, "y"), ME)
    assert answer["result"] == "internal_error"
    assert "disk on fire" not in json.dumps(answer)  # the sender learns no internals
    assert retry["result"] == "internal_error"


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"content": ""}, "content: empty payload"),
        ({"content_encoding": "klingon-8"}, "content_encoding: unknown encoding"),
        ({"content_encoding": "utf-16"}, "applies to content_ref only"),
        ({"content": "x" * 2049}, "over the hard limit of 2048 bytes; send it as content_ref"),
        ({"v": 2}, "v: version 2 is not supported"),
        ({"sent_at": "yesterday"}, "sent_at: not an RFC 3339 time"),
        ({"request_id": ""}, "request_id: must be 1 to 256 characters"),
        (
            {"content_ref": {"path": "/x", "size_bytes": 1, "sha256": "0", "mime": "text/plain"}},
            "exactly one of content and content_ref",
        ),
    ],
)
async def test_invalid_requests_are_rejected_naming_the_rule(
    tmp_path: Path, change: dict[str, Any], rule: str
) -> None:
    control = control_config(hard_limit_bytes=2048, soft_limit_bytes=1024)
    async with hosted(tmp_path, ScriptedModel(), control) as (host, session_id, agent_id, events):
        request = {**stdin_request(session_id, agent_id, "hello"), **change}
        answer = await receiver(host).handle(request, ME)
    assert answer["result"] == "rejected"
    assert rule in answer["detail"], answer
    assert answer["request_id"] == request["request_id"] or not request["request_id"]
    assert "task_started" not in events.types()


async def test_interrupt_with_another_signal_is_rejected(tmp_path: Path) -> None:
    async with hosted(tmp_path, ScriptedModel()) as (host, session_id, agent_id, _events):
        answer = await receiver(host).handle(
            interrupt_request(session_id, agent_id, signal="kill"), ME
        )
    assert answer["result"] == "rejected"
    assert "signal: expected 'interrupt'" in answer["detail"]


async def test_over_the_soft_limit_is_accepted_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="codexcore.control")
    control = control_config(soft_limit_bytes=16)
    model = ScriptedModel([text_response("ok")])
    async with hosted(tmp_path, model, control) as (host, session_id, agent_id, events):
        answer = await receiver(host).handle(stdin_request(session_id, agent_id, "y" * 64), ME)
        await events.until("task_complete")
    assert answer["result"] == "ok"
    warnings = [r for r in caplog.records if r.getMessage() == "control input over the soft limit"]
    assert warnings
    assert (getattr(warnings[0], "bytes", None), warnings[0].levelname) == (64, "WARNING")


# --- authorisation and the replay window -----------------------------------------------------


@pytest.mark.parametrize(
    ("who", "credential", "rule"),
    [
        ("an unknown sender", None, "sender 'mallory' is unknown"),
        ("another team", None, "team 'other-team' is not this host's team"),
        ("another uid", Credential("unix", uid=os.getuid() + 1), "is unknown on this connection"),
        ("tcp without a token", Credential("tcp"), "is unknown on this connection"),
        ("tcp, wrong token", Credential("tcp", token="guess"), "is unknown on this connection"),
    ],
)
async def test_senders_are_denied_unless_bound_to_the_connection_and_the_team(
    tmp_path: Path, who: str, credential: Credential | None, rule: str
) -> None:
    async with hosted(tmp_path, ScriptedModel()) as (host, session_id, agent_id, events):
        request = stdin_request(session_id, agent_id, "let me in")
        if who == "an unknown sender":
            request["sender"] = "mallory"
        if who == "another team":
            request["team"] = "other-team"
        answer = await receiver(host).handle(request, credential or ME)
    assert answer["result"] == "rejected", who
    assert rule in answer["detail"], answer
    assert "task_started" not in events.types()


async def test_a_sender_of_another_team_is_refused_even_naming_this_team(tmp_path: Path) -> None:
    outsider = ControlSender("outsider", "ops", uid=os.getuid())
    control = control_config(senders=(outsider,))
    async with hosted(tmp_path, ScriptedModel(), control) as (host, session_id, agent_id, _e):
        request = stdin_request(session_id, agent_id, "hi", sender="outsider")
        answer = await receiver(host).handle(request, ME)
    assert answer["result"] == "rejected"
    assert "sender 'outsider' is not in team 'atm-dev'" in answer["detail"]


async def test_a_tcp_sender_is_known_by_its_own_token(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("ok")])
    async with hosted(tmp_path, model) as (host, session_id, agent_id, events):
        answer = await receiver(host).handle(
            stdin_request(session_id, agent_id, "over tcp"), Credential("tcp", token=SENDER_TOKEN)
        )
        await events.until("task_complete")
    assert answer["result"] == "ok", answer


async def test_a_host_without_a_control_team_refuses_everything(tmp_path: Path) -> None:
    async with hosted(tmp_path, ScriptedModel(), ControlConfig()) as (host, sid, agent, _e):
        answer = await receiver(host).handle(stdin_request(sid, agent, "hi"), ME)
        capabilities = host.config.control.capabilities()
    assert answer["result"] == "rejected"
    assert "no [control] team" in answer["detail"]
    assert (capabilities.stdin, capabilities.interrupt) == (False, False)


@pytest.mark.parametrize(
    ("offset", "rule"),
    [
        (-301.0, "stale: sent_at is 301 s old"),
        (31.0, "in the future, beyond the allowed clock skew"),
    ],
)
async def test_stale_and_future_sent_at_are_rejected(
    tmp_path: Path, offset: float, rule: str
) -> None:
    async with hosted(tmp_path, ScriptedModel()) as (host, session_id, agent_id, _events):
        request = stdin_request(session_id, agent_id, "replayed", sent_at=sent_at(offset))
        answer = await receiver(host).handle(request, ME)
    assert answer["result"] == "rejected"
    assert rule in answer["detail"], answer


async def test_the_seeds_example_as_written_is_refused_as_stale(tmp_path: Path) -> None:
    async with hosted(tmp_path, ScriptedModel()) as (host, _session_id, _agent_id, _events):
        answer = await receiver(host).handle(json.loads(SEED_EXAMPLES["8.1"]), ME)
    assert answer["result"] == "rejected"
    assert answer["detail"].startswith("stale: sent_at is")
    assert answer["request_id"] == "req_01HZY8QJ8R7G6K2YJ7V2M9A1P3"


# --- content_ref -----------------------------------------------------------------------------


def _ref(path: Path, data: bytes, **changes: Any) -> dict[str, Any]:
    ref = {
        "path": str(path),
        "size_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "mime": "text/plain; charset=utf-8",
    }
    return {**ref, **changes}


async def test_content_ref_under_an_allowed_directory_is_read_and_checked(tmp_path: Path) -> None:
    share = tmp_path / "share"
    (share / "atm-dev" / "input").mkdir(parents=True)
    text = "big input\n" * 20_000
    data = text.encode()
    path = share / "atm-dev" / "input" / "req.txt"
    path.write_bytes(data)
    control = control_config(allowed_content_dirs=(str(share),))
    model = ScriptedModel([text_response("read it")])
    async with hosted(tmp_path, model, control) as (host, session_id, agent_id, events):
        request = stdin_request(session_id, agent_id, None, content_ref=_ref(path, data))
        answer = await receiver(host).handle(request, ME)
        await events.until("task_complete")
    assert answer["result"] == "ok", answer
    assert sent_text(model.requests[0])[-1] == text


def _escapes(tmp_path: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """Every way out of the allowed directory, or a lie about the file, and its rule."""
    share, outside = tmp_path / "share", tmp_path / "outside"
    share.mkdir()
    outside.mkdir()
    data = b"secret outside\n"
    (outside / "secret.txt").write_bytes(data)
    (share / "inside.txt").write_bytes(data)
    (share / "link.txt").symlink_to(outside / "secret.txt")
    (share / "dirlink").symlink_to(outside)
    inside = share / "inside.txt"
    return {
        "dotdot": (_ref(share / ".." / "outside" / "secret.txt", data), "'..' is not allowed"),
        "symlink out": (_ref(share / "link.txt", data), "a symlink below the allowed directory"),
        "dir symlink": (_ref(share / "dirlink" / "secret.txt", data), "a symlink below"),
        "wrong size": (_ref(inside, data, size_bytes=len(data) - 1), "content_ref.size_bytes"),
        "wrong sha256": (_ref(inside, data, sha256="0" * 64), "content_ref.sha256: does not match"),
        "expired": (
            _ref(inside, data, expires_at="2020-01-01T00:00:00Z"),
            "content_ref.expires_at: the reference has expired",
        ),
        "outside every base": (
            _ref(outside / "secret.txt", data),
            "not under any allowed content directory",
        ),
        "not text": (_ref(inside, data, mime="application/octet-stream"), "is not text"),
        "relative": (_ref(Path("share/inside.txt"), data), "must be an absolute path"),
    }


async def test_every_content_ref_escape_is_refused(tmp_path: Path) -> None:
    escapes = _escapes(tmp_path)
    control = control_config(allowed_content_dirs=(str(tmp_path / "share"),))
    async with hosted(tmp_path, ScriptedModel(), control) as (host, session_id, agent_id, events):
        answers = {
            name: await receiver(host).handle(
                stdin_request(session_id, agent_id, None, content_ref=ref), ME
            )
            for name, (ref, _rule) in escapes.items()
        }
    for name, (_, rule) in escapes.items():
        assert answers[name]["result"] == "rejected", (name, answers[name])
        assert rule in answers[name]["detail"], (name, answers[name])
    assert "task_started" not in events.types()


async def test_content_ref_is_refused_without_an_allowed_directory(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"hi")
    async with hosted(tmp_path, ScriptedModel()) as (host, session_id, agent_id, _events):
        request = stdin_request(session_id, agent_id, None, content_ref=_ref(path, b"hi"))
        answer = await receiver(host).handle(request, ME)
        capabilities = host.config.control.capabilities()
    assert answer["result"] == "rejected"
    assert "no allowed content directory is configured" in answer["detail"]
    assert capabilities.content_ref is False


# --- the audit -------------------------------------------------------------------------------


async def test_audit_records_every_step_without_the_message_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="codexcore.control")
    audit = tmp_path / "audit" / "control.jsonl"
    control = control_config(audit_file=str(audit))
    secret = "the launch code is 0000"
    model = ScriptedModel([text_response("ok")])
    async with hosted(tmp_path, model, control) as (host, session_id, agent_id, events):
        request = stdin_request(session_id, agent_id, secret, thread_id="th-1")
        await receiver(host).handle(request, ME)
        await events.until("task_complete")
        await receiver(host).handle(request, ME)  # a duplicate
        await receiver(host).handle({**request, "request_id": "r2", "sender": "eve"}, ME)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    steps = [line["step"] for line in lines]
    assert steps == ["request", "ack", "request", "duplicate", "ack", "request", "rejected", "ack"]
    for line in lines:
        for name in (
            "request_id",
            "team",
            "session_id",
            "agent_id",
            "sender",
            "result",
            "duplicate",
        ):
            assert name in line, (name, line)
    assert lines[0]["thread_id"] == "th-1"
    assert (lines[1]["result"], lines[4]["duplicate"]) == ("ok", True)
    assert (lines[7]["result"], lines[7]["sender"]) == ("rejected", "eve")
    assert oct(audit.stat().st_mode & 0o777) == "0o600"
    assert secret not in audit.read_text()
    records = [r for r in caplog.records if r.getMessage().startswith("control ")]
    assert [r.getMessage() for r in records] == [f"control {step}" for step in steps]
    assert all(getattr(r, "request_id", None) == request["request_id"] for r in records[:5])
    assert secret not in repr([vars(r) for r in records])


async def test_verbose_message_logging_puts_the_text_in_the_request_record(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.jsonl"
    control = control_config(audit_file=str(audit), verbose_messages=True)
    model = ScriptedModel([text_response("ok")])
    async with hosted(tmp_path, model, control) as (host, session_id, agent_id, events):
        await receiver(host).handle(stdin_request(session_id, agent_id, "say it loud"), ME)
        await events.until("task_complete")
    first = json.loads(audit.read_text().splitlines()[0])
    assert first["content"] == "say it loud"


# --- identity --------------------------------------------------------------------------------


async def test_welcome_names_the_agent_and_the_control_capability(tmp_path: Path) -> None:
    control = control_config(allowed_content_dirs=(str(tmp_path),), hard_limit_bytes=4096)
    async with hosted(tmp_path, ScriptedModel(), control) as (host, session_id, agent_id, _e):
        attachment = await host.attach(token=None, session_id=session_id, control=False)
        welcome = host.welcome(attachment)
        attachment.detach()
    assert welcome.agent_id == agent_id
    assert agent_id.startswith("codexcore:")
    assert welcome.control_messages is not None
    assert (welcome.control_messages.v, welcome.control_messages.max_inline_bytes) == (1, 4096)
    assert welcome.control_messages.stdin
    assert welcome.control_messages.content_ref


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("SO_PEERCRED and /proc are Linux's")


def test_the_dedupe_store_forgets_keys_after_the_ttl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codexcore.adapters.control import _store as _control_store
    from codexcore.adapters.control._store import PENDING, DedupeStore

    now = [1000.0]
    monkeypatch.setattr(_control_store, "time", type("Clock", (), {"time": lambda: now[0]}))
    store = DedupeStore(str(tmp_path / "store" / "dedupe.sqlite3"), ttl=600.0)
    key = (TEAM, "s1", "codexcore:a", "req-1")
    assert store.claim(key) is None  # new: ours
    assert store.claim(key) == (PENDING, None)  # claimed, not answered yet
    store.finish(key, "ok", "accepted: injected")
    now[0] += 599.0
    assert store.claim(key) == ("ok", "accepted: injected")
    now[0] += 2.0  # past the TTL: the key counts as absent and is claimed afresh
    assert store.claim(key) is None
    store.release(key)
    assert store.claim(key) is None
    store.close()
    assert oct((tmp_path / "store" / "dedupe.sqlite3").stat().st_mode & 0o777) == "0o600"


async def test_a_native_connection_has_a_bound_on_control_requests_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codexcore.adapters.native._native import MAX_CONTROL_IN_FLIGHT, _Controls

    release = asyncio.Event()
    async with hosted(tmp_path, ScriptedModel()) as (host, session_id, agent_id, _events):

        async def slow(value: Any, credential: Credential) -> dict[str, Any]:
            await release.wait()
            return {"type": "control.stdin.ack", "request_id": value["request_id"]}

        monkeypatch.setattr(receiver(host), "handle", slow)
        attachment = await host.attach(token=None, session_id=session_id, control=False)
        controls = _Controls(attachment, ME)
        lines = [
            orjson.dumps(stdin_request(session_id, agent_id, f"n{i}"))
            for i in range(MAX_CONTROL_IN_FLIGHT + 1)
        ]
        assert all(controls.take(line) for line in lines)
        await asyncio.sleep(0)  # the others start, and wait
        first = attachment.poll() or []
        release.set()
        await asyncio.gather(*controls.running)
        replies = [*first, *(attachment.poll() or [])]
        attachment.detach()
        over = orjson.loads(getattr(first[0], "data", b"{}"))  # answered at once
    assert (over["result"], over["request_id"]) == ("busy", orjson.loads(lines[-1])["request_id"])
    assert f"{MAX_CONTROL_IN_FLIGHT} control requests in flight" in over["detail"]
    assert len(first) == 1  # only the one over the bound was answered before the release
    assert len(replies) == MAX_CONTROL_IN_FLIGHT + 1
    assert controls.take(b'{"id": "s1", "op": {"type": "interrupt"}}') is False  # a submission
