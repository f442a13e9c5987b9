"""The engine's queue pair: event throughput to a consumer, and submit latency.

1. Events per second from the engine to a consumer thread. The consumer is
   the main thread blocked in ``CodexThread.next_event()`` (for the bare
   limit, in ``janus.Queue.sync_q.get()``); the producers are:

   * end to end: a Task whose scripted model streams one long message as
     ``N`` text deltas through the real ``ModelClient`` (httpx with
     ``ScriptedModel.mock_transport()``: no socket, but the httpx response
     machinery, the SSE decoder, the Responses event mapping and the Task's
     stream loop all run), each delta becoming one ``agent_message_delta``.
     Twice: with the session recorded in its rollout file (the default) and
     with an ``ephemeral`` engine (nothing recorded);
   * the emit path only: the same ``agent_message_delta`` messages, made in
     advance, pushed through ``Codex._emit`` on the engine's loop (numbering,
     the ``Event`` envelope, the rollout record, the janus queue);
   * the bare limit: a ``janus.Queue`` of the engine's event queue size, an
     asyncio producer awaiting ``async_q.put`` of the very ``Event`` objects
     the end-to-end run delivered.

   A model-client-only row (``ModelClient.stream`` over the same response on
   one thread, no engine, no queue) shows what the model path costs alone.

1b. The same to a consumer task on the engine's loop (the async face, what an
    asyncio UI or a protocol adapter reads), beside bare janus queues put
    into with ``await put`` and with ``put_nowait`` (as ``Codex._emit`` does).

2. Latency from ``await codex.submit(user_input)`` to reading ``task_started``
   on the async face, over many Tasks (the scripted model answers each at
   once; only submit to ``task_started`` is timed). The bare limit is the same
   round trip through two queues and one hop to another asyncio task: a put on
   an input queue, an echo task moving the item to an output queue, a get
   there. The threads face (``CodexThread.submit`` then ``next_event``) is
   timed beside the same echo driven from another thread.

Sessions are recorded under a temporary home, removed at the end. Sections 1 and
1b are in ``_engine_throughput.py``, section 2 in ``_engine_latency.py``, what they
share in ``_engine_setup.py``.
Run ``.venv/bin/python bench/bench_engine.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import shutil
import tempfile

from _common import header, parse_args
from _engine_latency import bench_latency
from _engine_throughput import bench_async_throughput, bench_throughput


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    tokens, repeat, tasks = (2_000, 2, 200) if args.quick else (20_000, 7, 1_000)
    header("bench_engine", args.quick, f"N = {tokens:,} deltas per Task, {tasks:,} Tasks timed")
    home = tempfile.mkdtemp(prefix="codexcore-bench-home-")
    try:
        bench_throughput(home, tokens, repeat)
        bench_async_throughput(home, tokens, repeat)
        bench_latency(home, tasks)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
