"""Whose a Unix socket is: the checks a server and its clients share.

A socket is only as private as its folder. Without ``XDG_RUNTIME_DIR`` the
default folder is ``codexcore-UID`` in the system temporary directory, where
any user can make that folder first and listen in it. So both ends check the
folder before they use it (with ``lstat``: a link is refused, not followed):

* the server (:func:`~codexcore.adapters.unix.prepare_directory`) binds only in a folder it
  owns that no one else may enter (no group or other bits at all);
* a client (:func:`open_unix_checked`), before it sends a byte, wants the
  folder to be a real directory owned by its own user, without write bits
  for group or others; for the default folder, without any group or other
  bits, as the server made it. Connected, it wants the peer (``SO_PEERCRED``)
  to run as its own user: a server of another user, root included, is
  refused, as Codex's own clients and servers trust only their own uid.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import struct
import tempfile
from pathlib import Path

__all__ = [
    "UnsafeSocket",
    "default_socket_path",
    "directory_problem",
    "open_unix_checked",
    "peer_credentials",
    "peer_uid",
]


class UnsafeSocket(PermissionError):
    """A socket this process will not use: its folder or its peer is not its user's."""


def default_socket_path() -> Path:
    """``$XDG_RUNTIME_DIR/codexcore/codexcore.sock``, else ``codexcore-UID/codexcore.sock``
    in the system temporary directory (``$TMPDIR``, else ``/tmp``)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "codexcore" / "codexcore.sock"
    return Path(tempfile.gettempdir()) / f"codexcore-{os.geteuid()}" / "codexcore.sock"


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket (``SO_PEERCRED``).

    The pid is as this process's PID namespace sees it, taken when the peer connected.
    """
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return int(pid), int(uid)


def directory_problem(directory: Path, *, private: bool) -> str | None:
    """What makes ``directory`` unfit to hold our socket, or None.

    It must be a directory (not a link to one) that this user owns, with no
    write bits for group or others; ``private``: with no group or other bits at all.
    Raises :class:`FileNotFoundError` when it does not exist.
    """
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        return f"{directory} is a symbolic link, not a directory"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != os.geteuid():
        return f"{directory} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & (0o077 if private else 0o022):
        return f"{directory} is open to other users (mode {mode:04o})"
    return None


def _is_default_folder(directory: Path) -> bool:
    return os.path.abspath(directory) == os.path.abspath(default_socket_path().parent)


async def open_unix_checked(
    path: str | os.PathLike[str], *, limit: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to our own server's socket at ``path``, or raise before sending anything.

    Raises :class:`UnsafeSocket` when the socket's folder or the process listening
    is not this user's, and :class:`OSError` as connecting does.
    """
    where = Path(path)
    directory = where.parent
    try:
        problem = directory_problem(directory, private=_is_default_folder(directory))
    except FileNotFoundError:
        missing = f"no server socket at {where}: {directory} does not exist"
        raise FileNotFoundError(missing) from None
    if problem is not None:
        raise UnsafeSocket(f"refusing the socket {where}: {problem}; nothing was sent")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, os.fspath(where))
        _pid, uid = peer_credentials(sock)
        if uid != os.geteuid():
            raise UnsafeSocket(
                f"refusing the socket {where}: the process listening runs as uid {uid}, "
                f"not as this user (uid {os.geteuid()}); nothing was sent"
            )
        return await asyncio.open_unix_connection(sock=sock, limit=limit)
    except BaseException:
        sock.close()
        raise


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    return peer_credentials(sock)[1]
