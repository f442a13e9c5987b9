"""One writer per session: an advisory lock on its rollout file.

Two processes appending to one rollout interleave their Turns, and the History
rebuilt from it answers calls twice. So whoever appends to a rollout holds
``flock(LOCK_EX)`` on the file itself for as long as it does, and a second
opener is refused at once (``LOCK_NB``) with :class:`SessionBusy`, which names
the holder's process.

Why ``flock`` on the rollout itself: the kernel releases it when the holder's
last descriptor closes, which includes any death, ``SIGKILL`` too, so there is
never a stale lock to clean up, and no second file to fall out of step with
the first. ``flock`` locks belong to an open file description, not a process
(POSIX ``lockf`` locks do, and any ``close`` of the file in the process drops
them): two engines in one process open the file separately and so exclude each
other as two processes do, while a reader that opens and closes the file
(listing, ``get_history``, forking from it) neither needs the lock nor drops
it. The holder is named from ``/proc/locks``, where Linux lists each ``flock``
with its pid: nothing is written for it, so nothing can be stale.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import weakref
from pathlib import Path
from typing import Final

from .._logging import get_logger

__all__ = ["RolloutLock", "SessionBusy", "holder_of", "take_lock"]

log = get_logger(__name__)

_PROC_LOCKS: Final = "/proc/locks"
_COMMAND_MAX_CHARS: Final = 120
# "1: FLOCK  ADVISORY  WRITE 4242 fe:00:5359811 0 EOF"; "1: -> FLOCK ..." is a waiter.
_FLOCK_LINE: Final = re.compile(
    r"^\d+:\s+FLOCK\s+\S+\s+WRITE\s+(?P<pid>\d+)\s+"
    r"(?P<major>[0-9a-f]+):(?P<minor>[0-9a-f]+):(?P<inode>\d+)\s"
)


class SessionBusy(Exception):
    """Another open session holds the rollout: a session has one writer at a time."""

    def __init__(self, session_id: str, path: Path, pid: int | None, command: str | None) -> None:
        self.session_id, self.path, self.pid, self.command = session_id, path, pid, command
        if pid is None:
            where = "another process"
        elif pid == os.getpid():
            where = f"this process (pid {pid}, another connection or engine)"
        else:
            where = f"process {pid}" + (f" ({command})" if command else "")
        super().__init__(
            f"session {session_id} is open in {where}; a session has one writer at a "
            "time: end that one first, or fork the session to continue it separately"
        )


class RolloutLock:
    """A descriptor of a rollout, open for appending, holding its lock.

    Hand it to a :class:`~._rollout.RolloutWriter` with :meth:`take`. One that
    is never taken is closed when collected, so the lock cannot outlive it.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._finalizer = weakref.finalize(self, os.close, fd)

    def take(self) -> int:
        """The locked descriptor, now the caller's to close (which releases the lock)."""
        if self._fd is None:
            raise RuntimeError("this rollout lock was already taken")
        fd, self._fd = self._fd, None
        self._finalizer.detach()
        return fd

    def release(self) -> None:
        """Close the descriptor (and so release the lock) unless it was taken."""
        if self._fd is not None:
            self._fd = None
            self._finalizer()


def take_lock(path: Path, session_id: str) -> RolloutLock:
    """Open ``path`` for appending and lock it; raises :class:`SessionBusy` when
    another open session holds it, ``OSError`` when it cannot be opened."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    if not try_lock(fd):
        pid = holder_of(fd)
        os.close(fd)
        raise SessionBusy(session_id, path, pid, _command_of(pid))
    return RolloutLock(path, fd)


def try_lock(fd: int) -> bool:
    """Lock the open file ``fd`` for this description; False if someone else holds it.

    A file system that cannot lock at all (``ENOLCK``, ``EOPNOTSUPP``) counts as
    locked, with a warning: recording matters more than the one-writer check.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        log.warning("rollout.unlockable", error=str(exc))
    return True


def holder_of(fd: int) -> int | None:
    """The pid holding the ``flock`` on the file ``fd`` is open on, per ``/proc/locks``;
    None where that cannot be told (not Linux, no /proc, a pid from another namespace)."""
    stat = os.fstat(fd)
    major, minor = os.major(stat.st_dev), os.minor(stat.st_dev)
    same_inode: list[int] = []
    try:
        with open(_PROC_LOCKS, encoding="ascii", errors="replace") as locks:
            for line in locks:
                match = _FLOCK_LINE.match(line)
                if match is None or int(match["inode"]) != stat.st_ino:
                    continue
                pid = int(match["pid"])
                if (int(match["major"], 16), int(match["minor"], 16)) == (major, minor):
                    return pid or None
                same_inode.append(pid)
    except OSError:
        return None
    # Some file systems (overlayfs) report another device than the lock's; an
    # inode number alone is good enough to name a process in an error message.
    return same_inode[0] or None if len(same_inode) == 1 else None


def _command_of(pid: int | None) -> str | None:
    """The command line of process ``pid``, shortened; None if it cannot be read."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            raw = cmdline.read(4096)
    except OSError:
        return None
    words = _split(raw)
    if words and os.path.basename(words[0]).startswith("python"):
        # "python3 /venv/bin/codexcore exec ..." or "python3 -m codexcore exec ...": the
        # interpreter says nothing the user typed.
        words = words[2:] if words[1:2] == ["-m"] else words[1:]
    if words:
        words[0] = os.path.basename(words[0])
    text = " ".join(words)
    return text if len(text) <= _COMMAND_MAX_CHARS else text[: _COMMAND_MAX_CHARS - 1] + "…"


def _split(raw: bytes) -> list[str]:
    return [os.fsdecode(word) for word in raw.rstrip(b"\0").split(b"\0") if word]
