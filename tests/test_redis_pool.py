"""``codexcore serve --redis``: gateways and workers as real processes on a real redis-server.

Every process is a real ``codexcore serve``; failures are real signals
(SIGKILL, SIGSTOP/SIGCONT) and a real Redis restart. The model is the
scripted one, served over HTTP, so workers need no network.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore.testing import (
    Pause,
    ScriptedModel,
    ScriptedResponse,
    idle,
    text_response,
    truncated,
)

from .redis_helpers import Pool, open_session, pool
from .server_helpers import PY, TOKEN, Client, kind, say, server_env, sub

pytestmark = pytest.mark.anyio

LEASE = "2.5"  # seconds: a frozen worker's takeover within the tests' patience (default 5)


def paused(response: ScriptedResponse, seconds: float) -> ScriptedResponse:
    """``response`` with a pause after its first delta: a Turn caught mid-stream."""
    cut = len(truncated(response).steps)
    steps = response.steps
    return attrs.evolve(response, steps=(*steps[:cut], Pause(seconds), *steps[cut:]))


def answers(count: int, text: str = "done") -> list[ScriptedResponse]:
    return [text_response(f"{text} {n}") for n in range(count)]


async def run_task(ui: Client, sub_id: str, text: str = "go", within: float = 20) -> dict[str, Any]:
    await ui.send(say(sub_id, text))
    return await ui.until("task_complete", id=sub_id, within=within)


async def workers(running: Pool, *names: str, lease: str = "5") -> None:
    await asyncio.gather(*(running.worker(name, "--lease", lease) for name in names))


async def test_a_task_runs_on_a_worker_through_a_gateway(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello from the pool")])
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await running.worker("w1")
        ui, session_id = await open_session(gateway)
        await run_task(ui, "u1", "hi")
        assert ui.of("agent_message")[-1]["message"] == "hello from the pool"
        assert await running.owner(session_id) == "w1"
        await ui.send(sub("bye", "shutdown"))
        await ui.until("shutdown_complete", id="bye")
        ui.check_invariants()
        # The session has ended for every gateway: it cannot be attached again.
        late = await gateway.client()
        refused = await late.greet(session_id=session_id, last_seq=-1)
        assert refused["type"] == "refused", refused
        assert refused["code"] == "unknown_session"
        await running.workers["w1"].wait_stderr(rf"session ended.*{session_id}")


async def test_sessions_spread_over_workers_and_any_gateway_serves_any_session(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(answers(12))
    async with pool(model, tmp_path) as running:
        a, b = await running.gateway(), await running.gateway()
        await workers(running, "w1", "w2", "w3")
        sessions = [await open_session(gateway) for gateway in (a, b, a, b, a, b)]
        for n, (ui, _) in enumerate(sessions):
            await run_task(ui, f"u{n}")
        owners = {await running.owner(session_id) for _, session_id in sessions}
        assert len(owners) == 3, owners
        # Watching a session from the gateway that did not create it: its whole stream.
        ui, session_id = sessions[0]
        watcher = await b.client()
        welcome = await watcher.greet(session_id=session_id, last_seq=-1, control=False)
        assert welcome["type"] == "welcome", welcome
        assert welcome["resumed"]
        await watcher.until("task_complete", id="u0")
        assert watcher.events() == ui.events()
        # Seed 003's agent_id: the one the creating gateway chose, from any gateway.
        other = await a.client()
        again = await other.greet(session_id=session_id, last_seq=-1, control=False)
        assert str(welcome["agent_id"]).startswith("codexcore:"), welcome
        assert again["agent_id"] == welcome["agent_id"]


async def test_a_resend_through_another_gateway_is_acked_as_a_duplicate(tmp_path: Path) -> None:
    model = ScriptedModel(answers(3))
    async with pool(model, tmp_path) as running:
        a, b = await running.gateway(), await running.gateway()
        await workers(running, "w1", "w2")
        ui, session_id = await open_session(a)
        await run_task(ui, "u1")
        # The UI lost its answer and resends through gateway B.
        other = await b.client()
        last = ui.seqs()[-1]
        await other.greet(session_id=session_id, last_seq=last)
        await other.send(say("u1", "go"))
        ack = await other.until("submission_ack", id="u1")
        assert ack["msg"]["duplicate"] is True
        # The watcher on A sees the same duplicate ack, and nothing ran twice.
        seen = await ui.until("submission_ack", id="u1")
        assert seen["msg"]["duplicate"] is True
        assert seen["seq"] == ack["seq"]
        assert len(model.requests) == 1
        await run_task(other, "u2")
        assert len(model.requests) == 2
        ui.check_invariants()


async def test_sigkill_of_the_owning_worker_mid_turn(tmp_path: Path) -> None:
    """The UI sees turn_aborted (worker_lost) once, and the next Task completes elsewhere."""
    model = ScriptedModel(
        [
            text_response("noted", response_id="resp_u0"),
            idle(text_response("never finished")),
            *answers(2, "after"),
        ]
    )
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await workers(running, "w1", "w2", "w3")
        ui, session_id = await open_session(gateway)
        await run_task(ui, "u0", "remember the number 7")
        await ui.send(say("u1", "start"))
        await ui.until("agent_message_delta", id="u1", within=20)
        lost = await running.owner(session_id)
        running.workers[lost].process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        aborted = await ui.until("turn_aborted", id="u1", within=20)
        assert aborted["msg"]["reason"] == "worker_lost"
        warnings = [w["message"] for w in ui.of("warning")]
        assert any(f"worker {lost} was lost" in w for w in warnings), warnings
        await run_task(ui, "u2", "again")
        new_owner = await running.owner(session_id)
        assert new_owner != lost
        assert ui.of("agent_message")[-1]["message"] == "after 0"
        # The new owner resumed the conversation from the history kept in Redis.
        request = model.requests[-1]
        assert request.get("previous_response_id") == "resp_u0" or "number 7" in str(
            request["input"]
        ), request
        ui.check_invariants()
        assert ui.types(id="u1").count("turn_aborted") == 1


async def test_sigkill_of_a_gateway_then_replay_through_the_other(tmp_path: Path) -> None:
    model = ScriptedModel([paused(text_response("a b c d e f", chunks=6), 1.5)])
    async with pool(model, tmp_path) as running:
        a, b = await running.gateway(), await running.gateway()
        await workers(running, "w1")
        ui, session_id = await open_session(a)
        await ui.send(say("u1", "go"))
        await ui.until("agent_message_delta", id="u1", within=20)
        before = ui.events()
        a.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        await a.wait_exit()
        again = await b.client()
        welcome = await again.greet(session_id=session_id, last_seq=before[-1]["seq"])
        assert welcome["type"] == "welcome", welcome
        assert welcome["replay_complete"]
        await again.until("task_complete", id="u1", within=20)
        events = before + again.events()
        assert [e["seq"] for e in events] == list(range(len(events)))
        text = "".join(e["msg"]["delta"] for e in events if kind(e) == "agent_message_delta")
        assert text == "a b c d e f"


async def test_a_paused_worker_is_fenced_off_after_its_lease(tmp_path: Path) -> None:
    model = ScriptedModel([paused(text_response("late words", chunks=4), 6.0), *answers(1)])
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await workers(running, "w1", "w2", lease=LEASE)
        ui, session_id = await open_session(gateway)
        await ui.send(say("u1", "go"))
        await ui.until("agent_message_delta", id="u1", within=20)
        frozen = await running.owner(session_id)
        process = running.workers[frozen].process
        assert process is not None
        os.kill(process.pid, signal.SIGSTOP)
        try:
            aborted = await ui.until("turn_aborted", id="u1", within=20)
        finally:
            os.kill(process.pid, signal.SIGCONT)
        assert aborted["msg"]["reason"] == "worker_lost"
        # Woken up, the old owner's writes are refused; it notices and lets go.
        await running.workers[frozen].wait_stderr(rf"session dropped.*{session_id}", within=20)
        await run_task(ui, "u2")
        assert await running.owner(session_id) != frozen
        ui.check_invariants()
        late = [e for e in ui.events() if e["id"] == "u1" and e["seq"] > aborted["seq"]]
        assert late == [], late
        assert "late words" not in [m["message"] for m in ui.of("agent_message")]


async def test_a_redis_restart_between_tasks_loses_nothing_acknowledged(tmp_path: Path) -> None:
    model = ScriptedModel(answers(2))
    async with pool(model, tmp_path, persistent=True) as running:
        a, b = await running.gateway(), await running.gateway()
        await workers(running, "w1")
        ui, session_id = await open_session(a)
        await run_task(ui, "u1")
        before = ui.events()
        await running.redis.restart()
        await run_task(ui, "u2", within=30)
        watcher = await b.client()
        await watcher.greet(session_id=session_id, last_seq=-1, control=False)
        await watcher.until("task_complete", id="u2")
        assert watcher.events()[: len(before)] == before
        assert watcher.events() == ui.events()
        ui.check_invariants()


async def test_json_rpc_through_a_gateway_with_its_token(tmp_path: Path) -> None:
    """Seed 000's dialect, handshake and token work on a gateway as on one server."""
    model = ScriptedModel([text_response("rpc answer")])
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await workers(running, "w1")
        refused = await gateway.client()
        await refused.send(rpc_initialize("guess"))
        await refused.to_end()
        assert refused.seen[0]["error"]["code"] == -32011, refused.seen
        ui = await gateway.client()
        await ui.send(
            rpc_initialize(TOKEN), rpc("2", "run.start", input={"type": "text", "text": "hi"})
        )
        statuses: list[str] = []
        async with asyncio.timeout(20):
            while "completed" not in statuses:
                message = await ui.recv()
                assert message is not None, ui.seen
                if message.get("method") == "run.status":
                    statuses.append(message["params"]["status"])
        assert statuses[0] == "running", ui.seen
        assert len(model.requests) == 1


def rpc(rid: str, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def rpc_initialize(token: str) -> dict[str, Any]:
    return rpc(
        "1",
        "initialize",
        protocol_version="0",
        client={"name": "tests", "version": "0"},
        auth={"token": token},
    )


async def test_doctor_checks_that_workers_share_the_workspace(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("pong")])
    async with pool(model, tmp_path) as running:
        await workers(running, "w1")
        doctor = await asyncio.create_subprocess_exec(
            PY,
            "-m",
            "codexcore",
            "doctor",
            "--redis",
            running.redis.url,
            "--cwd",
            str(tmp_path),
            env=server_env(running.http.base_url),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(30):
            out, _ = await doctor.communicate()
        text = out.decode()
        assert f"ok    pool: worker w1 on {socket.gethostname()} shares the workspace" in text, text
        assert doctor.returncode == 0, text


def test_doctor_names_a_worker_that_sees_another_directory() -> None:
    from codexcore.cli._doctor_pool import _compare

    info = {"host": "far", "cwd": "/work", "workspace": "aaa"}
    status, text = _compare("w9", info, "/work", "bbb")
    assert status == "fail"
    assert "worker w9 on far sees a different /work (not one shared volume)" in text
    unreachable = {**info, "workspace": "unreachable: [Errno 2] No such file or directory"}
    assert _compare("w9", unreachable, "/work", "bbb")[0] == "fail"
    assert _compare("w9", {**info, "workspace": "bbb"}, "/work", "bbb")[0] == "ok"


async def test_a_worker_stopped_with_sigterm_hands_its_sessions_over_at_once(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(answers(2))
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        # A lease far longer than the test's patience: only a handover can move the session.
        await asyncio.gather(*(running.worker(n, "--lease", "60") for n in ("w1", "w2")))
        ui, session_id = await open_session(gateway)
        await run_task(ui, "u1")
        first = await running.owner(session_id)
        assert await running.workers[first].stop() == 0
        await run_task(ui, "u2", within=10)
        assert await running.owner(session_id) != first
        assert ui.of("turn_aborted") == []
        ui.check_invariants()


async def test_a_killed_worker_is_taken_over_before_its_lease_runs_out(tmp_path: Path) -> None:
    """Redis sees a killed worker's connections close: no waiting for a 60 s lease."""
    model = ScriptedModel([idle(text_response("never finished")), *answers(1)])
    async with pool(model, tmp_path) as running:
        gateway = await running.gateway()
        await asyncio.gather(*(running.worker(n, "--lease", "60") for n in ("w1", "w2")))
        ui, session_id = await open_session(gateway)
        await ui.send(say("u1", "start"))
        await ui.until("agent_message_delta", id="u1", within=20)
        lost = await running.owner(session_id)
        await running.workers[lost].kill()
        aborted = await ui.until("turn_aborted", id="u1", within=20)
        assert aborted["msg"]["reason"] == "worker_lost"
        await run_task(ui, "u2")
        ui.check_invariants()


async def test_an_unreachable_redis_is_named_without_its_password(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once closed
    url = f"redis://:hunter2-secret@127.0.0.1:{port}/0"
    process = await asyncio.create_subprocess_exec(
        PY,
        *("-m", "codexcore", "serve", "--redis", url, "--role", "worker"),
        env=server_env(None),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    text = err.decode()
    assert process.returncode == 1, text
    assert f"cannot reach redis at redis://:***@127.0.0.1:{port}/0" in text, text
    assert "hunter2" not in text + out.decode()


async def test_serve_redis_refuses_flags_that_cannot_work(tmp_path: Path) -> None:
    async def refused(*args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            PY,
            *("-m", "codexcore", "serve", "--redis", "redis://127.0.0.1:1/0", *args),
            env=server_env(None),
            cwd=tmp_path,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(30):
            _, err = await process.communicate()
        assert process.returncode == 2, err
        return err.decode()

    assert "a gateway listens somewhere" in await refused("--role", "gateway")
    assert "--lease must be more than 0" in await refused("--role", "worker", "--lease", "0")
    assert "does not serve --stdio" in await refused("--stdio")
