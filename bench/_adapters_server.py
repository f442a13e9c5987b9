"""The server side of ``bench_adapters.py``: processes it starts, never imported by it.

``python bench/_adapters_server.py MODE ...``, one process per server:

``host --stdio`` / ``host --tcp --unix PATH``
    codexcore's adapters as ``codexcore serve`` runs them (the same
    ``serve_stdio``, ``SessionHost``, ``TcpServer``, ``UnixServer`` and
    ``shutdown``, the same start-up: ``claim_stdio``, the raised descriptor
    limit, ``gc.freeze()``), with one addition for measuring the adapter
    path alone: a ``user_input`` whose text is ``bench-emit N`` is not run
    as a Task. The engine answers it as it answers any submission (its
    ``submission_ack``), then pushes ``task_started``, ``N`` premade
    ``agent_message_delta`` messages and ``task_complete`` through
    ``Codex._emit`` (numbering, the ``Event`` envelope, the janus event
    queue), as fast as the engine's queue takes them. From there on
    everything is the adapters' own path: the host's pump, the encoding,
    the replay buffer, the send queues, the writer and the channel. Any
    other submission goes to the real engine. ``--mock-model TOKENS COUNT``
    answers model requests in-process (``ScriptedModel.mock_transport()``,
    COUNT replies of TOKENS deltas each), for the end-to-end rows.

``bare --stdio`` / ``bare --tcp --unix PATH``
    The bare limit: on the line ``emit N ID [self|watchers]`` it writes the
    same events (the same ``Event`` objects, ``encode_event``, one a line)
    with blocking writes of about 64 KiB to stdout, to the connection that
    asked, or to every connection that sent ``watch`` (answered by one line,
    as a ``welcome``). After a line ``echo``, a connection has every further
    line echoed back; after ``echo US``, each echo comes after US microseconds
    of busy work (what a server that computes that long before answering
    pays on this machine in wake-ups).

``bare-asyncio``
    The bare limit of an idle connection: an asyncio TCP server whose handler
    waits in ``reader.read()`` (what a connection costs an asyncio server).

``engines --count N``
    N idle engines alone, as a host makes them (``host_engine_config``, one
    ``ModelClientPool`` of 16 shards, ``configure_session`` answered), no
    host; prints the resident set before and after as JSON.

``model --chunks C --responses R``
    A ``ScriptedResponsesServer`` on 127.0.0.1 answering R requests, each
    with a message of C deltas; prints its base URL on stdout.

Every mode stops on SIGTERM (the host in good order, as ``codexcore serve``).
"""

from __future__ import annotations

import gc

gc.disable()  # as the CLI: start-up's objects live until exit; freeze them once loaded

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import selectors  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from typing import Any  # noqa: E402

import attrs  # noqa: E402
import orjson  # noqa: E402

import codexcore.adapters.host._host as host_module  # noqa: E402
from codexcore import Codex  # noqa: E402
from codexcore._logging import configure_cli_logging  # noqa: E402
from codexcore.adapters.host._host import HostConfig, SessionHost, host_engine_config  # noqa: E402
from codexcore.adapters.servers._listener import Listener, shutdown  # noqa: E402
from codexcore.adapters.stdio import claim_stdio, serve_stdio  # noqa: E402
from codexcore.adapters.tcp import TcpServer  # noqa: E402
from codexcore.adapters.unix import UnixServer  # noqa: E402
from codexcore.engine import ModelClientPool, Rejected, SessionConfig  # noqa: E402
from codexcore.protocol import (  # noqa: E402
    AgentMessageDelta,
    ConfigureSession,
    Event,
    EventMsg,
    SessionConfigured,
    Submission,
    SubmissionAck,
    TaskComplete,
    TaskStarted,
    TextInput,
    UserInput,
    encode_event,
)
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response  # noqa: E402

TRIGGER = "bench-emit "
CHUNK = 64 * 1024


def long_text(tokens: int) -> str:
    """A message of ``tokens`` token-sized words (as ``bench_engine.long_text``)."""
    return "".join(f"tok{i % 1000:03d} " for i in range(tokens))


def premade(count: int) -> list[AgentMessageDelta]:
    return [AgentMessageDelta(f"tok{i % 1000:03d} ") for i in range(count)]


DELTAS = premade(1000)


def bench_messages(sub_id: str, n: int) -> Iterator[EventMsg]:
    """What follows the ack of ``bench-emit n``: ``task_started``, n deltas, ``task_complete``."""
    yield TaskStarted()
    for i in range(n):
        yield DELTAS[i % 1000]
    yield TaskComplete()


def trigger_count(item: Submission | Rejected) -> int | None:
    if not isinstance(item, Submission) or not isinstance(item.op, UserInput):
        return None
    first = item.op.items[0] if item.op.items else None
    if isinstance(first, TextInput) and first.text.startswith(TRIGGER):
        return int(first.text[len(TRIGGER) :])
    return None


class BenchCodex(Codex):
    """The engine, plus ``bench-emit N``: premade messages through ``_emit``."""

    async def _dispatch(self, item: Submission | Rejected) -> None:
        n = trigger_count(item)
        if n is None:
            await super()._dispatch(item)
            return
        assert isinstance(item, Submission)
        if self._seen is not None:
            fresh = self._seen.accept(item.id)
            await self._emit(item.id, SubmissionAck(item.id, duplicate=not fresh))
            if not fresh:
                return
        emit = self._emit
        for msg in bench_messages(item.id, n):
            await emit(item.id, msg)


# --- host ----------------------------------------------------------------------------------


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def host_config(args: argparse.Namespace) -> HostConfig:
    engine = host_engine_config(session=SessionConfig(cwd="/tmp"), ephemeral=args.ephemeral)
    return HostConfig(
        engine=engine,
        token=os.environ.get("CODEXCORE_TOKEN") or None,
        max_sessions=args.max_sessions,
        max_connections=args.max_connections,
        max_connections_per_session=args.per_session,
    )


def mock_transport(args: argparse.Namespace) -> Any:
    if args.mock_model is None:
        return None
    tokens, count = args.mock_model
    reply = text_response(long_text(tokens), chunks=tokens)
    return ScriptedModel([reply] * count).mock_transport()


async def serve_sockets(args: argparse.Namespace, config: HostConfig) -> int:
    host = SessionHost(config, transport=mock_transport(args))
    await host.start()
    tcp, unix = TcpServer(host, "127.0.0.1", 0), UnixServer(host, args.unix)
    listeners: list[Listener] = [tcp, unix]
    address = await tcp.start()
    say(f"listening on tcp {address[0]}:{address[1]}")
    say(f"listening on unix {await unix.start()}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await shutdown(host, listeners, grace=config.stuck_timeout)
    return 0


def run_host(args: argparse.Namespace) -> int:
    configure_cli_logging("warning")
    host_module.Codex = BenchCodex  # type: ignore[attr-defined]
    config = host_config(args)
    if args.stdio:
        in_fd, out_fd = claim_stdio()
        gc.freeze()
        gc.enable()
        return asyncio.run(serve_stdio(in_fd, out_fd, config, transport=mock_transport(args)))
    raise_fd_limit()
    gc.freeze()
    gc.enable()
    return asyncio.run(serve_sockets(args, config))


# --- bare -----------------------------------------------------------------------------------


def bare_events(sub_id: str, n: int, seq: int) -> Iterator[Event]:
    yield Event(sub_id, seq, SubmissionAck(sub_id, duplicate=False))
    for msg in bench_messages(sub_id, n):
        seq += 1
        yield Event(sub_id, seq, msg)


def bare_write(events: Iterator[Event], send: Callable[[bytes], object]) -> None:
    """NDJSON in writes of about 64 KiB: ``encode_event`` per event, joined, written."""
    parts: list[bytes] = []
    size = 0
    for event in events:
        data = encode_event(event)
        parts.append(data)
        size += len(data) + 1
        if size >= CHUNK:
            parts.append(b"")
            send(b"\n".join(parts))
            parts.clear()
            size = 0
    if parts:
        parts.append(b"")
        send(b"\n".join(parts))


def write_all(fd: int) -> Callable[[bytes], None]:
    def send(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    return send


def bare_stdio() -> int:
    in_fd, out_fd = claim_stdio()
    gc.enable()
    seq = 0
    with os.fdopen(in_fd, "rb") as lines:
        for line in lines:
            words = line.split()
            if words[:1] == [b"emit"]:
                n, sub_id = int(words[1]), words[2].decode()
                bare_write(bare_events(sub_id, n, seq), write_all(out_fd))
                seq += n + 3
    os.close(out_fd)
    return 0


def spin(ns: int) -> None:
    """Busy work (not a sleep): the CPU stays awake, as a server's computing would."""
    until = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < until:
        pass


class BareConnection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rest = b""
        self.echo = False
        self.busy_ns = 0  # ``echo US``: spin this long before each echo
        self.seq = 0


class BareServer:
    """A selector loop: lines in, blocking writes out (see the module's docstring)."""

    def __init__(self, unix_path: str) -> None:
        self.selector = selectors.DefaultSelector()
        self.watchers: list[BareConnection] = []
        self.watch_seq = 0
        tcp = socket.create_server(("127.0.0.1", 0), backlog=4096)
        if os.path.exists(unix_path):
            os.unlink(unix_path)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(unix_path)
        unix.listen(4096)
        for listener in (tcp, unix):
            listener.setblocking(False)
            self.selector.register(listener, selectors.EVENT_READ, None)
        host, port = tcp.getsockname()[:2]
        say(f"listening on tcp {host}:{port}")
        say(f"listening on unix {unix_path}")
        self.listeners = (tcp, unix)
        self.stopping = False

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        while not self.stopping:
            for key, _ in self.selector.select(timeout=0.2):
                if key.data is None:
                    self._accept(key.fileobj)  # type: ignore[arg-type]
                else:
                    self._read(key.data)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def _accept(self, listener: socket.socket) -> None:
        with contextlib.suppress(BlockingIOError):
            while True:
                sock, _ = listener.accept()
                if sock.family == socket.AF_INET:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
                self.selector.register(sock, selectors.EVENT_READ, BareConnection(sock))

    def _read(self, conn: BareConnection) -> None:
        try:
            data = conn.sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        if conn.echo and not conn.rest and data.endswith(b"\n"):
            spin(conn.busy_ns)
            self._send(conn, data)  # whole lines: echo them as they came
            return
        *lines, conn.rest = (conn.rest + data).split(b"\n")
        for line in lines:
            self._line(conn, line)

    def _line(self, conn: BareConnection, line: bytes) -> None:
        if conn.echo:
            spin(conn.busy_ns)
            self._send(conn, line + b"\n")
            return
        words = line.split()
        if words[:1] == [b"echo"]:
            conn.echo = True
            conn.busy_ns = int(words[1]) * 1000 if len(words) > 1 else 0
        elif words == [b"watch"]:
            self.watchers.append(conn)
            self._send(conn, b'{"type":"watching"}\n')
        elif words[:1] == [b"emit"]:
            n, sub_id, where = int(words[1]), words[2].decode(), words[3]
            if where == b"self":
                bare_write(bare_events(sub_id, n, conn.seq), lambda d: self._send(conn, d))
                conn.seq += n + 3
            else:
                watchers = list(self.watchers)

                def send_all(data: bytes) -> None:
                    for watcher in watchers:
                        self._send(watcher, data)

                bare_write(bare_events(sub_id, n, self.watch_seq), send_all)
                self.watch_seq += n + 3

    def _send(self, conn: BareConnection, data: bytes) -> None:
        conn.sock.setblocking(True)
        try:
            conn.sock.sendall(data)
        except OSError:
            pass
        finally:
            conn.sock.setblocking(False)

    def _close(self, conn: BareConnection) -> None:
        self.selector.unregister(conn.sock)
        conn.sock.close()
        if conn in self.watchers:
            self.watchers.remove(conn)


def run_bare(args: argparse.Namespace) -> int:
    if args.stdio:
        return bare_stdio()
    raise_fd_limit()
    gc.enable()
    BareServer(args.unix).run()
    return 0


async def serve_idle_asyncio() -> int:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=65536, backlog=4096)
    host, port = server.sockets[0].getsockname()[:2]
    say(f"listening on tcp {host}:{port}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()
    return 0


def run_bare_asyncio() -> int:
    raise_fd_limit()
    gc.freeze()
    gc.enable()
    return asyncio.run(serve_idle_asyncio())


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def idle_engines(count: int, ephemeral: bool) -> dict[str, int]:
    config = attrs.evolve(
        host_engine_config(session=SessionConfig(cwd="/tmp"), ephemeral=ephemeral),
        acknowledge_submissions=True,
    )
    pool = ModelClientPool(config, shards=16)
    engines: list[Codex] = []

    async def one() -> Codex:
        codex = Codex(config, clients=pool)
        await codex.start()
        await codex.submit(ConfigureSession())
        while not isinstance((await codex.next_event()).msg, SessionConfigured):
            pass
        return codex

    engines.append(await one())  # the first one makes what all share
    gc.collect()
    before = rss()
    for _ in range(count):
        engines.append(await one())
    gc.collect()
    after = rss()
    for codex in engines:
        codex.request_close()
    for codex in engines:
        await codex.wait_finished()
    await pool.aclose()
    return {"count": count, "before": before, "after": after}


def run_engines(args: argparse.Namespace) -> int:
    raise_fd_limit()
    gc.freeze()
    gc.enable()
    print(orjson.dumps(asyncio.run(idle_engines(args.count, args.ephemeral))).decode(), flush=True)
    return 0


# --- model ----------------------------------------------------------------------------------


async def serve_model(chunks: int, responses: int) -> int:
    model = ScriptedModel([text_response(long_text(chunks), chunks=chunks)] * responses)
    async with ScriptedResponsesServer(model) as server:
        print(server.base_url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    return 0


def run_model(args: argparse.Namespace) -> int:
    raise_fd_limit()
    gc.enable()
    return asyncio.run(serve_model(args.chunks, args.responses))


def say(line: str) -> None:
    print(f"bench-server: {line}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("mode", choices=("host", "bare", "bare-asyncio", "engines", "model"))
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--unix", default="")
    parser.add_argument("--mock-model", nargs=2, type=int, metavar=("TOKENS", "COUNT"))
    parser.add_argument("--ephemeral", action="store_true")
    defaults = attrs.fields(HostConfig)
    parser.add_argument("--max-sessions", type=int, default=defaults.max_sessions.default)
    parser.add_argument("--max-connections", type=int, default=defaults.max_connections.default)
    parser.add_argument(
        "--per-session", type=int, default=defaults.max_connections_per_session.default
    )
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--responses", type=int, default=10_000)
    args = parser.parse_args()
    if args.mode == "host":
        return run_host(args)
    if args.mode == "bare":
        return run_bare(args)
    if args.mode == "bare-asyncio":
        return run_bare_asyncio()
    if args.mode == "engines":
        return run_engines(args)
    return run_model(args)


if __name__ == "__main__":
    sys.exit(main())
