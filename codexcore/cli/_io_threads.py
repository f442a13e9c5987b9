"""The server's worker threads (``asyncio.to_thread``): enough of them, and a bounded exit.

Blocking file work (session files, turn diffs, patches, skills) runs in the event
loop's default executor. Its stock size is ``cpu_count + 4`` threads: six on a
two-core machine, so six stuck reads once stalled every session of a server
(issue 26). Reads no longer block (``codexcore.tools._safe_read``), but a thread
stuck in a system call for any other reason must neither starve the other sessions
nor keep the process alive after SIGTERM:

- a server runs with :data:`IO_THREADS` worker threads;
- at exit, after every session was shut down (rollouts closed, clients told), the
  threads get :data:`EXIT_GRACE` seconds to finish. A thread blocked in a system
  call cannot be interrupted from Python, and both ``asyncio.run`` and the
  interpreter's exit join every executor thread without a limit; so when one is
  still busy the process logs which and leaves with ``os._exit``. Nothing is lost
  that a normal exit would save: the sessions' work is already written and closed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from .._logging import get_logger

IO_THREADS = 64
EXIT_GRACE = 3.0
_PREFIX = "codexcore-io"

log = get_logger(__name__)


def use_io_threads() -> ThreadPoolExecutor:
    """Give the running loop a default executor of :data:`IO_THREADS` threads."""
    executor = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix=_PREFIX)
    asyncio.get_running_loop().set_default_executor(executor)
    return executor


async def release_io_threads(executor: ThreadPoolExecutor, code: int, grace: float) -> int:
    """``code`` once the worker threads have finished; if one is still busy after
    ``grace`` seconds, exit the process now with ``code`` (see the module's note)."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()

    def join() -> None:
        executor.shutdown(wait=True, cancel_futures=True)
        loop.call_soon_threadsafe(_settle, finished)

    # A daemon thread: if the join never ends, it does not hold the exit either.
    threading.Thread(target=join, name=f"{_PREFIX}-join", daemon=True).start()
    try:
        await asyncio.wait_for(asyncio.shield(finished), grace)
    except TimeoutError:
        busy = sorted(t.name for t in threading.enumerate() if t.name.startswith(_PREFIX + "_"))
        log.warning(
            f"{len(busy)} worker thread(s) still busy {grace} s after shutdown "
            "(stuck in a system call): left behind, exiting now",
            threads=busy,
        )
        # os._exit runs no atexit hook: write out the log lines still queued for
        # stderr (this one included) and stdio's buffers first.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
