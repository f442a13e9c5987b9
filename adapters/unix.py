"""The Unix socket face: ``codexcore serve --unix [PATH]``.

The socket is created with mode 0600 in a directory only its user can
enter (made with mode 0700 when missing; an existing one that others can
reach, that another user owns, or that is a link, is refused; the checks
are shared with the clients, in :mod:`codexcore.adapters.transports._unix_trust`).
Every connection's peer is checked with ``SO_PEERCRED``: a process of another user is
refused even if the permissions were loosened. So is a process that runs inside one of this
server's own sandboxes (see :func:`not_sandboxed_by_us`), token or not. A
stale socket file left by a dead server is replaced; a live server's socket
is never taken over. When the server has a token, every client presents it:
a native one in ``hello``, a JSON-RPC one in ``initialize``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
from pathlib import Path

from .host._host import SessionHost
from .servers._dialect import Dialects
from .servers._listener import Listener, shutdown
from .transports._conduit import READ_CHUNK
from .transports._unix_trust import default_socket_path, directory_problem, peer_credentials
from .transports._unix_trust import peer_uid as peer_uid

__all__ = [
    "SocketInUse",
    "UnixServer",
    "default_socket_path",
    "not_sandboxed_by_us",
    "peer_credentials",
    "prepare_directory",
    "shutdown",
]


class SocketInUse(OSError):
    """The socket path cannot be used: a live server holds it, or it is unsafe."""


def same_user(sock: socket.socket) -> str | None:
    """Refuse a peer that is not the server's user, or that runs in one of our sandboxes."""
    pid, uid = peer_credentials(sock)
    if uid != os.geteuid():
        return f"peer uid {uid} is not the server's user"
    return not_sandboxed_by_us(pid)


_MAX_ANCESTORS = 4096  # a pid chain is far shorter; this only bounds a corrupt /proc


def not_sandboxed_by_us(pid: int) -> str | None:
    """Refuse ``pid`` if it descends from this server and sits in another PID or mount namespace.

    That is what a command confined by this server looks like (bwrap unshares
    both); the syscall filter already keeps such a command from making a Unix
    socket, so this is the second wall, for a kernel or a future code path
    where the filter is missing. A descendant in our namespaces (an unconfined
    command, which the user allowed to do anything) and a process that is not
    ours (another terminal's client, a container's) are served.

    Fails closed for our own user's peers: when the peer's ancestry or
    namespaces cannot be read (it has already exited, /proc is hidden or
    absent), it is refused, since being wrong costs a sandbox escape while
    refusing costs one reconnect.
    """
    try:
        descendant = _descends_from(pid, os.getpid())
        if not descendant:
            return None
        if all(_namespace(pid, kind) == _namespace("self", kind) for kind in ("pid", "mnt")):
            return None
    except (OSError, ValueError) as exc:
        return f"cannot check peer pid {pid} in /proc ({exc.__class__.__name__}): refused"
    return f"peer pid {pid} runs inside one of this server's sandboxes"


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(_MAX_ANCESTORS):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        pid = _parent(pid)
    raise ValueError(f"no end to the parents of pid {pid}")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as stat_file:
        stat_line = stat_file.read()
    # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
    return int(stat_line.rpartition(b")")[2].split()[1])


def _namespace(pid: int | str, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


class UnixServer(Listener):
    """Serves a :class:`SessionHost` on a Unix socket."""

    def __init__(
        self,
        host: SessionHost,
        path: str | os.PathLike[str] | None = None,
        *,
        dialects: Dialects | None = None,
        require_initialize: bool | None = None,
    ) -> None:
        """``require_initialize`` None: a JSON-RPC client must ``initialize`` with the
        token exactly when the host has one. False: the peer checks alone admit it
        (a per-session control socket, whose seed 004 clients never initialize)."""
        # With a token, a JSON-RPC client proves it in initialize, as a native one
        # does in hello; without one, the peer checks alone admit it (seed 004's
        # clients never send initialize).
        if require_initialize is None:
            require_initialize = host.config.token is not None
        super().__init__(
            host, peer_check=same_user, dialects=dialects, require_initialize=require_initialize
        )
        self.path = Path(path) if path is not None else default_socket_path()
        self._inode: int | None = None

    async def start(self) -> Path:
        """Prepare the directory, replace a stale socket, bind with mode 0600 and listen."""
        prepare_directory(self.path.parent)
        await _remove_stale_socket(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old_umask = os.umask(0o177)  # the socket is born 0600: no window with looser modes
            try:
                sock.bind(str(self.path))
            finally:
                os.umask(old_umask)
            os.chmod(self.path, 0o600)
            self._inode = os.stat(self.path).st_ino
            self._server = await asyncio.start_unix_server(
                self._handle, sock=sock, limit=READ_CHUNK
            )
        except BaseException:
            sock.close()
            raise
        return self.path

    def stop_accepting(self) -> None:
        super().stop_accepting()
        if self._inode is not None:
            try:
                if os.stat(self.path).st_ino == self._inode:
                    os.unlink(self.path)
            except FileNotFoundError:
                pass
            self._inode = None


def prepare_directory(directory: Path) -> None:
    """Make ``directory`` (mode 0700) if missing; refuse one that is a link, that another
    user owns, or that others can enter (an explicit ``--unix /tmp/x.sock`` included:
    ``/tmp`` is everyone's)."""
    with contextlib.suppress(FileExistsError):  # judged below, whoever made it
        directory.mkdir(mode=0o700, parents=True)
    problem = directory_problem(directory, private=True)
    if problem is not None:
        raise SocketInUse(
            f"{problem}; put the socket in a directory only you own and can enter (mode 0700)"
        )


async def _remove_stale_socket(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise SocketInUse(f"{path} exists and is not a socket")
    try:
        _reader, writer = await asyncio.open_unix_connection(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        os.unlink(path)  # nobody listens: a dead server's leftover
        return
    writer.close()
    raise SocketInUse(f"another server is listening on {path}")
