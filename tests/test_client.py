"""``codexcore.adapters.client`` against real servers: real processes, real sockets.

The seed's flows (``tests/flows.py``) drive the client through :class:`ClientLink`,
which gives a :class:`RemoteCodex` the line-level face the flows are written
against: what a flow sends is submitted with ``submit``, what it reads is
each event the client delivers. Connections are cut with :class:`Proxy`, a
TCP relay the test controls, as a network failure would cut them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trustme

from codexcore import EngineClosed
from codexcore.adapters.client import (
    ConnectionLost,
    ControlChange,
    Disconnected,
    EventsLost,
    HandshakeRefused,
    Notice,
    NotInControl,
    Reconnected,
    ReconnectPolicy,
    RemoteCodex,
    RemoteCodexThread,
    ServerExited,
    SessionLost,
    SubmissionRefused,
)
from codexcore.protocol import (
    ConfigureSession,
    Event,
    ExecApproval,
    ExecApprovalRequest,
    Interrupt,
    Shutdown,
    TaskComplete,
    TextInput,
    UserInput,
    decode_submission,
    encode_event,
)
from codexcore.testing import (
    Pause,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    shell_call,
    text_response,
)

from .flows import basic_flow, basic_model, interrupt_flow, interrupt_model
from .server_helpers import (
    PY,
    TOKEN,
    Client,
    LineLink,
    ServerProcess,
    kind,
    private_dir,
    say,
    server_env,
    sub,
)

pytestmark = pytest.mark.anyio

WITHIN = 15.0


# --- helpers ---------------------------------------------------------------------------------


class ClientLink(LineLink):
    """A :class:`RemoteCodex` with the face of a :class:`LineLink`.

    ``send`` decodes each line into a Submission and submits it with the
    client; ``recv`` returns each event the client delivers, encoded as on
    the wire (``None`` once ``next_event`` raises EngineClosed). Notices
    collect in ``notices``.
    """

    name = "client"

    def __init__(self, server: Any = None) -> None:
        super().__init__()
        self.notices: list[Notice] = []
        self.server = server
        self._client: RemoteCodex | None = None
        self._outbox: list[bytes] = []

    @property
    def client(self) -> RemoteCodex:
        assert self._client is not None
        return self._client

    def attach(self, client: RemoteCodex) -> ClientLink:
        self._client = client
        return self

    def on_notice(self, notice: Notice) -> None:
        self.notices.append(notice)

    async def _readline(self) -> bytes:
        try:
            event = await self.client.next_event()
        except EngineClosed:
            return b""
        return encode_event(event)

    def _write(self, data: bytes) -> None:
        self._outbox.append(data)

    async def _drain(self) -> None:
        lines, self._outbox = self._outbox, []
        for data in lines:
            for line in data.splitlines():
                submission = decode_submission(line)
                await self.client.submit(submission.op, id=submission.id)

    def context(self) -> str:
        notices = "\nnotices: " + repr(self.notices[-10:])
        server = self.server.context() if self.server is not None else ""
        return notices + server


@asynccontextmanager
async def serving(
    model: ScriptedModel, cwd: Path, *args: str, unix: Path | None = None, tcp: bool = True
) -> AsyncIterator[ServerProcess]:
    async with ScriptedResponsesServer(model) as http:
        server = await ServerProcess.start(http.base_url, cwd, *args, tcp=tcp, unix=unix)
        try:
            yield server
        finally:
            await server.kill()


class Proxy:
    """A TCP relay to ``target`` that the test can hold and cut.

    ``hold(direction)`` stops relaying ``"up"`` (client to server) or
    ``"down"`` (server to client): bytes wait in the relay. ``cut()`` aborts
    every relayed connection at both ends (what is held is lost), as a dead
    network does; new connections are relayed as before, to ``target``.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.accepted = 0
        self._flowing = {"up": asyncio.Event(), "down": asyncio.Event()}
        for gate in self._flowing.values():
            gate.set()
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    def hold(self, direction: str) -> None:
        self._flowing[direction].clear()

    def release(self, direction: str) -> None:
        self._flowing[direction].set()

    def cut(self) -> None:
        for client_side, server_side in self._pairs:
            client_side.transport.abort()
            server_side.transport.abort()
        self._pairs.clear()
        for gate in self._flowing.values():
            gate.set()

    async def aclose(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            self._tasks.discard(task)
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, "up"),
                self._pump(up_reader, writer, "down"),
                return_exceptions=True,
            )
        finally:
            self._pairs.discard(pair)
            writer.transport.abort()
            up_writer.transport.abort()
            self._tasks.discard(task)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str
    ) -> None:
        try:
            while data := await reader.read(65536):
                await self._flowing[direction].wait()
                if writer.transport.is_closing():
                    return
                writer.write(data)
                await writer.drain()
        finally:
            writer.transport.abort()  # one side gone: the whole relay goes


async def watcher_of(server: ServerProcess, session_id: str) -> Client:
    """A raw client attached to the session from its first event, without control."""
    watcher = await server.client()
    welcome = await watcher.greet(session_id=session_id, control=False)
    assert welcome["type"] == "welcome", welcome
    return watcher


def notices_of(link: ClientLink, cls: type[Notice]) -> list[Any]:
    return [n for n in link.notices if isinstance(n, cls)]


async def raises_within(exc: type[BaseException], what: Awaitable[Any], context: str) -> Any:
    """Await ``what``; it must raise ``exc`` within WITHIN seconds. Returns the exception."""
    try:
        async with asyncio.timeout(WITHIN):
            result = await what
    except exc as error:
        return error
    except TimeoutError:
        raise AssertionError(f"nothing raised within {WITHIN} s{context}") from None
    raise AssertionError(f"expected {exc.__name__}, got {result!r}{context}")


async def finish(ui: ClientLink) -> None:
    """Shut the session down; the stream ends with shutdown_complete, then EngineClosed."""
    await ui.client.submit(Shutdown(), id="bye")
    await ui.to_end(WITHIN)
    assert ui.types()[-1] == "shutdown_complete", ui.summary()
    with pytest.raises(EngineClosed):
        await ui.client.next_event()


# --- the seed's flows through the client, over TCP, Unix and stdio -----------------------------


Flow = Callable[[Any, ScriptedModel, Path], Awaitable[None]]


@pytest.mark.parametrize("transport", ["tcp", "unix", "stdio"])
@pytest.mark.parametrize(
    ("flow", "make_model"),
    [(basic_flow, basic_model), (interrupt_flow, interrupt_model)],
    ids=["basic", "interrupt"],
)
async def test_seed_flows_through_the_client(
    tmp_path: Path, transport: str, flow: Flow, make_model: Callable[[], ScriptedModel]
) -> None:
    model = make_model()
    if transport == "stdio":
        async with ScriptedResponsesServer(model) as http:
            ui = ClientLink()
            async with RemoteCodex.spawn_stdio(
                env=server_env(http.base_url), cwd=tmp_path, on_notice=ui.on_notice
            ) as client:
                ui.attach(client)
                assert client.process is not None
                assert client.welcome is not None
                assert client.welcome.resumed is False
                await flow(ui, model, tmp_path)
                ui.check_invariants()
                await finish(ui)
            assert client.process.returncode == 0
        assert ui.notices == []
        return
    with private_dir() as run:
        unix = run / "s.sock" if transport == "unix" else None
        async with serving(model, tmp_path, unix=unix, tcp=transport == "tcp") as server:
            ui = ClientLink(server)
            if unix is not None:
                opening = RemoteCodex.connect_unix(unix, token=TOKEN, on_notice=ui.on_notice)
            else:
                assert server.tcp is not None
                opening = RemoteCodex.connect_tcp(*server.tcp, token=TOKEN, on_notice=ui.on_notice)
            async with opening as client:
                ui.attach(client)
                assert client.welcome is not None
                assert (client.welcome.resumed, client.control) == (False, True)
                assert client.session_id == client.welcome.session_id
                await flow(ui, model, tmp_path)
                ui.check_invariants()
                assert client.last_seq == ui.seqs()[-1]
                await finish(ui)
            assert await server.stop() == 0
    assert ui.notices == []


# --- reconnecting ---------------------------------------------------------------------------


def paced_text(text: str, chunks: int, pause: float = 0.01) -> ScriptedResponse:
    """A text reply whose deltas arrive over time, so a cut lands mid-stream."""
    response = text_response(text, chunks=chunks)
    steps: list[Any] = []
    for step in response.steps:
        steps.append(step)
        if isinstance(step, bytes) and b"output_text.delta" in step:
            steps.append(Pause(pause))
    return ScriptedResponse(response.status, response.headers, steps)


async def test_a_cut_connection_is_resumed_with_every_event_once(tmp_path: Path) -> None:
    """Cut twice mid-task: once after a submission reached the server (its ack unseen),
    once before one did. The client reconnects by itself; the UI sees the session's
    events exactly once, in order; each submission runs once."""
    model = ScriptedModel(
        [
            shell_call([PY, "-c", "print('once')"], call_id="c1", response_id="r1"),
            paced_text("abcdefghij" * 6, chunks=30),
            text_response("second task", response_id="r3"),
        ]
    )
    async with serving(model, tmp_path) as server:
        assert server.tcp is not None
        proxy = Proxy(server.tcp)
        address = await proxy.start()
        ui = ClientLink(server)
        try:
            client = await RemoteCodex.connect_tcp(*address, token=TOKEN, on_notice=ui.on_notice)
            ui.attach(client)
            watcher = await watcher_of(server, client.session_id)
            await ui.send(
                sub("cfg", "configure_session", approval_policy="untrusted", cwd=str(tmp_path)),
                say("u1", "run it"),
            )
            await ui.until("exec_approval_request", within=WITHIN)

            # 1. The approval reaches the server, but nothing comes back before the cut.
            proxy.hold("down")
            await ui.send(sub("a1", "exec_approval", id="c1", decision="approved"))
            await watcher.until("submission_ack", id="a1", within=WITHIN)
            await watcher.until("agent_message_delta", within=WITHIN)  # the Task goes on
            proxy.cut()
            await ui.until("task_complete", id="u1", within=WITHIN)

            # 2. A submission lost on its way: the client resends it after reconnecting.
            proxy.hold("up")
            await ui.send(say("u2", "again"))
            proxy.cut()
            await ui.until("task_complete", id="u2", within=WITHIN)

            await ui.send(sub("bye", "shutdown"))
            await ui.to_end(WITHIN)
            await watcher.to_end(WITHIN)
        finally:
            with contextlib.suppress(Exception):
                await ui.client.aclose()
            await proxy.aclose()

    # The client reconnected by itself, twice, resending what was unanswered.
    assert [type(n) for n in ui.notices] == [Disconnected, Reconnected] * 2, ui.notices
    assert [n.resent for n in notices_of(ui, Reconnected)] == [("a1",), ("u2",)]
    assert all(n.welcome.resumed and n.welcome.replay_complete for n in notices_of(ui, Reconnected))
    assert proxy.accepted == 3

    # Every event of the session exactly once, in order: what a watcher that was never
    # cut saw, but for the acks of resent copies (``duplicate: true``).
    watched = watcher.events()
    duplicates = [m for m in watched if kind(m) == "submission_ack" and m["msg"]["duplicate"]]
    assert [m["id"] for m in duplicates] == ["a1"]  # u2's first copy never arrived
    assert ui.events() == [m for m in watched if m not in duplicates]
    assert ui.seqs() == sorted(set(ui.seqs()))
    assert ui.of("submission_ack") == [
        {"type": "submission_ack", "id": sub_id, "duplicate": False}
        for sub_id in ("cfg", "u1", "a1", "u2", "bye")
    ]
    # Each submission ran once.
    assert ui.types(id="u1").count("exec_command_begin") == 1
    assert ui.types(id="u2").count("task_started") == 1
    assert len(model.requests) == 3
    assert "".join(d["delta"] for d in ui.of("agent_message_delta")[:30]) == "abcdefghij" * 6


async def test_a_lost_session_is_a_clear_error(tmp_path: Path) -> None:
    """The server restarted while the client was away: its session is gone."""
    model = ScriptedModel([])
    async with serving(model, tmp_path) as first:
        assert first.tcp is not None
        proxy = Proxy(first.tcp)
        address = await proxy.start()
        ui = ClientLink(first)
        try:
            client = await RemoteCodex.connect_tcp(*address, token=TOKEN, on_notice=ui.on_notice)
            ui.attach(client)
            await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
            await ui.until("session_configured", within=WITHIN)
            async with serving(model, tmp_path) as second:
                assert second.tcp is not None
                proxy.target = second.tcp
                proxy.cut()
                error = await raises_within(SessionLost, client.next_event(), ui.context())
            assert error.code == "unknown_session"
            assert client.session_id in error.message
            assert [type(n) for n in ui.notices] == [Disconnected]
            with pytest.raises(SessionLost):
                await client.submit(Interrupt())
        finally:
            await ui.client.aclose()
            await proxy.aclose()


async def test_refusals_at_connect_are_clear_errors(tmp_path: Path) -> None:
    async with serving(ScriptedModel([]), tmp_path) as server:
        assert server.tcp is not None
        with pytest.raises(HandshakeRefused) as wrong:
            await RemoteCodex.connect_tcp(*server.tcp, token="not-the-token")
        assert wrong.value.code == "unauthorized"
        assert "unauthorized" in str(wrong.value)
        with pytest.raises(SessionLost) as unknown:
            await RemoteCodex.connect_tcp(*server.tcp, token=TOKEN, session_id="no-such-session")
        assert unknown.value.code == "unknown_session"
        # An attach past the end of the session's events.
        async with RemoteCodex.connect_tcp(*server.tcp, token=TOKEN) as client:
            with pytest.raises(SessionLost) as bad:
                await RemoteCodex.connect_tcp(
                    *server.tcp, token=TOKEN, session_id=client.session_id, last_seq=99
                )
            assert bad.value.code == "bad_seq"


async def test_control_messages_become_notices(tmp_path: Path) -> None:
    """control_changed and submission_rejected reach the UI as notices, in order."""
    model = ScriptedModel([text_response("hi")])
    async with serving(model, tmp_path) as server:
        assert server.tcp is not None
        proxy = Proxy(server.tcp)
        address = await proxy.start()
        a = ClientLink(server)
        b = ClientLink(server)
        two = asyncio.Event()

        def on_a_notice(notice: Notice) -> None:
            a.on_notice(notice)
            if len(a.notices) == 2:
                two.set()

        try:
            a.attach(await RemoteCodex.connect_tcp(*address, token=TOKEN, on_notice=on_a_notice))
            await a.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
            await a.until("session_configured", within=WITHIN)

            # b takes control while a cannot hear it; a submits, believing it controls.
            proxy.hold("down")
            b.attach(
                await RemoteCodex.connect_tcp(
                    *server.tcp, token=TOKEN, session_id=a.client.session_id, on_notice=b.on_notice
                )
            )
            assert b.client.control is True
            await a.client.submit(Interrupt(), id="late")
            reading = asyncio.create_task(a.client.next_event())
            proxy.release("down")
            async with asyncio.timeout(WITHIN):
                await two.wait()
            assert a.notices[0] == ControlChange(False, "taken_over")
            refused = a.notices[1]
            assert isinstance(refused, SubmissionRefused)
            assert (refused.id, refused.code) == ("late", "not_controller")
            assert a.client.control is False
            with pytest.raises(NotInControl):
                await a.client.submit(Interrupt())

            # Everyone sees the controller's events.
            await b.send(say("t1", "hello"))
            async with asyncio.timeout(WITHIN):
                first = await reading
            a.seen.append(orjson.loads(encode_event(first)))
            await a.until("task_complete", within=WITHIN)
            await b.until("task_complete", within=WITHIN)

            # a takes control back: it reattaches, asking for it.
            await a.client.reconnect(take_control=True)
            await a.send(sub("cfg2", "configure_session", approval_policy="never"))
            await a.until("session_configured", within=WITHIN)
            assert a.client.control is True
            assert [type(n) for n in a.notices[2:]] == [Disconnected, Reconnected]
            await b.until("session_configured", within=WITHIN)
            assert b.notices == [ControlChange(False, "taken_over")]
            assert b.client.control is False
        finally:
            for link in (a, b):
                if link._client is not None:
                    await link.client.detach()
            await proxy.aclose()


async def test_a_watcher_cannot_submit(tmp_path: Path) -> None:
    async with serving(ScriptedModel([]), tmp_path) as server:
        assert server.tcp is not None
        async with RemoteCodex.connect_tcp(*server.tcp, token=TOKEN) as owner:
            await owner.submit(ConfigureSession(cwd=str(tmp_path)), id="cfg")
            watcher = await RemoteCodex.connect_tcp(
                *server.tcp, token=TOKEN, session_id=owner.session_id, control=False
            )
            try:
                assert watcher.control is False
                with pytest.raises(NotInControl):
                    await watcher.submit(Interrupt())
                async with asyncio.timeout(WITHIN):
                    seen = [await watcher.next_event() for _ in range(2)]
                assert [e.msg.TYPE for e in seen] == ["submission_ack", "session_configured"]
            finally:
                await watcher.aclose()  # a watcher leaves; the session goes on
            async with asyncio.timeout(WITHIN):
                assert (await owner.next_event()).msg.TYPE == "submission_ack"


async def test_events_lost_for_good_are_announced(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("z" * 200, chunks=100)])
    async with serving(model, tmp_path, "--replay-events", "20") as server:
        assert server.tcp is not None
        async with RemoteCodex.connect_tcp(*server.tcp, token=TOKEN) as owner:
            await owner.submit(ConfigureSession(cwd=str(tmp_path)), id="cfg")
            await owner.submit(UserInput((TextInput("go"),)), id="t1")
            async with asyncio.timeout(WITHIN):
                async for event in owner.events():
                    if isinstance(event.msg, TaskComplete):
                        break
            total = event.seq + 1
            notices: list[Notice] = []
            late = await RemoteCodex.connect_tcp(
                *server.tcp,
                token=TOKEN,
                session_id=owner.session_id,
                last_seq=3,
                control=False,
                on_notice=notices.append,
            )
            try:
                async with asyncio.timeout(WITHIN):
                    first = await late.next_event()
                assert notices == [EventsLost(4, total - 21)]
                assert first.seq == total - 20
            finally:
                await late.detach()


async def test_detach_and_attach_again_later(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("still here")])
    async with serving(model, tmp_path) as server:
        assert server.tcp is not None
        first = await RemoteCodex.connect_tcp(*server.tcp, token=TOKEN)
        await first.submit(ConfigureSession(cwd=str(tmp_path)), id="cfg")
        async with asyncio.timeout(WITHIN):
            seen = [await first.next_event() for _ in range(2)]
        await first.submit(UserInput((TextInput("go on without me"),)), id="t1")
        session_id, last_seq = first.session_id, first.last_seq
        await first.detach()  # the submission still goes out; the session goes on
        with pytest.raises(EngineClosed):
            await first.next_event()

        async with RemoteCodex.connect_tcp(
            *server.tcp, token=TOKEN, session_id=session_id, last_seq=last_seq
        ) as second:
            assert second.welcome is not None
            assert second.welcome.resumed is True
            async with asyncio.timeout(WITHIN):
                async for event in second.events():
                    seen.append(event)
                    if isinstance(event.msg, TaskComplete):
                        break
        assert [e.seq for e in seen] == list(range(len(seen)))
        last = seen[-1].msg
        assert isinstance(last, TaskComplete)
        assert last.last_agent_message == "still here"


async def test_a_server_that_is_gone_for_good(tmp_path: Path) -> None:
    async with serving(ScriptedModel([]), tmp_path) as server:
        assert server.tcp is not None
        notices: list[Notice] = []
        policy = ReconnectPolicy(attempts=3, initial_delay=0.01, max_delay=0.05)
        client = await RemoteCodex.connect_tcp(
            *server.tcp, token=TOKEN, reconnect=policy, on_notice=notices.append
        )
        try:
            await server.kill()
            error = await raises_within(ConnectionLost, client.next_event(), server.context())
            assert error.attempts == 3
            assert "3 attempts to reconnect failed" in str(error)
            assert [type(n) for n in notices] == [Disconnected]
        finally:
            await client.aclose()


FLOOD = [
    PY,
    "-c",
    "import sys; block = b'x' * 65536\nfor _ in range(320): sys.stdout.buffer.write(block)",
]  # 20 MiB of output: about 2,500 exec_command_output_delta events


async def test_a_ui_that_stops_reading_holds_the_socket_and_catches_up(tmp_path: Path) -> None:
    """The client's buffer is bounded: a UI that stops reading stops the client reading
    its socket, until the server cuts the connection as stuck. When the UI reads again,
    the client reattaches and the UI sees the rest, in order, told what was lost."""
    model = ScriptedModel([shell_call(FLOOD, call_id="c1"), text_response("flooded")])
    async with ScriptedResponsesServer(model) as http:
        env = server_env(http.base_url, CODEXCORE_TOKEN=TOKEN, CODEXCORE_LOG="info")
        args = ("--stuck-timeout", "1", "--send-buffer-bytes", "65536")
        server = await ServerProcess.start(http.base_url, tmp_path, *args, env=env)
        ui = ClientLink(server)
        try:
            assert server.tcp is not None
            client = await RemoteCodex.connect_tcp(
                *server.tcp, token=TOKEN, event_buffer=4, on_notice=ui.on_notice
            )
            ui.attach(client)
            await ui.send(
                sub("cfg", "configure_session", approval_policy="never", cwd=str(tmp_path)),
                say("t1", "flood"),
            )
            await ui.until("exec_command_output_delta", within=WITHIN)
            await server.wait_stderr("client stuck: disconnecting", within=WITHIN * 2)
            assert client._require_queue().async_q.qsize() <= 4
            await ui.until("task_complete", within=WITHIN * 2)
        finally:
            with contextlib.suppress(Exception):
                await ui.client.aclose()
            await server.kill()
    assert [type(n) for n in ui.notices][:2] == [Disconnected, Reconnected], ui.notices
    welcome = notices_of(ui, Reconnected)[0].welcome
    if not welcome.replay_complete:
        assert notices_of(ui, EventsLost)[0].last_seq == welcome.replay_from - 1
    seqs = ui.seqs()
    assert seqs == sorted(set(seqs))
    assert ui.of("task_complete")[0]["last_agent_message"] == "flooded"


# --- the algorithm against a server that plays a script -----------------------------------


def welcome_line(*, resumed: bool, replay_from: int, replay_complete: bool = True) -> bytes:
    welcome = {
        "type": "welcome",
        "protocol_version": 1,
        "server": {"name": "scripted", "version": "0"},
        "capabilities": ["acks", "control", "replay"],
        "session_id": "s-1",
        "resumed": resumed,
        "control": True,
        "replay_from": replay_from,
        "replay_complete": replay_complete,
        "limits": {"max_line_bytes": 1048576, "duplicate_ttl": 600.0, "idle_timeout": 600.0},
        "a_field_from_the_future": True,
    }
    return orjson.dumps(welcome) + b"\n"


def event_line(seq: int, sub_id: str, msg: dict[str, Any]) -> bytes:
    return orjson.dumps({"id": sub_id, "seq": seq, "msg": msg}) + b"\n"


def ack(seq: int, sub_id: str) -> bytes:
    return event_line(seq, sub_id, {"type": "submission_ack", "id": sub_id, "duplicate": False})


async def test_what_the_client_makes_of_the_wire() -> None:
    """A server playing a script, to show what the real one never does: events replayed
    twice, unknown types, ``closing``, a replay that starts late."""
    hellos: list[dict[str, Any]] = []
    received: list[dict[str, Any]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hellos.append(orjson.loads(await reader.readline()))
        if len(hellos) == 1:
            writer.write(welcome_line(resumed=False, replay_from=0))
            received.extend([orjson.loads(await reader.readline()) for _ in range(2)])
            writer.write(
                ack(0, "x1")
                + event_line(1, "x1", {"type": "task_started"})
                + b'{"type": "a_connection_message_from_the_future", "n": 1}\n'
                + event_line(2, "x1", {"type": "an_event_from_the_future"})
                + event_line(3, "x1", {"type": "warning", "message": "careful"})
                + b'{"type": "closing", "code": "lagged", "message": "too slow"}\n'
            )
        else:  # the reattach: x2 was never answered, so it comes again
            writer.write(welcome_line(resumed=True, replay_from=6, replay_complete=False))
            received.append(orjson.loads(await reader.readline()))
            writer.write(
                event_line(2, "x1", {"type": "an_event_from_the_future"})
                + event_line(3, "x1", {"type": "warning", "message": "careful"})
                + ack(6, "x2")
                + event_line(7, "x2", {"type": "shutdown_complete"})
            )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    story: list[str] = []
    try:
        async with RemoteCodex.connect_tcp(
            host, port, token="t", on_notice=lambda n: story.append(type(n).__name__)
        ) as client:
            await client.submit(Interrupt(), id="x1")
            await client.submit(Shutdown(), id="x2")
            async with asyncio.timeout(WITHIN):
                async for event in client.events():
                    story.append(f"{event.seq}:{event.msg.TYPE}")
            assert client.last_seq == 7
    finally:
        server.close()
        await server.wait_closed()

    assert story == [
        "0:submission_ack",
        "1:task_started",
        "3:warning",
        "Disconnected",
        "Reconnected",
        "EventsLost",
        "6:submission_ack",
        "7:shutdown_complete",
    ]
    assert hellos[0]["session_id"] is None
    assert (hellos[1]["session_id"], hellos[1]["last_seq"], hellos[1]["control"]) == (
        "s-1",
        3,
        True,
    )
    assert hellos[1]["token"] == "t"
    assert [r["id"] for r in received] == ["x1", "x2", "x2"]
    assert received[2] == received[1]


# --- stdio: the process is the session ---------------------------------------------------------


async def test_a_dead_stdio_child_is_a_clear_error(tmp_path: Path) -> None:
    model = ScriptedModel([])
    async with ScriptedResponsesServer(model) as http:
        lines: list[str] = []
        client = await RemoteCodex.spawn_stdio(
            env=server_env(http.base_url), cwd=tmp_path, on_stderr=lines.append
        )
        try:
            await client.submit(ConfigureSession(cwd=str(tmp_path)), id="cfg")
            async with asyncio.timeout(WITHIN):
                assert (await client.next_event()).msg.TYPE == "submission_ack"
            assert client.process is not None
            os.kill(client.process.pid, signal.SIGKILL)
            error = await raises_within(ServerExited, drain(client), f"\nstderr: {lines}")
            assert error.returncode == -signal.SIGKILL
            assert "code -9" in str(error)
            with pytest.raises(ServerExited):
                await client.submit(Interrupt())
        finally:
            await client.aclose()


async def drain(client: RemoteCodex) -> None:
    while True:
        await client.next_event()


async def test_a_stdio_child_that_dies_at_once(tmp_path: Path) -> None:
    argv = [PY, "-c", "import sys; print('no such luck', file=sys.stderr); sys.exit(3)"]
    lines: list[str] = []
    with pytest.raises(ServerExited) as died:
        await RemoteCodex.spawn_stdio(argv, cwd=tmp_path, on_stderr=lines.append)
    assert died.value.returncode == 3
    assert died.value.stderr_tail == ("no such luck",)
    assert "no such luck" in str(died.value)
    assert lines == ["no such luck"]


# --- the blocking face -------------------------------------------------------------------------


def blocking_ui(path: Path, cwd: Path, notices: list[tuple[Notice, int]]) -> list[Event]:
    """A UI without an event loop: blocking calls on a plain thread."""
    seen: list[Event] = []

    def on_notice(notice: Notice) -> None:
        notices.append((notice, threading.get_ident()))

    with RemoteCodexThread.connect_unix(path, token=TOKEN, on_notice=on_notice) as codex:
        codex.submit(ConfigureSession(approval_policy="untrusted", cwd=str(cwd)), id="cfg")
        codex.submit(UserInput((TextInput("run it"),)), id="u1")
        for event in codex:
            seen.append(event)
            if isinstance(event.msg, ExecApprovalRequest):
                codex.reconnect()  # the approval goes out after the reattach
                codex.submit(ExecApproval(event.msg.call_id, "approved"), id="a1")
            elif isinstance(event.msg, TaskComplete):
                codex.submit(Shutdown(), id="bye")
        with pytest.raises(EngineClosed):
            codex.next_event(timeout=1)
    return seen


async def test_the_blocking_face_from_a_plain_thread(tmp_path: Path) -> None:
    model = basic_model()
    with private_dir() as run:
        async with serving(model, tmp_path, unix=run / "s.sock", tcp=False) as server:
            assert server.unix is not None
            notices: list[tuple[Notice, int]] = []
            seen = await asyncio.wait_for(
                asyncio.to_thread(blocking_ui, server.unix, tmp_path, notices), WITHIN * 2
            )
    types = [e.msg.TYPE for e in seen]
    assert types[-1] == "shutdown_complete", types
    assert types.count("exec_command_begin") == 1
    assert [e.seq for e in seen] == list(range(len(seen)))
    assert [type(n) for n, _ in notices] == [Disconnected, Reconnected]
    assert len({thread for _, thread in notices}) == 1  # the UI's thread
    assert threading.get_ident() not in {thread for _, thread in notices}
    assert len(model.requests) == 2


async def test_the_blocking_face_times_out_and_reports_refusals(tmp_path: Path) -> None:
    async with serving(ScriptedModel([]), tmp_path) as server:
        assert server.tcp is not None
        address = server.tcp

        def blocking() -> None:
            with pytest.raises(HandshakeRefused):
                RemoteCodexThread.connect_tcp(*address, token="wrong")
            with RemoteCodexThread.connect_tcp(*address, token=TOKEN) as codex:
                with pytest.raises(TimeoutError):
                    codex.next_event(timeout=0.05)
                codex.submit(ConfigureSession(cwd=str(tmp_path)), id="cfg")
                assert codex.next_event(timeout=WITHIN).msg.TYPE == "submission_ack"
                assert codex.last_seq == 0
            with pytest.raises(EngineClosed):
                codex.submit(Interrupt())

        await asyncio.wait_for(asyncio.to_thread(blocking), WITHIN * 2)


# --- TLS ---------------------------------------------------------------------------------------


async def test_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    model = ScriptedModel([text_response("over TLS")])
    args = ("--tls-cert", str(tmp_path / "server.pem"), "--tls-key", str(tmp_path / "server.pem"))
    async with serving(model, tmp_path, *args) as server:
        assert server.tcp is not None
        context = ssl.create_default_context()
        ca.configure_trust(context)
        async with RemoteCodex.connect_tcp(*server.tcp, token=TOKEN, ssl=context) as codex:
            await codex.submit(UserInput((TextInput("hi"),)), id="t1")
            async with asyncio.timeout(WITHIN):
                async for event in codex.events():
                    if isinstance(event.msg, TaskComplete):
                        assert event.msg.last_agent_message == "over TLS"
                        break
        with pytest.raises(ssl.SSLCertVerificationError):
            await RemoteCodex.connect_tcp(
                *server.tcp, token=TOKEN, ssl=ssl.create_default_context()
            )
