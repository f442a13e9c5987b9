"""The session host: sessions by id, each a Codex engine, a replay buffer and its connections.

Theory of operation
-------------------
A :class:`SessionHost` knows nothing of sockets or of how lines are framed.
Transports (stdio, TCP, Unix) accept connections; a dialect (the native
NDJSON one today) turns lines into calls on the host. Every session is a
:class:`~codexcore.Codex` with ``acknowledge_submissions`` on, drawing model
clients from the host's one :class:`~codexcore.ModelClientPool`.

One asyncio task per session, the pump, reads the engine's events, encodes
each once and appends it to the session's replay buffer and to the send queue
of every attached connection (an :class:`Attachment`). The encoded bytes are
shared: the buffer and the queues hold references, not copies.

The parts, each in a module of its own (``codexcore.adapters.host`` exports their
public names):

- :mod:`._config`: :class:`HostConfig`, the rules; every limit bounds
  memory or time.
- :mod:`._session`: :class:`HostedSession`, one engine's events, its
  replay buffer, its attachments and its controller.
- :mod:`._attachment`: :class:`Attachment`, one connection's send queue,
  replay cursor and rights: replay, slow connections and lossless (stdio)
  ones are described there.
- :mod:`._frames`: :class:`Out`, an encoded event, and :data:`Frame`, what an
  attachment hands its transport.
- :mod:`._deltas`: merging deltas for a slow connection, loaded with the
  first one (a stdio server never does).
- here: the host itself: sessions by id (created, attached to, reattached
  with replay, opened from an :class:`EngineSource`, renamed after a resume
  or a fork) and by the names others give them (:meth:`SessionHost.name_session`),
  connections and tokens, the pumps, the idle sweeper, closing.

A session with no attachment and no new event for ``idle_timeout`` seconds is
shut down by a sweeper. Closing the host shuts every session down, so each
attached client receives ``shutdown_complete`` before its connection closes.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import attrs

from codexcore._api_key import DEFAULT_API_KEY_ENV
from codexcore._logging import get_logger
from codexcore.engine import Codex, EngineClosed, ModelClientPool
from codexcore.protocol import PROTOCOL_VERSION, Event, Limits, Welcome

from ._attachment import DEFAULT_BATCH_BYTES, Attachment, Direct, NotAccepted
from ._config import ENGINE_EVENT_QUEUE, HostConfig, KiB, MiB, host_engine_config
from ._frames import NORMAL, OUTPUT_DELTA, TEXT_DELTA, Frame, Out
from ._session import HostedEngine, HostedSession

if TYPE_CHECKING:
    import httpx

    from ._deltas import OUTPUT_CHUNK_LIMIT, coalesce

__all__ = [
    "CAPABILITIES",
    "DEFAULT_BATCH_BYTES",
    "ENGINE_EVENT_QUEUE",
    "NORMAL",
    "OUTPUT_CHUNK_LIMIT",
    "OUTPUT_DELTA",
    "TEXT_DELTA",
    "Attachment",
    "Direct",
    "EngineSource",
    "Frame",
    "HostConfig",
    "HostRefusal",
    "HostedEngine",
    "HostedSession",
    "KiB",
    "MiB",
    "NotAccepted",
    "Out",
    "SessionHost",
    "coalesce",
    "host_engine_config",
]

log = get_logger(__name__)

CAPABILITIES = ("acks", "coalesced_deltas", "control", "replay")
"""What every session of this host offers (see ``docs/adapters.md``)."""


def __getattr__(name: str) -> object:
    """The delta merging's names, loaded on first use (see :mod:`._deltas`)."""
    if name in ("OUTPUT_CHUNK_LIMIT", "coalesce"):
        from . import _deltas as _host_deltas

        return getattr(_host_deltas, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class HostExtension(Protocol):
    """What a dialect package keeps per host (:meth:`SessionHost.extension`)."""

    def close(self) -> None:
        """Release it: the host is closing."""
        ...


E = TypeVar("E", bound=HostExtension)


class HostRefusal(Exception):
    """The host will not do what was asked; ``code`` is the wire code (``refused.code``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class EngineSource(Protocol):
    """Where a host's sessions run when not in this process (``SessionHost(engines=)``).

    ``create`` returns the started engine of a new session with that id.
    ``open`` returns the engine of a session this process does not host yet
    and the events it already has (oldest first, each at most once, the
    newest of them the one before the engine's first), or None when no such
    session exists: a client may attach to any session from any host.
    """

    async def create(self, session_id: str) -> HostedEngine: ...

    async def open(self, session_id: str) -> tuple[HostedEngine, Sequence[Event]] | None: ...


class SessionHost:
    """Sessions by id behind any transport and dialect. Use ``async with SessionHost(config)``.

    ``transport`` replaces the model client's HTTP transport (tests).
    ``engines``, when given, runs the sessions instead of engines of this
    process (see :class:`EngineSource`); replay, control and the dialects
    work the same.
    """

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        engines: EngineSource | None = None,
    ) -> None:
        self.config = config or HostConfig()
        self.tui_theme = self.config.tui_theme  # theme.set changes it for later UIs
        self._engines = engines
        self.engine_config = attrs.evolve(self.config.engine, acknowledge_submissions=True)
        # Shards: one httpx pool does not carry a thousand streams well.
        self._pool = ModelClientPool(self.engine_config, transport=transport, shards=16)
        self._sessions: dict[str, HostedSession] = {}
        self._aliases: dict[str, HostedSession] = {}
        self._named: dict[tuple[str, str], list[HostedSession]] = {}
        self._idle: dict[str, HostedSession] = {}
        self._pumps: set[asyncio.Task[None]] = set()
        self._connections = 0
        self._closing = False
        self._closing_event = asyncio.Event()
        self._sweeper: asyncio.Task[None] | None = None
        self._on_new_session: list[Callable[[str], None]] = []
        self._extensions: dict[Callable[[SessionHost], HostExtension], HostExtension] = {}
        self._sender_tokens = self.config.control.tokens()

    def forget_api_key(self) -> bool:
        """Send no API key in any later model request of any session (a logout); whether
        a key was held. It is held in memory only (read from the environment at start):
        nothing on disk changes, and a restarted server reads it again."""
        key = self.engine_config.api_key
        held = bool(key) if key is not None else bool(os.environ.get(DEFAULT_API_KEY_ENV))
        self.engine_config = attrs.evolve(self.engine_config, api_key="")
        self._pool.forget_api_key()
        return held

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="codexcore-sweeper")

    async def __aenter__(self) -> SessionHost:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def closing(self) -> bool:
        return self._closing

    def begin_close(self) -> None:
        """Refuse new work and start shutting every session down, without waiting."""
        self._closing = True
        self._closing_event.set()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for session in list(self._sessions.values()):
            self._shut_down(session)

    async def wait_closing(self) -> None:
        """Return once the host begins closing (for a connection that has no session to end)."""
        await self._closing_event.wait()

    async def aclose(self) -> None:
        """Shut every session down (attached clients get ``shutdown_complete``) and release all."""
        self.begin_close()
        if self._sweeper is not None:
            await asyncio.gather(self._sweeper, return_exceptions=True)
        await asyncio.gather(*self._pumps, return_exceptions=True)
        for extension in self._extensions.values():
            extension.close()
        await self._pool.aclose()

    # --- what transports and dialects use -------------------------------------------------

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    @property
    def connection_count(self) -> int:
        return self._connections

    def session(self, session_id: str) -> HostedSession | None:
        """The live session known by ``session_id``: its id, or one it had before a
        ``resume_session`` or ``fork_session`` gave it the engine's new one."""
        return self._sessions.get(session_id) or self._aliases.get(session_id)

    def name_session(self, session: HostedSession, kind: str, names: Sequence[str]) -> None:
        """Give ``session`` the ``names`` of ``kind``, in place of those it had of that kind.

        Names are how others know a session beside its ids (ATM-style control
        messages name a session by the sender's ``session_id`` and the worker's
        ``agent_id``); what a kind means is the business of whoever reads it
        (:meth:`named`). One name may be several sessions'. A session's names go
        with it when it ends.
        """
        self._unindex(session, kind)
        unique = tuple(dict.fromkeys(names))
        if unique:
            session.names[kind] = unique
        else:
            session.names.pop(kind, None)
        if self._sessions.get(session.id) is not session:
            return  # ended: findable by no name
        for name in unique:
            self._named.setdefault((kind, name), []).append(session)

    def _unindex(self, session: HostedSession, kind: str) -> None:
        for name in session.names.get(kind, ()):
            holders = self._named.get((kind, name), [])
            if session in holders:
                holders.remove(session)
            if not holders:
                self._named.pop((kind, name), None)

    def named(self, kind: str, name: str) -> list[HostedSession]:
        """The live sessions that have ``name`` among their names of ``kind``."""
        return list(self._named.get((kind, name), ()))

    def open_connection(self) -> None:
        """Count a new connection in, or refuse it (``too_many_connections``, ``shutting_down``)."""
        if self._closing:
            raise HostRefusal("shutting_down", "the server is shutting down")
        if self._connections >= self.config.max_connections:
            raise HostRefusal(
                "too_many_connections",
                f"the server is at its limit of {self.config.max_connections} connections",
            )
        self._connections += 1

    def close_connection(self) -> None:
        self._connections -= 1

    def check_token(self, token: str | None) -> bool:
        """True when the host needs no token or ``token`` is it, or a control sender's
        (constant-time comparisons)."""
        expected = self.config.token
        if expected is None:
            return True
        import hmac  # only a server with a token (sockets) compares: stdio starts without it

        given = (token or "").encode()
        found = hmac.compare_digest(given, expected.encode())
        for sender_token in self._sender_tokens:
            found |= hmac.compare_digest(given, sender_token.encode())
        return found

    def extension(self, factory: Callable[[SessionHost], E]) -> E:
        """This host's one ``factory(self)``, made on first use and closed with the host.

        How a dialect package plugs in what it keeps per host (the control receiver:
        ``codexcore.adapters.control.receiver``) without the host importing it."""
        found = self._extensions.get(factory)
        if found is None:
            found = self._extensions[factory] = factory(self)
        return cast("E", found)

    async def attach(
        self,
        *,
        token: str | None,
        session_id: str | None = None,
        last_seq: int | None = None,
        control: bool = True,
        lossless: bool = False,
        events: bool = False,
    ) -> Attachment:
        """Create a session (``session_id`` None) or attach to one, replaying after ``last_seq``.

        ``events``: the attachment's live frames carry the published event itself
        (:attr:`Out.event`) beside its bytes, for a dialect in this process that maps
        events rather than forwarding bytes (it need not decode them again). Raises
        :class:`HostRefusal`. The token is checked first and a wrong
        one is refused before any session is looked up, so a client without
        it learns nothing about sessions.
        """
        if self._closing:
            raise HostRefusal("shutting_down", "the server is shutting down")
        if not self.check_token(token):
            raise HostRefusal("unauthorized", "the token is missing or wrong")
        if session_id is None:
            session = await self._create()
            attachment = Attachment(
                session,
                controller=control,
                lossless=lossless,
                send_buffer_bytes=self.config.send_buffer_bytes,
                cursor=None,
                events=events,
            )
        else:
            if self._engines is not None and self.session(session_id) is None:
                await self._open(session_id)
            attachment = self._reattach(session_id, last_seq, control, lossless, events)
        attachment.session.add(attachment, control=control)
        return attachment

    def _reattach(
        self, session_id: str, last_seq: int | None, control: bool, lossless: bool, events: bool
    ) -> Attachment:
        session = self.session(session_id)
        if session is None:
            raise HostRefusal("unknown_session", f"no session {session_id!r} on this server")
        if len(session.attachments) >= self.config.max_connections_per_session:
            raise HostRefusal(
                "session_full",
                f"the session has its limit of {self.config.max_connections_per_session} "
                "connections",
            )
        want = 0 if last_seq is None else last_seq + 1
        if want < 0 or want > session.next_seq:
            raise HostRefusal(
                "bad_seq",
                f"last_seq {last_seq} is not an event of this session "
                f"(its latest is {session.next_seq - 1})",
            )
        first = session.ring[0].seq if session.ring else session.next_seq
        start = max(want, first)
        attachment = Attachment(
            session,
            controller=control,
            lossless=lossless,
            send_buffer_bytes=self.config.send_buffer_bytes,
            cursor=start if start < session.next_seq else None,
            events=events,
        )
        attachment.resumed = True
        attachment.replay_from = start
        attachment.replay_complete = want >= first
        return attachment

    def welcome(self, attachment: Attachment) -> Welcome:
        """The ``welcome`` that tells a client about its new attachment."""
        config = self.config
        return Welcome(
            PROTOCOL_VERSION,
            config.server,
            CAPABILITIES,
            attachment.session_id,
            resumed=attachment.resumed,
            control=attachment.controller,
            replay_from=attachment.replay_from,
            replay_complete=attachment.replay_complete,
            limits=Limits(
                config.max_line_bytes, self.engine_config.duplicate_ttl, config.idle_timeout
            ),
            agent_id=attachment.session.agent_id,
            control_messages=config.control.capabilities(),
        )

    def on_new_session(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(session_id)`` for every session this host creates from now on.

        It runs synchronously, right after the session is registered and before
        its first event is published, so ``attach(session_id=..., last_seq=-1)``
        from a task it starts replays the session from its first event (while
        the replay buffer holds it). The session's end is seen by that
        attachment (:meth:`Attachment.take` returns ``[]``). A callback that
        raises is logged; the session goes on.
        """
        self._on_new_session.append(callback)

    def end_session(self, session_id: str) -> None:
        """Shut a session down now (its attachments get ``shutdown_complete``)."""
        session = self.session(session_id)
        if session is not None:
            self._shut_down(session)

    # --- sessions -------------------------------------------------------------------------

    async def _create(self) -> HostedSession:
        if len(self._sessions) >= self.config.max_sessions:
            raise HostRefusal(
                "too_many_sessions",
                f"the server is at its limit of {self.config.max_sessions} sessions",
            )
        # One id everywhere: the engine's Session takes the id welcome announces.
        session_id = str(uuid.uuid4())
        codex: HostedEngine
        if self._engines is not None:
            codex = await self._engines.create(session_id)
        else:
            # The pump reads the engine's events on this loop: no thread needs janus.
            codex = Codex(
                self.engine_config, clients=self._pool, threadsafe=False, session_id=session_id
            )
            await codex.start()
            # Let the engine's dispatcher take its first step: a request_close() before
            # that cancels it before its shutdown handler exists, and the stream never ends.
            await asyncio.sleep(0)
        session = self._host_session(session_id, codex, ())
        for kind, names in self.config.session_names.items():
            self.name_session(session, kind, names)
        for callback in self._on_new_session:
            try:
                callback(session.id)
            except Exception:
                log.exception("new-session callback failed", session=session.id)
        return session

    def _host_session(
        self, session_id: str, codex: HostedEngine, past: Sequence[Event]
    ) -> HostedSession:
        session = HostedSession(self, session_id, codex)
        self._sessions[session.id] = session
        for event in past:  # into the replay buffer, before anyone can attach
            session.publish(event)
        pump = asyncio.create_task(self._pump(session), name=f"codexcore-pump-{session.id}")
        session.pump = pump
        self._pumps.add(pump)
        pump.add_done_callback(self._pumps.discard)
        return session

    async def _open(self, session_id: str) -> None:
        """Host a session that runs elsewhere, its past events in the replay buffer."""
        assert self._engines is not None
        opened = await self._engines.open(session_id)
        if opened is None:
            return
        codex, past = opened
        if self.session(session_id) is not None or self._closing:
            await codex.aclose()  # another attach opened it meanwhile
            return
        session = self._host_session(session_id, codex, past)
        self._idle[session.id] = session  # swept if the attach that opened it fails

    async def _pump(self, session: HostedSession) -> None:
        codex = session.codex
        try:
            while True:
                try:
                    event: Event | None = await codex.next_event()
                except EngineClosed:
                    break
                # Publish all that is queued before the writers run: fewer, larger writes.
                while event is not None:
                    session.publish(event)
                    event = codex.next_event_nowait()
                session.hand_over()
                await session.backpressure()
        except Exception:
            log.exception("session pump failed", session=session.id)
        finally:
            self._forget(session)
            await codex.aclose()

    def _forget(self, session: HostedSession) -> None:
        """The session takes no new attachments; the ones it has finish."""
        self._unregister(session)
        if not session.ended:
            session.end()

    def _shut_down(self, session: HostedSession) -> None:
        self._unregister(session)  # refuse reattaching from now on
        session.codex.request_close(discard=False)  # the pump drains: lose nothing

    def _unregister(self, session: HostedSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        for alias in session.aliases:
            if self._aliases.get(alias) is session:
                del self._aliases[alias]
        for kind in session.names:
            self._unindex(session, kind)
        self._idle.pop(session.id, None)

    def _rename(self, session: HostedSession, new_id: str) -> None:
        """The engine switched to session ``new_id`` (a resume or a fork): the hosted
        session follows, so ``welcome``, ``session_configured`` and the recorded
        session share one id. The old id stays an alias, for clients that kept it."""
        if self._sessions.get(session.id) is not session:
            return  # shutting down: nobody can attach any more
        other = self.session(new_id)
        if other is not None and other is not session:
            # Two engines on one recorded session: the first keeps the name.
            log.warning("session already open on this server", session=new_id)
            return
        old_id = session.id
        del self._sessions[old_id]
        self._aliases.pop(new_id, None)
        if new_id in session.aliases:
            session.aliases.remove(new_id)
        session.aliases.append(old_id)
        self._aliases[old_id] = session
        session.id = new_id
        self._sessions[new_id] = session
        if self._idle.pop(old_id, None) is not None:
            self._idle[new_id] = session

    async def _sweep_forever(self) -> None:
        timeout = self.config.idle_timeout
        interval = min(max(timeout / 10, 0.01), 5.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for session in list(self._idle.values()):
                if now - max(session.idle_since, session.last_event) >= timeout:
                    log.info("session expired", session=session.id)
                    self._shut_down(session)
