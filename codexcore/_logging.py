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

import structlog

_PROCESSORS: list[Any] = [
    structlog.stdlib.filter_by_level,  # drop disabled levels before any work
    structlog.stdlib.add_log_level,
    structlog.stdlib.render_to_log_kwargs,
]

LEVELS = ("debug", "info", "warning", "error")


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger writing to the stdlib logger ``name``."""
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    return logger


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
