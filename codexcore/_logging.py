"""Logging: structlog for structured calls, stdlib logging for where they go.

The library configures nothing. Its loggers hand each entry to the stdlib
logger of the same name, so the host program decides levels and handlers (an
unconfigured program shows warnings on stderr and drops the rest, as for any
library). This matters because structlog left unconfigured prints to stdout,
which would corrupt a stdio protocol stream and surprise an IDE plugin.
The command line calls :func:`configure_cli_logging` to send everything to
stderr. Secrets are never passed to a logger.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

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
    """For the command line only: codexcore's logs go to stderr as key=value lines."""
    handler = logging.StreamHandler(sys.stderr)
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
