"""The worker pool behind Redis Streams (``codexcore serve --redis``), beside bare redis-py.

Everything runs on this machine: one ``redis-server`` (no persistence) on a
free port, gateways and workers as real ``codexcore serve --redis``
processes, the scripted model over HTTP in a thread of this process, and the
UI clients in this process. Each figure is printed beside a bare redis-py
loop measured in the same run, against the same server:

1. ``one-session``: events/s of one delta-heavy Task (N ``agent_message_delta``)
   through a gateway and a worker, counted at the UI from ``user_input`` to
   ``task_complete``. Bare: one stream, ``XADD`` pipelined in batches of 256
   (what a worker's script call writes at once) and read with ``XREAD BLOCK``
   by a second connection, the same payload size.
2. ``many-sessions``: 100 sessions over 3 workers and 2 gateways, each running
   one delta-heavy Task at once: the events/s summed over all. Bare: 100
   streams written the same way, read by one ``XREAD`` over all.
3. ``latency``: ``user_input`` -> ``task_started`` at the UI, one session,
   Tasks one after another, p50 and p99. Bare: a request/reply round trip
   over two streams (``XADD``; the other side ``XREAD BLOCK`` then ``XADD``).
4. ``takeover``: SIGKILL of the worker that owns an idle session, then the
   next ``user_input``: time from the kill to that Task's ``task_started``,
   with the default lease (5 s). Goal: under 3 s. Bare: the time Redis takes
   to notice a closed connection (``CLIENT LIST`` polled after a socket is
   dropped), which is what lets the pool beat its lease.
5. ``scale``: 1,000 sessions over 4 workers (2 gateways), each having run a
   Task and then idle: memory per session in the workers, the gateways and
   Redis. Scaled down (and said) if it would take more than two minutes.

Run ``.venv/bin/python bench/bench_redis.py`` (``--quick`` for a smoke run;
``--only takeover`` and the like for one section). Needs redis-server.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from _adapters_procs import (
    PY,
    AsyncConn,
    Proc,
    Procs,
    raise_fd_limit,
    server_env,
    task_latencies,
    user_input,
)
from _common import (
    Table,
    fmt_bytes,
    fmt_ms,
    fmt_rate,
    fmt_ratio,
    header,
    parse_args,
    percentile,
    verdict,
)

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

WORKER_ARGS = {"many-sessions": ("--lease", "15")}
"""100 delta-heavy sessions saturate this 2-core machine (shared with other work):
the workers' loops lag by seconds and a 5 s lease ran out under them (the Tasks
ended worker_lost: safe, by fencing, but not what this section measures)."""

SECTIONS = ("one-session", "many-sessions", "latency", "takeover", "scale")
PAYLOAD = 110  # bytes: an encoded agent_message_delta of a short word


# --- the pool ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Redis:
    def __init__(self, directory: str) -> None:
        redis_server = shutil.which("redis-server")
        if redis_server is None:
            raise SystemExit("bench_redis: redis-server is not installed")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        argv = [redis_server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir"]
        argv += [directory, "--save", "", "--appendonly", "no", "--maxclients", "20000"]
        self.popen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("bench_redis: redis-server did not start") from None
                time.sleep(0.02)

    def client(self) -> Any:
        from redis.asyncio import Redis as Client

        return Client.from_url(self.url)

    def rss(self) -> int:
        with open(f"/proc/{self.popen.pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(10)


class Pool:
    """Gateways and workers of one pool (all stopped by ``procs`` on leaving)."""

    def __init__(self, procs: Procs, redis: Redis, base_url: str) -> None:
        self.procs, self.redis, self.base_url = procs, redis, base_url
        self.gateways: list[Proc] = []
        self.workers: list[Proc] = []
        self._names = 0

    def _env(self) -> dict[str, str]:
        return {**server_env(self.procs.home, self.base_url), "CODEXCORE_LOG": "info"}

    def gateway(self) -> Proc:
        argv = [PY, "-m", "codexcore", "serve", "--redis", self.redis.url, "--role", "gateway"]
        argv += ["--tcp", "127.0.0.1:0", "--max-connections", "5000"]
        proc = self.procs.spawn(f"gateway{len(self.gateways)}", argv, self._env(), stdio=False)
        proc.wait_listening(unix=False)
        self.gateways.append(proc)
        return proc

    def worker(self, *args: str) -> Proc:
        self._names += 1
        name = f"w{self._names}"
        argv = [PY, "-m", "codexcore", "serve", "--redis", self.redis.url, "--role", "worker"]
        argv += ["--worker-name", name, *args]
        proc = self.procs.spawn(name, argv, self._env(), stdio=False)
        proc.wait_stderr(rf"worker {name} serving")
        self.workers.append(proc)
        return proc

    def owner(self, session_id: str) -> Proc:
        for proc in reversed(self.workers):
            if proc.popen.poll() is None and "session taken" in proc.stderr_text():
                lines = [ln for ln in proc.stderr_text().splitlines() if "session taken" in ln]
                if any(session_id in ln for ln in lines):
                    return proc
        raise RuntimeError(f"no live worker took {session_id}")


def model_of(count: int, deltas: int) -> ScriptedModel:
    """``count`` answers of ``deltas`` one-word deltas each."""
    text = "word " * deltas
    return ScriptedModel([text_response(text, chunks=deltas) for _ in range(count)])


async def session(gateway: Proc) -> tuple[AsyncConn, str]:
    conn = await AsyncConn.tcp(gateway.address())
    welcome = await conn.greet()
    return conn, str(welcome["session_id"])


async def run_task(conn: AsyncConn, sub_id: str, within: float = 60.0) -> tuple[int, float]:
    """One Task: (events read, seconds from user_input to task_complete)."""
    started = time.perf_counter()
    await conn.send(user_input(sub_id, "go"))
    events = 0
    last: list[bytes] = []
    while True:
        try:
            async with asyncio.timeout(within):
                line = await conn.reader.readline()
        except TimeoutError:
            raise RuntimeError(f"{sub_id}: no task_complete; last lines {last}") from None
        last = [*last[-4:], line[:120]]
        if not line:
            raise EOFError("the gateway closed the connection")
        events += 1
        if b'"task_complete"' in line or b'"turn_aborted"' in line or b'"type":"error"' in line:
            message = orjson.loads(line)
            if message["id"] == sub_id and message["msg"]["type"] == "task_complete":
                return events, time.perf_counter() - started
            if message["id"] == sub_id:
                raise RuntimeError(f"the Task did not complete: {message}")


# --- bare redis-py -------------------------------------------------------------------------


async def bare_streams(redis: Redis, streams: int, per_stream: int) -> float:
    """events/s: ``streams`` streams written in pipelined batches of 256, read by XREAD."""
    writer, reader = redis.client(), redis.client()
    data = b"x" * PAYLOAD
    keys = [f"bare:{n}:{time.monotonic_ns()}" for n in range(streams)]

    async def write(key: str) -> None:
        for start in range(0, per_stream, 256):
            async with writer.pipeline(transaction=False) as pipe:
                for seq in range(start, min(start + 256, per_stream)):
                    pipe.xadd(key, {"e": data}, id=f"{seq}-1")
                await pipe.execute()

    async def read() -> None:
        cursors = dict.fromkeys(keys, "0-0")
        left = streams * per_stream
        while left:
            reply = await reader.xread(cursors, count=512, block=5000)
            for key, entries in reply:
                cursors[key.decode()] = entries[-1][0]
                left -= len(entries)

    started = time.perf_counter()
    await asyncio.gather(read(), *(write(key) for key in keys))
    elapsed = time.perf_counter() - started
    await writer.delete(*keys)
    await writer.aclose()
    await reader.aclose()
    return streams * per_stream / elapsed


async def bare_round_trips(redis: Redis, count: int) -> list[float]:
    client, server = redis.client(), redis.client()
    stamp = time.monotonic_ns()
    requests, replies = f"bare:req:{stamp}", f"bare:rep:{stamp}"

    async def serve() -> None:
        cursor = "$"
        for _ in range(count):
            reply = await server.xread({requests: cursor}, count=1, block=5000)
            cursor = reply[0][1][-1][0]
            await server.xadd(replies, {"e": b"x" * PAYLOAD})

    server_task = asyncio.create_task(serve())
    await asyncio.sleep(0.05)  # the server blocks before the first request
    times, cursor = [], "0-0"
    for _ in range(count):
        started = time.perf_counter()
        await client.xadd(requests, {"e": b"x" * PAYLOAD})
        reply = await client.xread({replies: cursor}, count=1, block=5000)
        cursor = reply[0][1][-1][0]
        times.append(time.perf_counter() - started)
    await server_task
    await client.delete(requests, replies)
    await client.aclose()
    await server.aclose()
    return sorted(times)


# --- sections ------------------------------------------------------------------------------


async def one_session(pool: Pool, deltas: int) -> None:
    gateway = pool.gateways[0]
    conn, _ = await session(gateway)
    rates = []
    for n in range(3):
        events, seconds = await run_task(conn, f"one{n}")
        rates.append(events / seconds)
    bare = [await bare_streams(pool.redis, 1, deltas) for _ in range(3)]
    await conn.close()
    best, limit = max(rates), max(bare)
    table = Table(
        f"One delta-heavy session through Redis ({deltas:,} deltas a Task, best of 3)",
        ["path", "events/s", "of the bare loop"],
    )
    table.add("UI <- gateway <- Redis <- worker <- engine", fmt_rate(best), fmt_ratio(best / limit))
    table.add("bare redis-py: pipelined XADD -> XREAD", fmt_rate(limit), "1.00")
    table.print()


async def many_sessions(pool: Pool, count: int, deltas: int) -> None:
    conns = [await session(pool.gateways[n % 2]) for n in range(count)]
    started = time.perf_counter()
    results = await asyncio.gather(*(run_task(conn, "many") for conn, _ in conns))
    elapsed = time.perf_counter() - started
    total = sum(events for events, _ in results)
    bare = await bare_streams(pool.redis, count, deltas)
    for conn, _ in conns:
        await conn.close()
    rate = total / elapsed
    table = Table(
        f"{count} sessions at once on 3 workers, 2 gateways ({deltas:,} deltas each)",
        ["path", "events/s summed", "of the bare loop"],
    )
    table.add("through the pool", fmt_rate(rate), fmt_ratio(rate / bare))
    table.add(f"bare redis-py: {count} streams, one reader", fmt_rate(bare), "1.00")
    table.note(
        f"{total:,} events in {elapsed:.1f} s. The pool's events cross three processes "
        "(worker, Redis, gateway) besides the UI's; the bare loop is one process and Redis. "
        "Workers here run with --lease 15: with the default 5 s, their renewals, late "
        "behind a saturated event loop, let leases run out (see WORKER_ARGS)."
    )
    table.print()


async def latency(pool: Pool, count: int) -> None:
    conn, _ = await session(pool.gateways[0])
    times = await task_latencies(conn, count, "lat", "go")
    await conn.close()
    times.sort()
    bare = await bare_round_trips(pool.redis, count)
    table = Table(
        f"user_input -> task_started through a gateway ({count} Tasks one after another)",
        ["path", "p50", "p99"],
    )
    table.add("UI -> gateway -> Redis -> worker -> Redis -> gateway -> UI", *_p(times))
    table.add("bare redis-py: XADD, XREAD BLOCK, XADD, XREAD BLOCK", *_p(bare))
    table.print()


def _p(times: list[float]) -> tuple[str, str]:
    return fmt_ms(percentile(times, 50)), fmt_ms(percentile(times, 99))


async def takeover(pool: Pool, rounds: int) -> None:
    while len(pool.workers) < 2:
        pool.worker()
    times = []
    for n in range(rounds):
        conn, session_id = await session(pool.gateways[0])
        await run_task(conn, f"before{n}")
        owner = pool.owner(session_id)
        killed = time.perf_counter()
        owner.popen.send_signal(signal.SIGKILL)
        await conn.send(user_input(f"after{n}", "go"))
        await conn.until("task_started", within=60)
        times.append(time.perf_counter() - killed)
        await conn.until("task_complete", within=60)
        await conn.close()
        owner.popen.wait(10)
        pool.workers.remove(owner)
        pool.worker()  # back to two
    noticed = await bare_disconnect(pool.redis)
    table = Table(
        f"Takeover: SIGKILL of the owner -> the next Task's task_started ({rounds} rounds)",
        ["what", "median", "worst", "goal < 3 s"],
    )
    times.sort()
    table.add(
        "through the pool (default lease 5 s)",
        fmt_ms(times[len(times) // 2]),
        fmt_ms(times[-1]),
        verdict(times[-1] < 3.0),
    )
    table.add("bare: Redis notices a closed connection", fmt_ms(noticed), fmt_ms(noticed), "")
    table.note(
        "A killed worker's connections close at once; the others look every second and "
        "take its sessions over at the second look (a Redis restart drops connections "
        "for a moment too). A frozen worker keeps them open and waits out the lease."
    )
    table.print()


async def bare_disconnect(redis: Redis) -> float:
    from redis.asyncio import Redis as Client

    name = f"bare-{time.monotonic_ns()}"
    doomed, watcher = Client.from_url(redis.url, client_name=name), redis.client()
    await doomed.ping()
    started = time.perf_counter()
    await doomed.aclose()
    for _ in range(10_000):
        if all(c.get("name") != name for c in await watcher.client_list()):
            break
        await asyncio.sleep(0.001)
    elapsed = time.perf_counter() - started
    await watcher.aclose()
    return elapsed


async def scale(pool: Pool, count: int, budget: float) -> None:
    while len(pool.workers) < 4:
        pool.worker()
    before = [p.rss() for p in pool.workers], [p.rss() for p in pool.gateways], pool.redis.rss()
    conns: list[tuple[AsyncConn, str]] = []
    started = time.perf_counter()
    opened = 0
    semaphore = asyncio.Semaphore(50)

    async def one(n: int) -> None:
        nonlocal opened
        async with semaphore:
            conn, sid = await session(pool.gateways[n % 2])
            await run_task(conn, "s")
            conns.append((conn, sid))
            opened += 1

    tasks = [asyncio.create_task(one(n)) for n in range(count)]
    done, pending = await asyncio.wait(tasks, timeout=budget)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        task.result()
    elapsed = time.perf_counter() - started
    await asyncio.sleep(1.0)  # let the workers' last writes settle before reading memory
    workers = sum(p.rss() for p in pool.workers) - sum(before[0])
    gateways = sum(p.rss() for p in pool.gateways) - sum(before[1])
    redis = pool.redis.rss() - before[2]
    table = Table(
        f"{opened:,} sessions over 4 workers and 2 gateways (each ran one Task, then idle)",
        ["where", "memory", "per session"],
    )
    for where, size in (("workers (4)", workers), ("gateways (2)", gateways), ("redis", redis)):
        table.add(where, fmt_bytes(size), fmt_bytes(size / max(opened, 1)))
    table.note(f"{opened:,} sessions opened and run in {elapsed:.1f} s.")
    if opened < count:
        table.note(f"Scaled down: {count:,} asked, {opened:,} done within {budget:.0f} s.")
    table.print()
    for conn, _ in conns:
        await conn.close()


# --- main ----------------------------------------------------------------------------------


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0], sections=SECTIONS)
    header("bench_redis: the worker pool behind Redis Streams", args.quick)
    raise_fd_limit()
    home, rundir = tempfile.mkdtemp(prefix="cx-bench-"), tempfile.mkdtemp(prefix="cx-")
    redis = Redis(rundir)
    try:
        with Procs(home, rundir) as procs:
            asyncio.run(_sections(args, procs, redis))
    finally:
        redis.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(rundir, ignore_errors=True)


Section = tuple[str, ScriptedModel, int, Callable[["Pool"], Awaitable[None]]]


def _plan(quick: bool) -> list[Section]:
    deltas = 2_000 if quick else 20_000
    many, many_deltas = (20, 200) if quick else (100, 1_000)
    rounds, sessions = (30, 100) if quick else (200, 1_000)
    small = ScriptedModel([text_response("ok") for _ in range(2 * sessions + rounds + 20)])
    return [
        ("one-session", model_of(3, deltas), 1, lambda p: one_session(p, deltas)),
        (
            "many-sessions",
            model_of(many, many_deltas),
            3,
            lambda p: many_sessions(p, many, many_deltas),
        ),
        ("latency", small, 1, lambda p: latency(p, rounds)),
        ("takeover", small, 2, lambda p: takeover(p, 1 if quick else 3)),
        ("scale", small, 4, lambda p: scale(p, sessions, 120.0)),
    ]


async def _sections(args: Any, procs: Procs, redis: Redis) -> None:
    for name, model, workers, run in _plan(args.quick):
        if name not in args.only:
            continue
        http = ScriptedResponsesServer(model).start_in_thread()
        pool = Pool(procs, redis, http.base_url)
        try:
            pool.gateway()
            pool.gateway()
            for _ in range(workers):
                pool.worker(*WORKER_ARGS.get(name, ()))
            await run(pool)
        finally:
            for proc in [*pool.gateways, *pool.workers]:
                if proc.popen.poll() is None:
                    proc.stop(within=15.0)
            http.stop()
            await _flush(redis)


async def _flush(redis: Redis) -> None:
    client = redis.client()
    await client.flushdb()
    await client.aclose()


if __name__ == "__main__":
    main()
