"""The blocking face of the client library: :class:`RemoteCodexThread`, a
:class:`~codexcore.adapters.client.RemoteCodex` on an event loop of its own thread, for
programs without one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import ssl as _ssl
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from codexcore._logging import get_logger
from codexcore.adapters.control._sender import SenderOptions
from codexcore.adapters.transports._loop_thread import LoopThread
from codexcore.engine import EngineClosed
from codexcore.protocol import Event, Op, Welcome

from ._async import RemoteCodex
from ._link import DEFAULT_MAX_LINE_BYTES
from ._types import ClientOptions, StdioOptions

if TYPE_CHECKING:
    from ._tools import ClientTools

_LOGGER = "codexcore.adapters.client"  # the public module's name, as before the split
log = get_logger(_LOGGER)

T = TypeVar("T")


class RemoteCodexThread:
    """A :class:`RemoteCodex` on a thread of its own, with blocking methods.

    The shape of :class:`~codexcore.adapters.threads.CodexThread`: ``submit``
    returns the id; ``next_event(timeout)`` blocks until an event arrives or
    ``timeout`` (seconds) passes (:class:`TimeoutError`), and raises
    :class:`~codexcore.EngineClosed` once the stream has ended (or the
    client's error, as :meth:`RemoteCodex.next_event` does); iterating yields
    every event until then. ``on_notice`` is called in the thread that calls
    ``next_event``. ``close`` (or leaving the ``with`` block) is
    :meth:`RemoteCodex.aclose`; it is idempotent. Any thread may call any method.

        with RemoteCodexThread.connect_unix(path) as codex:
            codex.submit(UserInput((TextInput("list the files"),)))
            for event in codex:
                ...
    """

    def __init__(
        self, open: Callable[[], Awaitable[RemoteCodex]], *, name: str = "codexcore-client"
    ) -> None:
        self._open = open
        self._client: RemoteCodex | None = None
        self._runner: LoopThread[RemoteCodex] = LoopThread(
            self._main, name=name, logger=_LOGGER, what="client thread failed"
        )
        self._stop: asyncio.Event | None = None
        self._detach = False
        self._close_lock = threading.Lock()

    @classmethod
    def connect_tcp(
        cls,
        host: str,
        port: int,
        *,
        token: str,
        ssl: _ssl.SSLContext | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        **options: Unpack[ClientOptions],
    ) -> RemoteCodexThread:
        """Connect as :meth:`RemoteCodex.connect_tcp` does (same options); started."""
        return cls(
            lambda: RemoteCodex.connect_tcp(
                host, port, token=token, ssl=ssl, max_line_bytes=max_line_bytes, **options
            )
        ).start()

    @classmethod
    def connect_unix(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        token: str | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        **options: Unpack[ClientOptions],
    ) -> RemoteCodexThread:
        """Connect as :meth:`RemoteCodex.connect_unix` does (same options); started."""
        return cls(
            lambda: RemoteCodex.connect_unix(
                path, token=token, max_line_bytes=max_line_bytes, **options
            )
        ).start()

    @classmethod
    def spawn_stdio(
        cls,
        argv: Sequence[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        on_stderr: Callable[[str], None] | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        **options: Unpack[StdioOptions],
    ) -> RemoteCodexThread:
        """Spawn as :meth:`RemoteCodex.spawn_stdio` does (same options); started."""
        return cls(
            lambda: RemoteCodex.spawn_stdio(
                argv,
                env=env,
                cwd=cwd,
                on_stderr=on_stderr,
                max_line_bytes=max_line_bytes,
                **options,
            )
        ).start()

    def start(self) -> RemoteCodexThread:
        """Start the client's thread and connect; raises what connecting raises."""
        if self._runner.started:
            raise RuntimeError("RemoteCodexThread.start() called twice")
        self._client = self._runner.start()
        return self

    def __enter__(self) -> RemoteCodexThread:
        return self if self._runner.started else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _main(self, ready: concurrent.futures.Future[RemoteCodex]) -> None:
        try:
            client = await self._open()
        except BaseException as exc:
            ready.set_exception(exc)
            return
        self._stop = asyncio.Event()
        ready.set_result(client)
        await self._stop.wait()
        if self._detach:
            await client.detach()
        else:
            await client.aclose()

    def _require(self) -> RemoteCodex:
        if self._client is None:
            raise RuntimeError("the client is not started: use `with RemoteCodexThread...`")
        return self._client

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        loop = self._runner.loop
        if loop is None or loop.is_closed() or self._stop is None or self._stop.is_set():
            coro.close()
            raise EngineClosed("the client is closed")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    # --- the queue pair, blocking ----------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._require().session_id

    @property
    def last_seq(self) -> int | None:
        return self._require().last_seq

    @property
    def control(self) -> bool:
        return self._require().control

    @property
    def tools(self) -> ClientTools:
        """The local functions this client offers the model (:attr:`RemoteCodex.tools`);
        ``add`` and ``remove`` from any thread. Sync functions run on a worker thread,
        async ones on the client's thread."""
        return self._require().tools

    @property
    def welcome(self) -> Welcome | None:
        return self._require().welcome

    def submit(self, op: Op, *, id: str | None = None, timeout: float | None = None) -> str:
        """Send ``op``; returns its submission id (see :meth:`RemoteCodex.submit`)."""
        return self._call(self._require().submit(op, id=id), timeout)

    def next_event(self, timeout: float | None = None) -> Event:
        return self._require()._next_blocking(timeout)

    def __iter__(self) -> Iterator[Event]:
        """Every event until the stream ends (after ``shutdown_complete``)."""
        while True:
            try:
                yield self.next_event()
            except EngineClosed:
                return

    def reconnect(self, *, take_control: bool = False) -> None:
        """See :meth:`RemoteCodex.reconnect`."""
        self._call(self._require().reconnect(take_control=take_control), None)

    def control_stdin(
        self, text: str, sender: SenderOptions, *, timeout: float | None = None, **target: Any
    ) -> dict[str, Any]:
        """:meth:`RemoteCodex.control_stdin`, blocking; the ack."""
        return self._call(self._require().control_stdin(text, sender, **target), timeout)

    def control_interrupt(
        self, sender: SenderOptions, *, timeout: float | None = None, **target: Any
    ) -> dict[str, Any]:
        """:meth:`RemoteCodex.control_interrupt`, blocking; the ack."""
        return self._call(self._require().control_interrupt(sender, **target), timeout)

    # --- teardown --------------------------------------------------------------------------------

    def close(self, timeout: float | None = 30.0) -> None:
        """:meth:`RemoteCodex.aclose` on the client's thread, then join it."""
        self._shut(detach=False, timeout=timeout)

    def detach(self, timeout: float | None = 30.0) -> None:
        """:meth:`RemoteCodex.detach` on the client's thread, then join it."""
        self._shut(detach=True, timeout=timeout)

    def _shut(self, *, detach: bool, timeout: float | None) -> None:
        with self._close_lock:
            runner, loop, stop = self._runner, self._runner.loop, self._stop
            if not runner.started:
                return
            if loop is not None and stop is not None and not stop.is_set():
                self._detach = detach
                with contextlib.suppress(RuntimeError):  # the loop is already closed
                    loop.call_soon_threadsafe(stop.set)
            runner.join(timeout)
