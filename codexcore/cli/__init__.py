"""The ``codexcore`` command line.

Each command lives in a module of its own (``_demo.py``, ``_schema.py`` …)
exposing ``register(subparsers)``, which adds its parser and sets ``run``
(``args -> exit code``) as the parser's default. Only the chosen command's
dependencies are imported.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from .._logging import LEVELS, configure_cli_logging

COMMANDS = ("demo", "doctor", "exec", "schema", "serve", "sessions")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codexcore",
        description="A Codex-style agent core: run a Task, serve the queue pair, "
        "inspect the protocol.",
    )
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default=os.environ.get("CODEXCORE_LOG", "warning").lower(),
        help="what codexcore logs to stderr (default: $CODEXCORE_LOG or warning)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"codexcore.cli._{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up builds long-lived objects (modules, classes): collecting while
    # they are made finds nothing. Commands call imports_done() once loaded.
    gc.disable()
    try:
        args = build_parser().parse_args(argv)
        if args.log_level not in LEVELS:
            print(f"codexcore: CODEXCORE_LOG must be one of {', '.join(LEVELS)}", file=sys.stderr)
            return 2
        configure_cli_logging(args.log_level)
        code: int = args.run(args)
        return code
    finally:
        # Nothing lives on after a command: spare the interpreter's exit a
        # full sweep of every object (about 80 ms after a Task here).
        gc.freeze()


def imports_done() -> None:
    """Collect again, ignoring everything start-up made (it lives until exit anyway)."""
    gc.freeze()
    gc.enable()
