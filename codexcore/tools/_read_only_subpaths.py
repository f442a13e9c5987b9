"""What stays read-only inside a writable root: one definition for commands and patches.

A writable root lets the model change the project, not the programs that run
the next time the *user* works in it. Git runs what ``.git/config``
(``core.fsmonitor``, ``core.pager``, aliases, filters) and ``.git/hooks/*`` name,
outside any sandbox, on the user's next ``git status``. codexcore reads a
project's ``.codexcore/skills/`` as instructions, and its home defaults to
``~/.codexcore``, whose ``config.toml`` names MCP servers it starts unconfined
(that folder is at the top of a root whenever a root is the user's home). So,
as Codex does with ``.git`` (and ``.codex``), these stay read-only inside every
writable root, the cwd included:

* ``.git`` at the top of each root: a directory, or a worktree/submodule pointer
  file together with the git directory its ``gitdir:`` line names;
* ``.codexcore`` at the top of each root.

:func:`read_only_subpaths` is the list the sandbox mounts read-only for confined
commands (it can only mount what exists). :func:`protected_part` is what patch
approval asks about; it covers that list and, since asking costs a click where
a sandbox mount costs a directory walk, more: any path component named ``.git``
below a root (a nested repository or vendored checkout), names compared
case-insensitively (``.GIT`` is ``.git`` on a case-insensitive file system), and
a ``.git`` or ``.codexcore`` that does not exist yet. Listing a protected path
(or a directory inside it) as a writable root opts it out, for both.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

__all__ = ["PROTECTED_NAMES", "protected_part", "read_only_subpaths"]

PROTECTED_NAMES: Final = (".git", ".codexcore")
_ANY_DEPTH: Final = frozenset({".git"})  # .codexcore means something only at a root's top
_GITDIR_PREFIX: Final = b"gitdir:"
_POINTER_MAX_BYTES: Final = 4096


def read_only_subpaths(roots: Iterable[str]) -> list[str]:
    """The existing paths to keep read-only inside ``roots``, resolved, each once.

    ``roots`` are absolute writable roots (resolved here). A protected entry that
    is a symlink counts at its target; one outside every root is read-only
    already and left out, as is one that is, or holds, a writable root itself.
    """
    real_roots = _resolved(roots)
    found: dict[str, None] = {}
    for root in real_roots:
        for path in _candidates(root):
            if path in found or not os.path.exists(path):
                continue
            if _inside_any(path, real_roots) and not contains_any(path, real_roots):
                found[path] = None
    return list(found)


def protected_part(path: str, roots: Iterable[str]) -> str | None:
    """The protected path a write to the absolute ``path`` would change, or None.

    ``path`` is taken as given (a caller checks the resolved target of a write,
    and may check its unresolved spelling too). None when ``path`` lies in no
    root: whether it may be written at all is another question.
    """
    real_roots = _resolved(roots)
    for sub in read_only_subpaths(real_roots):
        if path == sub or path.startswith(sub + os.sep):
            return sub
    containing = [root for root in real_roots if _under(path, root)]
    named = [_named_part(path, root) for root in containing]
    if containing and all(part is not None for part in named):
        return named[-1]  # the deepest root's view, the one nearest the file
    return None


def _named_part(path: str, root: str) -> str | None:
    """The first component of ``path`` below ``root`` named as protected, as a path."""
    parts = os.path.relpath(path, root).split(os.sep)
    for depth, part in enumerate(parts):
        name = part.casefold()
        if (depth == 0 and name in PROTECTED_NAMES) or name in _ANY_DEPTH:
            return os.path.join(root, *parts[: depth + 1])
    return None


def _candidates(root: str) -> Iterator[str]:
    """The protected paths at the top of ``root``, resolved (a .git pointer's gitdir too)."""
    for name in PROTECTED_NAMES:
        entry = os.path.join(root, name)
        if not os.path.lexists(entry):
            continue
        yield os.path.realpath(entry)
        if name == ".git":
            gitdir = _pointed_gitdir(entry)
            if gitdir is not None:
                yield os.path.realpath(os.path.join(root, gitdir))


def _pointed_gitdir(entry: str) -> str | None:
    """The ``gitdir:`` a ``.git`` file names, or None (a directory, or anything odd).

    Opened non-blocking and checked to be a regular file before reading, so a
    FIFO planted as ``.git`` cannot hang the caller.
    """
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _POINTER_MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    first = data.split(b"\n", 1)[0].strip()
    if not first.startswith(_GITDIR_PREFIX):
        return None
    target = first[len(_GITDIR_PREFIX) :].strip()
    return os.fsdecode(target) or None


def _resolved(roots: Iterable[str]) -> list[str]:
    return [os.path.realpath(root) for root in roots if os.path.isabs(root)]


def _under(path: str, root: str) -> bool:
    """Whether ``path`` is strictly below ``root``."""
    return path.startswith(root.rstrip(os.sep) + os.sep)


def _inside_any(path: str, roots: Sequence[str]) -> bool:
    return any(_under(path, root) for root in roots)


def contains_any(path: str, roots: Sequence[str]) -> bool:
    """Whether one of ``roots`` is ``path`` itself or below it."""
    return any(root == path or root.startswith(path + os.sep) for root in roots)
