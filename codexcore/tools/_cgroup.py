"""Each reaped command in a cgroup v2 of its own, so that it can be killed whole.

A process group and an environment mark (``_reaper``) catch everything a
command starts except a process that both leaves the group (``setsid``) and
clears its environment (``env -u CODEXCORE_REAPER``). A cgroup catches that
one too: nothing a process does short of writing to ``cgroup.procs`` (which
the sandbox's read-only /sys forbids) takes it out of its cgroup, and
writing ``1`` to ``cgroup.kill`` (Linux 5.14) SIGKILLs every process in it
and below it at once, with no race against forks.

Layout: ``<this process's cgroup>/codexcore-<pid>-<random>/`` (the *tree*,
which holds no process, so cgroup v2's no-internal-process rule never bites)
and one ``c<n>/`` below it per command. The reaper kills the whole tree when
this process dies, however it dies, and removes it.

Used only where this process's own cgroup v2 directory lets it create a
child with a ``cgroup.kill`` (root; an ordinary user inside a systemd
delegation such as ``user@.service``). Anywhere else (cgroup v1 only, a
session scope owned by root, a kernel before 5.14, or ``CODEXCORE_CGROUPS=off``)
:meth:`CgroupTree.create` returns None with a debug log line, and commands keep
the reaper alone.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from typing import Final

from codexcore._logging import get_logger

__all__ = [
    "CGROUPS_ENV_VAR",
    "SHELL",
    "CgroupTree",
    "enter_argv",
    "kill",
    "own_cgroup",
    "populated",
    "remove",
    "runnable",
]

_log = get_logger(__name__)

CGROUPS_ENV_VAR: Final = "CODEXCORE_CGROUPS"
"""Set to ``off`` to run commands without cgroups (the reaper alone), as where none exist."""

SHELL: Final = "/bin/sh"
# Moves itself ($$) into the cgroup ($0 is its cgroup.procs), then becomes the
# command: whatever the command starts is born inside. A failed move costs the
# cgroup, not the command (the reaper's group and mark still hold).
_ENTER: Final = '{ echo $$ >"$0"; } 2>/dev/null; exec "$@"'


def own_cgroup() -> str | None:
    """The directory of this process's cgroup v2, or None (with the reason logged)."""
    try:
        with open("/proc/self/cgroup") as file:
            lines = file.read().splitlines()
        with open("/proc/self/mountinfo") as file:
            mounts = file.read().splitlines()
    except OSError as exc:
        _log.debug("exec.cgroup_unavailable", reason=f"cannot read /proc/self: {exc}")
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    if relative is None:
        _log.debug("exec.cgroup_unavailable", reason="this process is in no cgroup v2")
        return None
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        parts = fields.split()
        if tail.split()[:1] != ["cgroup2"] or len(parts) < 5:
            continue
        root, mount_point = parts[3], _unescape(parts[4])
        if relative == root or relative.startswith(root.rstrip("/") + "/"):
            return os.path.join(mount_point, relative[len(root) :].lstrip("/"))
    _log.debug("exec.cgroup_unavailable", reason=f"no cgroup2 mount shows {relative}")
    return None


def _unescape(path: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for escape, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(escape, char)
    return path


class CgroupTree:
    """This process's cgroup for its commands; one child per command."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._numbers = itertools.count()
        self._stale: list[str] = []  # released while a killed process was still exiting

    @classmethod
    def create(cls) -> CgroupTree | None:
        """Make the tree under this process's cgroup, or None where that cannot work."""
        if os.environ.get(CGROUPS_ENV_VAR, "").strip().lower() == "off":
            _log.debug("exec.cgroup_unavailable", reason=f"disabled by {CGROUPS_ENV_VAR}=off")
            return None
        own = own_cgroup()
        if own is None:
            return None
        path = os.path.join(own, f"codexcore-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            os.mkdir(path)
        except OSError as exc:
            _log.debug("exec.cgroup_unavailable", reason=f"cannot create {path}: {exc}")
            return None
        if not os.path.exists(os.path.join(path, "cgroup.kill")):
            remove(path)
            _log.debug("exec.cgroup_unavailable", reason="no cgroup.kill (Linux before 5.14)")
            return None
        _log.debug("exec.cgroup_tree", path=path)
        return cls(path)

    def new_command(self) -> str | None:
        """A fresh, empty cgroup for one command, or None if it cannot be made."""
        stale, self._stale = self._stale, []
        for old in stale:
            self.release(old)
        path = os.path.join(self.path, f"c{next(self._numbers)}")
        try:
            os.mkdir(path)
        except OSError as exc:
            _log.debug("exec.cgroup_unavailable", reason=f"cannot create {path}: {exc}")
            return None
        return path

    def release(self, cgroup: str) -> None:
        """Remove a command's cgroup; if a process in it is still exiting, try again later
        (at the next command, or the reaper's at the end)."""
        if not remove(cgroup):
            self._stale.append(cgroup)


def enter_argv(
    cgroup: str, argv: Sequence[str], cwd: str, env: Mapping[str, str] | None
) -> list[str]:
    """``argv`` started inside ``cgroup``: through a shell that moves itself in and execs it.

    The move happens before the command runs, so nothing it forks can be
    outside. A program that cannot be found or run is left unwrapped, so its
    spawn fails exactly as it would without a cgroup (exit 127 or 126, named).
    """
    if not runnable(argv[0], cwd, env):
        return list(argv)
    return [SHELL, "-c", _ENTER, os.path.join(cgroup, "cgroup.procs"), *argv]


def runnable(program: str, cwd: str, env: Mapping[str, str] | None) -> bool:
    """Whether ``program`` (a path from ``cwd``, or a name on ``env``'s PATH) can be run."""
    if "/" in program:
        path = os.path.join(cwd, program)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    search = (os.environ if env is None else env).get("PATH", os.defpath)
    return shutil.which(program, path=search) is not None


def kill(cgroup: str) -> bool:
    """SIGKILL everything in ``cgroup``; False if that could not be asked."""
    try:
        with open(os.path.join(cgroup, "cgroup.kill"), "w") as file:
            file.write("1")
    except OSError as exc:
        _log.debug("exec.cgroup_kill_failed", cgroup=cgroup, error=str(exc))
        return False
    return True


def populated(cgroup: str) -> bool:
    """Whether a live process is still in ``cgroup`` (or below it)."""
    try:
        with open(os.path.join(cgroup, "cgroup.events")) as file:
            return "populated 1" in file.read()
    except OSError:
        return False  # gone already


def remove(cgroup: str) -> bool:
    """Remove the (empty) ``cgroup``; False, logged, if a process is still in it."""
    try:
        os.rmdir(cgroup)
    except FileNotFoundError:
        return True
    except OSError as exc:
        _log.debug("exec.cgroup_remove_failed", cgroup=cgroup, error=str(exc))
        return False
    return True
