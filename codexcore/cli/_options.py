"""The options every command takes, before its name or after it: ``--log-level``,
``--color`` and ``-c KEY=VALUE``.

The top-level parser holds their defaults. Each command's parser (and each of
its actions' parsers) takes them again with no default of its own, so a value
given after the command wins and one given before it is kept. ``-c`` given in
both places adds up: argparse gives a command's parser a fresh namespace, so
the two lists are kept under two names and joined by :func:`config_pairs`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import IO, Any

from .._logging import LEVELS

COLOR_CHOICES = ("auto", "always", "never")
VALUED = frozenset({"--log-level", "--color", "-c", "--config"})
"""The global options that take a value: the word after them is no command."""

_color = "auto"


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """The global options on the top-level parser, with their defaults."""
    _add(
        parser,
        log_level=os.environ.get("CODEXCORE_LOG", "warning").lower(),
        color="auto",
        config=[],
        config_dest="config_pairs",
    )


def add_to_commands(parser: argparse.ArgumentParser) -> None:
    """The global options again on every command's parser, however deep, without defaults."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _add(
                    command,
                    log_level=argparse.SUPPRESS,
                    color=argparse.SUPPRESS,
                    config=argparse.SUPPRESS,
                    config_dest="config_pairs_after",
                )
                add_to_commands(command)


def _add(
    parser: argparse.ArgumentParser, *, log_level: Any, color: Any, config: Any, config_dest: str
) -> None:
    options = parser.add_argument_group("global options (before or after the command)")
    options.add_argument(
        "--log-level",
        choices=LEVELS,
        default=log_level,
        help="what codexcore logs to stderr (default: $CODEXCORE_LOG or warning)",
    )
    options.add_argument(
        "--color",
        choices=COLOR_CHOICES,
        default=color,
        help="colour the output: auto (a terminal, unless $NO_COLOR is set), always, never",
    )
    options.add_argument(
        "-c",
        "--config",
        dest=config_dest,
        action="append",
        type=parse_pair,
        default=config,
        metavar="KEY=VALUE",
        help="override a setting of config.toml (repeatable; VALUE is TOML, else a string): "
        "-c model=gpt-5, -c network_access=true, -c 'provider.base_url=\"http://...\"'",
    )


def parse_pair(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as ``(key, value)``: the value parsed as TOML, else the text itself
    (``-c model=gpt-5`` needs no quotes; ``-c network_access=true`` is a boolean)."""
    key, equals, raw = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected KEY=VALUE, such as model=gpt-5 or provider.max_attempts=3"
        )
    import tomllib  # only when -c is given

    try:
        value: Any = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def config_pairs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """Every ``-c`` given, those before the command first."""
    before: list[tuple[str, Any]] = getattr(args, "config_pairs", [])
    after: list[tuple[str, Any]] = getattr(args, "config_pairs_after", [])
    return [*before, *after]


def settings_overrides(
    args: argparse.Namespace, flags: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What ``load_settings(overrides=...)`` takes: the ``-c`` settings (checked by
    :func:`~codexcore.cli.main` already), then the command's own flags over them."""
    overrides: dict[str, Any] = dict(getattr(args, "config_settings", {}))
    overrides.update({key: value for key, value in (flags or {}).items() if value is not None})
    return overrides


def set_color(choice: str) -> None:
    """Remember ``--color`` for every renderer this process makes."""
    global _color
    _color = choice


def use_color(stream: IO[str]) -> bool:
    """Whether to colour what goes to ``stream``: ``--color always|never``, else on a
    terminal when ``NO_COLOR`` is unset or empty (https://no-color.org)."""
    if _color != "auto":
        return _color == "always"
    return not os.environ.get("NO_COLOR") and stream.isatty()
