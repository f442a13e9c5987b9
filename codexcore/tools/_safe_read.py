"""Reading a path the engine did not create: a regular file, of a stated size, or a clear no.

A path in a workspace, a session folder or a prompt can be anything: a FIFO (an
``open`` for reading waits for a writer forever), a character device (``/dev/zero``
and ``/dev/urandom`` never end), a directory, a socket, a symlink to any of those.
Every such read goes through here:

- opened ``O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC``: opening a FIFO returns at
  once, and a terminal never becomes the controlling one;
- ``follow_links=False`` adds ``O_NOFOLLOW``: a final component that is a symlink is
  refused; ``within`` resolves the path first and refuses one that leads outside
  those roots, then opens the resolved path without following a link;
- the open file is checked with ``fstat`` (what was opened, not what a name said a
  moment before): anything but a regular file is :class:`NotRegularFile`, naming
  what it is;
- at most a stated limit is read: :func:`read_regular` refuses a larger file
  (:class:`FileTooLarge`), :func:`read_head` cuts it and says its size.

Each error is an :class:`OSError` (callers that handle "cannot read" already handle
it) whose ``strerror`` is the problem alone and whose ``str`` names the path too.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from typing import BinaryIO

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class FileRefused(OSError):
    """A path this reader will not read; ``problem`` says why, ``str()`` names the path."""

    def __init__(self, path: str, problem: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, problem)
        self.path = path
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.path} {self.problem}"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.problem, self.errno))


class NotRegularFile(FileRefused):
    """The path is (or leads to) a FIFO, a device, a directory, a socket or a link."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(path, f"is {kind}, not a regular file")
        self.kind = kind

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.kind))


class FileTooLarge(FileRefused):
    """The regular file is over the caller's limit."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(path, f"is over the {limit}-byte limit ({size} bytes)", errno.EFBIG)
        self.size = size
        self.limit = limit

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.size, self.limit))


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words (``a regular file`` included)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def open_regular(
    path: str,
    *,
    max_size: int | None = None,
    follow_links: bool = True,
    within: Sequence[str] | None = None,
) -> tuple[BinaryIO, int]:
    """The regular file at ``path`` opened for reading, and its size when opened.

    Raises :class:`FileRefused` (not a regular file, over ``max_size``, outside
    ``within``) or the ``OSError`` of the open itself (absent, permission denied).
    The caller bounds its reads (a file may grow after it is opened).
    """
    opened = _resolve_within(path, within) if within is not None else path
    flags = OPEN_FLAGS | (os.O_NOFOLLOW if within is not None or not follow_links else 0)
    fd = _open(path, opened, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(path, kind_of(info.st_mode))
        if max_size is not None and info.st_size > max_size:
            raise FileTooLarge(path, info.st_size, max_size)
        return os.fdopen(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str,
    limit: int,
    *,
    follow_links: bool = True,
    within: Sequence[str] | None = None,
) -> bytes:
    """All of the regular file at ``path``; :class:`FileTooLarge` when it is over ``limit``
    bytes (when opened, or by the time it is read)."""
    file, _ = open_regular(path, max_size=limit, follow_links=follow_links, within=within)
    with file:
        data = file.read(limit + 1)  # one byte more: a file that grew is refused, not cut
    if len(data) > limit:
        raise FileTooLarge(path, len(data), limit)
    return data


def read_head(
    path: str,
    limit: int,
    *,
    follow_links: bool = True,
    within: Sequence[str] | None = None,
) -> tuple[bytes, int]:
    """At most the first ``limit`` bytes of the regular file at ``path``, and its size
    when opened (larger than the bytes returned: the file was cut)."""
    file, size = open_regular(path, follow_links=follow_links, within=within)
    with file:
        data = file.read(limit) if limit > 0 else b""
    return data, max(size, len(data))


def _open(path: str, opened: str, flags: int) -> int:
    try:
        return os.open(opened, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and flags & os.O_NOFOLLOW:
            raise NotRegularFile(path, "a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a socket, or a device with nothing behind it
            raise NotRegularFile(path, _lstat_kind(opened)) from None
        raise


def _lstat_kind(path: str) -> str:
    try:
        return kind_of(os.lstat(path).st_mode)
    except OSError:
        return "not a regular file"


def _resolve_within(path: str, roots: Sequence[str]) -> str:
    """``path`` with every link resolved, refused when that is outside all ``roots``."""
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return real
    raise FileRefused(path, f"leads outside the allowed folders (to {real})", errno.EACCES)
