"""Model clients shared by Sessions.

An httpx client loads the CA bundle when it is made: about 1.3 MiB and 150 ms
here. A host with thousands of sessions must not pay that per session, so
Sessions draw clients from a pool keyed by base_url, and whoever owns the
pool closes it. A lone engine owns a pool of its own, with one client.

One client carries at most 100 requests at once (httpx's default limit),
and httpcore, httpx's own transport, does bookkeeping that grows
quadratically with the connections in one pool (1,000 running sessions over real HTTP: 56 s on
one client, 7 s on ten). So a pool may hold several shards per base_url; a
Session always uses the same shard (its connections stay warm), and all
shards share one SSL context, so the CA bundle is still loaded once.
"""

from __future__ import annotations

import ssl
import zlib
from typing import TYPE_CHECKING

import attrs

from ._config import EngineConfig

if TYPE_CHECKING:
    import httpx

    from ..model import ModelClient


class ModelClientPool:
    """Up to ``shards`` :class:`~codexcore.model.ModelClient` per base_url, made on first use.

    The clients send over httpx's own transport, or ``transport`` if given.
    ``http_client``, an ``httpx.AsyncClient`` of the
    caller's, carries every request instead (see
    :class:`~codexcore.model.ModelClient`); :meth:`aclose` leaves it open.
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
        shards: int = 1,
    ) -> None:
        if shards < 1:
            raise ValueError(f"shards must be at least 1, not {shards}")
        if transport is not None and http_client is not None:
            raise ValueError("give transport or http_client, not both")
        self._config = config or EngineConfig()
        self._transport = transport
        self._http_client = http_client
        self._shards = shards
        self._ssl: ssl.SSLContext | None = None
        self._clients: dict[tuple[str | None, int], ModelClient] = {}
        self._retired: list[ModelClient] = []  # see forget_api_key

    def get(self, base_url: str | None, key: str = "") -> ModelClient:
        """The client for ``base_url``; the same ``key`` (a session id) always gets the same one."""
        shard = zlib.crc32(key.encode()) % self._shards if self._shards > 1 else 0
        client = self._clients.get((base_url, shard))
        if client is None:
            client = self._clients[base_url, shard] = self._make(base_url)
        return client

    def _make(self, base_url: str | None) -> ModelClient:
        from ..model import ModelClient, RetryPolicy  # httpx is heavy: import on first use

        config = self._config
        transport = self._transport
        verify: ssl.SSLContext | bool = True
        if self._http_client is None:
            verify = self._verify(base_url)
        return ModelClient(
            base_url=base_url,
            api_key=config.api_key,
            retry=RetryPolicy(max_attempts=config.max_attempts, base_delay=config.retry_base_delay),
            stream_idle_timeout=config.stream_idle_timeout,
            response_header_timeout=config.response_header_timeout,
            headers=config.headers,
            transport=transport,
            verify=verify,
            http_client=self._http_client,
        )

    def _verify(self, base_url: str | None) -> ssl.SSLContext | bool:
        from ..model._client import resolve_base_url

        # Loading the CA bundle costs ~30 ms, and only TLS needs it: skipped for a
        # plain-http URL (any case: httpx reads "HTTP:" as http), verified otherwise.
        plain = resolve_base_url(base_url).lower().startswith("http:")
        return False if plain else self._ssl_context()

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            import httpx  # loaded by now: the model client is made next

            # httpx's rules: $SSL_CERT_FILE or $SSL_CERT_DIR if set, else certifi's bundle.
            self._ssl = httpx.create_ssl_context(verify=True)
        return self._ssl

    def forget_api_key(self) -> None:
        """Send no key from now on: the clients made so far are retired (closed with the
        pool; a request they carry now finishes) and the next ones are made without it."""
        self._config = attrs.evolve(self._config, api_key="")
        self._retired.extend(self._clients.values())
        self._clients = {}

    async def aclose(self) -> None:
        """Close the clients this pool made (a caller's ``http_client`` stays open)."""
        clients, self._clients = [*self._retired, *self._clients.values()], {}
        self._retired = []
        for client in clients:
            await client.aclose()
