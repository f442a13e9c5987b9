"""Seed 001 on the JSON-RPC dialect, driven as its desktop app drives its CLI child.

A real ``codexcore serve --stdio`` process, a scripted Responses server, and
seed 001's own example messages exactly as the seed writes them (pretty-printed
there, one line here): ``initialize``, ``chat`` with its ``stream/chunk``
notifications, the bounded request queue (-32004), and the ``exit`` notification.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from codexcore.adapters.jsonrpc._machine import RpcMachine
from codexcore.adapters.jsonrpc._methods import standard_methods
from codexcore.adapters.jsonrpc._outbox import Outbox
from codexcore.adapters.jsonrpc._server import RpcContext
from codexcore.adapters.jsonrpc.chat._chat import NO_APPROVER, SEPARATOR, _Chat
from codexcore.adapters.jsonrpc.chat._jobs import _JOBS, jobs_of
from codexcore.protocol import AgentMessageDelta, Event, TaskComplete, encode_event
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    http_error,
    shell_call,
    text_response,
)

from .fault_helpers import held_command, kill_marked, marked_processes, new_marker, wait_no_orphans
from .server_helpers import PY, ServerProcess, StdioServer, server_env

pytestmark = pytest.mark.anyio

# Seed 001's examples, as written.
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "clientName": "experience-ui",
        "clientVersion": "1.0.0",
        "capabilities": {"streaming": True, "specFormats": ["openapi3", "swagger2", "graphql"]},
    },
}
CHAT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 4,
    "method": "chat",
    "params": {
        "message": "What formats do you support?",
        "context": {"tabId": "tab-1", "hasActiveSpec": True, "hasActiveInterface": True},
    },
}
ANSWER = (
    "I support OpenAPI 3.x, Swagger 2.0, and GraphQL schemas. You can provide them via "
    "file upload, URL, or direct paste."
)
EXIT = {"jsonrpc": "2.0", "method": "exit"}


def chat(rid: Any, message: str) -> dict[str, Any]:
    return {**CHAT, "id": rid, "params": {**CHAT["params"], "message": message}}


@asynccontextmanager
async def serve(
    tmp_path: Path, responses: list[ScriptedResponse], *args: str
) -> AsyncIterator[tuple[StdioServer, ScriptedModel]]:
    model = ScriptedModel(responses)
    async with ScriptedResponsesServer(model) as http:
        argv = [PY, "-m", "codexcore", "--log-level", "info", "serve", "--stdio", *args]
        server = await StdioServer.start(http.base_url, tmp_path, argv=argv)
        try:
            yield server, model
        finally:
            await server.kill()


class Stream:
    """What the app saw of one chat: its chunks, then its response."""

    def __init__(self, chunks: list[dict[str, Any]], response: dict[str, Any]) -> None:
        self.chunks, self.response = chunks, response

    @property
    def text(self) -> str:
        return "".join(chunk["chunk"] for chunk in self.chunks)

    def check(self, rid: Any) -> None:
        """Every chunk names the request exactly; index from 0 without gaps; done last only."""
        assert [c["requestId"] for c in self.chunks] == [rid] * len(self.chunks), self.chunks
        assert all(type(c["requestId"]) is type(rid) for c in self.chunks)
        assert [c["index"] for c in self.chunks] == list(range(len(self.chunks)))
        assert [c["done"] for c in self.chunks] == [False] * (len(self.chunks) - 1) + [True]
        assert self.chunks[-1]["chunk"] == ""
        assert self.response["id"] == rid
        assert type(self.response["id"]) is type(rid)


async def read_chat(ui: StdioServer, rid: Any) -> Stream:
    """Read one chat's chunks and its response (nothing else may come in between)."""
    chunks: list[dict[str, Any]] = []
    while True:
        message = await ui.recv()
        assert message is not None, f"stream ended; saw {ui.seen[-5:]}{ui.context()}"
        if message.get("method") == "stream/chunk":
            assert message["jsonrpc"] == "2.0", message
            assert "id" not in message, message
            assert message["params"]["requestId"] == rid, (rid, message, ui.seen[-5:])
            chunks.append(message["params"])
            continue
        assert message["id"] == rid, (rid, message)
        return Stream(chunks, message)


async def exits_cleanly(ui: StdioServer) -> None:
    """The server closes its output and exits 0; stdin is still open (only exit ended it)."""
    await ui.to_end()
    assert await ui.wait_exit() == 0, ui.context()


def last_recorded_event(home: Path) -> str:
    """The type of the last event the session's rollout recorded."""
    (rollout,) = home.glob("sessions/*/*/*/rollout-*.jsonl")
    records = [orjson.loads(line) for line in rollout.read_bytes().splitlines()]
    events = [r["event"]["msg"]["type"] for r in records if r["type"] == "event"]
    return str(events[-1])


def codexcore_home() -> Path:
    return Path(os.environ["CODEXCORE_HOME"])


def unconfined() -> None:
    """Commands run with no sandbox and no approval (the held command must run anywhere)."""
    (codexcore_home() / "config.toml").write_text('sandbox_mode = "danger-full-access"\n')


@pytest.fixture
def marker() -> Iterator[str]:
    mark = new_marker()
    yield mark
    kill_marked(mark)


async def wait_marked(ui: StdioServer, marker: str, within: float = 10.0) -> None:
    """Wait until a process carrying ``marker`` runs."""
    deadline = asyncio.get_running_loop().time() + within
    while not marked_processes(marker):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no command started within {within} s{ui.context()}")
        await asyncio.sleep(0.02)


# --- chat and stream/chunk ------------------------------------------------------------------


async def test_chat_streams_its_text_as_chunks_then_answers(tmp_path: Path) -> None:
    responses = [text_response(ANSWER, chunks=5), text_response("Yes.", chunks=2)]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(INITIALIZE, CHAT)
        init = await ui.recv()
        assert init is not None
        assert init["result"]["capabilities"] == {
            "codeGeneration": True,
            "customization": True,
            "streaming": True,
        }
        first = await read_chat(ui, 4)
        first.check(4)
        assert len(first.chunks) == 6  # five deltas, then the done chunk
        assert first.text == ANSWER
        assert first.response == {
            "jsonrpc": "2.0",
            "id": 4,
            "result": {"message": ANSWER, "suggestions": []},
        }
        user = model.requests[0]["input"][-1]
        assert user["content"][0]["text"] == "What formats do you support?"

        await ui.send(chat("tab-1/7", "And YAML?"))  # a string id, echoed as it is
        second = await read_chat(ui, "tab-1/7")
        second.check("tab-1/7")
        assert (second.text, second.response["result"]["message"]) == ("Yes.", "Yes.")
        assert model.requests[1]["previous_response_id"]  # the same session, continued

        await ui.send(EXIT)
        await exits_cleanly(ui)
    assert last_recorded_event(codexcore_home()) == "shutdown_complete"


async def test_two_chats_back_to_back_run_in_turn(tmp_path: Path) -> None:
    responses = [text_response("first answer"), text_response("second answer")]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(chat(4, "one"), chat(5, "two"))  # one write: the second waits its turn
        first = await read_chat(ui, 4)
        second = await read_chat(ui, 5)
        first.check(4)
        second.check(5)
        assert first.response["result"]["message"] == "first answer"
        assert second.response["result"]["message"] == "second answer"
        assert [r["input"][-1]["content"][0]["text"] for r in model.requests] == ["one", "two"]
        await ui.send(EXIT)
        await exits_cleanly(ui)


async def test_a_task_of_several_messages_streams_them_apart(tmp_path: Path) -> None:
    unconfined()
    responses = [
        shell_call(["true"], text="Let me look."),
        text_response("Nothing there."),
    ]
    async with serve(tmp_path, responses) as (ui, _):
        await ui.send(chat(4, "look"))
        stream = await read_chat(ui, 4)
        stream.check(4)
        assert stream.text == "Let me look." + SEPARATOR + "Nothing there."
        assert stream.response["result"]["message"] == "Nothing there."


async def test_a_failed_task_ends_its_stream_then_answers_an_error(tmp_path: Path) -> None:
    async with serve(tmp_path, [http_error(401, "bad key")]) as (ui, _):
        await ui.send(chat(4, "hello"))
        stream = await read_chat(ui, 4)
        stream.check(4)
        assert [c["done"] for c in stream.chunks] == [True]
        error = stream.response["error"]
        assert (error["code"], error["data"]) == (-32000, {"code": "unauthorized"})
        assert "bad key" in error["message"]


async def test_an_approval_nobody_can_give_is_denied_not_waited_for(tmp_path: Path) -> None:
    responses = [
        shell_call(["rm", "-rf", "build"], with_escalated_permissions=True, justification="x"),
        text_response("I could not remove it."),
    ]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(chat(4, "clean up"))
        stream = await read_chat(ui, 4)
        assert stream.response["result"]["message"] == "I could not remove it."
        (output,) = [i for i in model.requests[1]["input"] if i["type"] == "function_call_output"]
        assert NO_APPROVER in output["output"]
        assert not (tmp_path / "build").exists()
        await ui.wait_stderr("approval denied: no one to ask")


# --- the pending bound, exit ----------------------------------------------------------------


async def test_at_most_100_requests_pending_then_32004_and_the_connection_goes_on(
    tmp_path: Path, marker: str
) -> None:
    unconfined()
    release = tmp_path / "release"
    responses = [shell_call(held_command(marker, release)), text_response("reply 1")]
    responses += [text_response(f"reply {n}") for n in range(2, 101)]
    responses.append(text_response("reply 102"))
    async with serve(tmp_path, responses) as (ui, _):
        # Chat 1 runs a command that waits; 2..100 queue behind it; 101 is one too many.
        await ui.send(*(chat(n, f"chat {n}") for n in range(1, 102)))
        refused = await ui.recv()
        assert refused == {
            "jsonrpc": "2.0",
            "id": 101,
            "error": {
                "code": -32004,
                "message": "too many requests: 100 already pending on this connection",
            },
        }
        release.touch()
        for n in range(1, 101):  # every queued chat is answered, in order
            stream = await read_chat(ui, n)
            stream.check(n)
            assert stream.response["result"]["message"] == f"reply {n}"
        await ui.send(chat(102, "still there?"))
        assert (await read_chat(ui, 102)).response["result"]["message"] == "reply 102"
        await ui.send(EXIT)
        await exits_cleanly(ui)


async def test_exit_with_a_full_queue_answers_every_chat_and_leaves_nothing_running(
    tmp_path: Path, marker: str
) -> None:
    unconfined()
    release = tmp_path / "release"  # never created: the command would run ~30 s
    responses = [shell_call(held_command(marker, release))]
    async with serve(tmp_path, responses) as (ui, model):
        await ui.send(*(chat(n, f"chat {n}") for n in range(1, 101)))
        await wait_marked(ui, marker)
        await ui.send(EXIT)  # 100 already pending: exit still gets through
        answers = {}
        while (message := await ui.recv()) is not None:
            if "id" in message:
                answers[message["id"]] = message["error"]
        assert await ui.wait_exit() == 0, ui.context()
        assert answers[1]["data"] == {"code": "aborted", "reason": "interrupted"}
        assert all(answers[n]["data"] == {"code": "exiting"} for n in range(2, 101))
        assert sorted(answers) == list(range(1, 101))
        assert len(model.requests) == 1  # the queued chats never reached the model
        await ui.wait_stderr("exit: shutting the session down")
    await wait_no_orphans(marker)
    assert last_recorded_event(codexcore_home()) == "shutdown_complete"


async def test_exit_before_any_chat_ends_the_server(tmp_path: Path) -> None:
    async with serve(tmp_path, []) as (ui, model):
        await ui.send(INITIALIZE, {**EXIT, "id": 2})  # as a request, it is answered
        assert (await ui.recv() or {})["id"] == 1
        assert await ui.recv() == {"jsonrpc": "2.0", "id": 2, "result": None}
        await exits_cleanly(ui)
        assert model.requests == []


# --- the encoded fast path ------------------------------------------------------------------

TRICKY = ["plain ", 'a "quoted" word', "back\\slash\\", '"delta":"x"}}', "é 漢 🙂", "a\nb", ""]


@pytest.mark.parametrize("rid", [4, "tab-1/7", 2**70, 1.5])
def test_chunks_cut_from_encoded_deltas_equal_what_a_parser_reads(rid: Any) -> None:
    chat_ = _Chat(rid, "chat-1")
    batch = [
        encode_event(Event("chat-1", 100 + n, AgentMessageDelta(text)))
        for n, text in enumerate(TRICKY)
    ]
    batch.append(encode_event(Event("chat-1", 200, TaskComplete())))
    lines: list[bytes] = []
    assert chat_.take_deltas(batch, 0, lines) == len(TRICKY)  # stops at the terminal event
    sent = [json.loads(line) for line in lines]  # json: exact for big ids
    assert [m["params"] for m in sent] == [
        {"requestId": rid, "chunk": text, "done": False, "index": n}
        for n, text in enumerate(t for t in TRICKY if t)
    ]
    assert all(line.endswith(b"}\n") and line.count(b"\n") == 1 for line in lines)
    assert {m["method"] for m in sent} == {"stream/chunk"}


def test_another_tasks_deltas_and_the_separator() -> None:
    chat_ = _Chat(4, "chat-1")
    other = encode_event(Event("chat-10", 1, AgentMessageDelta("not mine")))
    lines: list[bytes] = []
    assert chat_.take_deltas([other], 0, lines) == 0
    chat_.between = True  # an agent message ended before this delta
    mine = encode_event(Event("chat-1", 2, AgentMessageDelta("next")))
    assert chat_.take_deltas([mine], 0, lines) == 1
    assert [json.loads(line)["params"]["chunk"] for line in lines] == [SEPARATOR, "next"]
    assert chat_.line(b'""', done=True).endswith(b'"chunk":"","done":true,"index":2}}\n')


def test_a_connections_chats_go_with_it() -> None:
    ctx = RpcContext(
        cast(Any, None),
        RpcMachine(),
        Outbox(1024),
        standard_methods(),
        require_token=False,
        lossless=True,
    )
    jobs = jobs_of(ctx)
    assert jobs.ctx is ctx
    assert jobs_of(ctx) is jobs  # one per connection
    del ctx, jobs
    gc.collect()
    assert len(_JOBS) == 0


async def test_chat_and_exit_over_a_unix_socket(tmp_path: Path) -> None:
    """The same dialect on a socket: exit ends this client's session and connection; the
    server goes on serving others."""
    model = ScriptedModel([text_response(ANSWER), text_response("again")])
    async with ScriptedResponsesServer(model) as http:
        path = tmp_path / "s.sock"
        env = server_env(http.base_url)  # no token: the peer's uid admits it
        server = await ServerProcess.start(http.base_url, tmp_path, tcp=False, unix=path, env=env)
        try:
            for round_ in (1, 2):
                ui = await server.client(unix=True)
                await ui.send(INITIALIZE, CHAT)
                assert (await ui.recv() or {})["result"]["capabilities"]["streaming"] is True
                chunks = []
                while "id" not in (message := await ui.recv() or {}):
                    chunks.append(message["params"])
                assert message["result"]["message"] == (ANSWER if round_ == 1 else "again")
                assert [c["index"] for c in chunks] == list(range(len(chunks)))
                await ui.send(EXIT)
                assert await ui.recv() is None, f"round {round_}: the connection stayed open"
            assert await server.stop() == 0, server.context()
        finally:
            await server.kill()
