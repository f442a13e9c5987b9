"""Values and errors of the apply_patch tool (see ``apply_patch`` for the contracts)."""

from __future__ import annotations

from typing import Literal

import attrs

from ..protocol._value import Value

HunkOp = Literal[" ", "-", "+"]
EditKind = Literal["add", "delete", "update"]


class PatchError(Exception):
    """Base of every error the apply_patch tool raises on purpose."""


class PatchParseError(PatchError):
    """The patch text is not in the apply_patch format.

    ``line_number`` is 1-based in the text given to ``parse_patch`` (None when the
    problem is not tied to one line); ``message`` says what was expected.
    """

    def __init__(self, message: str, line_number: int | None = None) -> None:
        self.message = message
        self.line_number = line_number
        where = f" at line {line_number}" if line_number is not None else ""
        super().__init__(f"invalid patch{where}: {message}")


class PatchApplyError(PatchError):
    """The patch is well formed but cannot be applied to the files as they are.

    ``path`` is the file concerned (absolute), when there is one.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.message = message
        self.path = path
        super().__init__(message)


@attrs.frozen(repr=False, eq=False)
class HunkLine(Value):
    """One body line of a hunk: ``op`` is ' ' (context), '-' (remove) or '+' (add)."""

    op: HunkOp
    text: str


@attrs.frozen(repr=False, eq=False)
class Chunk(Value):
    """One ``@@`` hunk of an Update.

    ``context`` is the anchor text after ``@@`` (a line to seek to before matching),
    ``lines`` the body in patch order, ``is_end_of_file`` whether ``*** End of File``
    followed, i.e. the old lines must be the last lines of the file.
    """

    context: str | None
    lines: tuple[HunkLine, ...]
    is_end_of_file: bool = False

    @property
    def old_lines(self) -> tuple[str, ...]:
        """The lines the hunk expects in the file (context and removed lines)."""
        return tuple(line.text for line in self.lines if line.op != "+")

    @property
    def new_lines(self) -> tuple[str, ...]:
        """The lines the hunk leaves in their place (context and added lines)."""
        return tuple(line.text for line in self.lines if line.op != "-")


@attrs.frozen(repr=False, eq=False)
class AddFile(Value):
    """Create ``path`` with ``content`` (each '+' line plus a newline)."""

    path: str
    content: str


@attrs.frozen(repr=False, eq=False)
class DeleteFile(Value):
    """Remove the file ``path``."""

    path: str


@attrs.frozen(repr=False, eq=False)
class UpdateFile(Value):
    """Edit ``path`` by ``chunks`` (in file order) and, with ``move_path``, rename it.

    A pure rename has no chunks.
    """

    path: str
    move_path: str | None
    chunks: tuple[Chunk, ...]


FileOperation = AddFile | DeleteFile | UpdateFile


@attrs.frozen(repr=False, eq=False)
class Patch(Value):
    """A parsed patch: its file operations in the order they are applied."""

    operations: tuple[FileOperation, ...]


@attrs.frozen(repr=False, eq=False)
class FileEdit(Value):
    """One planned change to the filesystem, fully computed and verified.

    ``path`` and ``move_path`` are absolute (resolved against the cwd, with ``..``
    folded lexically; symlinks are left as they are). ``old_content`` is the file's
    text before this edit (None when it did not exist), ``new_content`` after it
    (None for a delete). For an update with ``move_path``, ``new_content`` goes to
    ``move_path`` and ``path`` is removed. ``unified_diff`` is a git-style diff of
    the edit with file headers (every kind has one; empty when nothing changes).

    ``target`` and ``move_target`` are where the edit really lands, every symlink
    resolved when it was planned: for a write (an add, an update in place, a move's
    destination) the file the content goes to; for a removal (a delete, a move's
    source) the directory entry removed, which is ``path``'s own name in its real
    directory (a symlink is removed, not what it points at). These are what must be
    checked and approved; ``commit_edits`` writes exactly there, or nowhere.
    """

    kind: EditKind
    path: str
    move_path: str | None
    old_content: str | None
    new_content: str | None
    unified_diff: str
    target: str
    move_target: str | None = None


@attrs.frozen(repr=False, eq=False)
class ApplyResult(Value):
    """What ``apply_patch`` did: the committed edits and Codex's summary text."""

    edits: tuple[FileEdit, ...]
    summary: str


@attrs.frozen(repr=False, eq=False)
class PatchInvocation(Value):
    """An apply_patch call found in a command line.

    ``patch`` is the patch text (not yet parsed), ``workdir`` the directory of a
    leading ``cd DIR &&`` (as written, perhaps relative to the command's cwd).
    """

    patch: str
    workdir: str | None = None
