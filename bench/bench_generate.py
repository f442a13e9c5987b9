"""The Copilot-CLI-style chat protocol's ``generate`` beside ``chat`` on the same model stream.

One ``codexcore serve --stdio`` process and one scripted Responses server (a real
HTTP server on 127.0.0.1, ``codexcore.testing``). Every request gets the same
scripted answer: a JSON object ``{"code": ..., "componentCount": ..., "description":
...}`` of about ``SIZE`` bytes written in ``N`` deltas. ``generate`` decodes the
``code`` string out of that JSON as it streams (its chunks are the code);
``chat`` streams the deltas as they are (its chunks are the JSON text). The two
alternate in the same run, on the same connection and session.

- time to first chunk: from writing the request to reading its first
  ``stream/chunk`` (the Task's start, the model request, the first delta);
- chunks/s: the request's chunks over the time from its first chunk to its
  response.

Medians over the rounds, and the median of each round's ratio (generate's
chunks/s over chat's, measured moments apart, so a load change hits both).
Run ``.venv/bin/python bench/bench_generate.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from statistics import median
from typing import Any

import orjson
from _common import Table, fmt_ms, fmt_rate, header, parse_args

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

SPEC = {"title": "Bench API", "endpoints": [{"method": "GET", "path": "/items"}]}


def answer_text(size: int) -> str:
    """A generate answer of about ``size`` bytes of code, with escapes to decode."""
    line = '  <Row key={item.id} label="{item.name}">\\t{item.value}</Row>\n'
    code = "export function Items({ items }) {\n" + line * (size // len(line)) + "}\n"
    return json.dumps({"code": code, "componentCount": 3, "description": "Items table"})


class Client:
    """The app's side of a stdio server: lines in, lines out."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.stdin, self.stdout = proc.stdin, proc.stdout

    async def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(orjson.dumps(message) + b"\n")
        await self.stdin.drain()

    async def recv(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.stdout.readline(), 60)
        if not line:
            raise RuntimeError("the server closed its output")
        message: dict[str, Any] = orjson.loads(line)
        return message

    async def request(
        self, rid: int, method: str, params: dict[str, Any]
    ) -> tuple[float, float, int]:
        """Send one request; (time to first chunk, chunks/s, chunks) once it is answered."""
        t0 = time.perf_counter()
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        first = 0.0
        chunks = 0
        while True:
            message = await self.recv()
            if "id" in message:
                if "result" not in message:
                    raise RuntimeError(f"{method}: {message}")
                break
            if chunks == 0:
                first = time.perf_counter()
            chunks += 1
        end = time.perf_counter()
        return first - t0, chunks / max(end - first, 1e-9), chunks


async def run(n: int, size: int, rounds: int) -> dict[str, list[tuple[float, float, int]]]:
    text = answer_text(size)
    model = ScriptedModel([text_response(text, chunks=n) for _ in range(2 * rounds + 2)])
    results: dict[str, list[tuple[float, float, int]]] = {"generate": [], "chat": []}
    async with ScriptedResponsesServer(model) as http:
        home = tempfile.mkdtemp(prefix="bench-generate-")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEXCORE_"))},
            "OPENAI_BASE_URL": http.base_url,
            "CODEXCORE_HOME": home,
        }
        argv = [sys.executable, "-m", "codexcore", "serve", "--stdio", "--ephemeral"]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            cwd=home,
            limit=1 << 24,
        )
        client = Client(proc)
        try:
            caps = {"streaming": True}
            init = {"clientName": "bench", "clientVersion": "0", "capabilities": caps}
            await client.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            await client.recv()
            generate = {"spec": SPEC, "format": "react", "theme": "light", "options": {}}
            rid = 1
            # One of each first, not counted: imports and the session's start.
            await client.request(rid, "generate", {**generate, "theme": "warm-up"})
            await client.request(rid + 1, "chat", {"message": "warm-up"})
            rid += 2
            for n_round in range(rounds):
                theme = f"round-{n_round}"  # params differ: no request joins another
                results["generate"].append(
                    await client.request(rid, "generate", {**generate, "theme": theme})
                )
                results["chat"].append(await client.request(rid + 1, "chat", {"message": theme}))
                rid += 2
            await client.send({"jsonrpc": "2.0", "method": "exit"})
            await asyncio.wait_for(proc.wait(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    return results


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n, size, rounds = (500, 50_000, 3) if args.quick else (2_000, 200_000, 9)
    header(
        "bench_generate",
        args.quick,
        f"{n} deltas of a {size // 1000} kB answer a request; {rounds} rounds each",
    )
    results = asyncio.run(run(n, size, rounds))
    table = Table(
        "generate beside chat on the same model stream (medians)",
        ["request", "chunks", "time to first chunk", "chunks/s"],
    )
    for method, runs in results.items():
        table.add(
            method,
            int(median(r[2] for r in runs)),
            fmt_ms(median(r[0] for r in runs)),
            fmt_rate(median(r[1] for r in runs)),
        )
    ratios = [g[1] / c[1] for g, c in zip(results["generate"], results["chat"], strict=True)]
    table.note(
        f"generate's chunks/s ÷ chat's, each round's pair (run moments apart): median "
        f"{median(ratios):.2f}, range {min(ratios):.2f} to {max(ratios):.2f}"
    )
    table.note(
        "generate's chunks are the code decoded out of the JSON answer (a delta that holds "
        "no code character gives none); chat's are the deltas as they are"
    )
    print(table.render())


if __name__ == "__main__":
    main()
