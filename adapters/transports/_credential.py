"""What a connection proved about its peer, which a control request is checked against."""

from __future__ import annotations

import contextlib
import os
import stat

import attrs

from codexcore.protocol._value import Value


@attrs.frozen(repr=False, eq=False)
class Credential(Value):
    """What a connection proved about its peer: ``transport`` (``unix``, ``stdio``,
    ``tcp``, ``websocket`` or ``local`` for in-process callers), the peer's ``uid``
    (Unix, stdio) and the ``token`` it presented in its handshake (TCP) or as the
    bearer token of its WebSocket upgrade."""

    transport: str
    uid: int | None = None
    token: str | None = attrs.field(default=None, repr=False)


def peer_uid_of_fd(fd: int) -> int:
    """The uid at the other end of stdio: the peer's (a socket) or our own (a pipe's
    writer is the parent that spawned us, which runs as our user)."""
    if stat.S_ISSOCK(os.fstat(fd).st_mode):
        import socket

        with contextlib.suppress(OSError):
            sock = socket.socket(fileno=os.dup(fd))
            try:
                from ._unix_trust import peer_uid

                return peer_uid(sock)
            finally:
                sock.close()
    return os.getuid()
