"""Planning a patch against the filesystem, and committing the plan atomically."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence

import attrs

from ..protocol._value import Value
from ._patch_text import apply_chunks, unified_diff
from ._patch_types import (
    AddFile,
    DeleteFile,
    FileEdit,
    FileOperation,
    Patch,
    PatchApplyError,
    UpdateFile,
)


def resolve_path(path: str, cwd: str) -> str:
    """``path`` made absolute against ``cwd``, with ``.``/``..`` folded lexically.

    Symlinks are not resolved here: ``is_path_writable`` and the commit resolve them,
    so the check and the write see the same file.
    """
    return os.path.normpath(os.path.join(os.path.abspath(cwd), path))


def display_path(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies under it, else absolute."""
    relative = os.path.relpath(path, os.path.abspath(cwd))
    return path if relative == ".." or relative.startswith(".." + os.sep) else relative


def is_path_writable(path: str, writable_roots: Sequence[str]) -> bool:
    """Whether ``path``, with every symlink resolved, lies inside one of the roots.

    ``os.path.realpath`` resolves the existing part of the path (a symlink anywhere
    on it, dangling or not, is followed) and folds the rest lexically, so a path
    that leaves the roots through a symlink is not writable. Roots are resolved the
    same way. A relative path or root is never trusted (False / ignored).
    """
    if not os.path.isabs(path):
        return False
    real = os.path.realpath(path)
    for root in writable_roots:
        if not os.path.isabs(root):
            continue
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
            return True
    return False


def paths_touched(edits: Sequence[FileEdit]) -> list[str]:
    """Every absolute path the edits write or remove (move targets too), once, in order."""
    seen: dict[str, None] = {}
    for edit in edits:
        seen[edit.path] = None
        if edit.move_path is not None:
            seen[edit.move_path] = None
    return list(seen)


# -- planning -----------------------------------------------------------------


def _read_text(path: str, shown: str, *, lossy: bool) -> str | None:
    """The file's text, or None when it does not exist.

    ``lossy`` decodes invalid UTF-8 with replacement characters (enough to show
    and check a file that is deleted or overwritten whole); otherwise it fails.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise PatchApplyError(f"{shown} is a directory, not a file", path) from None
    except OSError as error:
        raise PatchApplyError(f"Failed to read {shown}: {error.strerror}", path) from None
    try:
        return data.decode("utf-8", errors="replace" if lossy else "strict")
    except UnicodeDecodeError:
        raise PatchApplyError(f"Failed to update {shown}: it is not UTF-8 text", path) from None


class _Tree:
    """The files as the operations planned so far leave them; read from disk lazily."""

    def __init__(self, cwd: str) -> None:
        self.cwd = os.path.abspath(cwd)
        self._files: dict[str, str | None] = {}

    def shown(self, path: str) -> str:
        return display_path(path, self.cwd)

    def read(self, path: str, *, lossy: bool) -> str | None:
        if path not in self._files:
            self._files[path] = _read_text(path, self.shown(path), lossy=lossy)
        return self._files[path]

    def write(self, path: str, content: str | None) -> None:
        self._files[path] = content

    def require_creatable(self, path: str) -> None:
        """Fail now, not mid-commit, when ``path`` cannot become a file."""
        if os.path.isdir(path):
            raise PatchApplyError(f"{self.shown(path)} is a directory, not a file", path)
        parent = os.path.dirname(path)
        while parent != os.path.dirname(parent) and not os.path.lexists(parent):
            if self._files.get(parent) is not None:
                break
            parent = os.path.dirname(parent)
        if self._files.get(parent) is not None or not os.path.isdir(parent):
            raise PatchApplyError(
                f"Cannot create {self.shown(path)}: {self.shown(parent)} is not a directory", path
            )


def plan_patch(patch: Patch, cwd: str) -> list[FileEdit]:
    """Compute every edit of ``patch`` against the files under ``cwd``; write nothing.

    Operations apply in order, each to the result of the ones before (two Updates
    of one file compose). Every hunk of every file is verified here, so a plan
    that returns can be committed; any problem raises ``PatchApplyError`` naming
    the file (for a hunk: the lines not found). Paths resolve against ``cwd``;
    whether they may be written is the caller's call (``is_path_writable``).

    Add over an existing file replaces it, as Codex does (``old_content`` then
    holds what it replaces and the diff shows it); a Move onto an existing file
    replaces that file too. Delete and Update need the file to exist.
    """
    tree = _Tree(cwd)
    return [_plan_operation(operation, tree) for operation in patch.operations]


def _plan_operation(operation: FileOperation, tree: _Tree) -> FileEdit:
    path = resolve_path(operation.path, tree.cwd)
    if isinstance(operation, AddFile):
        return _plan_add(path, operation.content, tree)
    if isinstance(operation, DeleteFile):
        return _plan_delete(path, tree)
    return _plan_update(path, operation, tree)


def _plan_add(path: str, content: str, tree: _Tree) -> FileEdit:
    tree.require_creatable(path)
    old = tree.read(path, lossy=True)
    tree.write(path, content)
    shown = tree.shown(path)
    return FileEdit("add", path, None, old, content, unified_diff(old, content, shown, shown))


def _plan_delete(path: str, tree: _Tree) -> FileEdit:
    shown = tree.shown(path)
    old = tree.read(path, lossy=True)
    if old is None:
        raise PatchApplyError(f"Failed to delete {shown}: the file does not exist", path)
    tree.write(path, None)
    return FileEdit("delete", path, None, old, None, unified_diff(old, None, shown, shown))


def _plan_update(path: str, operation: UpdateFile, tree: _Tree) -> FileEdit:
    shown = tree.shown(path)
    old = tree.read(path, lossy=False)
    if old is None:
        raise PatchApplyError(f"Failed to update {shown}: the file does not exist", path)
    new = apply_chunks(old, operation.chunks, path, shown) if operation.chunks else old
    move_path = None
    if operation.move_path is not None:
        move_path = resolve_path(operation.move_path, tree.cwd)
        move_path = None if move_path == path else move_path
    if move_path is None:
        tree.write(path, new)
        return FileEdit("update", path, None, old, new, unified_diff(old, new, shown, shown))
    tree.require_creatable(move_path)
    tree.write(path, None)
    tree.write(move_path, new)
    diff = unified_diff(old, new, shown, tree.shown(move_path))
    return FileEdit("update", path, move_path, old, new, diff)


# -- committing ---------------------------------------------------------------


@attrs.frozen(repr=False, eq=False)
class _Staged(Value):
    """An edit whose new content sits in ``temp``, ready to be renamed onto ``target``."""

    edit: FileEdit
    target: str | None = None
    temp: str | None = None


def commit_edits(edits: Sequence[FileEdit]) -> None:
    """Carry out planned edits, in order.

    First every file the plan read is checked to still hold what the plan saw (the
    user may have edited it while approval was pending); then every new content is
    written to a temp file beside its target (parent directories created); only
    then are the temp files renamed over their targets (``os.replace``, so a reader
    sees the old or the new file, never half of one) and deletions and move
    sources removed. A failure before the renames changes nothing (temp files and
    created directories are removed); a failure during them (rare: the renames do
    no I/O on content) is reported with the files already changed.

    A written file keeps the mode of the file it replaces (a moved file that of its
    source); a new file gets the default mode under the umask. Writes go through
    symlinks to the file they point at; a deleted symlink is itself removed.
    Ownership and hard links of a rewritten file are not kept (it is a new inode).
    """
    _verify_unchanged(edits)
    staged = _stage_all(edits)
    _swap_all(staged)


def _verify_unchanged(edits: Sequence[FileEdit]) -> None:
    seen: set[str] = set()
    for edit in edits:
        if edit.path not in seen:
            current = _read_text(edit.path, edit.path, lossy=edit.kind != "update")
            if current != edit.old_content:
                raise PatchApplyError(
                    f"{edit.path} changed since the patch was planned; nothing was written",
                    edit.path,
                )
        seen.add(edit.path)
        if edit.move_path is not None:
            seen.add(edit.move_path)


def _stage_all(edits: Sequence[FileEdit]) -> list[_Staged]:
    staged: list[_Staged] = []
    created: list[str] = []
    modes: dict[str, int | None] = {}
    for edit in edits:
        try:
            staged.append(_stage(edit, modes, created))
        except BaseException as error:
            _discard(staged, created)
            if not isinstance(error, OSError | UnicodeError):
                raise
            raise _staging_error(edit, error) from error
    return staged


def _staging_error(edit: FileEdit, error: OSError | UnicodeError) -> PatchApplyError:
    if isinstance(error, OSError):
        where, reason = error.filename or edit.path, error.strerror
    else:
        where, reason = edit.move_path or edit.path, str(error)
    return PatchApplyError(f"Failed to write {where}: {reason}; nothing was changed", edit.path)


def _current_mode(path: str, modes: dict[str, int | None]) -> int | None:
    """The mode ``path`` will have once the edits staged so far are in place."""
    real = os.path.realpath(path)
    if real in modes:
        return modes[real]
    try:
        return stat.S_IMODE(os.stat(real).st_mode)
    except OSError:
        return None


def _stage(edit: FileEdit, modes: dict[str, int | None], created: list[str]) -> _Staged:
    if edit.new_content is None:
        modes[os.path.realpath(edit.path)] = None
        return _Staged(edit)
    data = edit.new_content.encode("utf-8")
    target = os.path.realpath(edit.move_path or edit.path)
    mode = _current_mode(edit.path if edit.kind == "update" else target, modes)
    if edit.move_path is not None:
        modes[os.path.realpath(edit.path)] = None
    modes[target] = mode
    _make_parents(target, created)
    return _Staged(edit, target, _write_temp(target, data, mode))


def _make_parents(target: str, created: list[str]) -> None:
    missing: list[str] = []
    parent = os.path.dirname(target)
    while not os.path.isdir(parent) and parent != os.path.dirname(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(directory)
        created.append(directory)


def _write_temp(target: str, data: bytes, mode: int | None) -> str:
    directory, name = os.path.split(target)
    temp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.tmp")
    # 0o666 lets the umask decide a new file's mode, as a plain open() would.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is not None else 0o666)
    try:
        with open(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
    except BaseException:
        _remove_quietly(temp)
        raise
    return temp


def _swap_all(staged: list[_Staged]) -> None:
    done: list[str] = []
    for index, item in enumerate(staged):
        try:
            _swap(item)
        except OSError as error:
            _discard(staged[index:], [])
            changed = ", ".join(done) or "none"
            raise PatchApplyError(
                f"Failed to commit {item.edit.path}: {error.strerror}; files already changed:"
                f" {changed}",
                item.edit.path,
            ) from error
        done.append(item.edit.move_path or item.edit.path)


def _swap(item: _Staged) -> None:
    edit = item.edit
    if item.temp is None or item.target is None:
        os.unlink(edit.path)
        return
    os.replace(item.temp, item.target)
    moved_away = edit.move_path is not None and os.path.realpath(edit.path) != item.target
    if moved_away:
        os.unlink(edit.path)


def _discard(staged: Sequence[_Staged], created: list[str]) -> None:
    for item in staged:
        if item.temp is not None:
            _remove_quietly(item.temp)
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
