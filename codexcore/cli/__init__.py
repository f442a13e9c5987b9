"""The ``codexcore`` command line.

Each command lives in a module of its own (``_demo.py``, ``_schema.py`` …)
exposing ``register(subparsers)``, which adds its parser and sets ``run``
(``args -> exit code``) as the parser's default. Only the chosen command's
module (and so its dependencies) is imported: the others appear in the
parser by their one-line summary alone (:data:`SUMMARIES`). Help texts come
from the modules' docstrings, written in reStructuredText for the API docs;
:func:`plain` turns them into the plain text a terminal shows.
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
from ._options import VALUED, add_global_options, add_to_commands, config_pairs, set_color

COMMANDS = (
    "acp",
    "app-server",
    "completion",
    "control",
    "demo",
    "doctor",
    "exec",
    "schema",
    "serve",
    "sessions",
)

SUMMARIES = {
    "acp": "be an Agent Client Protocol agent on stdio (Zed, JetBrains, Neovim)",
    "app-server": "speak Codex's app-server protocol on stdio (clients written for Codex)",
    "completion": "print a shell completion script (bash, zsh or fish)",
    "control": "give a live session input, or interrupt it (ATM-style control messages)",
    "demo": "run one Task offline against an embedded scripted model",
    "doctor": "check the configuration and reach the model provider",
    "exec": "run one Task in the terminal",
    "schema": "print the JSON Schema (draft 2020-12) of every Submission and Event",
    "serve": "serve the Submission/Event queue pair over stdio, TCP or a Unix socket",
    "sessions": "list, show or prune recorded sessions",
}
"""Each command's ``help``, which its module registers: ``codexcore --help`` lists the
commands without importing their modules. A command missing here is imported whenever
the parser is built (correct, only slower)."""

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


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser, every command in full; given the ``argv`` it will parse,
    only the command ``argv`` names is built in full (none for ``codexcore --help``)."""
    chosen = None if argv is None else _named_command(argv)
    parser = argparse.ArgumentParser(
        prog="codexcore",
        description="A Codex-style agent core: run a Task, serve the queue pair, "
        "inspect the protocol.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    add_global_options(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        if argv is not None and name != chosen and name in SUMMARIES:
            subparsers.add_parser(name, help=SUMMARIES[name], add_help=False)
        else:
            importlib.import_module(f"codexcore.cli._{name.replace('-', '_')}").register(subparsers)
    add_to_commands(parser)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (nor the value
    of a global option), if that is a command."""
    words = iter(argv)
    for word in words:
        if word in VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up builds long-lived objects (modules, classes): collecting while
    # they are made finds nothing. Commands call imports_done() once loaded.
    gc.disable()
    try:
        words = sys.argv[1:] if argv is None else argv
        args = build_parser(words).parse_args(words)
        if args.log_level not in LEVELS:
            print(f"codexcore: CODEXCORE_LOG must be one of {', '.join(LEVELS)}", file=sys.stderr)
            return 2
        configure_cli_logging(args.log_level)
        set_color(args.color)
        if pairs := config_pairs(args):
            from ..config import ConfigError, command_line_settings

            try:
                args.config_settings = command_line_settings(pairs)
            except ConfigError as exc:
                print(f"codexcore: {exc}", file=sys.stderr)
                return 2
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
