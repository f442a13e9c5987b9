"""The adapters benchmark's sections 4 and 5: the memory of idle sessions and connections,
and sessions running Tasks at once (see ``bench_adapters.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson
from _adapters_procs import AsyncConn, Proc, Procs, raise_fd_limit, task_latencies, user_input
from _common import Table, fmt_bytes, fmt_ms, fmt_ratio, fmt_us, percentile

# --- 4. memory ----------------------------------------------------------------------------------


async def new_session(
    address: tuple[str, int], *, keep: bool = False
) -> tuple[str, int, AsyncConn]:
    """A configured session (``session_configured`` read); the connection closed unless kept."""
    conn = await AsyncConn.tcp(address)
    welcome = await conn.greet()
    seq = await conn.configure()
    if not keep:
        await conn.close()
    return str(welcome["session_id"]), seq, conn


async def in_parallel(count: int, width: int, make: Callable[[int], Any]) -> list[Any]:
    """``make(i)`` for i in range(count), at most ``width`` at a time, in order."""
    gate = asyncio.Semaphore(width)

    async def one(i: int) -> Any:
        async with gate:
            return await make(i)

    return list(await asyncio.gather(*(one(i) for i in range(count))))


def settle(proc: Proc, fds: int | None = None, within: float = 30.0) -> None:
    """Wait until the server is quiet: (optionally) its descriptor count is ``fds``, and
    its CPU time stops growing; then collect nothing (the server's own GC runs as it runs)."""
    deadline = time.monotonic() + within
    while fds is not None and proc.fds() != fds and time.monotonic() < deadline:
        time.sleep(0.05)
    last = proc.cpu()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = proc.cpu()
        if now - last < 0.004:
            return
        last = now


async def memory(serve: Proc, sessions: int, connections: int, tasks: int) -> dict[str, Any]:
    address = serve.address()
    result: dict[str, Any] = {}
    _, _, probe = await new_session(address, keep=True)  # for the round trips, kept open
    await task_latencies(probe, 50, "w")
    result["rt_before"] = await task_latencies(probe, tasks, "a")
    settle(serve)
    fds0, rss0 = serve.fds(), serve.rss()
    t0 = time.perf_counter()
    made = await in_parallel(sessions, 32, lambda i: new_session(address))
    result["create_s"] = time.perf_counter() - t0
    settle(serve)
    fds1, rss1 = serve.fds(), serve.rss()
    result["rt_after"] = await task_latencies(probe, tasks, "b")
    conns: list[AsyncConn] = []

    async def attach(i: int) -> None:
        session_id, seq, _ = made[i]
        conn = await AsyncConn.tcp(address)
        await conn.greet(session_id=session_id, last_seq=seq)
        conns.append(conn)

    await in_parallel(connections, 32, attach)
    settle(serve)
    fds2, rss2 = serve.fds(), serve.rss()
    for conn in conns:
        await conn.close()
    await probe.close()
    result.update(
        rss0=rss0, rss1=rss1, rss2=rss2, fds0=fds0, fds1=fds1, fds2=fds2, hwm=serve.status("VmHWM")
    )
    return result


async def bare_connections(proc: Proc, count: int) -> tuple[int, int]:
    """RSS of a bare asyncio server before and after ``count`` idle connections."""
    assert proc.tcp is not None
    settle(proc)
    before = proc.rss()
    conns = await in_parallel(count, 32, lambda i: AsyncConn.tcp(proc.address()))
    settle(proc)
    after = proc.rss()
    for conn in conns:
        await conn.close()
    return before, after


def bench_memory(procs: Procs, base_url: str, quick: bool) -> None:
    sessions = 1_000 if quick else 10_000
    connections = 200 if quick else 1_000
    tasks = 50 if quick else 200
    serve = procs.codexcore_serve(base_url, "--max-sessions", str(sessions + 100))
    got = asyncio.run(memory(serve, sessions, connections, tasks))
    serve.stop()
    engines = procs.helper("engines", "engines", "--count", str(connections))
    assert engines.popen.stdout is not None
    alone = orjson.loads(engines.popen.stdout.readline())
    engines.stop()
    bare = procs.helper("bare asyncio", "bare-asyncio")
    bare_before, bare_after = asyncio.run(bare_connections(bare, connections))
    bare.stop()
    per_session = (got["rss1"] - got["rss0"]) / sessions
    per_engine = (alone["after"] - alone["before"]) / alone["count"]
    per_connection = (got["rss2"] - got["rss1"]) / connections
    per_bare = (bare_after - bare_before) / connections
    table = Table(
        f"4. Memory: {sessions:,} idle sessions on one `codexcore serve`, then "
        f"{connections:,} idle connections attached to them (RSS growth)",
        ["what", "per instance", "÷ bare", "in all", "descriptors each"],
    )
    table.add(
        "codexcore: an idle session (created, `configure_session` answered, detached; recorded)",
        fmt_bytes(per_session),
        fmt_ratio(per_session / per_engine),
        fmt_bytes(got["rss1"] - got["rss0"]),
        f"{(got['fds1'] - got['fds0']) / sessions:.2f}",
    )
    table.add(
        "bare: the engine alone (`Codex` configured, the host's engine config and pool; "
        f"{alone['count']:,} in one process)",
        fmt_bytes(per_engine),
        "1.00",
        "",
        "",
    )
    table.add(
        "codexcore: an idle connection attached to an idle session (`hello` with `last_seq`)",
        fmt_bytes(per_connection),
        fmt_ratio(per_connection / per_bare),
        fmt_bytes(got["rss2"] - got["rss1"]),
        f"{(got['fds2'] - got['fds1']) / connections:.2f}",
    )
    table.add(
        "bare: an idle connection to an asyncio server (a task blocked in `reader.read()`)",
        fmt_bytes(per_bare),
        "1.00",
        "",
        "",
    )
    before, after = sorted(got["rt_before"]), sorted(got["rt_after"])
    table.note(
        f"The server's RSS: {fmt_bytes(got['rss0'])} with no session, "
        f"{fmt_bytes(got['rss1'])} with {sessions:,} idle sessions, {fmt_bytes(got['rss2'])} "
        f"with the connections; peak {fmt_bytes(got['hwm'])}. Creating the sessions "
        f"(32 clients at a time, each: connect, `hello`, `configure_session`, close) took "
        f"{got['create_s']:.1f} s, {sessions / got['create_s']:,.0f} sessions/s. "
        f"`user_input` → `task_started` over TCP on one more session of the same server, "
        f"{len(before)} Tasks: p50 {fmt_us(percentile(before, 50))}, p99 "
        f"{fmt_us(percentile(before, 99))} with no idle session; p50 "
        f"{fmt_us(percentile(after, 50))}, p99 {fmt_us(percentile(after, 99))} beside "
        f"{sessions:,} idle ones. A recorded session holds its rollout file open: one "
        "descriptor per session (the server raises its limit to the hard limit, here "
        f"{raise_fd_limit():,})."
    )
    table.print()


# --- 5. load ----------------------------------------------------------------------------------


async def load_level(
    serve: Proc, sessions: int, rounds: int
) -> tuple[list[float], list[float], int, int, float]:
    """``sessions`` sessions each run a Task, all at once, ``rounds`` times.

    Returns the latencies to ``task_started`` and to ``task_complete``, the RSS
    with the sessions idle, the peak RSS, and the server CPU seconds per Task.
    """
    assert serve.tcp is not None
    address = serve.tcp
    made = await in_parallel(sessions, 50, lambda i: new_session(address, keep=True))
    conns = [conn for _, _, conn in made]
    settle(serve)
    idle = serve.rss()
    started: list[float] = []
    complete: list[float] = []

    async def one(conn: AsyncConn, sub_id: str) -> None:
        t0 = time.perf_counter()
        await conn.send(user_input(sub_id, "Say ok."))
        await conn.until("task_started")
        started.append(time.perf_counter() - t0)
        await conn.until("task_complete")
        complete.append(time.perf_counter() - t0)

    await asyncio.gather(*(one(conn, "w") for conn in conns))  # warm-up
    cpu0 = serve.cpu()
    for r in range(rounds):
        await asyncio.gather(*(one(conn, f"r{r}") for conn in conns))
    cpu = (serve.cpu() - cpu0) / (sessions * rounds)
    del started[:sessions], complete[:sessions]
    for conn in conns:
        await conn.close()
    return started, complete, idle, serve.status("VmHWM"), cpu


async def bare_model_requests(base_url: str, count: int, rounds: int) -> list[float]:
    """The same model requests made at once straight to the scripted server: ``count``
    kept-alive connections, a minimal HTTP/1.1 POST on each, the chunked reply read to
    its end. No engine, no adapter, no HTTP library: the floor of a Task's latency."""
    host, _, port = base_url.removeprefix("http://").partition("/")[0].partition(":")
    body = orjson.dumps({"model": "gpt-5", "input": [], "stream": True})
    request = (
        f"POST /v1/responses HTTP/1.1\r\nhost: {host}:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    conns = await in_parallel(
        count, 50, lambda i: asyncio.open_connection(host, int(port), limit=1 << 20)
    )
    samples: list[float] = []

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
        t0 = time.perf_counter()
        writer.write(request)
        await reader.readuntil(b"\r\n0\r\n\r\n")
        return time.perf_counter() - t0

    await asyncio.gather(*(one(r, w) for r, w in conns))  # warm-up
    for _ in range(rounds):
        samples += await asyncio.gather(*(one(r, w) for r, w in conns))
    for _, writer in conns:
        writer.close()
    return samples


def bench_load(procs: Procs, base_url: str, quick: bool) -> None:
    levels = (1, 10, 100) if quick else (1, 10, 100, 1_000)
    most = 20 if quick else 100
    table = Table(
        f"5. Sessions running a Task at once (each a `user_input` against the scripted "
        f"model over real HTTP; {most} Tasks a session when alone, 3 from 100 sessions, after "
        "a warm-up round; a fresh "
        "`codexcore serve` per row)",
        [
            "sessions",
            "→ task_started p50 / p99",
            "→ task_complete p50 / p90 / p99",
            "bare: the model request alone p50 / p99",
            "server RSS idle / peak",
            "RSS per session",
            "server CPU per Task",
        ],
    )
    for sessions in levels:
        rounds = max(3, most // sessions)
        serve = procs.codexcore_serve(base_url)
        settle(serve)
        rss0 = serve.rss()
        started, complete, idle, peak, cpu = asyncio.run(load_level(serve, sessions, rounds))
        serve.stop()
        bare = sorted(asyncio.run(bare_model_requests(base_url, sessions, rounds)))
        started.sort()
        complete.sort()
        table.add(
            f"{sessions:,}",
            f"{fmt_ms(percentile(started, 50))} / {fmt_ms(percentile(started, 99))}",
            " / ".join(fmt_ms(percentile(complete, q)) for q in (50, 90, 99)),
            f"{fmt_ms(percentile(bare, 50))} / {fmt_ms(percentile(bare, 99))}",
            f"{fmt_bytes(idle)} / {fmt_bytes(peak)}",
            fmt_bytes((peak - rss0) / sessions),
            fmt_us(cpu),
        )
    table.note(
        "Each session is its own TCP connection; a round sends every session's "
        "`user_input` at once and waits for every `task_complete`. The model's reply is "
        "a message of 10 deltas (about 17 events a Task). RSS per session: the peak less "
        "the server's RSS before any session, over the sessions. The bare column is the "
        "same number of requests made at once straight to the scripted server (a minimal "
        "HTTP/1.1 client on kept-alive connections: no engine, no adapter, no HTTP "
        "library): the floor of a Task's latency here."
    )
    table.print()
