"""The syscall filter every confined command runs under, as classic BPF for bwrap's ``--seccomp``.

Why a filter at all: a read-only bind does not keep a command from a
filesystem socket. ``connect()`` on a Unix socket needs write permission on
the socket's inode, and a read-only mount only refuses writes to regular
files, directories and symlinks, so a socket under the read-only root (the
user's ``codexcore serve --unix``, an ssh-agent, ``docker.sock``) stays
reachable. The filter takes away the means instead:

* ``socket(AF_UNIX, ...)`` fails with EPERM (abstract-namespace sockets too);
* ``socket(AF_VSOCK, ...)`` fails with EPERM: in a virtual machine it reaches
  the host's services (WSL2's interop starts Windows programs through one),
  and a network namespace does not isolate it;
* ``socketpair`` of datagram type fails with EPERM: a datagram socket can
  ``sendto`` any filesystem address even when it came from a pair, a stream
  or seqpacket pair cannot (pipes, shells and asyncio use those, so they stay);
* ``io_uring_setup``/``_enter``/``_register`` fail with EPERM: io_uring opens
  and connects sockets without the syscalls above;
* a syscall of another ABI than the native one (i386 via ``int 0x80``, x32)
  is refused the same way (x32) or kills the process (a foreign ``arch``),
  since its numbers are not the ones checked here.

Only x86_64 and aarch64 are known; elsewhere :func:`program` raises
:class:`UnsupportedArchitecture` and no sandbox is reported, rather than an
unfiltered one.
"""

from __future__ import annotations

import functools
import os
import platform
import struct
from typing import Final, NamedTuple

__all__ = ["UnsupportedArchitecture", "open_program", "program"]

# <linux/filter.h> and <linux/seccomp.h>
_LD_W_ABS: Final = 0x20
_ALU_AND_K: Final = 0x54
_JEQ_K: Final = 0x15
_JSET_K: Final = 0x45
_RET_K: Final = 0x06
_RET_ALLOW: Final = 0x7FFF0000
_RET_EPERM: Final = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_RET_KILL_PROCESS: Final = 0x80000000

# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
# (little-endian on both architectures: an argument's low word comes first).
_NR: Final = 0
_ARCH: Final = 4
_ARG0: Final = 16
_ARG1: Final = 24

_AF_UNIX: Final = 1
_AF_VSOCK: Final = 40
_SOCK_TYPE_MASK: Final = 0xF  # the type without SOCK_NONBLOCK/SOCK_CLOEXEC
_SOCK_DGRAM: Final = 2
_SOCK_RAW: Final = 3  # AF_UNIX treats it as SOCK_DGRAM
_X32_SYSCALL_BIT: Final = 0x40000000


class UnsupportedArchitecture(RuntimeError):
    """No filter is known for this machine; commands must not be confined without one."""


class _Arch(NamedTuple):
    audit: int  # AUDIT_ARCH_*
    socket: int
    socketpair: int
    io_uring: tuple[int, int, int]  # setup, enter, register
    x32: bool  # whether nr & 0x40000000 marks another ABI


_ARCHES: Final = {
    "x86_64": _Arch(0xC000003E, 41, 53, (425, 426, 427), x32=True),
    "aarch64": _Arch(0xC00000B7, 198, 199, (425, 426, 427), x32=False),
}
_ARCH_ALIASES: Final = {"amd64": "x86_64", "arm64": "aarch64"}


@functools.cache
def program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one), as bwrap reads it: sock_filter structs.

    Raises :class:`UnsupportedArchitecture` for a machine other than x86_64 or aarch64.
    """
    name = (machine or platform.machine()).lower()
    arch = _ARCHES.get(_ARCH_ALIASES.get(name, name))
    if arch is None:
        raise UnsupportedArchitecture(
            f"no syscall filter for {name!r} (only x86_64 and aarch64): commands cannot be "
            "kept from the user's Unix sockets here"
        )
    return b"".join(struct.pack("=HBBI", *insn) for insn in _assemble(_source(arch)))


def open_program() -> int:
    """A fresh read descriptor positioned at the start of :func:`program`.

    bwrap reads the descriptor to its end, so each spawn needs its own; it is
    close-on-exec (pass it with ``pass_fds``) and the caller closes it once the
    child has started.
    """
    data = program()
    fd = os.memfd_create("codexcore-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)  # a few hundred bytes: one write
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


# An instruction before assembly: (code, jump-if-true label, jump-if-false label, k).
# Labels name the instruction to go to; None falls through to the next one.
_Insn = tuple[int, str | None, str | None, int]


def _source(arch: _Arch) -> list[tuple[str | None, _Insn]]:
    """The program, instruction by instruction, each with an optional label."""
    setup, enter, register = arch.io_uring
    code: list[tuple[str | None, _Insn]] = [
        (None, (_LD_W_ABS, None, None, _ARCH)),
        (None, (_JEQ_K, None, "kill", arch.audit)),
        (None, (_LD_W_ABS, None, None, _NR)),
    ]
    if arch.x32:
        code.append((None, (_JSET_K, "deny", None, _X32_SYSCALL_BIT)))
    code += [
        (None, (_JEQ_K, "socket", None, arch.socket)),
        (None, (_JEQ_K, "socketpair", None, arch.socketpair)),
        (None, (_JEQ_K, "deny", None, setup)),
        (None, (_JEQ_K, "deny", None, enter)),
        (None, (_JEQ_K, "deny", None, register)),
        (None, (_RET_K, None, None, _RET_ALLOW)),
        ("socket", (_LD_W_ABS, None, None, _ARG0)),
        (None, (_JEQ_K, "deny", None, _AF_UNIX)),
        (None, (_JEQ_K, "deny", None, _AF_VSOCK)),
        (None, (_RET_K, None, None, _RET_ALLOW)),  # BPF only jumps forward: one return each
        ("socketpair", (_LD_W_ABS, None, None, _ARG1)),
        (None, (_ALU_AND_K, None, None, _SOCK_TYPE_MASK)),
        (None, (_JEQ_K, "deny", None, _SOCK_DGRAM)),
        (None, (_JEQ_K, "deny", None, _SOCK_RAW)),
        (None, (_RET_K, None, None, _RET_ALLOW)),
        ("deny", (_RET_K, None, None, _RET_EPERM)),
        ("kill", (_RET_K, None, None, _RET_KILL_PROCESS)),
    ]
    return code


def _assemble(source: list[tuple[str | None, _Insn]]) -> list[tuple[int, int, int, int]]:
    """Resolve labels into BPF's relative jump offsets (forward only, < 256)."""
    where = {label: index for index, (label, _) in enumerate(source) if label is not None}

    def offset(index: int, label: str | None) -> int:
        if label is None:
            return 0
        distance = where[label] - index - 1
        assert 0 <= distance < 256, f"jump to {label} out of range"
        return distance

    return [
        (code, offset(index, true), offset(index, false), k)
        for index, (_, (code, true, false, k)) in enumerate(source)
    ]
