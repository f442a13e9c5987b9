"""Logging: structlog for structured calls, stdlib logging for where they go.

The library configures nothing. Its loggers hand each entry to the stdlib
logger of the same name, so the host program decides levels and handlers (an
unconfigured program shows warnings on stderr and drops the rest, as for any
library). This matters because structlog left unconfigured prints to stdout,
which would corrupt a stdio protocol stream and surprise an IDE plugin.
The command line calls :func:`configure_cli_logging` to send everything to
stderr, through :class:`NonBlockingStderrHandler`: a log line never waits for
stderr, so a client that does not read it cannot stall a protocol server.
Secrets are never passed to a logger.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
from typing import IO, Any

LEVELS = ("debug", "info", "warning", "error")


class Logger:
    """A structlog logger writing to the stdlib logger ``name``, made on first use.

    The level is checked first, with the stdlib logger's own cheap test, so a
    debug call in a hot path costs one method call when debug is off, and
    structlog (about 40 ms to import) is loaded only by a program that
    actually logs something.
    """

    __slots__ = ("_bound", "_stdlib")

    def __init__(self, name: str) -> None:
        self._stdlib = logging.getLogger(name)
        self._bound: Any = None

    def debug(self, event: str, **fields: Any) -> None:
        self._log(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log(logging.ERROR, "error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """An error with the exception being handled (or ``exc_info=``) attached."""
        fields.setdefault("exc_info", True)
        self._log(logging.ERROR, "error", event, fields)

    def _log(self, level: int, method: str, event: str, fields: dict[str, Any]) -> None:
        if not self._stdlib.isEnabledFor(level):
            return
        if self._bound is None:
            self._bound = _structlog_logger(self._stdlib)
        getattr(self._bound, method)(event, **fields)


def _structlog_logger(stdlib: logging.Logger) -> Any:
    import structlog

    return structlog.wrap_logger(
        stdlib,
        processors=[structlog.stdlib.add_log_level, structlog.stdlib.render_to_log_kwargs],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


def get_logger(name: str) -> Logger:
    """The logger for module ``name`` (pass ``__name__``)."""
    return Logger(name)


def configure_cli_logging(level: str = "warning") -> None:
    """For the command line only: codexcore's logs go to stderr as key=value lines,
    never blocking the program (:class:`NonBlockingStderrHandler`)."""
    handler = NonBlockingStderrHandler(sys.stderr)
    handler.setFormatter(_KeyValueFormatter())
    root = logging.getLogger("codexcore")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


class _KeyValueFormatter(logging.Formatter):
    _RESERVED = frozenset(vars(logging.makeLogRecord({})))

    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in vars(record).items() if k not in self._RESERVED}
        extra.pop("level", None)
        fields = " ".join(f"{k}={v!r}" for k, v in extra.items())
        line = f"{record.levelname.lower():7} {record.name}: {record.getMessage()} {fields}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line.rstrip()


class NonBlockingStderrHandler(logging.Handler):
    """Writes log lines to ``stream`` from a thread of its own, so logging never waits
    for the stream: when its reader does not keep up (a client that never reads our
    stderr pipe), lines wait in a bounded queue and, once it is full, are dropped and
    counted; the next line written says how many were dropped.

    Why a thread, not ``O_NONBLOCK`` on fd 2: that flag belongs to the open file
    description, which stderr shares with the parent and every other process
    writing to it (a terminal, an editor's pipe); it would make their writes fail
    with EAGAIN. At exit, :meth:`close` lets the queue drain for at most
    ``exit_wait`` seconds: a stream nobody reads does not hold the exit up.
    """

    def __init__(self, stream: IO[str], *, limit: int = 4096, exit_wait: float = 2.0) -> None:
        super().__init__()
        self.stream = stream
        self.exit_wait = exit_wait
        self._queue: queue.Queue[tuple[int, str] | None] = queue.Queue(limit)
        self._dropped = 0  # since the last line queued; under self.lock
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()
        self._unwritten = 0

    @property
    def dropped(self) -> int:
        """Lines dropped since the last one queued."""
        return self._dropped

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
        except Exception:
            self.handleError(record)
            return
        if self._thread is None:
            self._start()
        # Handler.handle holds self.lock around emit: the count and the queue agree.
        try:
            self._queue.put_nowait((self._dropped, line))
        except queue.Full:
            self._dropped += 1
            return
        self._dropped = 0
        with self._idle:
            self._unwritten += 1

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._write_forever, name="codexcore-log", daemon=True
        )
        self._thread.start()

    def _write_forever(self) -> None:
        while (item := self._queue.get()) is not None:
            dropped, line = item
            if dropped:
                line = (
                    f"warning codexcore._logging: {dropped} log lines dropped "
                    "(stderr was not being read)\n" + line
                )
            try:
                self.stream.write(line)
                self.stream.flush()
            except (OSError, ValueError):
                pass  # stderr closed or gone: nowhere left to say so
            with self._idle:
                self._unwritten -= 1
                self._idle.notify_all()

    def flush(self) -> None:
        """Wait (at most ``exit_wait`` seconds) for the lines queued to be written."""
        with self._idle:
            self._idle.wait_for(lambda: self._unwritten <= 0, self.exit_wait)

    def close(self) -> None:
        self.flush()
        if self._thread is not None:
            with contextlib.suppress(queue.Full):  # else the daemon thread ends with us
                self._queue.put_nowait(None)
        super().close()
