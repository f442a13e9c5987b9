"""The Session: configuration and state that outlive each Task."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import attrs

from ..protocol import AbortReason
from ._approvals import Approvals
from ._config import EngineConfig, SessionConfig
from ._history import History, Item

if TYPE_CHECKING:
    import httpx

    from ..model import ModelClient


@attrs.define
class RunningTask:
    """The Session's one running Task and why it would be stopped."""

    sub_id: str
    task: asyncio.Task[None]
    abort_reason: AbortReason = "interrupted"


class Session:
    """Codex's current configuration and conversation.

    Holds the History (with its response bookmarks), what the user approved
    for the session, input injected for the running Task, and the model
    client (made on first use and remade when ``base_url`` changes).
    """

    def __init__(
        self,
        config: SessionConfig,
        engine: EngineConfig,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        self.id = str(uuid.uuid4())
        self.config = config
        self.history = History()
        self.approvals = Approvals()
        self.running: RunningTask | None = None
        self._injected: list[Item] = []
        self._engine = engine
        self._transport = transport
        self._client: ModelClient | None = None

    def client(self) -> ModelClient:
        if self._client is None:
            from ..model import ModelClient, RetryPolicy  # httpx is heavy: import on first use

            self._client = ModelClient(
                base_url=self.config.base_url,
                api_key=self._engine.api_key,
                retry=RetryPolicy(
                    max_attempts=self._engine.max_attempts,
                    base_delay=self._engine.retry_base_delay,
                ),
                stream_idle_timeout=self._engine.stream_idle_timeout,
                transport=self._transport,
            )
        return self._client

    async def reconfigure(self, config: SessionConfig) -> None:
        if config.base_url != self.config.base_url:
            await self.aclose()
        self.config = config

    def inject(self, item: Item) -> None:
        self._injected.append(item)

    def take_injected(self) -> list[Item]:
        taken, self._injected = self._injected, []
        return taken

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
