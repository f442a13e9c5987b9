"""Control messages (seed 003) on a client's own connection: whether the server takes
them, and handing each ack that comes in to the request waiting for it.

The envelopes and the retries are :mod:`codexcore.adapters.control._sender`'s, shared
with ``codexcore control``; this is the part that lives on
:class:`~codexcore.adapters.client.RemoteCodex`'s connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from codexcore.adapters.control._sender import (
    ControlError,
    SenderOptions,
    interrupt_envelope,
    send_control,
    stdin_envelope,
)
from codexcore.protocol import ControlMessages, Welcome


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


class ControlMethods:
    """:class:`~codexcore.adapters.client.RemoteCodex`'s control messages to live sessions
    (``docs/control.md``), sent through its ``_send_control``."""

    welcome: Welcome | None

    async def _send_control(self, envelope: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def control_stdin(
        self,
        text: str,
        sender: SenderOptions,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        interrupt: bool = False,
        thread_id: str | None = None,
    ) -> dict[str, Any]:
        """Give a live session input as an ATM-style ``control.stdin.request``; the ack.

        The target is this client's own session unless ``session_id`` (and its
        ``agent_id``, as ``codexcore sessions list`` shows it) names another;
        ``interrupt`` ends its running Task first. One request id for the
        logical send, reused on each retry (``sender.retries``, 1 by default,
        each waiting ``sender.ack_timeout`` for the ack). Text over the hard
        limit goes as ``content_ref``, written under ``sender.share_dir``.
        Raises :class:`~codexcore.adapters.control.ControlError` when the server does not
        announce control messages (``welcome.control_messages``) or no ack comes.
        """
        capabilities, target, agent = control_target(self.welcome, "stdin", session_id, agent_id)
        envelope = stdin_envelope(
            sender,
            target,
            agent,
            text,
            interrupt=interrupt,
            thread_id=thread_id,
            capabilities=capabilities,
        )
        return await send_control(self._send_control, envelope, sender)

    async def control_interrupt(
        self,
        sender: SenderOptions,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        thread_id: str | None = None,
    ) -> dict[str, Any]:
        """Interrupt a live session's running Task (``control.interrupt.request``); the
        ack, ``ok`` once the Task has ended (``detail: idle`` when none ran). Targets and
        retries as :meth:`control_stdin`."""
        _, target, agent = control_target(self.welcome, "interrupt", session_id, agent_id)
        envelope = interrupt_envelope(sender, target, agent, thread_id=thread_id)
        return await send_control(self._send_control, envelope, sender)
