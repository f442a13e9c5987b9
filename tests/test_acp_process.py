"""``codexcore acp`` as a process (issue 27): what end of input means, and a stderr nobody
reads. Real subprocesses over raw pipes, newline-delimited JSON-RPC as a client writes it,
a real scripted HTTP model."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import pytest
from acp import spawn_agent_process
from acp.interfaces import Client

from codexcore._logging import NonBlockingStderrHandler
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, shell_call, text_response

from .acp_helpers import PY, RecordingClient, prompt_text
from .server_helpers import server_env

pytestmark = pytest.mark.anyio

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
PIPE_SIZE = 4096  # the smallest a pipe can be: it fills after a few prompts' debug lines


def new_session(request_id: int, cwd: Path) -> dict[str, Any]:
    params = {"cwd": str(cwd), "mcpServers": []}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/new", "params": params}


def prompt(request_id: int, session_id: str, text: str) -> dict[str, Any]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}


@contextlib.asynccontextmanager
async def agent(base_url: str, cwd: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``codexcore acp`` on raw pipes, as a script would pipe to it; its stderr to a file."""
    with (cwd.parent / f"{cwd.name}-stderr.log").open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            PY,
            "-m",
            "codexcore",
            "acp",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=server_env(base_url),
            cwd=cwd,
            limit=16 * 1024 * 1024,
        )
        try:
            yield process
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


def write(process: asyncio.subprocess.Process, *messages: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))


async def read_all(process: asyncio.subprocess.Process) -> list[dict[str, Any]]:
    """Every message the agent writes until it closes stdout."""
    assert process.stdout is not None
    out = await asyncio.wait_for(process.stdout.read(), 30)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


async def read_answer(process: asyncio.subprocess.Process, request_id: int) -> dict[str, Any]:
    assert process.stdout is not None
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        assert line, "the agent closed stdout before answering"
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return dict(message)


async def test_requests_piped_with_end_of_input_are_all_answered(tmp_path: Path) -> None:
    # Issue 27.3: initialize and session/new written together, stdin closed: before,
    # only initialize was answered (session/new was cancelled) and the agent exited 0.
    async with (
        ScriptedResponsesServer(ScriptedModel([])) as http,
        agent(http.base_url, tmp_path) as process,
    ):
        write(process, INITIALIZE, new_session(1, tmp_path))
        assert process.stdin is not None
        process.stdin.close()
        messages = await read_all(process)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    answers = {m["id"]: m for m in messages if "id" in m and "method" not in m}
    assert sorted(answers) == [0, 1], messages
    assert answers[0]["result"]["protocolVersion"] == 1
    assert answers[1]["result"]["sessionId"]


async def test_a_prompt_sent_before_end_of_input_runs_to_its_end(tmp_path: Path) -> None:
    # The prompt's command asks for approval after stdin closed: no answer can come,
    # so the request is refused at once (as a cancelled one is) and the turn goes on.
    marker = tmp_path / "ran"
    model = ScriptedModel(
        [
            shell_call([PY, "-c", f"open({str(marker)!r}, 'w').close()"], call_id="c1"),
            text_response("All done."),
        ]
    )
    async with ScriptedResponsesServer(model) as http, agent(http.base_url, tmp_path) as process:
        write(process, INITIALIZE, new_session(1, tmp_path))
        session_id = (await read_answer(process, 1))["result"]["sessionId"]
        mode = {"sessionId": session_id, "modeId": "ask"}
        write(
            process,
            {"jsonrpc": "2.0", "id": 2, "method": "session/set_mode", "params": mode},
            prompt(3, session_id, "make the marker"),
        )
        assert process.stdin is not None
        process.stdin.close()
        messages = await read_all(process)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    [answer] = [m for m in messages if m.get("id") == 3 and "method" not in m]
    assert answer["result"]["stopReason"] == "end_turn"
    said = [
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(said) == "All done."
    assert not marker.exists()
    told = json.dumps(model.requests[1]["input"])
    assert "not allowed" in told or "cancelled" in told, told


async def test_a_client_that_has_gone_leaves_nothing_running(tmp_path: Path) -> None:
    # The client dies mid-prompt: its end of our stdout closes. The prompt would run to
    # its end for no one; the first write that fails ends everything instead.
    script = (
        "import os, time\nprint(os.getpid(), flush=True)\n"
        "while True: print('tick', flush=True); time.sleep(0.05)"
    )
    model = ScriptedModel([shell_call([PY, "-c", script], call_id="c1")])
    out_read, out_write = os.pipe()
    async with ScriptedResponsesServer(model) as http:
        process = await asyncio.create_subprocess_exec(
            PY,
            "-m",
            "codexcore",
            "acp",
            stdin=asyncio.subprocess.PIPE,
            stdout=out_write,
            stderr=asyncio.subprocess.DEVNULL,
            env=server_env(http.base_url),
            cwd=tmp_path,
        )
        os.close(out_write)
        try:
            lines = LineReader(out_read)
            write(process, INITIALIZE, new_session(1, tmp_path))
            session_id = (await lines.answer(1))["result"]["sessionId"]
            mode = {"sessionId": session_id, "modeId": "full-access"}
            write(
                process,
                {"jsonrpc": "2.0", "id": 2, "method": "session/set_mode", "params": mode},
                prompt(3, session_id, "tick"),
            )
            pid = await lines.first_output_line()
            assert alive(pid)
            os.close(out_read)  # the client is gone: it reads nothing more
            out_read = -1
            assert await asyncio.wait_for(process.wait(), 20) == 0
        finally:
            if out_read >= 0:
                os.close(out_read)
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert not alive(pid)


class LineReader:
    """Reads the agent's stdout (a pipe of ours) a message at a time."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    async def message(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await asyncio.wait_for(asyncio.to_thread(os.read, self.fd, 65536), 30)
            assert chunk, "the agent closed stdout"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return dict(json.loads(line))

    async def answer(self, request_id: int) -> dict[str, Any]:
        while (message := await self.message()).get("id") != request_id or "method" in message:
            pass
        return message

    async def first_output_line(self) -> int:
        """The first line a command printed, streamed as a tool call's content."""
        while True:
            message = await self.message()
            update = message.get("params", {}).get("update", {})
            for content in update.get("content") or []:
                text = content.get("content", {}).get("text", "").strip("`\n ")
                if text.split("\n")[0].isdigit():
                    return int(text.split("\n")[0])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def small_pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    return read_end, write_end


async def test_a_client_that_never_reads_stderr_does_not_stall_the_agent(tmp_path: Path) -> None:
    # Issue 27.4: with --log-level debug the agent's stderr filled its pipe and every
    # prompt from then on waited forever. Here the pipe holds 4 KiB and is never read.
    prompts = 120
    model = ScriptedModel([text_response(f"answer {n}", chunks=2) for n in range(prompts)])
    client = RecordingClient()
    read_end, write_end = small_pipe()
    try:
        async with (
            ScriptedResponsesServer(model) as http,
            spawn_agent_process(
                client_of(client),
                PY,
                "-m",
                "codexcore",
                "--log-level",
                "debug",
                "acp",
                env=server_env(http.base_url),
                cwd=tmp_path,
                transport_kwargs={"stderr": write_end, "shutdown_timeout": 10.0},
            ) as (conn, process),
        ):
            os.close(write_end)
            write_end = -1
            await asyncio.wait_for(conn.initialize(protocol_version=1), 20)
            session = await asyncio.wait_for(
                conn.new_session(cwd=str(tmp_path), mcp_servers=[]), 20
            )
            for n in range(prompts):
                answer = await asyncio.wait_for(
                    conn.prompt(session_id=session.session_id, prompt=prompt_text(f"q{n}")), 10
                )
                assert answer.stop_reason == "end_turn", n
        # The agent exits although its last log lines cannot be written.
        assert await asyncio.wait_for(process.wait(), 10) == 0
        logged = os.read(read_end, PIPE_SIZE * 2)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    assert len(logged) >= PIPE_SIZE // 2, "the pipe was not filled: this test proves nothing"
    assert b"debug" in logged


def read_available(fd: int) -> bytes:
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    return data


def client_of(client: RecordingClient) -> Client:
    return client  # type: ignore[return-value]


def test_log_lines_past_a_full_stderr_are_dropped_counted_and_reported() -> None:
    read_end, write_end = small_pipe()
    stream: IO[str] = os.fdopen(write_end, "w")
    handler = NonBlockingStderrHandler(stream, limit=8, exit_wait=0.2)
    logger = logging.getLogger("codexcore.tests.full_stderr")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        line = "x" * 200
        for n in range(200):  # far more than the pipe and the queue hold: none may block
            logger.warning("%s %d", line, n)
        assert handler.dropped > 0
        dropped = handler.dropped
        os.set_blocking(read_end, False)
        drained = b""
        for _ in range(100):  # the reader comes back: empty the pipe until nothing is left
            handler.flush()
            chunk = read_available(read_end)
            drained += chunk
            if not chunk:
                break
        assert handler.dropped == dropped
        logger.warning("after")
        handler.flush()
        drained += read_available(read_end)
        # In order: the lines written before, how many were dropped, the next line.
        assert drained.endswith(
            f"{dropped} log lines dropped (stderr was not being read)\nafter\n".encode()
        ), drained[-400:]
        assert drained.startswith(line.encode() + b" 0\n")
    finally:
        logger.removeHandler(handler)
        handler.close()
        stream.close()
        os.close(read_end)


if sys.platform != "linux":  # F_SETPIPE_SZ
    pytestmark = [pytestmark, pytest.mark.skip(reason="needs Linux pipes")]
