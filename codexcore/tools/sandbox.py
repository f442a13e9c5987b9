"""Linux confinement of the model's commands with bubblewrap (``bwrap``).

This module only *builds* argv and answers questions; it never runs the
model's commands itself. The engine asks :func:`probe_sandbox` once whether
bubblewrap works here, then runs every command as::

    with confine(argv, spec, cwd, bwrap=status.executable) as command:
        await run_command(command.argv, ..., pass_fds=command.pass_fds)

Every confined command (``read-only`` and ``workspace-write``, with or
without network) runs under a syscall filter (see ``_seccomp``) that refuses
``socket(AF_UNIX, ...)``, datagram socket pairs and io_uring: read-only mounts
do not stop ``connect()`` to a filesystem socket, so without it a command
could reach the user's own ``codexcore serve --unix``, an ssh-agent or
``docker.sock`` and leave the sandbox through them.

Policies (the wire names of the protocol's ``SandboxMode``):

``read-only``
    The whole filesystem is read-only (a private ``/dev`` and ``/proc``
    aside, with the host-wide parts of that ``/proc`` read-only too, so that
    not even root can change a kernel setting) and there is no network.
``workspace-write``
    Read-only except the cwd, the writable roots and a private ``/tmp`` (a
    fresh tmpfs, not the host's). A ``.git`` (and a ``.codexcore``) directly
    inside a writable root stays read-only, as in Codex: a sandboxed command
    must not plant hooks or rewrite config that the user's own ``git`` would
    later run unconfined. The list is :func:`._read_only_subpaths.read_only_subpaths`,
    the same one patch approval asks about.
    Network only when ``network_access`` is true.
``danger-full-access``
    No confinement: :func:`wrap_command` returns argv unchanged.

Both confined modes get their own UTS (hostname) namespace. Process
lifetime: the wrapped command runs in its own session and PID namespace,
and bubblewrap is told to die with its parent. Killing the bwrap process
(for instance ``os.killpg`` on the group of a ``start_new_session`` child)
therefore kills every process inside, including ones that started their
own session. Caveat: ``--die-with-parent`` is ``PR_SET_PDEATHSIG``,
which fires when the *thread* that spawned bwrap exits, so spawn it from a
long-lived thread (the event loop's), never from a short-lived worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Final, Literal

from attrs import field, frozen, validators

from codexcore._logging import get_logger
from codexcore.protocol._value import Value
from codexcore.tools import _seccomp
from codexcore.tools._read_only_subpaths import contains_any, read_only_subpaths
from codexcore.tools._sandbox_status import SandboxStatus as SandboxStatus

_log = get_logger(__name__)

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
SANDBOX_MODES: Final[tuple[SandboxMode, ...]] = (
    "read-only",
    "workspace-write",
    "danger-full-access",
)

SANDBOX_ENV_VAR: Final = "CODEXCORE_SANDBOX"
"""Set to ``none`` to make :func:`probe_sandbox` report no sandbox."""

PROBE_TIMEOUT_SECONDS: Final = 5.0
"""A working bwrap starts in milliseconds; a hung one must not hang startup."""

_REASON_MAX_CHARS: Final = 500


@frozen(repr=False, eq=False)
class SandboxSpec(Value):
    """What confinement one command gets.

    ``writable_roots`` only matter under ``workspace-write``: relative roots
    are taken relative to the command's cwd, and roots that do not exist (or
    are not directories) when the command is wrapped are skipped.
    ``network_access`` only matters under ``workspace-write``: ``read-only``
    never has network, ``danger-full-access`` always has.
    """

    mode: SandboxMode = field(validator=validators.in_(SANDBOX_MODES))
    writable_roots: tuple[str, ...] = ()
    network_access: bool = False


def probe_sandbox(bwrap: str | None = None) -> SandboxStatus:
    """Find bubblewrap and check that it can actually start a sandbox.

    ``bwrap`` is a command name or path (default ``"bwrap"``, looked up on
    PATH). Finding the binary is not enough: containers, seccomp profiles and
    AppArmor (Ubuntu 24.04's ``apparmor_restrict_unprivileged_userns``) often
    refuse the namespaces it needs, so the probe runs ``true`` under exactly
    the options a ``read-only`` command gets. The answer is cached per process
    and per ``bwrap`` argument since it costs a process spawn.

    ``CODEXCORE_SANDBOX=none`` forces ``kind="none"``; it is read on every call
    (outside the cache) so it takes effect at once.
    """
    if os.environ.get(SANDBOX_ENV_VAR, "").strip().lower() == "none":
        return SandboxStatus(kind="none", reason=f"disabled by {SANDBOX_ENV_VAR}=none")
    return _probe_uncached(bwrap)


@functools.cache
def _probe_uncached(bwrap: str | None) -> SandboxStatus:
    """The probe itself; memoised by :func:`functools.cache` despite the name."""
    if not sys.platform.startswith("linux"):
        return SandboxStatus(kind="none", reason=f"bubblewrap needs Linux, not {sys.platform}")
    name = bwrap or "bwrap"
    executable = shutil.which(name)
    if executable is None:
        return SandboxStatus(kind="none", reason=f"bubblewrap not found: no executable {name!r}")
    executable = os.path.abspath(executable)
    status = _run_probe(executable)
    _log.debug("sandbox.probe", bwrap=executable, kind=status.kind, reason=status.reason)
    return status


def _run_probe(executable: str) -> SandboxStatus:
    """Start one sandbox running ``true``, filter included; turn any failure into a reason."""
    try:
        with confine(["true"], SandboxSpec(mode="read-only"), "/", bwrap=executable) as command:
            result = subprocess.run(
                command.argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=PROBE_TIMEOUT_SECONDS,
                check=False,
                pass_fds=command.pass_fds,
            )
    except _seccomp.UnsupportedArchitecture as exc:
        return SandboxStatus(kind="none", reason=str(exc))
    except subprocess.TimeoutExpired:
        reason = f"{executable} did not finish within {PROBE_TIMEOUT_SECONDS:g}s"
        return SandboxStatus(kind="none", reason=reason)
    except OSError as exc:
        return SandboxStatus(kind="none", reason=f"{executable} could not be started: {exc}")
    if result.returncode != 0:
        detail = (result.stderr.strip() or "no output")[:_REASON_MAX_CHARS]
        reason = f"{executable} cannot create a sandbox here (exit {result.returncode}): {detail}"
        return SandboxStatus(kind="none", reason=reason)
    return SandboxStatus(kind="bwrap", executable=executable)


@frozen(repr=False, eq=False)
class ConfinedCommand(Value):
    """What :func:`confine` yields: spawn ``argv`` with exactly ``pass_fds`` passed on."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()


@contextlib.contextmanager
def confine(
    argv: Sequence[str], spec: SandboxSpec, cwd: str, *, bwrap: str = "bwrap"
) -> Iterator[ConfinedCommand]:
    """The command that runs ``argv`` in ``cwd`` confined by ``spec``, valid inside the block.

    Spawn ``command.argv`` with ``pass_fds=command.pass_fds`` inside the
    ``with`` block; the descriptor bwrap reads its syscall filter from is
    closed when the block ends (bwrap has read it by then, at start-up).
    Under ``danger-full-access`` nothing is passed and the argv is unchanged.
    Raises as :func:`wrap_command` does, and ``UnsupportedArchitecture``
    (a ``RuntimeError``) where no filter exists, which :func:`probe_sandbox`
    already reports as no sandbox.
    """
    if spec.mode == "danger-full-access":
        yield ConfinedCommand(wrap_command(argv, spec, cwd, seccomp_fd=None))
        return
    fd = _seccomp.open_program()
    try:
        yield ConfinedCommand(wrap_command(argv, spec, cwd, bwrap=bwrap, seccomp_fd=fd), (fd,))
    finally:
        os.close(fd)


def wrap_command(
    argv: Sequence[str],
    spec: SandboxSpec,
    cwd: str,
    *,
    bwrap: str = "bwrap",
    seccomp_fd: int | None,
) -> list[str]:
    """Return the argv that runs ``argv`` in ``cwd`` confined by ``spec``.

    Prefer :func:`confine`, which also provides ``seccomp_fd``: a readable
    descriptor holding the syscall filter, which the child must inherit under
    the same number. ``seccomp_fd=None`` leaves the filter out, and with it
    the only thing between the command and the user's Unix sockets; it is
    required, not defaulted, so that no caller drops it by accident.

    ``cwd`` must be absolute; it is where the command starts (``--chdir`` to
    its real path, as a symlink to it may sit in the host's /tmp, which the
    sandbox hides), so the caller may spawn the result from any directory. Under
    ``danger-full-access`` the result is ``list(argv)``. The filesystem is
    inspected now (to resolve symlinks and find ``.git``), so wrap right
    before running. Raises ``ValueError`` on an empty argv or a relative cwd.
    """
    if not argv:
        raise ValueError("argv must name a program")
    if not os.path.isabs(cwd):
        raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
    if spec.mode == "danger-full-access":
        return list(argv)
    options = _bwrap_options(spec, os.path.realpath(cwd))
    if seccomp_fd is not None:
        options = ["--seccomp", str(seccomp_fd), *options]
    # "--" so a command whose name starts with "-" is not read as an option.
    return [bwrap, *options, "--", *argv]


def _bwrap_options(spec: SandboxSpec, cwd: str) -> list[str]:
    """The bwrap options for ``spec``. Order matters: later mounts cover earlier ones."""
    # --new-session: the command cannot push keystrokes into our terminal
    # (TIOCSTI). --die-with-parent + --unshare-pid: if bwrap dies, PID 1 of
    # the namespace gets SIGKILL and the kernel kills everything inside, even
    # processes that left bwrap's process group. (--seccomp goes first, from
    # wrap_command.)
    options = ["--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"]
    roots = _writable_roots(spec, cwd) if spec.mode == "workspace-write" else []
    if spec.mode == "workspace-write":
        options += _workspace_mounts(roots)
    # --unshare-uts: a hostname set inside (were it ever allowed) stays inside.
    options += ["--unshare-pid", "--unshare-uts"]
    if not (spec.mode == "workspace-write" and spec.network_access):
        # A fresh network namespace has only a loopback device, not the host's.
        options.append("--unshare-net")
    # --proc after the binds so no writable root can cover it. --cap-drop ALL
    # matters when we run as root: bwrap then keeps every capability by
    # default and the command could simply remount / read-write.
    options += ["--proc", "/proc", *_kernel_mounts(roots), "--cap-drop", "ALL"]
    options += ["--chdir", cwd]
    return options


# What of a fresh /proc changes the whole machine. Root needs no capability to
# write most of it: the kernel checks the file mode (owner uid 0), so a command
# run by root wrote /proc/sys/kernel/hostname and core_pattern (a host-wide
# code execution path) until these were bound read-only. Docker's list, plus
# mtrr. bwrap covers irq and bus itself, but only when it may write the
# directory, which it may not once root has dropped its capabilities.
READ_ONLY_PROC: Final = (
    "sys",
    "sysrq-trigger",
    "irq",
    "bus",
    "fs",
    "acpi",
    "asound",
    "scsi",
    "driver",
    "mtrr",
)
MASKED_PROC: Final = ("kcore", "keys", "latency_stats", "timer_list", "timer_stats", "sched_debug")
"""Hidden behind an empty read-only file, as Docker does: host-wide state (every
task on the machine, kernel memory) that no command needs."""


def _kernel_mounts(roots: Sequence[str]) -> list[str]:
    """Read-only binds over the host-wide parts of /proc; /sys and /dev again if a root
    covered them."""
    mounts = list(_proc_mounts())
    # /sys is read-only from "--ro-bind / /" and /dev private from "--dev", unless
    # a writable root is / or lies in them: then they are made so again on top.
    # A writable / means the user's files, not the kernel's knobs or raw disks.
    if "/" in roots or contains_any("/sys", roots):
        mounts += ["--ro-bind", "/sys", "/sys"]
    if "/" in roots or contains_any("/dev", roots):
        mounts += ["--dev", "/dev"]
    return mounts


@functools.cache
def _proc_mounts() -> tuple[str, ...]:
    """The binds for :data:`READ_ONLY_PROC` and :data:`MASKED_PROC` that exist here.

    bwrap takes a bind's source from the host, so /proc/sys here is the host's
    procfs; the kernel still answers every sysctl for the namespaces of the
    process reading it (the sandbox's network and hostname, not the host's).
    """
    mounts: list[str] = []
    for name in READ_ONLY_PROC:
        if os.path.lexists(f"/proc/{name}"):
            mounts += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    for name in MASKED_PROC:
        if os.path.lexists(f"/proc/{name}"):
            mounts += ["--ro-bind", os.devnull, f"/proc/{name}"]
    return tuple(mounts)


def _workspace_mounts(roots: Sequence[str]) -> list[str]:
    """The private /tmp, then the writable ``roots``, then the read-only subpaths on top
    (``.git``, ``.codexcore``: see :mod:`._read_only_subpaths`, which patch approval
    shares)."""
    # The tmpfs comes first so a cwd or root under /tmp, bound afterwards,
    # stays visible (bwrap takes bind sources from the host's view).
    mounts = _private_tmp(roots)
    for root in roots:
        mounts += ["--bind", root, root]
    for path in read_only_subpaths(roots):
        mounts += ["--ro-bind", path, path]
    return mounts


MAX_TMP_ENTRIES: Final = 4096
HOST_TMP: Final = "/tmp/.codexcore-host-tmp"
"""Where the host's /tmp shows, read-only, inside the private /tmp."""


def _private_tmp(roots: Sequence[str]) -> list[str]:
    """A private /tmp through which the host's /tmp stays readable.

    A fresh tmpfs would hide everything the host keeps under /tmp, including
    a program or virtual environment living there. bwrap before 0.9 has no
    overlay, so: the host's /tmp is bound once, read-only, at ``HOST_TMP``,
    and each of its entries appears in the private /tmp as a symlink into it
    (symlinks cost next to nothing; a bind mount per entry cost ~0.6 ms). An
    entry on the way to a writable root is bound read-only at its own path
    instead, since bwrap binds onto real paths; the root is bound writable
    on top later. Writes into /tmp itself stay private; the host's files can
    be read, never changed. Entries made after the command starts are not seen.
    """
    mounts = ["--tmpfs", "/tmp", "--ro-bind", "/tmp", HOST_TMP]
    try:
        entries = sorted(os.scandir("/tmp"), key=lambda entry: entry.name)
    except OSError:
        return mounts
    for entry in entries[:MAX_TMP_ENTRIES]:
        path = entry.path
        if path == HOST_TMP or path in roots:
            continue  # a root is bound, writable, after this
        if entry.is_dir(follow_symlinks=False) and any(r.startswith(path + "/") for r in roots):
            mounts += ["--ro-bind", path, path]
        else:
            mounts += ["--symlink", HOST_TMP + path.removeprefix("/tmp"), path]
    return mounts


def _writable_roots(spec: SandboxSpec, cwd: str) -> list[str]:
    """cwd and the spec's roots: resolved, deduplicated, existing directories only."""
    # realpath so a symlinked root binds the directory the writes really land
    # in, and two spellings of one directory bind once.
    resolved = {os.path.realpath(os.path.join(cwd, root)) for root in (cwd, *spec.writable_roots)}
    roots = [root for root in resolved if os.path.isdir(root)]
    if len(roots) != len(resolved):
        _log.debug("sandbox.skip_missing_roots", missing=sorted(resolved.difference(roots)))
    # Shallowest first: a parent bound after its child would hide the child's
    # mount, and a stable order keeps the argv reproducible.
    return sorted(roots, key=lambda root: (root.count(os.sep), root))


# Denial heuristic. bwrap denies by mounts and namespaces, so its failures look
# like EROFS and "no network"; the syscall filter adds EPERM, but only from
# socket creation. A bare "Permission denied" or "Operation not permitted"
# (the macOS Seatbelt wording Codex matches) is left out because ordinary
# failures print them all the time (file modes, ssh keys, kill, ping); EACCES
# never comes from us at all.
_FILESYSTEM_DENIALS: Final = (
    # EROFS: a write outside the writable roots. Outside a sandbox it needs a
    # truly read-only mount, which development machines rarely have.
    "read-only file system",
    # EBUSY: renaming or deleting a protected .git, which is a mount point.
    "device or resource busy",
)
_NETWORK_DENIALS: Final = (
    "network is unreachable",  # ENETUNREACH: the new namespace has no route
    "temporary failure in name resolution",  # glibc EAI_AGAIN: no DNS server reachable
    "eai_again",  # Node's spelling of the same
    "could not resolve host",  # curl and git
    # A fresh namespace has its own empty loopback, so connecting to a
    # service on the host's 127.0.0.1 is refused. Only counted when the
    # network is off, where almost every refusal comes from the sandbox.
    "connection refused",
)
# bwrap's own error (bad --chdir, namespaces refused after the probe): the
# sandbox, not the command, failed.
_BWRAP_ERROR: Final = re.compile(r"^bwrap: ", re.MULTILINE)
# EPERM where a socket was being made: the filter refused an AF_UNIX socket.
# "socket" must be on the same line (docker's "socket: operation not
# permitted", Node's "socket EPERM") or the line before (the last frame of a
# Python traceback, "_socket.socket.__init__(...)").
_SOCKET_EPERM: Final = re.compile(
    r"socket[^\n]*(?:operation not permitted|\beperm\b)"
    r"|socket[^\n]*\n[^\n]*operation not permitted"
)


def is_likely_sandbox_denial(exit_code: int, output: str, spec: SandboxSpec | None = None) -> bool:
    """Whether a failed confined command plausibly failed because of the sandbox.

    A heuristic for offering to rerun without the sandbox: a false positive
    costs the user one question, a false negative leaves the model confused.
    Only ask it about commands that ran confined. True when ``exit_code`` is
    positive and ``output`` (stdout and stderr, any case) shows a bwrap error,
    a read-only filesystem or busy mount point, "Operation not permitted"
    (EPERM) where a socket was made (the filter refuses Unix sockets, with or
    without network), or, unless ``spec`` allowed network, a network failure.
    Exit 0 and negative codes (killed by a signal: a timeout or an interrupt)
    are never denials, nor is anything under ``danger-full-access``.
    ``spec=None`` assumes the network was off.
    """
    if exit_code <= 0:
        return False
    if spec is not None and spec.mode == "danger-full-access":
        return False
    if _BWRAP_ERROR.search(output):
        return True
    network_off = spec is None or not (spec.mode == "workspace-write" and spec.network_access)
    markers = _FILESYSTEM_DENIALS + _NETWORK_DENIALS if network_off else _FILESYSTEM_DENIALS
    text = output.lower()
    return any(marker in text for marker in markers) or _SOCKET_EPERM.search(text) is not None
