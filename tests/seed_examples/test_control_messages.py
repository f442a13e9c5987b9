"""ATM-style control messages: every example message of the source document (section 8),
as written, to a real ``codexcore serve --stdio`` on both dialects; each ack compared
field by field with the document's example ack (8.2). Only ``sent_at`` is made valid
(the document's is older than any replay window). The differences that stay are the
rows of the ATM section of ``docs/seed-conformance.md``."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

from ..control_helpers import SEED_EXAMPLES, sent_at
from ..server_helpers import StdioServer
from ..test_control_serve import write_config
from ..test_control_socket import Gate

pytestmark = pytest.mark.anyio

WAIT = 20.0
NAMES = ("--agent-id", "codex:abc123", "--session-alias", "claude-session-uuid")
"""The names the document's examples give their target (a real sender knows no UUIDs)."""


def example(name: str, **changes: Any) -> dict[str, Any]:
    """Example ``name`` exactly as the document writes it, ``sent_at`` made valid."""
    value: dict[str, Any] = json.loads(SEED_EXAMPLES[name])
    if "sent_at" in value:
        value["sent_at"] = sent_at()
    return {**value, **changes}


DOCUMENT_ACK: dict[str, Any] = json.loads(SEED_EXAMPLES["8.2"])


def compare(ack: dict[str, Any], *, kind: str, detail: str, **expected: Any) -> None:
    """``ack`` against the document's example ack (8.2), field by field: the same fields
    and values, but ``type`` (``kind``), ``acked_at`` (now, in the same form), ``detail``
    (ours says what became of the input: a row of the conformance table) and
    ``expected``'s."""
    assert set(ack) == set(DOCUMENT_ACK) | set(expected), ack
    for field, wanted in {**DOCUMENT_ACK, "type": kind, "detail": detail, **expected}.items():
        if field == "acked_at":
            assert ack[field].endswith("Z"), ack
            acked = datetime.datetime.fromisoformat(ack[field])
            age = datetime.datetime.now(datetime.UTC) - acked
            assert datetime.timedelta(0) <= age < datetime.timedelta(seconds=WAIT), ack
        else:
            assert ack[field] == wanted, (field, ack)


class Dialect:
    """How a UI speaks to the server: JSON-RPC methods, or native lines."""

    def __init__(self, name: str, server: StdioServer) -> None:
        self.name, self.server, self.ids = name, server, 0

    async def start(self) -> None:
        if self.name == "jsonrpc":
            init = {"protocol_version": "0", "client": {"name": "atm", "version": "1"}}
            assert "result" in await self._call("initialize", init)
            # The UI's session, made as its first method that needs one makes it.
            assert "result" in await self._call("get_status", {})

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        rid = self.ids
        await self.server.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        answer: dict[str, Any] = await self.server.until(f"answer:{rid}", within=WAIT)
        return answer

    async def send(self, message: dict[str, Any]) -> dict[str, Any]:
        """``message`` to the receiver; its ack."""
        if self.name == "native":
            await self.server.send(message)
            kind = str(message["type"]).replace(".request", ".ack")
            kind = kind if kind.endswith(".ack") else "control.stdin.ack"
            ack: dict[str, Any] = await self.server.until(kind, within=WAIT)
            return ack
        method = "control.interrupt" if "interrupt.request" in message["type"] else "control.stdin"
        answer = await self._call(method, message)
        assert "result" in answer, answer  # an ack, never a JSON-RPC error
        result: dict[str, Any] = answer["result"]
        return result


@asynccontextmanager
async def receiver(
    tmp_path: Path, dialect: str, *, share: Path | None = None
) -> AsyncIterator[tuple[Dialect, Gate]]:
    """``serve --stdio`` named as the examples name their target, under a [control]
    table whose team and sender are the examples' (this user as ``arch-ctm``); the
    model's first reply waits until the test opens it (a Task runs meanwhile)."""
    write_config(Path(os.environ["CODEXCORE_HOME"]), share=share)
    gate = Gate(text_response("done"))
    model = ScriptedModel([gate, text_response("again")])
    # In a thread of its own (not on this loop): the gate blocks the thread it answers on.
    with ScriptedResponsesServer(model) as api:
        server = await StdioServer.start(api.base_url, tmp_path, *NAMES)
        try:
            link = Dialect(dialect, server)
            await link.start()
            yield link, gate
        finally:
            gate.open.set()
            await server.kill()


@pytest.mark.parametrize("dialect", ["jsonrpc", "native"])
async def test_8_1_stdin_then_8_3_interrupt_acked_as_8_2(tmp_path: Path, dialect: str) -> None:
    async with receiver(tmp_path, dialect) as (link, gate):
        stdin = await link.send(example("8.1"))
        await gate.wait_asked()  # the text started a Task, which runs
        interrupt = await link.send(example("8.3"))
        retry = await link.send(example("8.1", meta={"ui_source": "tui", "retry_count": 1}))
    compare(stdin, kind="control.stdin.ack", detail="accepted: started a task")
    compare(
        interrupt,
        kind="control.interrupt.ack",
        detail="interrupted",
        request_id="req_01HZY8R2N2S5CXK3Y8E1B4M7T0",
    )
    # Section 5: a retry of the same request is ok, duplicate, and never runs again.
    compare(retry, kind="control.stdin.ack", detail="accepted: started a task", duplicate=True)


@pytest.mark.parametrize("dialect", ["jsonrpc", "native"])
async def test_8_4_as_written_is_refused_naming_its_placeholder_path(
    tmp_path: Path, dialect: str
) -> None:
    async with receiver(tmp_path, dialect, share=tmp_path / "share") as (link, _gate):
        ack = await link.send(example("8.4"))
    compare(
        ack,
        kind="control.stdin.ack",
        detail="content_ref.path: not under any allowed content directory",
        request_id="req_01HZY8S9Q6P4W8F2M1K7R3D5N9",
        result="rejected",
        error="content_ref_invalid",
    )


async def test_8_4_with_its_file_made_real_is_read_and_given(tmp_path: Path) -> None:
    share = tmp_path / "share"
    text = ("first 240 chars for diagnostics... " * 4092)[:143201]
    path = share / "atm-dev" / "input" / "req_01HZY8S9Q6P4W8F2M1K7R3D5N9.txt"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    ref = {
        **json.loads(SEED_EXAMPLES["8.4"])["content_ref"],
        "path": str(path),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    async with receiver(tmp_path, "jsonrpc", share=share) as (link, gate):
        ack = await link.send(example("8.4", content_ref=ref))
        await gate.wait_asked()
    assert len(text.encode()) == 143201  # the example's size_bytes
    compare(
        ack,
        kind="control.stdin.ack",
        detail="accepted: started a task",
        request_id="req_01HZY8S9Q6P4W8F2M1K7R3D5N9",
    )


@pytest.mark.parametrize("dialect", ["jsonrpc", "native"])
async def test_8_2_sent_to_the_receiver_is_refused_as_not_a_request(
    tmp_path: Path, dialect: str
) -> None:
    async with receiver(tmp_path, dialect) as (link, _gate):
        ack = await link.send(json.loads(SEED_EXAMPLES["8.2"]))
    assert (ack["result"], ack["error"]) == ("rejected", "invalid_request"), ack
    assert ack["request_id"] == "req_01HZY8QJ8R7G6K2YJ7V2M9A1P3"
    assert "control.stdin.ack" in ack["detail"]


async def test_the_examples_own_sent_at_is_refused_as_stale(tmp_path: Path) -> None:
    async with receiver(tmp_path, "jsonrpc") as (link, _gate):
        ack = await link.send(json.loads(SEED_EXAMPLES["8.1"]))
    assert (ack["result"], ack["error"]) == ("rejected", "stale_request"), ack
