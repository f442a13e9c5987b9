"""The asyncio side of one command's process: its pipes fed into StreamReaders, its exit
as a future (``exec.run_command`` and ``_standby`` start processes with it)."""

from __future__ import annotations

import asyncio

__all__ = ["ExecProtocol"]

# StreamReader buffer per pipe; past twice this the pipe is not read until the
# consumer catches up, which is what makes on_output's backpressure reach the child.
_READER_LIMIT = 64 * 1024


class ExecProtocol(asyncio.SubprocessProtocol):
    """Feeds each pipe into a StreamReader and exposes the main process's exit.

    asyncio's own ``Process.wait()`` only resolves once the pipes are closed too,
    which never happens while a background job holds them; ``exited`` resolves
    as soon as the main process has been reaped.
    """

    def __init__(self) -> None:
        self.stdout = asyncio.StreamReader(limit=_READER_LIMIT)
        self.stderr = asyncio.StreamReader(limit=_READER_LIMIT)
        self.exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._readers = {1: self.stdout, 2: self.stderr}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        for fd, reader in self._readers.items():
            pipe = transport.get_pipe_transport(fd)
            if pipe is not None:
                # Lets the reader pause this pipe while its buffer is full.
                reader.set_transport(pipe)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        self._readers[fd].feed_data(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        reader = self._readers[fd]
        if exc is None:
            reader.feed_eof()
        else:
            reader.set_exception(exc)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
