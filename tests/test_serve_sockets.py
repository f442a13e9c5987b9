"""``codexcore serve --tcp/--unix`` as a real subprocess: sessions, replay, control, limits."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trustme

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
    IdleClient,
    ServerProcess,
    hello,
    private_dir,
    say,
    server_env,
    sub,
)

pytestmark = pytest.mark.anyio

SYSTEM_PYTHON = "/usr/bin/python3"
HAVE_SYSTEM_PYTHON = os.path.exists(SYSTEM_PYTHON)


@asynccontextmanager
async def serving(
    model: ScriptedModel,
    cwd: Path,
    *args: str,
    unix: Path | None = None,
    tcp: bool = True,
    token: str | None = TOKEN,
    log: str = "info",
) -> AsyncIterator[ServerProcess]:
    async with ScriptedResponsesServer(model) as http:
        env = server_env(http.base_url, CODEXCORE_LOG=log)
        if token is not None:
            env["CODEXCORE_TOKEN"] = token
        server = await ServerProcess.start(http.base_url, cwd, *args, tcp=tcp, unix=unix, env=env)
        try:
            yield server
        finally:
            await server.kill()


async def new_session(server: ServerProcess, *, unix: bool = False, **fields: Any) -> Client:
    client = await server.client(unix=unix)
    welcome = await client.greet(**fields)
    assert welcome["type"] == "welcome", welcome
    return client


def welcome_of(client: Client) -> dict[str, Any]:
    return next(m for m in client.seen if m.get("type") == "welcome")


# --- the seed's flows over TCP and Unix ---------------------------------------------------


Flow = Callable[[Any, ScriptedModel, Path], Awaitable[None]]


@pytest.mark.parametrize("transport", ["tcp", "unix"])
@pytest.mark.parametrize(
    ("flow", "make_model"),
    [(basic_flow, basic_model), (interrupt_flow, interrupt_model)],
    ids=["basic", "interrupt"],
)
async def test_seed_flows(
    tmp_path: Path, transport: str, flow: Flow, make_model: Callable[[], ScriptedModel]
) -> None:
    model = make_model()
    with private_dir() as run:
        unix = run / "s.sock" if transport == "unix" else None
        async with serving(model, tmp_path, unix=unix, tcp=transport == "tcp") as server:
            ui = await new_session(server, unix=transport == "unix")
            welcome = welcome_of(ui)
            assert (welcome["resumed"], welcome["control"], welcome["replay_from"]) == (
                False,
                True,
                0,
            )
            assert welcome["capabilities"] == ["acks", "coalesced_deltas", "control", "replay"]
            await flow(ui, model, tmp_path)
            ui.check_invariants()
            await ui.send(sub("bye", "shutdown"))
            await ui.to_end()
            assert ui.types()[-1] == "shutdown_complete"
            assert await server.stop() == 0


# --- the handshake and its refusals ----------------------------------------------------


async def test_refusals_say_one_line_and_close(tmp_path: Path) -> None:
    async with serving(ScriptedModel([]), tmp_path) as server:
        owner = await new_session(server)
        session_id = welcome_of(owner)["session_id"]

        async def refused(*lines: dict[str, Any] | bytes) -> dict[str, Any]:
            client = await server.client()
            await client.send(*lines)
            await client.to_end()
            assert len(client.seen) == 1, client.seen
            assert client.seen[0]["type"] == "refused"
            return client.seen[0]

        wrong = await refused(hello(token="guess"))
        wrong_with_session = await refused(hello(token="guess", session_id=session_id))
        no_token = await refused(hello(token=None, session_id="no-such-session"))
        # A wrong token says nothing about sessions, whichever id it names.
        assert wrong == wrong_with_session == no_token
        assert wrong["code"] == "unauthorized"
        assert session_id not in orjson.dumps(wrong).decode()

        assert (await refused(hello(session_id="no-such-session")))["code"] == "unknown_session"
        assert (await refused(sub("s1", "interrupt")))["code"] == "bad_hello"
        assert (await refused(b"not json\n"))["code"] == "bad_hello"
        assert (await refused({**hello(), "protocol_version": 2}))["code"] == "unsupported_version"
        late = await refused(hello(session_id=session_id, last_seq=5))
        assert late["code"] == "bad_seq"
        # The owner's session was never disturbed.
        await owner.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
        await owner.until("session_configured")


async def test_handshake_timeout(tmp_path: Path) -> None:
    async with serving(ScriptedModel([]), tmp_path, "--handshake-timeout", "0.3") as server:
        client = await server.client()
        await client.to_end()  # say nothing
        assert [(m["type"], m["code"]) for m in client.seen] == [("refused", "handshake_timeout")]


async def test_connection_and_session_limits(tmp_path: Path) -> None:
    args = ("--max-connections", "2", "--max-sessions", "1")
    async with serving(ScriptedModel([]), tmp_path, *args) as server:
        first = await new_session(server)
        second = await server.client()
        answer = await second.greet()
        assert (answer["type"], answer["code"]) == ("refused", "too_many_sessions")
        await second.to_end()
        await second.close()  # the server lingers, reading, until the refused client leaves
        # The refused connection is gone; two attachments fill the connection limit.
        watcher = await new_session(server, session_id=welcome_of(first)["session_id"])
        third = await server.client()
        await third.to_end()
        assert [(m["type"], m["code"]) for m in third.seen] == [("refused", "too_many_connections")]
        await watcher.close()
        await first.close()


async def test_the_limit_of_connections_per_session_is_a_flag(tmp_path: Path) -> None:
    args = ("--max-connections-per-session", "2")
    async with serving(ScriptedModel([]), tmp_path, *args) as server:
        first = await new_session(server)
        session_id = welcome_of(first)["session_id"]
        second = await new_session(server, session_id=session_id, control=False)
        third = await server.client()
        answer = await third.greet(session_id=session_id)
        assert (answer["type"], answer["code"]) == ("refused", "session_full")
        assert "limit of 2 connections" in answer["message"]
        await third.close()
        await second.close()
        await first.close()


# --- resuming ------------------------------------------------------------------------


def slow_text(text: str, chunks: int, pause: float = 0.02) -> ScriptedResponse:
    """A text response whose deltas trickle, so a connection can die in the middle."""
    response = text_response(text, chunks=chunks)
    steps: list[Any] = []
    for step in response.steps:
        steps.append(step)
        if b"output_text.delta" in step if isinstance(step, bytes) else False:
            steps.append(Pause(pause))
    return ScriptedResponse(response.status, response.headers, steps)


async def test_a_killed_connection_reattaches_with_nothing_lost_or_repeated(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [slow_text("abcdefghijklmnopqrstuvwxyz" * 4, chunks=40), text_response("second")]
    )
    async with serving(model, tmp_path) as server:
        first = await new_session(server)
        session_id = welcome_of(first)["session_id"]
        await first.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "go"))
        for _ in range(5):
            await first.until("agent_message_delta")
        first.kill()  # mid-stream: events keep coming while nobody is attached
        last_seen = first.seqs()[-1]

        second = await new_session(server, session_id=session_id, last_seq=last_seen)
        welcome = welcome_of(second)
        assert welcome["resumed"] is True
        assert welcome["replay_from"] == last_seen + 1
        assert welcome["replay_complete"] is True
        await second.until("task_complete", id="t1")
        await second.send(say("t2", "again"))
        await second.until("task_complete", id="t2")

    seqs = first.seqs() + second.seqs()
    assert seqs == list(range(len(seqs)))  # nothing lost, nothing twice
    deltas = first.of("agent_message_delta") + second.of("agent_message_delta")
    assert "".join(d["delta"] for d in deltas[:40]) == "abcdefghijklmnopqrstuvwxyz" * 4


async def test_a_resent_submission_is_not_run_twice(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("once"), text_response("never")])
    async with serving(model, tmp_path) as server:
        first = await new_session(server)
        session_id = welcome_of(first)["session_id"]
        await first.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
        await first.until("session_configured")
        before = first.seqs()[-1]
        await first.send(say("u1", "go"))
        await first.until("submission_ack", id="u1")
        first.kill()  # say the client never saw that ack: it resends after reconnecting

        second = await new_session(server, session_id=session_id, last_seq=before)
        await second.send(say("u1", "go"))
        acks = [await second.until("submission_ack", id="u1") for _ in range(2)]
        if "task_complete" not in second.types(id="u1"):  # the replay may have had it already
            await second.until("task_complete", id="u1")
        await second.send(sub("bye", "shutdown"))
        await second.to_end()
    assert [a["msg"]["duplicate"] for a in acks] == [False, True]
    assert second.types(id="u1").count("task_started") == 1
    assert len(model.requests) == 1


async def test_replay_says_when_events_are_gone(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("z" * 400, chunks=200)])
    async with serving(model, tmp_path, "--replay-events", "50") as server:
        first = await new_session(server)
        session_id = welcome_of(first)["session_id"]
        await first.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "go"))
        await first.until("task_complete")
        total = first.seqs()[-1] + 1
        await first.close()
        late = await new_session(server, session_id=session_id, last_seq=3)
        welcome = welcome_of(late)
        assert welcome["replay_complete"] is False
        assert welcome["replay_from"] == total - 50
        await late.until("task_complete")
        assert late.seqs() == list(range(total - 50, total))


# --- control -----------------------------------------------------------------------------


async def test_the_latest_client_asking_for_control_gets_it(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("for b")])
    async with serving(model, tmp_path) as server:
        a = await new_session(server)
        session_id = welcome_of(a)["session_id"]
        watcher = await new_session(server, session_id=session_id, control=False)
        assert welcome_of(watcher)["control"] is False
        await watcher.send(sub("w1", "interrupt"))
        rejected = await watcher.until("submission_rejected")
        assert (rejected["id"], rejected["code"]) == ("w1", "not_controller")

        b = await new_session(server, session_id=session_id)  # asks for control (the default)
        assert welcome_of(b)["control"] is True
        changed = await a.until("control_changed")
        assert (changed["control"], changed["reason"]) == (False, "taken_over")
        await a.send(sub("a1", "configure_session"))
        assert (await a.until("submission_rejected"))["code"] == "not_controller"

        await b.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "hi"))
        for client in (a, b, watcher):  # everyone watches the controller's task
            await client.until("task_complete", id="t1")
            client.check_invariants()
    assert "a1" not in [e["id"] for e in b.events()]  # a's submission never reached the engine


# --- backpressure ------------------------------------------------------------------------


FLOOD = [
    PY,
    "-c",
    "import sys; block = b'x' * 65536\nfor _ in range(640): sys.stdout.buffer.write(block)",
]  # 40 MiB of output: about 5,000 exec_command_output_delta events of 8 KiB


async def test_a_client_that_never_reads(tmp_path: Path) -> None:
    """Server memory stays bounded; the client is cut off; the session goes on."""
    model = ScriptedModel(
        [shell_call(FLOOD, call_id="c1"), text_response("flooded"), text_response("still here")]
    )
    args = ("--send-buffer-bytes", "262144", "--stuck-timeout", "1", "--replay-bytes", "1048576")
    async with serving(model, tmp_path, *args) as server:
        assert server.tcp is not None
        sleeper = IdleClient(server.tcp)
        sleeper.send(hello())
        session_id = sleeper.read_line()["session_id"]
        watcher = await new_session(server, session_id=session_id, control=False)
        sleeper.send(
            sub(
                "cfg",
                "configure_session",
                cwd=str(tmp_path),
                approval_policy="never",
                sandbox_policy={"type": "danger-full-access"},
            )
        )
        await watcher.until("session_configured")
        baseline = server.memory_kib()
        sleeper.send(say("t1", "flood"))  # and never read again
        done = await watcher.until("task_complete", id="t1", within=50)
        await server.wait_stderr("client stuck: disconnecting")
        peak = server.memory_kib("VmHWM")

        # The session goes on: its user reattaches, takes control, runs another task.
        back = await new_session(server, session_id=session_id, last_seq=done["seq"])
        await back.send(say("t2", "more"))
        await back.until("task_complete", id="t2")
        leftovers, reset = await asyncio.to_thread(sleeper.read_to_end)
        sleeper.close()

    growth_mib = (peak - baseline) / 1024
    # Measured: about 14 MiB, the same for 120 MiB of output; every event kept would be 55.
    assert growth_mib < 30, f"server memory grew by {growth_mib:.1f} MiB for 40 MiB of output"
    assert reset or leftovers  # cut off: what the kernel held, then the end
    assert "task_complete" not in [m.get("msg", {}).get("type") for m in leftovers]
    end = watcher.of("exec_command_end")[0]
    assert (end["exit_code"], end["status"]) == (0, "completed")
    seqs = watcher.seqs()
    assert seqs == sorted(set(seqs))  # increasing, never repeated, whatever was merged


async def test_a_slow_reader_gets_merged_or_dropped_deltas_but_every_other_event(
    tmp_path: Path,
) -> None:
    # 80,000 small deltas, 6 MB of events: more than the kernel's socket buffers (up to
    # 4 MB) hide, while the final message (which task_complete repeats) stays small.
    model = ScriptedModel([text_response("mm" * 80_000, chunks=80_000)])
    async with serving(model, tmp_path, "--send-buffer-bytes", "262144") as server:
        assert server.tcp is not None
        slow = IdleClient(server.tcp)
        slow.send(hello())
        session_id = slow.read_line()["session_id"]
        fast = await new_session(server, session_id=session_id, control=False)
        slow.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "go"))
        done = await fast.until("task_complete", within=40)  # slow has read nothing so far
        slow.send(sub("bye", "shutdown"))
        await fast.to_end()
        seen, _ = await asyncio.to_thread(slow.read_to_end)
        slow.close()

    events = [m for m in seen if "seq" in m]
    assert len(events) < done["seq"] + 1  # deltas were merged or dropped for the slow reader
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))

    def solid(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in events if e["msg"]["type"] != "agent_message_delta"]

    assert solid(events) == solid(fast.events())  # every other event, exactly
    assert events[-1]["msg"]["type"] == "shutdown_complete"
    message = next(e for e in events if e["msg"]["type"] == "agent_message")
    assert message["msg"]["message"] == "mm" * 80_000
    deltas = [e for e in events if e["msg"]["type"] == "agent_message_delta"]
    assert all(set(d["msg"]["delta"]) == {"m"} for d in deltas)
    assert any(len(d["msg"]["delta"]) > 2 for d in deltas) or len(deltas) < 40_000


# --- TLS -----------------------------------------------------------------------------------


async def test_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    model = ScriptedModel([text_response("over TLS")])
    args = ("--tls-cert", str(tmp_path / "server.pem"), "--tls-key", str(tmp_path / "server.pem"))
    async with serving(model, tmp_path, *args) as server:
        assert "listening on tls" in "\n".join(server.stderr)
        context = ssl.create_default_context()
        ca.configure_trust(context)
        server.tls = context
        ui = await new_session(server)
        await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)), say("t1", "hi"))
        done = await ui.until("task_complete")
        assert done["msg"]["last_agent_message"] == "over TLS"
        ui.check_invariants()

        server.tls = None  # plain TCP to a TLS port gets no welcome
        plain = await server.client()
        await plain.send(hello())
        async with asyncio.timeout(10):
            raw = await plain.reader.read()  # whatever comes back before the server hangs up
        assert b"welcome" not in raw
        untrusted = ssl.create_default_context()
        with pytest.raises(ssl.SSLCertVerificationError):
            await Client.tcp(server.tcp or ("", 0), ssl_context=untrusted)


# --- many sessions -------------------------------------------------------------------------


async def test_a_hundred_concurrent_sessions(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("done") for _ in range(100)])
    async with serving(model, tmp_path) as server:

        async def one(number: int) -> Client:
            ui = await new_session(server)
            await ui.send(sub("cfg", "configure_session", cwd=str(tmp_path)))
            await ui.send(say(f"t{number}", "work"))
            await ui.until("task_complete", within=40)
            return ui

        clients = await asyncio.gather(*(one(n) for n in range(100)))
        ids = {welcome_of(c)["session_id"] for c in clients}
        assert len(ids) == 100
        for ui in clients:
            ui.check_invariants()
            assert ui.of("task_complete")[0]["last_agent_message"] == "done"
        assert len(model.requests) == 100
        assert await server.stop() == 0
        for ui in clients:  # server shutdown: every session says goodbye
            await ui.to_end()
            assert ui.types()[-1] == "shutdown_complete"


async def test_shutdown_reaches_every_session_and_kills_commands(tmp_path: Path) -> None:
    sleeper = [PY, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    model = ScriptedModel([shell_call(sleeper, call_id="c1")])
    async with serving(model, tmp_path) as server:
        busy = await new_session(server)
        idle = await new_session(server)
        await busy.send(
            sub(
                "cfg",
                "configure_session",
                cwd=str(tmp_path),
                approval_policy="never",
                sandbox_policy={"type": "danger-full-access"},
            ),
            say("t1", "sleep"),
        )
        await busy.until("exec_command_output_delta")
        assert await server.stop() == 0
        for ui in (busy, idle):
            await ui.to_end()
            assert ui.types()[-1] == "shutdown_complete"
            ui.check_invariants()
        assert busy.types()[-2:] == ["turn_aborted", "shutdown_complete"]


async def test_idle_sessions_expire(tmp_path: Path) -> None:
    args = ("--idle-timeout", "0.3")
    async with serving(ScriptedModel([]), tmp_path, *args) as server:
        ui = await new_session(server)
        session_id = welcome_of(ui)["session_id"]
        await ui.close()
        await server.wait_stderr(f"session expired.*{session_id}")
        late = await server.client()
        answer = await late.greet(session_id=session_id)
        assert (answer["type"], answer["code"]) == ("refused", "unknown_session")


# --- Unix sockets ----------------------------------------------------------------------------


async def test_unix_socket_is_private_and_checks_the_peer(tmp_path: Path) -> None:
    with private_dir() as run:
        path = run / "codex" / "s.sock"
        async with serving(ScriptedModel([]), tmp_path, unix=path, tcp=False, token=None) as server:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            assert stat.S_ISSOCK(path.stat().st_mode)
            # No token is needed on a Unix-only server: the peer's uid is checked.
            ui = await new_session(server, unix=True, token=None)
            await ui.close()
            if os.geteuid() == 0 and HAVE_SYSTEM_PYTHON:
                # Loosened permissions still refuse another user.
                os.chmod(run, 0o755)
                os.chmod(path.parent, 0o755)
                os.chmod(path, 0o666)
                answer = await _connect_as_nobody(path)
                assert answer["type"] == "refused"
                assert answer["code"] == "unauthorized"
                assert "uid 65534" in answer["message"]
            assert await server.stop() == 0
        assert not path.exists()  # removed on the way out


NOBODY_CLIENT = """
import json, socket, sys
with socket.socket(socket.AF_UNIX) as sock:
    sock.settimeout(10)
    sock.connect(sys.argv[1])
    sock.sendall(json.dumps({"type": "hello", "protocol_version": 1,
                             "client": {"name": "intruder", "version": "0"}}).encode() + b"\\n")
    sys.stdout.write(sock.makefile("rb").readline().decode())
"""


async def _connect_as_nobody(path: Path) -> dict[str, Any]:
    """Say hello from a process of uid 65534 (a system Python: ours lives under /root)."""
    process = await asyncio.create_subprocess_exec(
        SYSTEM_PYTHON,
        "-c",
        NOBODY_CLIENT,
        str(path),
        user=65534,
        group=65534,
        extra_groups=[],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 15)
    assert process.returncode == 0, stderr.decode()
    answer: dict[str, Any] = orjson.loads(stdout)
    return answer


async def test_a_stale_socket_is_replaced_and_a_live_one_is_not_stolen(tmp_path: Path) -> None:
    with private_dir() as run:
        path = run / "s.sock"
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(path))
        stale.close()  # a dead server's leftover: nobody listens on it
        async with serving(ScriptedModel([]), tmp_path, unix=path, tcp=False) as server:
            await new_session(server, unix=True)
            process = await asyncio.create_subprocess_exec(
                PY,
                "-m",
                "codexcore",
                "serve",
                "--unix",
                str(path),
                env=server_env(None),
                stderr=asyncio.subprocess.PIPE,
            )
            _, stderr = await asyncio.wait_for(process.communicate(), 15)
            assert process.returncode == 1
            assert b"another server is listening" in stderr
            still = await new_session(server, unix=True)  # the first server still serves
            await still.close()


async def test_an_open_directory_is_refused(tmp_path: Path) -> None:
    with private_dir() as run:
        os.chmod(run, 0o755)
        process = await asyncio.create_subprocess_exec(
            PY,
            "-m",
            "codexcore",
            "serve",
            "--unix",
            str(run / "s.sock"),
            env=server_env(None),
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
        assert process.returncode == 1
        assert b"open to other users" in stderr


# --- malformed lines over a socket -----------------------------------------------------------


async def test_malformed_lines_over_tcp(tmp_path: Path) -> None:
    async with serving(ScriptedModel([]), tmp_path, "--max-line-bytes", "1000") as server:
        ui = await new_session(server)
        await ui.send(
            b"y" * 3000 + b"\n",
            b"\xc3\x28\n",
            b"{nope}\n",
            b"7\n",
            b'{"id": "b1", "op": {"type": "user_input", "items": "hi"}}\n',
            orjson.dumps(hello()) + b"\n",
            sub("cfg", "configure_session", cwd=str(tmp_path)),
        )
        await ui.until("session_configured")
        errors = [(e["id"], e["msg"]["code"]) for e in ui.events() if e["msg"]["type"] == "error"]
        assert errors == [
            ("", "line_too_long"),
            ("", "invalid_utf8"),
            ("", "invalid_json"),
            ("", "not_an_object"),
            ("b1", "bad_submission"),
            ("", "bad_hello"),
        ]
        ui.check_invariants()
