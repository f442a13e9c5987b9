"""The adapters: events to a client over stdio, TCP and Unix; round trips; fan-out; memory.

Every server is a process of its own and every client is this process, as a
UI would be. The servers run codexcore's adapters as ``codexcore serve`` does
(``bench/_adapters_server.py host``), or are the real ``codexcore serve`` (for
the round trips, the memory and the load), or are the bare limits
(``bench/_adapters_server.py bare``). Sessions are recorded under a temporary
home, removed at the end; every server started is stopped.

1. Events per second to a client over stdio, TCP and Unix. The adapter path
   alone: premade ``agent_message_delta`` messages pushed through
   ``Codex._emit`` in the server (``bench-emit N``; see
   ``_adapters_server.py``), then the host's pump, encoding, replay buffer,
   send queue and writer, the channel, and this process reading: large
   reads, split on newlines, every line decoded with ``orjson`` and its
   ``seq`` checked. The bare limit writes the same events (``encode_event``,
   NDJSON, blocking writes of about 64 KiB) over the same kind of channel
   to the same reader. Also end to end: a Task whose scripted model
   (in-process, ``ScriptedModel.mock_transport()``) streams N deltas.
2. ``user_input`` → ``task_started`` round trip over TCP (and Unix) against
   the real ``codexcore serve``, its model a ``ScriptedResponsesServer``
   answering at once; beside a bare echo of the same line, in the same run.
   Also through the client library (``RemoteCodex``), and without a Task
   (``bench-emit 0`` on the adapters' host: the round trip minus the Task's
   start-up).
3. Fan-out: one session, 1,000 watching connections; beside the same events
   written by the bare writer to 1,000 sockets.
4. Memory: idle sessions (10,000 on one server) and idle connections.
5. Load: 1, 10, 100 and 1,000 sessions each running a Task at once, over
   real HTTP to a scripted Responses server: latency percentiles, memory.
6. Nothing lost at shutdown or at a disconnect: N events in, N events out.

Each section is a module of its own: ``_adapters_throughput.py`` (1),
``_adapters_round_trip.py`` (2), ``_adapters_fan_out.py`` (3),
``_adapters_memory.py`` (4 and 5), ``_adapters_exactness.py`` (6).

Run ``.venv/bin/python bench/bench_adapters.py`` (``--quick`` for a smoke run;
``--only round-trip`` and the like for one section).
"""

from __future__ import annotations

import shutil
import tempfile
import time

from _adapters_exactness import bench_exactness
from _adapters_fan_out import bench_fan_out
from _adapters_memory import bench_load, bench_memory
from _adapters_procs import Procs, raise_fd_limit
from _adapters_round_trip import bench_round_trip
from _adapters_throughput import Scale, bench_throughput
from _common import header, parse_args

SECTIONS = ("throughput", "round-trip", "fan-out", "memory", "load", "exactness")
"""The sections in order, as ``--only`` names them."""


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "", sections=SECTIONS)
    only = args.only
    scale = Scale(args.quick)
    header("bench_adapters", args.quick, f"N = {scale.events:,} events a run")
    raise_fd_limit()
    started = time.perf_counter()
    home = tempfile.mkdtemp(prefix="codexcore-bench-home-")
    rundir = tempfile.mkdtemp(prefix="cxb-")
    try:
        with Procs(home, rundir) as procs:
            if "throughput" in only:
                bench_throughput(procs, scale)
            _, base_url = procs.model(chunks=10, responses=100_000)
            if "round-trip" in only:
                serve = procs.codexcore_serve(base_url)
                bare = procs.helper("bare", "bare")
                bench_round_trip(procs, serve, bare, args.quick)
                serve.stop()
                bare.stop()
            if "fan-out" in only:
                bench_fan_out(procs, args.quick)
            if "memory" in only:
                bench_memory(procs, base_url, args.quick)
            if "load" in only:
                bench_load(procs, base_url, args.quick)
            if "exactness" in only:
                bench_exactness(procs, args.quick)
            print(f"<!-- bench_adapters: {time.perf_counter() - started:.0f} s -->", flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(rundir, ignore_errors=True)


if __name__ == "__main__":
    main()
