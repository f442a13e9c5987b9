"""ATM-style control messages as a real sender sends them, against real processes: the
names a session is known by (``--agent-id``/``--session-alias`` on ``serve --stdio`` and
``exec``, ``control.register`` on both dialects), the audit file written by default (and a
symlink planted in its place not followed), inline content over the hard limit answered
by a ``rejected`` ack that names its request, and the ack's ``error`` on failures."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

from .control_helpers import SEED_EXAMPLES, SENDER, TEAM, sent_at, stdin_request
from .server_helpers import PY, TOKEN, Client, StdioServer, _Process, private_dir, server_env
from .test_control_serve import serving, write_config
from .test_control_socket import Gate, call, short_home

pytestmark = pytest.mark.anyio

WAIT = 20.0
ATM_SESSION, ATM_AGENT = "claude-session-uuid", "codex:abc123"
"""How the document's example 8.1 names its target."""
NAMES = ("--agent-id", ATM_AGENT, "--session-alias", ATM_SESSION)


def example(name: str, **changes: Any) -> dict[str, Any]:
    """The document's example ``name`` as written, with a fresh ``sent_at``."""
    value: dict[str, Any] = json.loads(SEED_EXAMPLES[name])
    return {**value, "sent_at": sent_at(), **changes}


def rpc(rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}


INITIALIZE = rpc(
    0, "initialize", {"protocol_version": "0", "client": {"name": "t", "version": "1"}}
)
SOCKET_INITIALIZE = {**INITIALIZE, "params": {**INITIALIZE["params"], "auth": {"token": TOKEN}}}


def answered(text: str) -> Gate:
    """A reply given at once, that tells when it was asked for."""
    gate = Gate(text_response(text))
    gate.open.set()
    return gate


@asynccontextmanager
async def stdio_server(
    tmp_path: Path, *flags: str, audit: str | None = None
) -> AsyncIterator[tuple[StdioServer, ScriptedModel, Gate]]:
    """``serve --stdio`` under the [control] table (this user the sender), initialized
    as a JSON-RPC UI does; its model's first reply tells when it is asked for."""
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    if audit is not None:
        config = home / "config.toml"
        line = f"[control]\naudit_file = {json.dumps(audit)}\n"
        config.write_text(config.read_text().replace("[control]\n", line, 1))
    first = answered("reply 1")
    model = ScriptedModel([first, text_response("reply 2")])
    async with ScriptedResponsesServer(model) as api:
        server = await StdioServer.start(api.base_url, tmp_path, *flags)
        try:
            assert "result" in await call_rpc(server, INITIALIZE)
            yield server, model, first
        finally:
            await server.kill()


async def call_rpc(link: Any, message: dict[str, Any]) -> dict[str, Any]:
    """Send a JSON-RPC call; its response (notifications before it are skipped)."""
    await link.send(message)
    answer: dict[str, Any] = await link.until(f"answer:{message['id']}", within=WAIT)
    return answer


def ack_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert "result" in answer, answer  # every outcome is an ack, never a JSON-RPC error
    result: dict[str, Any] = answer["result"]
    return result


async def test_the_documents_example_reaches_a_session_named_as_it_names_it(
    tmp_path: Path,
) -> None:
    async with stdio_server(tmp_path, *NAMES) as (server, model, first):
        status = ack_of(await call_rpc(server, rpc(1, "get_status")))  # the session, made
        request = example("8.1")
        answer = ack_of(await call_rpc(server, rpc(2, "control.stdin", request)))
        await first.wait_asked()
        wrong_agent = example("8.1", request_id="req_2", agent_id="codex:other")
        refused = ack_of(await call_rpc(server, rpc(3, "control.stdin", wrong_agent)))
        by_own_ids = example(
            "8.1", request_id="req_3", session_id=status["task_name"], agent_id=status["agent_id"]
        )
        own = ack_of(await call_rpc(server, rpc(4, "control.stdin", by_own_ids)))
    # The ack names the target as the sender did, as the document's example ack does.
    assert (answer["session_id"], answer["agent_id"]) == (ATM_SESSION, ATM_AGENT)
    assert (answer["result"], answer["duplicate"]) == ("ok", False), answer
    assert "error" not in answer
    assert model.requests[0]["input"][-1]["content"][0]["text"] == "single payload text"
    assert (refused["result"], refused["error"]) == ("not_found", "agent_not_found"), refused
    assert own["result"] in ("ok", "busy"), own  # its own ids still reach it


async def test_control_register_names_a_session_over_json_rpc_and_native(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("named")])
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets) as (_api, server):
            # A native UI names its session.
            owner = await server.client(unix=True)
            welcome = await owner.greet()
            await owner.send({"type": "control.register", "id": "n1", **_names()})
            registered = await owner.until("control.registered")
            # A watcher of that session may not rename it.
            watcher = await server.client(unix=True)
            await watcher.greet(session_id=welcome["session_id"], control=False)
            await watcher.send({"type": "control.register", "agent_id": "codex:thief"})
            watched = await watcher.until("control.register.refused")
            # Another session may not take the same agent name (JSON-RPC, its own session).
            rival = await server.client(unix=True)
            assert "result" in await call_rpc(rival, SOCKET_INITIALIZE)
            clash = await call_rpc(rival, rpc(1, "control.register", {"agent_id": ATM_AGENT}))
            alias_only = await call_rpc(rival, rpc(2, "control.register", {"session_id": "x"}))
            empty = await call_rpc(rival, rpc(3, "control.register", {}))
            # An operator's connection sends the document's example: it reaches the owner's.
            operator = await server.client(unix=True)
            assert "result" in await call_rpc(operator, SOCKET_INITIALIZE)
            answer = ack_of(await call_rpc(operator, rpc(1, "control.stdin", example("8.1"))))
            await owner.until("task_complete", within=WAIT)
            # Names gone: the owner removes the session alias; the example is not found.
            await owner.send({"type": "control.register", "session_id": []})
            await owner.until("control.registered")
            again = example("8.1", request_id="req_after_unnaming")
            gone = ack_of(await call_rpc(operator, rpc(2, "control.stdin", again)))
    assert registered["id"] == "n1"
    assert watched["error"] == "only the connection in control of the session names it"
    assert registered["names"] == {"session_id": [ATM_SESSION], "agent_id": [ATM_AGENT]}
    assert registered["agent_id"].startswith("codexcore:")
    assert clash["error"]["code"] == -32602, clash
    assert "already another live session's name" in clash["error"]["message"]
    assert alias_only["result"]["names"] == {"session_id": ["x"], "agent_id": []}
    assert empty["result"]["names"] == {"session_id": ["x"], "agent_id": []}  # a question
    assert (answer["result"], answer["detail"]) == ("ok", "accepted: started a task"), answer
    assert (gone["result"], gone["error"]) == ("not_found", "session_not_found"), gone


def _names() -> dict[str, str]:
    return {"session_id": ATM_SESSION, "agent_id": ATM_AGENT}


async def test_exec_names_its_session_for_control_messages_on_its_socket(tmp_path: Path) -> None:
    gate = Gate(text_response("done"))
    model = ScriptedModel([gate, text_response("took the input")])
    with short_home() as home, ScriptedResponsesServer(model) as http:
        cx = Path(home) / "cx"
        write_config(cx)
        path = Path(home) / "s.sock"
        argv = [PY, "-m", "codexcore", "exec", "--control-socket", str(path), *NAMES, "--", "go"]
        env = server_env(http.base_url, HOME=home, CODEXCORE_HOME=str(cx))
        process = _Process()
        await process._spawn(argv, env, tmp_path, stdout=asyncio.subprocess.DEVNULL)
        try:
            await process.wait_stderr(r"control socket")
            await gate.wait_asked()  # the Task runs: the input is injected
            client = await Client.unix(path)
            answer = await call(client, rpc(1, "control.stdin", example("8.1")))
            await client.close()
            gate.open.set()
            assert await process.wait_exit(WAIT) == 0, process.context()
        finally:
            gate.open.set()
            await process.kill()
        audit = (cx / "control-audit.jsonl").read_text().splitlines()
    assert (answer["result"], answer["agent_id"]) == ("ok", ATM_AGENT), answer
    assert answer["detail"] == "accepted: injected"
    assert "single payload text" in orjson.dumps(model.requests[1]["input"]).decode()
    steps = [json.loads(line)["step"] for line in audit]
    assert steps == ["request", "ack"], steps


async def test_names_without_a_place_for_control_messages_are_refused(tmp_path: Path) -> None:
    for argv in (
        ["exec", *NAMES, "hi"],
        ["serve", "--unix", str(tmp_path / "s.sock"), "--agent-id", ATM_AGENT],
    ):
        process = _Process()
        await process._spawn([PY, "-m", "codexcore", *argv], server_env(None), tmp_path)
        assert await process.wait_exit(WAIT) == 2
        assert any("--agent-id and --session-alias" in line for line in process.stderr)


async def test_the_audit_file_is_written_by_default_0600_and_off_with_an_empty_name(
    tmp_path: Path,
) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    audit = home / "control-audit.jsonl"
    async with stdio_server(tmp_path, *NAMES, "--log-level", "info") as (server, _model, first):
        await call_rpc(server, rpc(1, "get_status"))
        answer = ack_of(await call_rpc(server, rpc(2, "control.stdin", example("8.1"))))
        await first.wait_asked()
        await server.wait_stderr(r"control ack")  # logged at info too
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600
    assert [r["step"] for r in records] == ["request", "ack"]
    for record in records:
        assert record["request_id"] == "req_01HZY8QJ8R7G6K2YJ7V2M9A1P3"
        assert (record["team"], record["sender"]) == (TEAM, SENDER)
        assert (record["session_id"], record["agent_id"]) == (ATM_SESSION, ATM_AGENT)
        assert "content" not in record  # no message text unless verbose
    assert (records[1]["result"], records[1]["duplicate"]) == (answer["result"], False)
    audit.unlink()
    async with stdio_server(tmp_path, *NAMES, audit="") as (server, _model, _first):
        await call_rpc(server, rpc(1, "get_status"))
        ack_of(await call_rpc(server, rpc(2, "control.stdin", example("8.1", request_id="r2"))))
    assert not audit.exists()


def plant_symlink(where: Path, victim: Path) -> Path:
    """Another's file, and a symlink to it where the audit file goes."""
    where.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text("precious\n")
    where.symlink_to(victim)
    return victim


async def test_a_symlink_planted_as_the_audit_file_is_not_followed(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    victim = plant_symlink(home / "control-audit.jsonl", tmp_path / "victim.txt")
    async with stdio_server(tmp_path, *NAMES) as (server, _model, _first):
        await call_rpc(server, rpc(1, "get_status"))
        answer = ack_of(await call_rpc(server, rpc(2, "control.stdin", example("8.1"))))
        await server.wait_stderr(r"control audit file refused.*symlink")
    assert answer["result"] == "ok", answer  # control goes on; the log keeps the records
    assert victim.read_text() == "precious\n"
    assert (home / "control-audit.jsonl").is_symlink()


async def test_inline_content_over_the_hard_limit_gets_a_rejected_ack_naming_it(
    tmp_path: Path,
) -> None:
    over = "x" * (1024 * 1024 + 1)
    async with stdio_server(tmp_path) as (server, model, _first):
        status = ack_of(await call_rpc(server, rpc(1, "get_status")))
        target = (status["task_name"], status["agent_id"])
        request = stdin_request(*target, over)
        answer = ack_of(await call_rpc(server, rpc(2, "control.stdin", request)))
        # Escaped in JSON (each newline two bytes), still read and answered.
        newlines = stdin_request(*target, "\n" * (1024 * 1024 + 1))
        escaped = ack_of(await call_rpc(server, rpc(3, "control.stdin", newlines)))
        # Any other line keeps the line limit.
        await server.send(rpc(4, "get_status", {"padding": over}))
        too_long = await server.until("answer:None", within=WAIT)
        alive = ack_of(await call_rpc(server, rpc(5, "get_status")))
    assert answer["request_id"] == request["request_id"]
    assert (answer["result"], answer["error"]) == ("rejected", "content_too_large"), answer
    assert "over the hard limit of 1048576 bytes" in answer["detail"]
    assert (escaped["request_id"], escaped["result"]) == (newlines["request_id"], "rejected")
    assert "longer than 1048576 bytes" in too_long["error"]["message"]
    assert alive["agent_id"] == target[1]
    assert model.requests == []


async def test_a_native_oversize_request_gets_its_ack_too(tmp_path: Path) -> None:
    home = Path(os.environ["CODEXCORE_HOME"])
    write_config(home)
    model = ScriptedModel([])
    with private_dir() as sockets:
        async with serving(model, tmp_path, sockets) as (_api, server):
            client = await server.client(unix=True)
            welcome = await client.greet()
            request = stdin_request(
                welcome["session_id"], welcome["agent_id"], "y" * (1024 * 1024 + 7)
            )
            await client.send(request)
            answer = await client.until("control.stdin.ack", within=WAIT)
    assert answer["request_id"] == request["request_id"]
    assert (answer["result"], answer["error"]) == ("rejected", "content_too_large"), answer


async def test_failed_acks_carry_error_and_ok_ones_do_not(tmp_path: Path) -> None:
    async with stdio_server(tmp_path, *NAMES) as (server, _model, _first):
        await call_rpc(server, rpc(1, "get_status"))
        cases = {
            "unauthorized": example("8.1", request_id="a", sender="mallory"),
            "stale_request": example("8.1", request_id="b", sent_at="2026-02-20T21:15:00Z"),
            "session_not_found": example("8.1", request_id="c", session_id="nobody"),
            "invalid_request": example("8.1", request_id="d", content=""),
            "content_ref_invalid": example("8.4", request_id="e"),
        }
        acks = {}
        for n, (error, request) in enumerate(cases.items()):
            acks[error] = ack_of(await call_rpc(server, rpc(10 + n, "control.stdin", request)))
        fine = ack_of(await call_rpc(server, rpc(30, "control.interrupt", example("8.3"))))
    for error, answer in acks.items():
        assert answer["error"] == error, answer
        assert answer["result"] in ("rejected", "not_found"), answer
        assert answer["detail"], answer
    assert (fine["result"], fine["detail"]) == ("ok", "idle")
    assert "error" not in fine
