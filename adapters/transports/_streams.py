r"""Asyncio stream pairs as :class:`~._conduit.Conduit`\ s, TCP keepalive, and addresses."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from ._conduit import READ_CHUNK

DEFAULT_HOST = "127.0.0.1"


WRITE_HIGH_WATER = 64 * 1024
"""A connection's transport buffer: the writer waits above this (its queue is separate)."""

PeerCheck = Callable[[socket.socket], "str | None"]
"""Given a connected socket, a reason to refuse the peer, or None to go on."""

KEEPALIVE = (60, 10, 3)
"""TCP keepalive: probe after 60 s of silence, every 10 s, give up after 3. A client
that vanished without closing (a laptop that slept, a dropped network) is noticed
within about 90 s, so its session can expire; the writer's stuck timer covers the
case where something was being sent."""


def keepalive(sock: socket.socket) -> str | None:
    """Turn TCP keepalive on for an accepted connection (a check that refuses no one)."""
    idle, interval, count = KEEPALIVE
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", idle),
        ("TCP_KEEPINTVL", interval),
        ("TCP_KEEPCNT", count),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
    return None


class StreamConduit:
    """A :class:`~._conduit.Conduit` over an asyncio stream pair (TCP, TLS or Unix)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    async def read(self) -> bytes:
        try:
            return await self._reader.read(READ_CHUNK)
        except (ConnectionError, OSError):
            return b""

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    def pending(self) -> int:
        return self._writer.transport.get_write_buffer_size()

    def write_eof(self) -> None:
        if self._writer.can_write_eof():  # not over TLS
            with contextlib.suppress(OSError):
                self._writer.write_eof()

    async def drain(self) -> None:
        await self._writer.drain()

    async def close(self, flush_timeout: float | None) -> None:
        # close() sends what is buffered before the socket closes; wait_closed()
        # returns once it has. A peer that stops reading is cut off after timeout.
        self._writer.close()
        try:
            async with asyncio.timeout(flush_timeout):
                await self._writer.wait_closed()
        except TimeoutError:
            self._writer.transport.abort()
        except (ConnectionError, OSError):
            pass

    def abort(self) -> None:
        self._writer.transport.abort()


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPV6]:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or DEFAULT_HOST
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"not HOST:PORT: {text!r}") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"port out of range: {text!r}")
    return host, number
