"""Recognise an apply_patch call in a command line the model asked to run."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ._patch_parse import BEGIN_PATCH
from ._patch_types import PatchInvocation

_APPLY_PATCH_COMMANDS = frozenset({"apply_patch", "applypatch"})
_SHELLS = frozenset({"bash", "zsh", "sh"})
_SHELL_FLAGS = frozenset({"-c", "-lc"})

# The whole script must be `[cd DIR &&] apply_patch <<TAG` then the heredoc: no
# other command may ride along, as the engine applies the patch itself and runs
# nothing. DIR is a plain word or a quoted string without expansions.
_HEREDOC_START = re.compile(
    r"""\A\s*
    (?:cd\s+(?P<dir>'[^'\n]*'|"[^"$`\\\n]*"|[\w./@%+=:,-]+)\s*&&\s*)?
    (?:apply_patch|applypatch)[ \t]*<<[ \t]*
    (?P<quote>['"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_]*)(?P=quote)[ \t]*\r?\n""",
    re.VERBOSE,
)


def extract_patch_from_argv(argv: Sequence[str]) -> PatchInvocation | None:
    """The patch (and ``cd`` directory) of an apply_patch call, or None if ``argv`` is not one.

    Recognised: ``["apply_patch", PATCH]`` / ``["applypatch", PATCH]``, and
    ``[SHELL, "-c"|"-lc", SCRIPT]`` (SHELL bash, zsh or sh, by base name) where
    SCRIPT is exactly ``apply_patch <<'EOF'`` (or ``<<EOF``, ``<<"EOF"``, any tag)
    followed by the heredoc, optionally preceded by ``cd DIR &&``. The heredoc body
    is taken literally (the shell is never run); a missing terminator ends it at the
    end of the script, as bash does. The patch is returned unparsed.
    """
    if len(argv) == 2 and os.path.basename(argv[0]) in _APPLY_PATCH_COMMANDS:
        return PatchInvocation(argv[1])
    script = _shell_script(argv)
    return None if script is None else _from_heredoc(script)


def is_bare_patch(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a patch body run as a command, without apply_patch.

    True when ``argv[0]``, the space-joined ``argv``, or a shell ``-c`` script
    starts with ``*** Begin Patch``; the engine rejects those with a clear message
    rather than running them.
    """
    if not argv:
        return False
    script = _shell_script(argv) or ""
    candidates = (argv[0], " ".join(argv), script)
    return any(text.lstrip().startswith(BEGIN_PATCH) for text in candidates)


def _shell_script(argv: Sequence[str]) -> str | None:
    if len(argv) == 3 and os.path.basename(argv[0]) in _SHELLS and argv[1] in _SHELL_FLAGS:
        return argv[2]
    return None


def _from_heredoc(script: str) -> PatchInvocation | None:
    start = _HEREDOC_START.match(script)
    if start is None:
        return None
    lines = script[start.end() :].split("\n")
    tag = start.group("tag")
    end = next((i for i, line in enumerate(lines) if line.rstrip() == tag), len(lines))
    if "\n".join(lines[end + 1 :]).strip():
        return None  # more commands after the heredoc
    return PatchInvocation("\n".join(lines[:end]), _unquote(start.group("dir")))


def _unquote(word: str | None) -> str | None:
    if word is not None and len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"":
        return word[1:-1]
    return word
