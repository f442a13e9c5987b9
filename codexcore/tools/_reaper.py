"""A watchdog process that kills unconfined commands when this process dies, even by SIGKILL.

A command under bubblewrap dies with us (``--die-with-parent`` and a PID
namespace). An unconfined one would not: when ``kill -9`` ends the server,
its commands are reparented to init and run on. ``PR_SET_PDEATHSIG`` on the
child only covers the child (not what it starts), and setting it needs a
``preexec_fn``, which costs a full fork of this process per command.

So, once per process and only when the first unconfined command starts, a
tiny ``/bin/sh`` process is started that reads ``+PGID`` / ``-PGID`` lines from a
pipe: each command's process group as it starts and after it is gone. Only
this process holds the pipe's write end, so the reaper reads EOF exactly
when this process dies, however it dies; it then sends SIGKILL to every
group still registered and exits. It lives in its own session (no terminal
signals reach it) with /dev/null for output, so it never holds a client's
pipe open.

Process groups miss two things: a command killed with us in the instant
between its spawn and its registration, and a process that left its group
(``setsid``, a daemon). So every reaped command also carries
``CODEXCORE_REAPER=<token>`` in its environment, which its children inherit;
after killing the groups, the reaper kills every process of the user whose
environment carries that token. A process that both leaves its group and
scrubs its environment escapes those two, so where this process may make
cgroups v2 (``_cgroup``) each command also runs in a cgroup of its own, under
one tree per process, and at EOF the reaper kills that whole tree through
``cgroup.kill`` and removes it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Callable
from typing import Final

from codexcore._logging import get_logger
from codexcore.tools._cgroup import CgroupTree

__all__ = ["REAPER_ENV_VAR", "reaper", "tell_reaper"]

_log = get_logger(__name__)

REAPER_ENV_VAR: Final = "CODEXCORE_REAPER"
"""Marks a reaped command's environment (and so its children's) with this process's token."""

_SCRIPT: Final = """\
# codexcore-reaper: at EOF, kill the groups still registered, the cgroup tree ($2,
# if any), then the marked processes; then remove the tree
g=
while IFS= read -r l; do
  case $l in
    +*) g="$g ${l#+}" ;;
    -*) h=; for p in $g; do [ "$p" = "${l#-}" ] || h="$h $p"; done; g=$h ;;
  esac
done
for p in $g; do kill -s KILL -- "-$p" 2>/dev/null; done
[ -z "$2" ] || echo 1 >"$2/cgroup.kill"
for _ in 1 2 3 4 5; do  # again while a fork raced the previous sweep
  f=$(grep -lsxzF -e "$1" /proc/[0-9]*/environ); [ -n "$f" ] || break
  for e in $f; do e=${e#/proc/}; kill -s KILL "${e%/environ}" 2>/dev/null; done
done
n=0  # a cgroup can be removed once its killed processes are gone: a few ms
while [ -n "$2" ] && [ -d "$2" ] && [ $n -lt 100 ]; do
  rmdir "$2"/*/ "$2" 2>/dev/null || sleep 0.01; n=$((n+1))
done
"""
"""The reaper, for ``/bin/sh``: a shell starts in about a millisecond and a
few hundred KiB, where an interpreter took about 15 ms and 3 MiB of the
tree's memory in every ``exec``. ``grep -z`` (GNU, busybox) reads each
process's environment as NUL-separated lines."""

_SHELL: Final = "/bin/sh"

# What the reaper's interpreter needs from our environment; nothing more, so
# no key or token is copied into one more process.
_ENV_KEEP: Final = ("PATH", "LD_LIBRARY_PATH", "PYTHONHOME")


class Reaper:
    """This process's reaper; use :func:`reaper`. Thread-safe."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(16)
        """The value of :data:`REAPER_ENV_VAR` in every command this reaper watches."""
        self._lock = threading.Lock()
        self._pipe: int | None = None
        self._pid: int | None = None
        self._groups: set[int] = set()
        self._cgroups: CgroupTree | None = None
        self._cgroups_tried = False

    @property
    def pid(self) -> int | None:
        """The reaper's pid once started (for tests and diagnostics)."""
        return self._pid

    @property
    def cgroups(self) -> CgroupTree | None:
        """The cgroup tree this reaper kills, once started; None where cgroups v2 are unusable."""
        return self._cgroups

    def ensure_started(self) -> None:
        """Start the reaper now if it is not running, so that registering a
        command right after its spawn is one pipe write, not a process start."""
        with self._lock:
            if self._pipe is None:
                self._start()

    def register(self, pgid: int) -> None:
        """Have group ``pgid`` killed if this process dies before :meth:`unregister`."""
        with self._lock:
            self._groups.add(pgid)
            self._send(b"+%d\n" % pgid)

    def unregister(self, pgid: int) -> None:
        """Forget ``pgid`` (its members are gone; the number may be reused)."""
        with self._lock:
            self._groups.discard(pgid)
            if self._pipe is not None:
                self._send(b"-%d\n" % pgid)

    def close(self) -> None:
        """Stop the reaper as this process's death would, and wait for it to exit.

        Groups still registered are killed. The process-wide reaper is never
        closed (it must outlive everything); this is for private instances.
        """
        with self._lock:
            if self._pipe is None or self._pid is None:
                return
            os.close(self._pipe)
            os.waitpid(self._pid, 0)
            self._pipe = self._pid = None
            self._groups.clear()
            self._cgroups, self._cgroups_tried = None, False  # the reaper removed it

    def _send(self, line: bytes) -> None:
        if self._pipe is None:
            self._start()
        assert self._pipe is not None
        try:
            os.write(self._pipe, line)  # < PIPE_BUF: atomic, and the reaper drains it
        except BrokenPipeError:
            # Someone killed the reaper: start another and tell it everything.
            _log.warning("exec.reaper_lost", pid=self._pid)
            os.close(self._pipe)
            self._pipe = None  # never write to a closed (and maybe reused) descriptor
            if self._pid is not None:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self._pid, os.WNOHANG)  # it is dead: collect the zombie
            self._start()
            assert self._pipe is not None
            os.write(self._pipe, b"".join(b"+%d\n" % pgid for pgid in self._groups))

    def _start(self) -> None:
        if not self._cgroups_tried:  # once: a restarted reaper takes over the same tree
            self._cgroups_tried = True
            self._cgroups = CgroupTree.create()
        tree = "" if self._cgroups is None else self._cgroups.path
        read_end, write_end = os.pipe()  # both close-on-exec: no command inherits them
        env = {name: os.environ[name] for name in _ENV_KEEP if name in os.environ}
        try:
            self._pid = os.posix_spawn(
                _SHELL,
                [_SHELL, "-c", _SCRIPT, "codexcore-reaper", f"{REAPER_ENV_VAR}={self.token}", tree],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                    *_close_inherited(read_end),
                ],
                setsid=True,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._pipe = write_end
        _log.debug("exec.reaper_started", pid=self._pid)

    def _forget_after_fork(self) -> None:
        """In a forked child: the reaper and its groups are the parent's, not ours."""
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self._pipe)
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self.token = secrets.token_hex(16)
        self._pipe = self._pid = None
        self._groups = set()
        # The parent's tree dies with the parent: make one of our own if needed.
        self._cgroups, self._cgroups_tried = None, False


def _close_inherited(keep: int) -> list[tuple[int, int]]:
    """Close, in the reaper, every inheritable descriptor this process got from its
    parent (an editor's pipe, say): the reaper must hold nothing open but its pipe."""
    actions = []
    listing = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    for name in os.listdir(listing):
        fd = int(name)
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, gone now
                if os.get_inheritable(fd):
                    actions.append((os.POSIX_SPAWN_CLOSE, fd))
    return actions


_REAPER: Final = Reaper()
# A forked child (multiprocessing's fork start method) that runs commands gets a
# reaper of its own, and does not hold the parent's pipe open past the parent.
os.register_at_fork(after_in_child=_REAPER._forget_after_fork)


def reaper() -> Reaper:
    """The process-wide :class:`Reaper` (started lazily, on the first registration)."""
    return _REAPER


def tell_reaper(action: Callable[[], None]) -> None:
    """Start the reaper, or (un)register a group; a reaper that cannot start costs a
    warning, not the run.

    Without it the command still ends with the call (timeouts, cancellation and
    the group kill are ours); only a SIGKILL of this process would orphan it.
    """
    try:
        action()
    except OSError as exc:
        _log.warning("exec.reaper_unavailable", error=str(exc))
