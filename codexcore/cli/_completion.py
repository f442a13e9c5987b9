"""``codexcore completion``: print a shell completion script for bash, zsh or fish.

The script is made from the command line's own parser: every command, action and
option, and the values of options that take a fixed set. Load it in the shell's
start-up file::

    bash  ~/.bashrc:                    eval "$(codexcore completion bash)"
    zsh   ~/.zshrc (after compinit):    eval "$(codexcore completion zsh)"
    fish  ~/.config/fish/config.fish:   codexcore completion fish | source
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from typing import Any

import attrs

from . import SUMMARIES, plain

SHELLS = ("bash", "zsh", "fish")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "completion",
        help=SUMMARIES["completion"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from . import build_parser

    commands = tuple(walk(build_parser(), ()))
    script = {"bash": bash, "zsh": zsh, "fish": fish}[args.shell](commands)
    print(script, end="")
    return 0


@attrs.frozen
class Option:
    names: tuple[str, ...]
    help: str
    choices: tuple[str, ...]
    takes_value: bool


@attrs.frozen
class Command:
    """One parser of the tree: its path of command words, children and options."""

    path: tuple[str, ...]
    children: tuple[tuple[str, str], ...]  # (name, summary)
    options: tuple[Option, ...]


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[Command]:
    children: list[tuple[str, str]] = []
    nested: list[tuple[str, argparse.ArgumentParser]] = []
    options: list[Option] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                children.append((name, summaries.get(name, "")))
                nested.append((name, child))
        elif action.option_strings:
            options.append(
                Option(
                    tuple(action.option_strings),
                    _one_line(action.help),
                    tuple(str(c) for c in action.choices or ()),
                    action.nargs != 0,
                )
            )
    yield Command(path, tuple(children), tuple(options))
    for name, child in nested:
        yield from walk(child, (*path, name))


def _one_line(text: str | None) -> str:
    if not text or text == argparse.SUPPRESS:
        return ""
    return " ".join(text.split()).split(" (", 1)[0].replace("%%", "%")


def _words(command: Command) -> str:
    return " ".join([name for name, _ in command.children] + list(_option_names(command)))


def _option_names(command: Command) -> Iterator[str]:
    for option in command.options:
        yield from option.names


def _key(path: tuple[str, ...]) -> str:
    """How the scripts name a command: its words after the program's (bash arrays
    take no empty key, so the program's own name is the root)."""
    return " ".join(("codexcore", *path))


def _valued(commands: tuple[Command, ...]) -> dict[str, str]:
    """``"PATH|OPTION"`` → the values it takes (empty: any value) for each valued option."""
    valued: dict[str, str] = {}
    for command in commands:
        for option in command.options:
            if option.takes_value:
                for name in option.names:
                    valued[_key(command.path) + "|" + name] = " ".join(option.choices)
    return valued


def bash(commands: tuple[Command, ...]) -> str:
    words = "\n".join(
        f"    [{shlex.quote(_key(c.path))}]={shlex.quote(_words(c))}" for c in commands
    )
    valued = "\n".join(
        f"    [{shlex.quote(key)}]={shlex.quote(values)}"
        for key, values in _valued(commands).items()
    )
    return _BASH.format(words=words, valued=valued)


# Walks the words before the cursor: a word that names a child of the current path
# extends it; an option that takes a value skips the word after it.
_BASH = """\
# bash completion for codexcore (codexcore completion bash)
declare -gA _codexcore_words=(
{words}
)
declare -gA _codexcore_valued=(
{valued}
)
_codexcore() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path=codexcore word next i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        if [[ -v "_codexcore_valued[$path|$word]" ]]; then
            ((i++))
            continue
        fi
        next="$path $word"
        [[ -v "_codexcore_words[$next]" ]] && path="$next"
    done
    local previous="${{COMP_WORDS[COMP_CWORD-1]}}"
    if ((COMP_CWORD > 1)) && [[ -v "_codexcore_valued[$path|$previous]" ]]; then
        local values="${{_codexcore_valued[$path|$previous]}}"
        if [[ -n "$values" ]]; then
            mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        fi
        return 0
    fi
    mapfile -t COMPREPLY < <(compgen -W "${{_codexcore_words[$path]}}" -- "$cur")
}}
complete -o default -F _codexcore codexcore
"""


def zsh(commands: tuple[Command, ...]) -> str:
    words = "\n".join(f"    {_zsh_quote(_key(c.path))} {_zsh_quote(_words(c))}" for c in commands)
    valued = "\n".join(
        f"    {_zsh_quote(key)} {_zsh_quote(values)}" for key, values in _valued(commands).items()
    )
    return _ZSH.format(words=words, valued=valued)


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# The same walk as bash's, over zsh's $words and $CURRENT.
_ZSH = """\
#compdef codexcore
# zsh completion for codexcore (codexcore completion zsh)
typeset -gA _codexcore_words _codexcore_valued
_codexcore_words=(
{words}
)
_codexcore_valued=(
{valued}
)
_codexcore() {{
    local path_=codexcore word next i
    for ((i = 2; i < CURRENT; i++)); do
        word="${{words[i]}}"
        if (( ${{+_codexcore_valued[$path_|$word]}} )); then
            ((i++))
            continue
        fi
        next="$path_ $word"
        (( ${{+_codexcore_words[$next]}} )) && path_="$next"
    done
    local previous="${{words[CURRENT-1]}}"
    if (( CURRENT > 2 && ${{+_codexcore_valued[$path_|$previous]}} )); then
        local values="${{_codexcore_valued[$path_|$previous]}}"
        if [[ -n "$values" ]]; then
            compadd -- ${{=values}}
        else
            _files
        fi
        return
    fi
    compadd -- ${{=_codexcore_words[$path_]}}
}}
compdef _codexcore codexcore
"""


def fish(commands: tuple[Command, ...]) -> str:
    lines = ["# fish completion for codexcore (codexcore completion fish)"]
    lines.append("complete -c codexcore -f")
    for command in commands:
        condition = _fish_condition(command)
        for name, summary in command.children:
            lines.append(
                f"complete -c codexcore -n {shlex.quote(condition)} -a {shlex.quote(name)}"
                + (f" -d {shlex.quote(summary)}" if summary else "")
            )
        for option in command.options:
            lines.append(f"complete -c codexcore -n {shlex.quote(condition)}" + _fish(option))
    return "\n".join(lines) + "\n"


def _fish_condition(command: Command) -> str:
    """Fish's test that the words typed so far reach ``command``'s path and go no deeper."""
    if not command.path:
        return "__fish_use_subcommand"
    tests = [f"__fish_seen_subcommand_from {word}" for word in command.path]
    if command.children:
        tests.append(
            "not __fish_seen_subcommand_from " + " ".join(name for name, _ in command.children)
        )
    return "; and ".join(tests)


def _fish(option: Option) -> str:
    text = ""
    for name in option.names:
        text += f" -l {name[2:]}" if name.startswith("--") else f" -s {name[1:]}"
    if option.choices:
        text += f" -x -a {shlex.quote(' '.join(option.choices))}"
    elif option.takes_value:
        text += " -r -F"
    if option.help:
        text += f" -d {shlex.quote(option.help)}"
    return text
