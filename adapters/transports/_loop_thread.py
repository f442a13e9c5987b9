"""An asyncio event loop on a thread of its own, for the blocking faces.

:class:`~codexcore.adapters.threads.CodexThread` (an engine) and
:class:`~codexcore.adapters.client.RemoteCodexThread` (a client) both run
their async object on a loop that no caller owns, so they work whether or not
the calling program runs a loop, and the caller never blocks it. This is that
loop's thread, written once: start it, learn when the async side is ready (or
why it could not be), reach its loop, wait for its end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from codexcore._logging import get_logger

T = TypeVar("T")

Main = Callable[["concurrent.futures.Future[T]"], Coroutine[Any, Any, None]]


class LoopThread(Generic[T]):
    """Runs ``main(ready)`` on a new event loop in a thread named ``name``.

    ``main`` sets ``ready`` (a result, or the exception that kept it from
    starting) and returns when its work is over; the loop is then closed.
    :meth:`start` blocks until ``ready`` is set and returns its result, or
    joins the thread and raises. An exception that escapes ``main`` is logged
    under ``logger`` as ``what`` and, if ``ready`` was not set yet, raised by
    :meth:`start`.
    """

    def __init__(self, main: Main[T], *, name: str, logger: str, what: str) -> None:
        self._main = main
        self._name = name
        self._log = get_logger(logger)
        self._what = what
        self.loop: asyncio.AbstractEventLoop | None = None
        """The thread's loop once it runs (for ``call_soon_threadsafe`` and the like)."""
        self.stopped: concurrent.futures.Future[None] = concurrent.futures.Future()
        """Done once the loop is closed."""
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> T:
        if self._thread is not None:
            raise RuntimeError(f"{self._name}: started twice")
        ready: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(ready,), name=self._name)
        self._thread.start()
        try:
            return ready.result()
        except BaseException:
            self._thread.join()
            raise

    def join(self, timeout: float | None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, ready: concurrent.futures.Future[T]) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        except BaseException as exc:  # surfaced to start() if it never got ready
            if not ready.done():
                ready.set_exception(exc)
            self._log.exception(self._what)
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self.stopped.set_result(None)
