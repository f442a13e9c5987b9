"""``bench_function_tools.py remote``: a client's tool call over a real socket.

See section 3 of ``bench_function_tools.py``. Three processes: the scripted model
(``--model N``), ``codexcore serve --tcp``, and this one (the client), plus an
echo server (``--echo``) for the bare round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from _common import Table, fmt_us, verdict

TOKEN = "bench-token-remote-tools"
LINE = (
    b'{"id":"x","op":{"type":"dynamic_tool_response","call_id":"r1","output":"src/app.py:10-12"}}\n'
)


async def editor_selection(include_text: bool = False) -> str:
    """The open editor's path and selection."""
    return "src/app.py:10-12"


def serve_model(calls: int) -> None:
    """The scripted model: ``calls`` Turns that each call the tool, then an answer."""
    from codexcore.testing import (
        ScriptedModel,
        ScriptedResponsesServer,
        function_call_response,
        text_response,
    )

    names = ("editor_selection", "by_hand")
    script = [function_call_response(names[n % 2], {}, call_id=f"r{n}") for n in range(calls)]
    script.append(text_response("done"))
    with ScriptedResponsesServer(ScriptedModel(script)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def serve_echo() -> None:
    """A bare TCP line echo server: the limit of a round trip to another process."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write(line)
            await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(main())


@contextlib.asynccontextmanager
async def child(
    *argv: str, env: dict[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def _listening(process: asyncio.subprocess.Process) -> tuple[str, int]:
    assert process.stderr is not None
    while line := await process.stderr.readline():
        match = re.search(rb"listening on tcp ([\d.]+):(\d+)", line)
        if match:
            return match[1].decode(), int(match[2])
    raise SystemExit("codexcore serve did not start")


async def _bare(port: int, n: int) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    times = []
    for i in range(n + 100):
        started = time.perf_counter()
        writer.write(LINE)
        await reader.readline()
        if i >= 100:  # warm-up
            times.append(time.perf_counter() - started)
    writer.close()
    return sorted(times)


async def _remote(base_url: str, n: int) -> dict[str, list[float]]:
    from codexcore import function_tool
    from codexcore.adapters.client import RemoteCodex
    from codexcore.protocol import (
        ConfigureSession,
        DynamicToolCallRequest,
        DynamicToolResponse,
        DynamicToolSpec,
        ErrorEvent,
        McpToolCallEnd,
        SandboxPolicy,
        SubmissionAck,
        TaskComplete,
        TextInput,
        UserInput,
    )

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))}
    home = tempfile.mkdtemp(prefix="bench-remote-")
    env |= {"OPENAI_BASE_URL": base_url, "CODEXCORE_TOKEN": TOKEN, "CODEXCORE_HOME": home}
    argv = (sys.executable, "-m", "codexcore", "serve", "--tcp", "127.0.0.1:0")
    library = function_tool(editor_selection)
    tools = (
        DynamicToolSpec(library.name, library.description, library.parameters),
        DynamicToolSpec("by_hand", "The same, answered by the program itself."),
    )
    times: dict[str, list[float]] = {"plain": [], "library": [], "ack": [], "end": []}
    async with child(*argv, env=env) as server:
        host, port = await _listening(server)
        async with RemoteCodex.connect_tcp(host, port, token=TOKEN, tools=[library]) as client:
            configure = ConfigureSession(
                approval_policy="never",
                sandbox_policy=SandboxPolicy("danger-full-access"),
                cwd=home,
                model="gpt-4.1",
                dynamic_tools=tools,
            )
            await client.submit(configure)
            # The protocol's own round trip, no tool: a stray answer and its error.
            for i in range(min(n, 500) + 50):
                started = time.perf_counter()
                sub_id = await client.submit(DynamicToolResponse(f"stray{i}", "x"))
                async for event in client.events():
                    if event.id == sub_id and isinstance(event.msg, ErrorEvent):
                        break
                if i >= 50:
                    times["plain"].append(time.perf_counter() - started)
            await client.submit(UserInput((TextInput("where am I?"),)))
            asked: dict[str, tuple[str, float]] = {}
            answers: dict[str, float] = {}
            async for event in client.events():
                msg, now = event.msg, time.perf_counter()
                if isinstance(msg, DynamicToolCallRequest):
                    if msg.tool == "by_hand":
                        answer = DynamicToolResponse(msg.call_id, "src/app.py:10-12")
                        answers[await client.submit(answer)] = now
                    asked[msg.call_id] = (msg.tool, now)
                elif isinstance(msg, SubmissionAck) and msg.id in answers:
                    times["ack"].append(now - answers.pop(msg.id))
                elif isinstance(msg, McpToolCallEnd) and msg.call_id in asked:
                    tool, started = asked.pop(msg.call_id)
                    times["end" if tool == "by_hand" else "library"].append(now - started)
                elif isinstance(msg, TaskComplete):
                    break
                elif msg.TYPE in ("error", "turn_aborted"):
                    raise SystemExit(f"the task failed: {msg}")
    return {key: sorted(values[5:] if key != "plain" else values) for key, values in times.items()}


HERE = str(Path(__file__).resolve())


async def _main(n: int) -> dict[str, list[float]]:
    here = HERE
    async with child(sys.executable, here, "--echo") as echo:
        assert echo.stdout is not None
        port = int(await echo.stdout.readline())
        bare = await _bare(port, n)
    async with child(sys.executable, here, "--model", str(2 * n + 20)) as model:
        assert model.stdout is not None
        base_url = (await model.stdout.readline()).decode().strip()
        times = await _remote(base_url, n)
    return {
        BARE: bare,
        PLAIN: times["plain"],
        ACK: times["ack"],
        END: times["end"],
        LIBRARY: times["library"],
    }


BARE = "bare: one line to an echo process and back (TCP)"
PLAIN = "native protocol, no tool: a stray answer, and its error back"
ACK = "a tool call answered by hand: the request at the UI, to its answer's ack"
END = "the same: the request at the UI, to the call's end event"
LIBRARY = "a tool call answered by RemoteCodex (async function): request to end event"


def bench_remote(quick: bool) -> None:
    n = 100 if quick else 1000
    rows = asyncio.run(_main(n))
    table = Table(
        f"A client's tool over a real TCP socket, {n} calls of each kind (p50 / p90)",
        ["what", "p50", "p90", "p50 beyond bare"],
    )
    bare = rows[BARE]
    for name, times in rows.items():
        p50, p90 = times[len(times) // 2], times[int(len(times) * 0.9)]
        beyond = fmt_us(p50 - bare[len(bare) // 2]) if times is not bare else ""
        table.add(name, fmt_us(p50), fmt_us(p90), beyond)
    ack, plain = rows[ACK], rows[PLAIN]
    extra = ack[len(ack) // 2] - plain[len(plain) // 2]
    table.note(
        f"Answering a waiting call costs {fmt_us(extra)} p50 beyond the protocol's own "
        f"round trip ({verdict(extra < 200e-6)}: under 200 µs). The Task yields right "
        "after the call's end event, so it leaves before the next model request is built. "
        "Processes: the model, the server, the client and the echo server, on one machine."
    )
    table.print()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if sys.argv[1] == "--echo":
        serve_echo()
    elif sys.argv[1] == "--model":
        serve_model(int(sys.argv[2]))
