"""A JSON-RPC connection that only sends control messages: what ``codexcore control`` uses.

It opens the server's Unix socket or TCP port, says ``initialize`` (seed 000's
shape, with the sender's token when there is one: over TCP that token is the
credential the sender is bound to), reads the ``control_messages`` capability,
and sends each request envelope as the params of ``control.stdin`` or
``control.interrupt``, returning the ack (the call's result). It never creates
a session.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any, Self

import orjson

from codexcore import __version__
from codexcore.protocol import ControlMessages

from ._sender import ControlError
from ._wire import INTERRUPT_REQUEST, STDIN_REQUEST

_METHODS = {STDIN_REQUEST: "control.stdin", INTERRUPT_REQUEST: "control.interrupt"}
LINE_LIMIT = 16 * 1024 * 1024


class RpcControlLink:
    """One connection; use ``async with await RpcControlLink.open(...)``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._ids = itertools.count(1)
        self.capabilities: ControlMessages | None = None

    @classmethod
    async def open(cls, unix: str | None, tcp: str | None, token: str | None) -> Self:
        """Connect (``tcp`` ``HOST:PORT``, else the Unix socket ``unix`` or the default)
        and initialize; raises :class:`ControlError` when the server refuses."""
        if tcp is not None:
            from codexcore.adapters.transports._streams import parse_address

            host, port = parse_address(tcp)
            reader, writer = await asyncio.open_connection(host, port, limit=LINE_LIMIT)
        else:
            from codexcore.adapters.transports._unix_trust import (
                default_socket_path,
                open_unix_checked,
            )

            # Checked before the token and the message go anywhere (a squatted folder).
            path = unix or str(default_socket_path())
            reader, writer = await open_unix_checked(path, limit=LINE_LIMIT)
        link = cls(reader, writer)
        try:
            await link._initialize(token)
        except BaseException:
            await link.aclose()
            raise
        return link

    async def _initialize(self, token: str | None) -> None:
        params: dict[str, Any] = {
            "protocol_version": "0",
            "client": {"name": "codexcore-control", "version": __version__},
        }
        if token is not None:
            params["auth"] = {"token": token}
        result = await self.call("initialize", params)
        found = result.get("server_capabilities", {}).get("control_messages")
        if not isinstance(found, dict):
            raise ControlError("the server does not announce control messages")
        self.capabilities = ControlMessages(**found)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One request; its result (raises :class:`ControlError` for an error answer)."""
        rid = next(self._ids)
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self._writer.write(orjson.dumps(message) + b"\n")
        await self._writer.drain()
        while True:
            line = await self._reader.readline()
            if not line:
                raise ConnectionError("the server closed the connection")
            answer = orjson.loads(line)
            if not isinstance(answer, dict) or answer.get("id") != rid:
                continue  # a notification, or an answer to no call of ours
            if "error" in answer:
                error = answer["error"]
                raise ControlError(f"{method}: {error.get('message')} ({error.get('code')})")
            return answer.get("result")

    async def send(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """Send a request envelope; its ack."""
        method = _METHODS[envelope["type"]]
        result = await self.call(method, envelope)
        if not isinstance(result, dict):
            raise ControlError(f"{method}: the result is not an ack: {result!r}")
        return result

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
