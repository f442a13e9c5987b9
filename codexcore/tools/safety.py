"""The known-safe command classifier: which commands may run without asking.

Under the ``untrusted`` approval policy only commands that cannot change anything
run unasked. :func:`is_known_safe_command` recognises them from their argv alone,
and answers ``False`` whenever it is not sure: a false "unsafe" costs the user one
approval click, a false "safe" can cost their files.

The rules are data: ``_RULES`` maps a command name to a :class:`_Rule` whose check
judges the arguments. To allow a command, add a row there.

Decisions worth knowing:

* A command given by path counts as its basename only in a standard system binary
  directory (``/bin/ls`` is ``ls``); ``./ls`` or ``/tmp/ls`` could be anything, so
  they are never safe.
* ``bash``/``sh``/``zsh`` with exactly ``-c SCRIPT`` or ``-lc SCRIPT`` are safe when
  SCRIPT parses, in a deliberately small subset of shell, into simple commands
  that are each safe, joined by ``&&``, ``||``, ``;``, ``|`` or newlines. Quoting
  and backslash escapes are understood; redirections, ``$`` in any form, backticks,
  ``( )``, ``{ }``, background ``&``, comments, and assignments (which are never a
  known command name) are rejected.
* In a script, an unquoted glob (``*``, ``?``, ``[``) is accepted only as an
  argument to commands for which every argument is safe: the shell expands it to
  file names, and a file named ``-delete`` or ``-i`` would turn ``find . *`` or
  ``sed -n 1p *`` into something else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from attrs import frozen

from codexcore.protocol._value import Value

__all__ = ["is_known_safe_command"]

ArgsCheck = Callable[[Sequence[str]], bool]
"""Judges a command's arguments (argv without the command name)."""


def is_known_safe_command(argv: Sequence[str]) -> bool:
    """True only if ``argv`` is known to be read-only (see the module docstring).

    Never raises: an empty argv, an unknown command, or a shell script outside the
    understood subset is simply not safe.
    """
    if not argv:
        return False
    return _is_safe_simple_command([_Word(arg) for arg in argv])


@frozen(repr=False, eq=False)
class _Word(Value):
    """One argv element; ``globbed`` if a shell would expand it as a file pattern."""

    text: str
    globbed: bool = False


@frozen(repr=False, eq=False)
class _Rule(Value):
    """How one command is judged.

    ``globs_ok`` is True only when ``check`` accepts any argument whatsoever, since
    only then can a shell glob, whatever it expands to, not change the verdict.
    """

    check: ArgsCheck
    globs_ok: bool = False


def _is_safe_simple_command(words: Sequence[_Word]) -> bool:
    name_word, *arg_words = words
    name = None if name_word.globbed else _command_name(name_word.text)
    rule = None if name is None else _RULES.get(name)
    if rule is None:
        return False
    if not rule.globs_ok and any(word.globbed for word in arg_words):
        return False
    return rule.check([word.text for word in arg_words])


# The usual homes of system commands; /usr/local/bin is on every default PATH anyway.
_TRUSTED_BIN_DIRS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin"})


def _command_name(word: str) -> str | None:
    """The table key for a command word, or None if its path is not trusted."""
    if "/" not in word:
        return word
    directory, _, name = word.rpartition("/")
    return name if directory in _TRUSTED_BIN_DIRS else None


# ---------------------------------------------------------------------------
# Option parsing, just enough of GNU getopt_long to find options and operands.


@frozen(repr=False, eq=False)
class _Getopt(Value):
    """Splits arguments into options and operands the way a GNU tool would.

    It errs on the side of inspecting too much: a word is skipped as an option's
    argument only if the option is listed here as taking one, so a word it does not
    know about is looked at as an option or counted as an operand. Options come
    back as ``-x`` (one per letter of a cluster) or ``--name`` (without ``=value``).
    """

    # Letters whose argument is the rest of the cluster, or else the next word.
    short_with_arg: str = ""
    # Letters whose optional argument can only be the rest of the cluster.
    short_optional_arg: str = ""
    # Exact long names whose argument may be the next word (``--name value``).
    long_with_arg: frozenset[str] = frozenset()

    def split(self, args: Sequence[str]) -> tuple[list[str], list[str]]:
        """(options, operands) of ``args``; GNU tools permute, so options may follow operands."""
        options: list[str] = []
        operands: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--":
                operands.extend(args[index:])
                break
            if arg.startswith("--"):
                name, has_value, _ = arg.partition("=")
                options.append(name)
                if not has_value and name in self.long_with_arg:
                    index += 1  # "--name value"
            elif arg.startswith("-") and arg != "-":
                letters, takes_next = self._cluster(arg[1:])
                options.extend(f"-{letter}" for letter in letters)
                if takes_next:
                    index += 1
            else:
                operands.append(arg)
        return options, operands

    def _cluster(self, cluster: str) -> tuple[str, bool]:
        """The option letters of ``-<cluster>``, and whether the next word is an argument."""
        for index, letter in enumerate(cluster):
            if letter in self.short_with_arg:
                return cluster[: index + 1], index == len(cluster) - 1
            if letter in self.short_optional_arg:
                return cluster[: index + 1], False
        return cluster, False


def _mentions(options: Sequence[str], *, short: str = "", long: Sequence[str] = ()) -> bool:
    """Whether ``options`` include a ``short`` letter or a ``long`` name.

    GNU tools (and git) accept any unambiguous prefix of a long option, so
    ``--out`` counts as ``--output``.
    """
    for option in options:
        if option.startswith("--"):
            if len(option) > 2 and any(name.startswith(option) for name in long):
                return True
        elif len(option) == 2 and option[1] in short:
            return True
    return False


_PLAIN_GETOPT = _Getopt()


def _without(
    *, short: str = "", long: Sequence[str] = (), getopt: _Getopt = _PLAIN_GETOPT
) -> ArgsCheck:
    """A check that accepts any arguments but the given options."""

    def check(args: Sequence[str]) -> bool:
        options, _ = getopt.split(args)
        return not _mentions(options, short=short, long=long)

    return check


# ---------------------------------------------------------------------------
# Per-command checks.


def _any_args(args: Sequence[str]) -> bool:
    return True


_DATE_GETOPT = _Getopt(
    short_with_arg="dfr",
    short_optional_arg="I",
    long_with_arg=frozenset({"--date", "--file", "--reference"}),
)


def _date_ok(args: Sequence[str]) -> bool:
    """``date`` that only prints: no ``-s``/``--set``, and no ``MMDDhhmm`` operand
    (which sets the clock too); the only operand allowed is a ``+FORMAT``."""
    options, operands = _DATE_GETOPT.split(args)
    return not _mentions(options, short="s", long=("--set",)) and all(
        operand.startswith("+") for operand in operands
    )


# -fprint* and -fls write files; -exec*/-ok* run programs; -delete deletes.
_FIND_UNSAFE_PREDICATES = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fls"})


def _find_ok(args: Sequence[str]) -> bool:
    return not any(arg in _FIND_UNSAFE_PREDICATES or arg.startswith("-fprint") for arg in args)


_SED_PRINT_SCRIPT = re.compile(r"([0-9]+|\$)(,([0-9]+|\$))?p")


def _sed_prints_lines(args: Sequence[str]) -> bool:
    """Only ``sed -n <N>p|<M>,<N>p [FILE...]``; files may not look like options,
    because GNU sed would read ``-i`` anywhere on the line as in-place editing."""
    return (
        len(args) >= 2
        and args[0] == "-n"
        and _SED_PRINT_SCRIPT.fullmatch(args[1]) is not None
        and not any(arg.startswith("-") for arg in args[2:])
    )


_UNIQ_GETOPT = _Getopt(
    short_with_arg="fsw",
    long_with_arg=frozenset({"--skip-fields", "--skip-chars", "--check-chars"}),
)


def _uniq_ok(args: Sequence[str]) -> bool:
    """``uniq [INPUT]``: a second operand is an OUTPUT file it would overwrite."""
    _, operands = _UNIQ_GETOPT.split(args)
    return len(operands) <= 1


# Global options that only change presentation. Everything else before the
# subcommand is refused: -c/--config-env set config that can name programs to run
# (core.pager, diff.external, ...), --exec-path/--git-dir/--work-tree redirect git.
_GIT_SAFE_GLOBAL_FLAGS = frozenset({"--no-pager", "-P", "--no-optional-locks"})
# `branch` lists with these; anything else (a name, -d, -m, -c, -f, -u) changes refs.
_GIT_BRANCH_LIST_FLAGS = frozenset(
    {"--all", "--remotes", "--verbose", "--list", "--show-current", "--no-color", "--color"}
)
_GIT_BRANCH_LIST_CLUSTER = re.compile(r"-[alrv]+")

# --output writes a file; --ext-diff runs the configured external diff program.
_git_diff_family_ok = _without(long=("--output", "--ext-diff"))


def _git_branch_lists(args: Sequence[str]) -> bool:
    return all(
        arg in _GIT_BRANCH_LIST_FLAGS or _GIT_BRANCH_LIST_CLUSTER.fullmatch(arg) for arg in args
    )


_GIT_SUBCOMMANDS: Mapping[str, ArgsCheck] = {
    "status": _any_args,
    "log": _git_diff_family_ok,
    "diff": _git_diff_family_ok,
    "show": _git_diff_family_ok,
    "branch": _git_branch_lists,
}


def _git_ok(args: Sequence[str]) -> bool:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        if args[index] in _GIT_SAFE_GLOBAL_FLAGS:
            index += 1
        elif args[index] == "-C":  # run as if started in <path>: still read-only
            index += 2
        else:
            return False
    if index >= len(args):
        return False
    check = _GIT_SUBCOMMANDS.get(args[index])
    return check is not None and check(args[index + 1 :])


_SHELL_SCRIPT_FLAGS = frozenset({"-c", "-lc"})


def _shell_script_ok(args: Sequence[str]) -> bool:
    """``-c SCRIPT`` or ``-lc SCRIPT`` and nothing more, with a safe SCRIPT."""
    if len(args) != 2 or args[0] not in _SHELL_SCRIPT_FLAGS:
        return False
    try:
        commands = _parse_script(args[1])
    except _UnsupportedSyntax:
        return False
    return all(_is_safe_simple_command(command) for command in commands)


# ---------------------------------------------------------------------------
# The table.

_ANY = _Rule(_any_args, globs_ok=True)
_SHELL = _Rule(_shell_script_ok)

_RULES: Mapping[str, _Rule] = {
    # Read-only whatever the arguments: none of their options writes or executes.
    "cat": _ANY,
    "cut": _ANY,
    "echo": _ANY,
    "false": _ANY,
    "grep": _ANY,
    "head": _ANY,
    "ls": _ANY,
    "nl": _ANY,
    "pwd": _ANY,
    "stat": _ANY,
    "tail": _ANY,
    "tr": _ANY,
    "true": _ANY,
    "wc": _ANY,
    "which": _ANY,
    "whoami": _ANY,
    # Read-only unless given particular options or operands.
    "date": _Rule(_date_ok),
    "file": _Rule(_without(short="C", long=("--compile",))),  # -C writes a magic .mgc file
    "find": _Rule(_find_ok),
    # --pre and --hostname-bin run a program; -z/--search-zip run decompressors.
    "rg": _Rule(_without(short="z", long=("--pre", "--hostname-bin", "--search-zip"))),
    "sed": _Rule(_sed_prints_lines),
    # -o/--output write a file; --compress-program runs one.
    "sort": _Rule(
        _without(
            short="o",
            long=("--output", "--compress-program"),
            getopt=_Getopt(short_with_arg="kStT"),
        )
    ),
    "uniq": _Rule(_uniq_ok),
    "git": _Rule(_git_ok),  # status, log, diff, show, and branch listing
    # Shells, when running a script made only of the commands above.
    "bash": _SHELL,
    "sh": _SHELL,
    "zsh": _SHELL,
}


# ---------------------------------------------------------------------------
# The shell subset.


class _UnsupportedSyntax(Exception):
    """The script uses shell syntax outside the subset this module understands."""


_Token = _Word | str  # a word, or an operator: "&&", "||", ";", "|" or "\n"

_BLANKS = frozenset(" \t")
_GLOB_CHARS = frozenset("*?[")
# Redirections, substitutions and expansions of every kind, subshells and groups,
# and brace expansion ({rm,-rf,x} is a command): anything the subset leaves out.
_REJECTED_CHARS = frozenset("<>()${}`")
# Inside double quotes a backslash escapes only these (POSIX); otherwise it is literal.
_DQUOTE_ESCAPABLE = frozenset('$`"\\\n')


class _Lexer:
    """Splits a script into words and operators, refusing unsupported syntax."""

    def __init__(self, script: str) -> None:
        self._src = script
        self._pos = 0
        self._tokens: list[_Token] = []
        self._text: list[str] = []
        self._in_word = False
        self._globbed = False

    def tokens(self) -> list[_Token]:
        while self._pos < len(self._src):
            self._step(self._src[self._pos])
        self._end_word()
        return self._tokens

    def _step(self, char: str) -> None:
        if char in _BLANKS or char == "\n":
            self._end_word()
            if char == "\n":  # a newline separates commands, like ";"
                self._tokens.append("\n")
            self._pos += 1
        elif char in "|&;":
            self._end_word()
            self._operator()
        elif char == "'":
            self._single_quoted()
        elif char == '"':
            self._double_quoted()
        elif char == "\\":
            self._escaped()
        elif char in _REJECTED_CHARS or (char == "#" and not self._in_word):
            raise _UnsupportedSyntax(char)
        else:
            self._add(char, globbed=char in _GLOB_CHARS)
            self._pos += 1

    def _operator(self) -> None:
        pair = self._src[self._pos : self._pos + 2]
        if pair in ("&&", "||"):
            self._tokens.append(pair)
            self._pos += 2
        elif pair[0] in ";|" and pair not in (";;", ";&", "|&"):
            self._tokens.append(pair[0])
            self._pos += 1
        else:  # background "&", "&>", case's ";;"/";&", "|&" (a redirection)
            raise _UnsupportedSyntax(pair)

    def _single_quoted(self) -> None:
        end = self._src.find("'", self._pos + 1)
        if end < 0:
            raise _UnsupportedSyntax("unterminated '")
        self._add(self._src[self._pos + 1 : end])
        self._pos = end + 1

    def _double_quoted(self) -> None:
        self._add("")  # "" is a word even when empty
        pos = self._pos + 1
        while pos < len(self._src) and self._src[pos] != '"':
            char = self._src[pos]
            if char in "$`":
                raise _UnsupportedSyntax(char)
            if char == "\\" and self._src[pos + 1 : pos + 2] in _DQUOTE_ESCAPABLE:
                escaped = self._src[pos + 1]
                if escaped != "\n":  # \<newline> is a line continuation and vanishes
                    self._add(escaped)
                pos += 2
                continue
            self._add(char)
            pos += 1
        if pos >= len(self._src):
            raise _UnsupportedSyntax('unterminated "')
        self._pos = pos + 1

    def _escaped(self) -> None:
        if self._pos + 1 >= len(self._src):
            raise _UnsupportedSyntax("trailing backslash")
        char = self._src[self._pos + 1]
        if char != "\n":  # \<newline> is a line continuation and vanishes
            self._add(char)  # escaped, so never a glob
        self._pos += 2

    def _add(self, text: str, *, globbed: bool = False) -> None:
        self._text.append(text)
        self._in_word = True
        self._globbed = self._globbed or globbed

    def _end_word(self) -> None:
        if self._in_word:
            self._tokens.append(_Word("".join(self._text), self._globbed))
        self._text = []
        self._in_word = False
        self._globbed = False


def _parse_script(script: str) -> list[list[_Word]]:
    """The simple commands of ``script`` (each a non-empty list of words).

    Raises _UnsupportedSyntax for anything outside the subset, including empty
    commands (``ls && && ls``, a trailing ``&&`` or ``|``) and an empty script.
    """
    commands: list[list[_Word]] = [[]]
    last_operator = None
    for token in _without_blank_lines(_Lexer(script).tokens()):
        if isinstance(token, _Word):
            commands[-1].append(token)
            continue
        if not commands[-1]:
            raise _UnsupportedSyntax(f"empty command before {token!r}")
        commands.append([])
        last_operator = token
    if not commands[-1]:
        if last_operator != ";":  # "ls;" is fine; "", "ls &&" and "ls |" are not
            raise _UnsupportedSyntax("empty command at end")
        commands.pop()
    return commands


def _without_blank_lines(tokens: Sequence[_Token]) -> list[_Token]:
    """Newlines that end a command become ``;``; the others (blank lines, a line
    continued after ``&&``, ``||``, ``|`` or ``;``) are dropped, as the shell does."""
    result: list[_Token] = []
    for token in tokens:
        if token == "\n":
            if not result or isinstance(result[-1], str):
                continue
            token = ";"
        result.append(token)
    return result
