"""The ``codexcore`` command line.

Each command lives in a module of its own (``_demo.py``, ``_schema.py`` …)
exposing ``register(subparsers)``, which adds its parser and sets ``run``
(``args -> exit code``) as the parser's default. Only the chosen command's
dependencies are imported. Help texts come from the modules' docstrings,
written in reStructuredText for the API docs; :func:`plain` turns them into the
plain text a terminal shows.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._logging import LEVELS, configure_cli_logging

COMMANDS = ("acp", "control", "demo", "doctor", "exec", "schema", "serve", "sessions")

# ``text``, and :role:`target` with its optional ~ (show the last name only) and
# the backslash-space that glues a role to a plural ("Submission\\ s").
_RST_MARKUP = re.compile(r"(?::[a-z]+(?::[a-z]+)?:`(~?)([^`]+)`|``([^`]+)``)(?:\\ )?")


def plain(text: str | None) -> str:
    """``text`` (a docstring) without reStructuredText markup: ``x`` and :role:`x` become x.

    A role's target is shown as the API docs show it: :class:`~codexcore.Codex`
    as Codex, :mod:`codexcore.protocol` whole.
    """
    return _RST_MARKUP.sub(_unmarked, text or "")


def _unmarked(match: re.Match[str]) -> str:
    tilde, target, literal = match.groups()
    if literal is not None:
        return literal
    return target.rsplit(".", 1)[-1] if tilde else target


def version() -> str:
    """The installed distribution's version; the source tree's when it is not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("codexcore")
    except PackageNotFoundError:  # run from a checkout without pip install
        from .. import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version``: reads the package metadata only when asked (it costs ~25 ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        print(f"codexcore {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codexcore",
        description="A Codex-style agent core: run a Task, serve the queue pair, "
        "inspect the protocol.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
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
        sys.stdout.flush()  # inside the try: a pipe closed early fails here
        return code
    except BrokenPipeError:
        # `codexcore doctor | head`: the reader left, which is no error of ours.
        # Point stdout at /dev/null so the interpreter's final flush is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a writer killed by SIGPIPE
    finally:
        # Nothing lives on after a command: spare the interpreter's exit a
        # full sweep of every object (about 80 ms after a Task here).
        gc.freeze()


def imports_done() -> None:
    """Collect again, ignoring everything start-up made (it lives until exit anyway)."""
    gc.freeze()
    gc.enable()
