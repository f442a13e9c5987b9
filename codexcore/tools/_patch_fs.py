"""Planning a patch against the filesystem, and committing the plan atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence

import attrs

from ..protocol._value import Value
from ._patch_parse import path_problem
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
from ._safe_read import FileTooLarge, NotRegularFile, read_regular

MAX_PATCH_FILE_BYTES = 16 << 20
"""The largest file a patch reads (to update, delete or move it)."""


def resolve_path(path: str, cwd: str) -> str:
    """``path`` made absolute against ``cwd``, with ``.``/``..`` folded lexically.

    Symlinks are not resolved here: the planner records where each edit lands
    (``FileEdit.target``), and the check and the commit both use that, so they see
    the same file.
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
    return os.path.isabs(path) and is_target_writable(os.path.realpath(path), writable_roots)


def is_target_writable(target: str, writable_roots: Sequence[str]) -> bool:
    """Whether ``target``, a ``FileEdit.target`` (already resolved), lies inside a root.

    ``target`` is taken as it is: a removal's target is an entry that may itself be
    a symlink, and removing it does not touch what it points at. Roots are resolved;
    a relative target or root is never trusted (False / ignored).
    """
    if not os.path.isabs(target):
        return False
    for root in writable_roots:
        if not os.path.isabs(root):
            continue
        real_root = os.path.realpath(root)
        if target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep):
            return True
    return False


def written_file(path: str) -> str:
    """The file a write to ``path`` lands on: every symlink on it followed, dangling or not."""
    return os.path.realpath(path)


def removed_entry(path: str) -> str:
    """The directory entry removing ``path`` takes away: its name in its real directory.

    Removing a symlink removes the link, so the last component is not followed.
    """
    directory, name = os.path.split(path)
    return os.path.join(os.path.realpath(directory), name)


def write_targets(edits: Sequence[FileEdit]) -> list[tuple[str, str]]:
    """Each path of ``paths_touched`` with where the edits really land (see ``FileEdit``).

    This is what a writability check and an approval must look at: ``link -> /etc/x``
    writes ``/etc/x`` whatever directory ``link`` sits in. Each pair once, in order;
    a path both written and removed in one patch can appear with two targets.
    """
    pairs: dict[tuple[str, str], None] = {}
    for edit in edits:
        pairs[(edit.path, edit.target)] = None
        if edit.move_path is not None and edit.move_target is not None:
            pairs[(edit.move_path, edit.move_target)] = None
    return list(pairs)


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
        # Non-blocking and bounded: a FIFO or /dev/zero named in a patch is refused
        # at planning, before any approval is asked.
        data = read_regular(path, MAX_PATCH_FILE_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except NotRegularFile as error:
        raise PatchApplyError(f"{shown} {error.problem}", path) from None
    except FileTooLarge as error:
        raise PatchApplyError(
            f"{shown} is {error.size} bytes; apply_patch edits files up to {error.limit} bytes",
            path,
        ) from None
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
        self._unlinked: set[str] = set()

    def shown(self, path: str) -> str:
        return display_path(path, self.cwd)

    def read(self, path: str, *, lossy: bool) -> str | None:
        if path not in self._files:
            self._files[path] = _read_text(path, self.shown(path), lossy=lossy)
        return self._files[path]

    def write(self, path: str, content: str | None) -> str:
        """Record ``path``'s content (None: removed); return where that lands.

        A removal lands on the entry. Once an operation has removed ``path``, it is
        no symlink any more (if it was one): later writes create a plain file in
        its place, as the commit renames onto the entry after the removal.
        """
        self._files[path] = content
        if content is None:
            self._unlinked.add(path)
        return removed_entry(path) if path in self._unlinked else written_file(path)

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
    the file (for a hunk: the lines not found). Paths resolve against ``cwd``, and
    each edit records where it lands (``FileEdit.target``); whether that may be
    written is the caller's call (``write_targets`` with ``is_target_writable``).

    Add over an existing file replaces it, as Codex does (``old_content`` then
    holds what it replaces and the diff shows it); a Move onto an existing file
    replaces that file too. Delete and Update need the file to exist.
    """
    problem = path_problem(cwd)
    if problem is not None:
        raise PatchApplyError(f"the working directory {problem}", cwd)
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
    target = tree.write(path, content)
    shown = tree.shown(path)
    diff = unified_diff(old, content, shown, shown)
    return FileEdit("add", path, None, old, content, diff, target)


def _plan_delete(path: str, tree: _Tree) -> FileEdit:
    shown = tree.shown(path)
    old = tree.read(path, lossy=True)
    if old is None:
        raise PatchApplyError(f"Failed to delete {shown}: the file does not exist", path)
    target = tree.write(path, None)
    diff = unified_diff(old, None, shown, shown)
    return FileEdit("delete", path, None, old, None, diff, target)


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
        target = tree.write(path, new)
        diff = unified_diff(old, new, shown, shown)
        return FileEdit("update", path, None, old, new, diff, target)
    tree.require_creatable(move_path)
    target, move_target = tree.write(path, None), tree.write(move_path, new)
    diff = unified_diff(old, new, shown, tree.shown(move_path))
    return FileEdit("update", path, move_path, old, new, diff, target, move_target)


# -- committing ---------------------------------------------------------------

# O_PATH: a handle to walk and to name entries by, which needs no read permission.
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@attrs.frozen(repr=False, eq=False)
class _Staged(Value):
    """An edit made ready: new content in ``temp`` beside its target, directories open.

    ``directory`` holds ``target``'s real directory open (for a write: where ``temp``
    sits and is renamed to); ``source_directory`` holds the directory of the entry
    the edit removes (a delete, or a move's source), when it removes one.
    """

    edit: FileEdit
    target: str | None = None
    temp: str | None = None
    directory: int | None = None
    source_directory: int | None = None


def commit_edits(edits: Sequence[FileEdit]) -> None:
    """Carry out planned edits, in order, exactly where they were planned to land.

    First every file the plan read is checked to still hold what the plan saw (the
    user may have edited it while approval was pending), and every path to still
    resolve to the ``target`` planned (a symlink re-pointed since is refused, not
    followed). Then every new content is written to a temp file beside its target
    (parent directories created); only then are the temp files renamed over their
    targets (``os.replace``, so a reader sees the old or the new file, never half
    of one) and deletions and move sources removed. A failure before the renames
    changes nothing (temp files and created directories are removed); a failure
    during them (rare: the renames do no I/O on content) is reported with the
    files already changed.

    Writes land on the planned targets only: each target's directory is opened by
    walking its real path from ``/`` without following any symlink, and the temp
    file and the rename work inside that open directory. A directory swapped for a
    symlink after planning makes the commit fail (nothing changed); a target file
    swapped for a symlink is replaced, never written through.

    A written file keeps the mode of the file it replaces (a moved file that of its
    source); a new file gets the default mode under the umask. Writes through a
    symlink reach the file it pointed at when planned; a deleted symlink is itself
    removed. Ownership and hard links of a rewritten file are not kept (it is a new
    inode).
    """
    _verify_unchanged(edits)
    with _Directories() as directories:
        staged = _stage_all(edits, directories)
        _swap_all(staged)


def _verify_unchanged(edits: Sequence[FileEdit]) -> None:
    seen: set[str] = set()
    for edit in edits:
        if edit.path not in seen:
            removes = edit.kind == "delete" or edit.move_path is not None
            _verify_target(edit.path, edit.target, removes=removes)
            current = _read_text(edit.path, edit.path, lossy=edit.kind != "update")
            if current != edit.old_content:
                raise PatchApplyError(
                    f"{edit.path} changed since the patch was planned; nothing was written",
                    edit.path,
                )
        seen.add(edit.path)
        if edit.move_path is not None and edit.move_target is not None:
            if edit.move_path not in seen:
                _verify_target(edit.move_path, edit.move_target, removes=False)
            seen.add(edit.move_path)


def _verify_target(path: str, planned: str, *, removes: bool) -> None:
    now = removed_entry(path) if removes else written_file(path)
    if now != planned:
        raise PatchApplyError(
            f"{path} now leads to {now}, not to {planned} as when the patch was checked;"
            " nothing was written",
            path,
        )


class _Directories:
    """Real directories opened without following symlinks; closed on exit."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}
        self._fds: list[int] = []
        self.created: list[tuple[int, str]] = []

    def __enter__(self) -> _Directories:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds:
            os.close(fd)

    def parent_of(self, target: str, *, create: bool) -> int:
        """``target``'s directory, open; missing directories made when ``create``.

        ``target`` is a real path, so each component must be a plain directory:
        one that became a symlink (or a file) since planning fails the walk.
        """
        directory = os.path.dirname(target)
        if directory not in self._open:
            self._open[directory] = self._walk(directory, create=create)
        return self._open[directory]

    def _walk(self, directory: str, *, create: bool) -> int:
        fd = self._keep(os.open("/", _DIR_FLAGS))
        walked = "/"
        for name in [part for part in directory.split("/") if part]:
            walked = os.path.join(walked, name)
            try:
                fd = self._keep(self._enter(fd, name, create=create))
            except OSError as error:
                if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                raise PatchApplyError(
                    f"{walked} is no longer the directory the patch was checked against"
                    " (a symlink or a file stands there now); nothing was changed",
                    directory,
                ) from None
        return fd

    def _enter(self, parent: int, name: str, *, create: bool) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        os.mkdir(name, dir_fd=parent)
        self.created.append((parent, name))
        return os.open(name, _DIR_FLAGS, dir_fd=parent)

    def _keep(self, fd: int) -> int:
        self._fds.append(fd)
        return fd


def _stage_all(edits: Sequence[FileEdit], directories: _Directories) -> list[_Staged]:
    staged: list[_Staged] = []
    modes: dict[str, int | None] = {}
    for edit in edits:
        try:
            staged.append(_stage(edit, modes, directories))
        except BaseException as error:
            _discard(staged, directories.created)
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


def _stage(edit: FileEdit, modes: dict[str, int | None], directories: _Directories) -> _Staged:
    removes = edit.new_content is None or edit.move_path is not None
    source = directories.parent_of(edit.target, create=False) if removes else None
    if edit.new_content is None:
        modes[edit.target] = None
        return _Staged(edit, source_directory=source)
    data = edit.new_content.encode("utf-8")
    target = edit.move_target or edit.target
    mode = _current_mode(edit.path if edit.kind == "update" else target, modes)
    if edit.move_path is not None:
        modes[edit.target] = None
    modes[target] = mode
    directory = directories.parent_of(target, create=True)
    temp = _write_temp(directory, os.path.basename(target), data, mode)
    return _Staged(edit, target, temp, directory, source)


def _write_temp(directory: int, name: str, data: bytes, mode: int | None) -> str:
    temp = f".{name}.{os.urandom(6).hex()}.tmp"
    # 0o666 lets the umask decide a new file's mode, as a plain open() would.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o600 if mode is not None else 0o666, dir_fd=directory)
    try:
        with open(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
    except BaseException:
        _remove_quietly(temp, directory)
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
    """Rename the temp file onto the target, then remove what the edit removes.

    Every name is taken inside a directory opened by ``_Directories``; a rename
    replaces a symlink at the target rather than following it.
    """
    edit = item.edit
    if item.temp is not None and item.target is not None and item.directory is not None:
        name = os.path.basename(item.target)
        os.replace(item.temp, name, src_dir_fd=item.directory, dst_dir_fd=item.directory)
    if item.source_directory is not None and edit.target != item.target:
        os.unlink(os.path.basename(edit.target), dir_fd=item.source_directory)


def _discard(staged: Sequence[_Staged], created: list[tuple[int, str]]) -> None:
    for item in staged:
        if item.temp is not None and item.directory is not None:
            _remove_quietly(item.temp, item.directory)
    for parent, name in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(name, dir_fd=parent)


def _remove_quietly(name: str, directory: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=directory)
