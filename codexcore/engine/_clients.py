"""Model clients shared by Sessions.

An httpx client loads the CA bundle when it is made: about 1.3 MiB and 150 ms
here. A host with thousands of sessions must not pay that per session, so
Sessions draw clients from a pool keyed by base_url, and whoever owns the
pool closes it. A lone engine owns a pool of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._config import EngineConfig

if TYPE_CHECKING:
    import httpx

    from ..model import ModelClient


class ModelClientPool:
    """One :class:`~codexcore.model.ModelClient` per base_url, made on first use."""

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._config = config or EngineConfig()
        self._transport = transport
        self._clients: dict[str | None, ModelClient] = {}

    def get(self, base_url: str | None) -> ModelClient:
        client = self._clients.get(base_url)
        if client is None:
            from ..model import ModelClient, RetryPolicy  # httpx is heavy: import on first use

            config = self._config
            client = ModelClient(
                base_url=base_url,
                api_key=config.api_key,
                retry=RetryPolicy(
                    max_attempts=config.max_attempts, base_delay=config.retry_base_delay
                ),
                stream_idle_timeout=config.stream_idle_timeout,
                headers=config.headers,
                transport=self._transport,
            )
            self._clients[base_url] = client
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()
