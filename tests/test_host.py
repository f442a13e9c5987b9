"""The session host in-process: queues, coalescing, replay, control, expiry, scale."""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore import Rejected, SessionConfig
from codexcore.adapters.host._host import (
    Attachment,
    HostConfig,
    HostedSession,
    HostRefusal,
    NotAccepted,
    Out,
    SessionHost,
    coalesce,
    host_engine_config,
)
from codexcore.protocol import (
    AgentMessage,
    AgentMessageDelta,
    AgentReasoningDelta,
    Closing,
    ConfigureSession,
    ControlChanged,
    Event,
    EventMsg,
    ExecApprovalRequest,
    ExecCommandOutputDelta,
    Submission,
    TaskComplete,
    TextInput,
    UserInput,
    encode_event,
)
from codexcore.testing import ScriptedModel, text_response

pytestmark = pytest.mark.anyio


def out(event: Event) -> Out:
    kinds = {"agent_message_delta": 1, "agent_reasoning_delta": 1, "exec_command_output_delta": 2}
    return Out(event.seq, encode_event(event), kinds.get(event.msg.TYPE, 0))


def _outs(frames: list[Any]) -> list[Out]:
    return [f for f in frames if isinstance(f, Out)]


def events(frames: list[Any]) -> list[dict[str, Any]]:
    return [orjson.loads(f.data) for f in frames if isinstance(f, Out)]


# --- coalescing, pure ---------------------------------------------------------------------


def test_runs_of_one_stream_merge_into_one_delta_with_the_last_seq() -> None:
    stream = [
        Event("t", 0, AgentMessageDelta("Hel")),
        Event("t", 1, AgentMessageDelta("lo")),
        Event("t", 2, AgentReasoningDelta("hmm")),  # another stream: a new run
        Event("t", 3, AgentReasoningDelta("!")),
        Event("t", 4, ExecApprovalRequest("c1", ("ls",), "/")),  # never merged, a barrier
        Event("t", 5, AgentMessageDelta(" world")),
        Event("u", 6, AgentMessageDelta("other task")),  # another id: a new run
        Event("t", 7, AgentMessage("Hello world")),
    ]
    merged = events(coalesce([out(e) for e in stream]))
    assert [(e["seq"], e["msg"]["type"], e["msg"].get("delta")) for e in merged] == [
        (1, "agent_message_delta", "Hello"),
        (3, "agent_reasoning_delta", "hmm!"),
        (4, "exec_approval_request", None),
        (5, "agent_message_delta", " world"),
        (6, "agent_message_delta", "other task"),
        (7, "agent_message", None),
    ]


def test_output_chunks_merge_per_call_and_stream_up_to_8_kib() -> None:
    def chunk(seq: int, call: str, stream: str, size: int) -> Event:
        return Event("t", seq, ExecCommandOutputDelta(call, stream, bytes([65 + seq]) * size))  # type: ignore[arg-type]

    stream = [
        chunk(0, "c1", "stdout", 3000),
        chunk(1, "c1", "stdout", 3000),
        chunk(2, "c1", "stdout", 3000),  # would pass 8 KiB: starts a new run
        chunk(3, "c1", "stderr", 10),
        chunk(4, "c2", "stderr", 10),
    ]
    merged = events(coalesce([out(e) for e in stream]))
    sizes = [
        (e["seq"], e["msg"]["stream"], len(base64.b64decode(e["msg"]["chunk"]))) for e in merged
    ]
    assert sizes == [(1, "stdout", 6000), (2, "stdout", 3000), (3, "stderr", 10), (4, "stderr", 10)]
    assert base64.b64decode(merged[0]["msg"]["chunk"]) == b"A" * 3000 + b"B" * 3000


# --- a session fed by hand ------------------------------------------------------------------


async def started_host(**config: Any) -> SessionHost:
    host = SessionHost(HostConfig(**config), transport=ScriptedModel([]).mock_transport())
    await host.start()
    return host


def feed(session: HostedSession, *msgs: EventMsg, id: str = "t") -> list[int]:
    """Publish events as if the engine had sent them (its own stream stays silent)."""
    seqs = []
    for msg in msgs:
        seqs.append(session.next_seq)
        session.publish(Event(id, session.next_seq, msg))
    return seqs


async def take_all(attachment: Attachment) -> list[Any]:
    """Everything queued for (or still to replay to) an attachment, without waiting for more."""
    frames: list[Any] = []
    while attachment.queued_bytes > 0 or attachment.replaying:
        frames += await attachment.take()
    return frames


async def test_an_idle_transport_is_written_in_the_pump_step_and_a_busy_one_by_its_writer() -> None:
    """hand_over(): frames reach an idle transport at once, without waking its writer;
    once the transport has bytes left unsent, the writer takes over again."""
    host = await started_host()
    try:
        client = await host.attach(token=None)
        session = client.session
        written: list[list[Any]] = []
        idle = [True]

        def direct(batch: list[Any]) -> bool:
            written.append(batch)
            return idle[0]

        assert client.poll() is None
        waiting = asyncio.create_task(client.wait(direct))
        await asyncio.sleep(0)
        feed(session, AgentMessageDelta("a"), AgentMessageDelta("b"))
        session.hand_over()
        assert [e["msg"]["delta"] for e in events(written[0])] == ["a", "b"]  # one write
        await asyncio.sleep(0.01)
        assert not waiting.done()  # nothing for the writer to do

        idle[0] = False  # the next write leaves bytes unsent
        feed(session, AgentMessageDelta("c"))
        session.hand_over()
        await asyncio.wait_for(waiting, 1)  # the writer is woken to watch its transport
        feed(session, AgentMessageDelta("d"))
        session.hand_over()  # no direct writer now: queued for take()
        assert len(written) == 2
        assert [e["msg"]["delta"] for e in events(await client.take())] == ["d"]
    finally:
        await host.aclose()


async def test_an_idle_transport_gets_a_run_longer_than_one_batch_whole() -> None:
    """A run of events larger than one batch (64 KiB), published in one pump step,
    reaches an idle transport at once, not when the next event arrives."""
    host = await started_host()
    try:
        client = await host.attach(token=None)
        written: list[list[Any]] = []

        def direct(batch: list[Any]) -> bool:
            written.append(batch)
            return True  # the transport took it all: still idle

        waiting = asyncio.create_task(client.wait(direct))
        await asyncio.sleep(0)
        text = "x" * 10_000
        feed(client.session, *(AgentMessage(text) for _ in range(20)))  # ~200 KB
        client.session.hand_over()
        assert len(written) > 1
        assert sum(len(events(batch)) for batch in written) == 20
        assert client.queued_bytes == 0
        waiting.cancel()
    finally:
        await host.aclose()


async def test_task_started_reaches_an_idle_transport_before_the_task_exists(
    tmp_path: Path,
) -> None:
    """The dispatcher lets the pump run between task_started and making the Task's asyncio
    tasks: the ack and task_started are written first, then the rest, in order."""
    engine = host_engine_config(session=SessionConfig(cwd=str(tmp_path)), home=str(tmp_path))
    model = ScriptedModel([text_response("ok")])
    host = SessionHost(HostConfig(engine=engine), transport=model.mock_transport())
    await host.start()
    try:
        client = await host.attach(token=None)
        codex = client.session.codex
        written: list[dict[str, Any]] = []
        running_at_write: list[bool] = []  # per event: was its Task running when written?

        complete = asyncio.Event()

        def direct(batch: list[Any]) -> bool:
            written.extend(events(batch))
            running_at_write.extend(codex.state.value == "running" for _ in events(batch))
            if written and written[-1]["msg"]["type"] == "task_complete":
                complete.set()
            return True

        assert client.poll() is None
        waiting = asyncio.create_task(client.wait(direct))
        await asyncio.sleep(0)
        await client.submit(Submission("u1", UserInput((TextInput("hi"),))))
        await asyncio.wait_for(complete.wait(), 10)
        waiting.cancel()
        types = [e["msg"]["type"] for e in written]
        assert types[:3] == ["submission_ack", "session_configured", "task_started"]
        assert running_at_write[types.index("task_started")] is False  # before the Task existed
        assert [e["seq"] for e in written] == list(range(len(written)))
    finally:
        await host.aclose()


async def test_a_slow_connection_keeps_every_non_delta_event_in_bounded_memory() -> None:
    host = await started_host(send_buffer_bytes=4096)
    try:
        slow = await host.attach(token=None)
        for n in range(2000):
            feed(slow.session, AgentMessageDelta(f"{n},"))
            if n % 100 == 99:
                feed(slow.session, ExecApprovalRequest(f"c{n}", ("ls",), "/"))
            assert slow.queued_bytes <= 4096 * 3
        feed(slow.session, TaskComplete("done"))
        frames = await take_all(slow)
    finally:
        await host.aclose()
    got = events(frames)
    seqs = [e["seq"] for e in got]
    assert seqs == sorted(set(seqs))
    assert len(got) < 2000
    requests = [e["msg"]["call_id"] for e in got if e["msg"]["type"] == "exec_approval_request"]
    assert requests == [f"c{n}" for n in range(99, 2000, 100)]  # never dropped
    assert got[-1]["msg"]["type"] == "task_complete"
    # What is left of the text is whole pieces, in order (merged or not).
    text = "".join(e["msg"]["delta"] for e in got if e["msg"]["type"] == "agent_message_delta")
    numbers = [int(n) for n in text.split(",") if n]
    assert numbers == sorted(set(numbers))


async def test_one_big_event_passes_but_a_backlog_of_them_cuts_the_connection() -> None:
    host = await started_host(send_buffer_bytes=4096)
    try:
        client = await host.attach(token=None)
        feed(client.session, AgentMessage("x" * 100_000))  # bigger than the whole buffer
        feed(client.session, AgentMessageDelta("a"))  # a push that runs the compaction
        assert not client.aborted
        for n in range(5):
            feed(client.session, AgentMessage(f"{n}" * 5000))
        assert client.aborted  # 25 kB that cannot be dropped, beside the big one
        assert await client.take() == []
        assert client.session.attachments == []
    finally:
        await host.aclose()


async def test_a_replay_that_falls_behind_the_buffer_is_closed_as_lagged() -> None:
    host = await started_host(replay_events=10)
    try:
        owner = await host.attach(token=None)
        session = owner.session
        feed(session, *[AgentMessageDelta(str(n)) for n in range(8)])
        late = await host.attach(token=None, session_id=session.id, last_seq=-1)
        assert (late.replay_from, late.replay_complete, late.replaying) == (0, True, True)
        first = await late.take(max_bytes=100)  # reads a little of the replay ...
        assert [e["seq"] for e in events(first)] == [0, 1]
        feed(session, *[AgentMessageDelta("more") for _ in range(10)])  # ... and falls behind
        rest = await take_all(late)
        assert rest == [Closing("lagged", rest[0].message)]
        assert late not in session.attachments

        gone = await host.attach(token=None, session_id=session.id, last_seq=2)
        assert (gone.replay_from, gone.replay_complete) == (8, False)
        replayed = events(await take_all(gone))
        assert [e["seq"] for e in replayed] == list(range(8, 18))
    finally:
        await host.aclose()


async def test_a_caught_up_replay_turns_live_with_nothing_missed() -> None:
    host = await started_host()
    try:
        owner = await host.attach(token=None)
        session = owner.session
        feed(session, *[AgentMessageDelta(str(n)) for n in range(5)])
        late = await host.attach(token=None, session_id=session.id, last_seq=1)
        batch = await late.take()
        assert not late.replaying
        feed(session, AgentMessageDelta("live"))
        batch += await late.take()
        assert [e["seq"] for e in events(batch)] == [2, 3, 4, 5]
    finally:
        await host.aclose()


async def test_an_attachment_that_asks_for_events_gets_the_published_ones_live_only() -> None:
    """events=True: live frames carry the very Event published beside its bytes (an
    in-process dialect maps it without decoding); replayed frames, the replay buffer
    and other attachments' frames carry bytes only."""
    host = await started_host()
    try:
        mapper = await host.attach(token=None, lossless=True, events=True)
        plain = await host.attach(token=None, session_id=mapper.session_id, control=False)
        session = mapper.session
        first = Event("t", session.next_seq, AgentMessage("first"))
        session.publish(first)
        frames = _outs(await mapper.take())
        assert [f.event for f in frames] == [first]
        assert frames[0].data == encode_event(first)
        assert [f.event for f in _outs(await plain.take())] == [None]
        assert [out.event for out in session.ring] == [None]

        late = await host.attach(
            token=None, session_id=session.id, last_seq=-1, control=False, events=True
        )
        replayed = _outs(await late.take())
        assert [(f.seq, f.event) for f in replayed] == [(first.seq, None)]
        second = Event("t", session.next_seq, AgentMessageDelta("live"))
        session.publish(second)
        assert [f.event for f in _outs(await late.take())] == [second]
    finally:
        await host.aclose()


async def test_control_goes_to_the_latest_client_that_asks() -> None:
    host = await started_host()
    try:
        a = await host.attach(token=None)
        watcher = await host.attach(token=None, session_id=a.session_id, control=False)
        assert (a.controller, watcher.controller) == (True, False)
        b = await host.attach(token=None, session_id=a.session_id)
        assert (a.controller, b.controller) == (False, True)
        assert await a.take() == [ControlChanged(False, "taken_over")]
        with pytest.raises(NotAccepted) as info:
            await a.submit(Submission("x", ConfigureSession()))
        assert info.value.code == "not_controller"
        with pytest.raises(NotAccepted):
            await watcher.submit(Rejected("", "bad line"))
        await b.submit(Submission("cfg", ConfigureSession(cwd="/")))
        got = events(await b.take())
        assert got[0]["msg"] == {"type": "submission_ack", "id": "cfg", "duplicate": False}
        b.detach()
        assert a.session.controller is None  # nobody controls until someone asks again
    finally:
        await host.aclose()


async def test_the_token_is_checked_before_any_session_is_looked_up() -> None:
    host = await started_host(token="right")
    try:
        with pytest.raises(HostRefusal) as wrong:
            await host.attach(token="wrong", session_id="no-such-session")
        assert wrong.value.code == "unauthorized"
        with pytest.raises(HostRefusal) as unknown:
            await host.attach(token="right", session_id="no-such-session")
        assert unknown.value.code == "unknown_session"
        assert host.check_token("right")
        assert not host.check_token(None)
    finally:
        await host.aclose()


async def test_idle_sessions_expire_and_attached_ones_do_not() -> None:
    host = await started_host(idle_timeout=0.1)
    try:
        watched = await host.attach(token=None)
        left = await host.attach(token=None)
        left.detach()
        started = time.monotonic()
        assert left.session.pump is not None
        await asyncio.wait_for(asyncio.shield(left.session.pump), 5)
        assert time.monotonic() - started >= 0.1
        assert host.session(left.session_id) is None
        assert host.session(watched.session_id) is watched.session
        with pytest.raises(HostRefusal) as info:
            await host.attach(token=None, session_id=left.session_id)
        assert info.value.code == "unknown_session"
    finally:
        await host.aclose()


async def test_closing_the_host_ends_every_session_with_shutdown_complete() -> None:
    host = await started_host()
    attachments = [await host.attach(token=None) for _ in range(3)]
    await host.aclose()
    for attachment in attachments:
        got = events(await take_all(attachment))
        assert [e["msg"]["type"] for e in got] == ["shutdown_complete"]
        assert await attachment.take() == []
    with pytest.raises(HostRefusal) as info:
        await host.attach(token=None)
    assert info.value.code == "shutting_down"


async def test_limits_refuse_with_a_code() -> None:
    host = await started_host(max_sessions=1, max_connections=1, max_connections_per_session=1)
    try:
        first = await host.attach(token=None)
        with pytest.raises(HostRefusal, match="limit of 1 sessions"):
            await host.attach(token=None)
        with pytest.raises(HostRefusal) as full:
            await host.attach(token=None, session_id=first.session_id)
        assert full.value.code == "session_full"
        host.open_connection()
        with pytest.raises(HostRefusal) as busy:
            host.open_connection()
        assert busy.value.code == "too_many_connections"
        host.close_connection()
    finally:
        await host.aclose()


# --- scale ---------------------------------------------------------------------------------


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_ten_thousand_idle_sessions(tmp_path: Path) -> None:
    """Each with its engine configured and a connection attached, in a few tens of kB.

    Ephemeral: a recorded session keeps its rollout file open, and ten
    thousand descriptors are more than a default ``ulimit -n`` allows.
    """
    host = SessionHost(
        HostConfig(engine=host_engine_config(ephemeral=True)),
        transport=ScriptedModel([]).mock_transport(),
    )
    await host.start()
    try:
        before = _rss_kib()
        attachments = [await host.attach(token=None) for _ in range(10_000)]
        config = ConfigureSession(cwd=str(tmp_path))
        for n, attachment in enumerate(attachments):
            await attachment.submit(Submission(f"cfg{n}", config))
        for attachment in attachments:
            while not any(
                b'"session_configured"' in f.data for f in _outs(await attachment.take())
            ):
                pass
        per_session = (_rss_kib() - before) / 10_000
        assert host.session_count == 10_000
    finally:
        await host.aclose()
    assert per_session < 64, f"{per_session:.1f} KiB per idle session"


async def test_a_thousand_running_sessions_share_a_few_model_clients(tmp_path: Path) -> None:
    model = ScriptedModel([text_response(f"answer {n}", chunks=5) for n in range(1000)])
    config = HostConfig(engine=host_engine_config())
    host = SessionHost(config, transport=model.mock_transport())
    await host.start()
    try:
        attachments = [await host.attach(token=None) for _ in range(1000)]
        for n, attachment in enumerate(attachments):
            await attachment.submit(Submission(f"cfg{n}", ConfigureSession(cwd=str(tmp_path))))
            await attachment.submit(Submission(f"t{n}", UserInput((TextInput("go"),))))

        async def until_done(attachment: Attachment) -> list[dict[str, Any]]:
            seen: list[dict[str, Any]] = []
            while not seen or seen[-1]["msg"]["type"] != "task_complete":
                seen += events(await attachment.take())
            return seen

        async with asyncio.timeout(60):
            results = await asyncio.gather(*(until_done(a) for a in attachments))
        assert len(host._pool._clients) <= 16  # a few shards for a thousand engines
    finally:
        await host.aclose()
    assert len(model.requests) == 1000
    answers = sorted(r[-1]["msg"]["last_agent_message"] for r in results)
    assert answers == sorted(f"answer {n}" for n in range(1000))
    for seen in results:
        assert [e["seq"] for e in seen] == list(range(len(seen)))
        assert any(e["msg"]["type"] == "session_configured" for e in seen)
