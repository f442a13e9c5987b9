"""Sessions on a worker pool behind Redis Streams (``codexcore serve --redis``).

Gateways accept UI connections in every dialect and relay them to the pool;
workers own sessions and run their engines; Redis holds the sessions' event
streams (the replay buffer), submission streams, leases, fencing numbers and
histories. See docs/deployment.md. Needs the ``redis`` extra
(``pip install 'codexcore[redis]'``); nothing else in codexcore imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from codexcore.adapters.host._host import HostConfig, SessionHost

from ._gateway import Gateway, RemoteEngine
from ._keys import WORKER_CLIENT, Keys
from ._owned import Fenced
from ._streams import BLOCK_MS, StreamReader
from ._worker import PoolConfig, Worker, default_worker_name

if TYPE_CHECKING:
    import httpx
    from redis.asyncio import Redis

    from codexcore.engine import EngineConfig

__all__ = [
    "Fenced",
    "Gateway",
    "Keys",
    "PoolConfig",
    "RedisPool",
    "RemoteEngine",
    "Worker",
    "default_worker_name",
]


COMMAND_TIMEOUT = 10.0
"""Seconds a command may wait for Redis's answer before the connection is replaced."""

BLOCKING_SOCKET_TIMEOUT = BLOCK_MS / 1000 + COMMAND_TIMEOUT
"""The same for the connections that block in XREAD and XREADGROUP."""

RETRIES = 12
"""Reconnection attempts per command (backoff up to 1 s: about 10 s in all)."""


class RedisPool:
    """One process's part in a pool: its Redis clients, its gateway host, its worker.

    Use ``async with RedisPool(url, config) as pool``; entering checks that
    Redis answers (``redis.exceptions.ConnectionError`` if not). Closing hands
    the worker's sessions over to the other workers and closes the clients
    (the gateway host is the caller's to close first).
    """

    def __init__(self, url: str, config: PoolConfig | None = None) -> None:
        self.url = url
        self.config = config or PoolConfig()
        self.redis: Redis = self._connect(single=False)
        self._clients: list[Redis] = [self.redis]
        self._tasks: list[asyncio.Task[None]] = []
        self.worker_: Worker | None = None

    async def __aenter__(self) -> RedisPool:
        await self.redis.ping()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _connect(self, *, single: bool, name: str | None = None) -> Any:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff
        from redis.exceptions import ConnectionError, TimeoutError

        # A connection that broke (a Redis restart) is replaced and the command
        # sent again, for about RETRY_SECONDS; after that the caller decides.
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), RETRIES)
        return Redis.from_url(
            self.url,
            # A blocking read waits BLOCK_MS on the server: its socket must wait longer
            # (redis-py's default of 5 s would cut it, and retry it, again and again).
            socket_timeout=BLOCKING_SOCKET_TIMEOUT if single else COMMAND_TIMEOUT,
            single_connection_client=single,
            client_name=name,
            retry=retry,
            retry_on_error=[ConnectionError, TimeoutError, OSError],
        )

    def _client(self, name: str | None = None) -> Any:
        client = self._connect(single=True, name=name)
        self._clients.append(client)
        return client

    def _reader(self) -> StreamReader:
        reader = StreamReader(self._client(), self.redis)
        self._tasks.append(asyncio.create_task(reader.run(), name="codexcore-redis-reader"))
        return reader

    def host(self, config: HostConfig) -> SessionHost:
        """A gateway: a session host whose sessions run on the pool's workers."""
        gateway = Gateway(
            self.redis,
            self._reader(),
            self.config.keys,
            replay_events=config.replay_events,
            dead_letter_maxlen=self.config.dead_letter_maxlen,
        )
        return SessionHost(config, engines=gateway)

    def worker(
        self,
        engine_config: EngineConfig,
        *,
        name: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> Worker:
        """Start this process's worker (one per pool object)."""
        from codexcore.engine import ModelClientPool

        clients = ModelClientPool(engine_config, transport=transport, shards=16)
        name = name or default_worker_name()
        # Every connection of a worker carries its name: when Redis sees them all
        # closed, the other workers take its sessions over without waiting out
        # its lease (Worker._claim_from_the_dead).
        connection_name = f"{WORKER_CLIENT}{name}"
        redis = self._connect(single=False, name=connection_name)
        self._clients.append(redis)
        reader = StreamReader(self._client(connection_name), redis)
        self._tasks.append(asyncio.create_task(reader.run(), name="codexcore-redis-reader"))
        worker = Worker(
            redis,
            reader,
            self._client(connection_name),
            engine_config,
            self.config,
            name=name,
            clients=clients,
        )
        self.worker_ = worker
        self._tasks.append(asyncio.create_task(worker.run(), name="codexcore-redis-worker"))
        return worker

    async def aclose(self) -> None:
        if self.worker_ is not None:
            # Stop claiming first, then offer what we own to the others.
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            # Without Redis there is nobody to hand over to: the leases run out instead.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.lease):
                    await self.worker_.aclose()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients:
            with contextlib.suppress(Exception):
                await client.aclose()
