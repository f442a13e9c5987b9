"""The blocking faces' event-loop thread (``adapters/transports/_loop_thread.py``): a failure to
start reaches the caller instead of hanging it, and the thread is gone afterwards."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from codexcore.adapters.transports._loop_thread import LoopThread


def _alive(name: str) -> bool:
    return any(thread.name == name for thread in threading.enumerate())


def test_start_returns_what_main_made_ready_and_the_loop_ends_with_main() -> None:
    release = threading.Event()

    async def main(ready: concurrent.futures.Future[str]) -> None:
        ready.set_result("up")
        await asyncio.get_running_loop().run_in_executor(None, release.wait)

    runner: LoopThread[str] = LoopThread(main, name="lt-ok", logger=__name__, what="failed")
    assert runner.start() == "up"
    assert runner.loop is not None
    assert runner.loop.is_running()
    assert not runner.stopped.done()
    release.set()
    runner.stopped.result(5)
    runner.join(5)
    assert runner.loop.is_closed()
    assert not _alive("lt-ok")
    with pytest.raises(RuntimeError, match="started twice"):
        runner.start()


def test_a_main_that_fails_before_ready_raises_from_start_and_leaves_no_thread() -> None:
    async def main(ready: concurrent.futures.Future[None]) -> None:
        raise OSError("no such socket")

    runner: LoopThread[None] = LoopThread(main, name="lt-bad", logger=__name__, what="failed")
    with pytest.raises(OSError, match="no such socket"):
        runner.start()
    assert runner.stopped.done()
    assert not _alive("lt-bad")
