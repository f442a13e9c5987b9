"""Control messages (seed 003) on a client's own connection: whether the server takes
them, and handing each ack that comes in to the request waiting for it.

The envelopes and the retries are :mod:`._control_client`'s, shared with ``codexcore
control``; this is the part that lives on :class:`~.client.RemoteCodex`'s connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from codexcore.protocol import ControlMessages, Welcome

from .control._sender import ControlError


def control_target(
    welcome: Welcome | None, kind: str, session_id: str | None, agent_id: str | None
) -> tuple[ControlMessages, str, str]:
    """Where a ``kind`` request goes: the control messages the server announced (if they
    take ``kind``), and the target session and agent, this client's own unless
    ``session_id`` names another (whose ``agent_id`` must then be given)."""
    found = welcome.control_messages if welcome is not None else None
    if welcome is None or found is None or not getattr(found, kind):
        raise ControlError(f"the server does not take control {kind} requests")
    if session_id is None or session_id == welcome.session_id:
        return found, welcome.session_id, agent_id or welcome.agent_id or ""
    if agent_id is None:
        raise ControlError(f"give the agent_id of session {session_id}")
    return found, session_id, agent_id


class AckWaiters:
    """The control requests sent on the connection and waiting for their ack, by
    request id (one per logical send: its retries wait for the same ack)."""

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[dict[str, Any]]] = {}

    def __bool__(self) -> bool:
        return bool(self._futures)

    async def send(
        self,
        envelope: dict[str, Any],
        write: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> dict[str, Any]:
        """``write`` the envelope and wait for its ack (an ack of an earlier try counts)."""
        request_id = envelope["request_id"]
        future = self._futures.get(request_id)
        if future is None or future.done():
            future = asyncio.get_running_loop().create_future()
            self._futures[request_id] = future
        try:
            await write(envelope)
            return await asyncio.shield(future)
        finally:
            if future.done():
                self._futures.pop(request_id, None)

    def offer(self, line: bytes) -> bool:
        """Whether ``line`` is a control ack (it is then not an event); one for a request
        of ours goes to its sender."""
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        if not (isinstance(value, dict) and str(value.get("type", "")).startswith("control.")):
            return False
        future = self._futures.get(str(value.get("request_id")))
        if future is not None and not future.done():
            future.set_result(value)
        return True
