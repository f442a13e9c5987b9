"""What the engine benchmark's sections share: the engine's config, the Session set-up,
a run's measure and an asyncio loop on a thread of its own (see ``bench_engine.py``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

from codexcore import Codex, EngineConfig, SessionConfig
from codexcore.adapters.threads import CodexThread
from codexcore.protocol import ConfigureSession, SessionConfigured, TextInput, UserInput

USER_INPUT = UserInput((TextInput("Write a long answer."),))


def engine_config(home: str, *, ephemeral: bool = False) -> EngineConfig:
    """The defaults, but recorded under ``home`` and with a cwd that exists everywhere."""
    return EngineConfig(
        session=SessionConfig(cwd="/tmp"),
        home=home,
        ephemeral=ephemeral,
        stream_idle_timeout=60.0,
    )


def long_text(tokens: int) -> str:
    """A message of ``tokens`` token-sized words (about 7 characters each)."""
    return "".join(f"tok{i % 1000:03d} " for i in range(tokens))


def configure(ct: CodexThread) -> None:
    """Create the Session; read ``session_configured`` and any warning right after it."""
    ct.submit(ConfigureSession())
    while not isinstance(ct.next_event().msg, SessionConfigured):
        pass
    try:
        while True:
            ct.next_event(timeout=0.2)
    except TimeoutError:
        pass


async def aconfigure(codex: Codex) -> None:
    await codex.submit(ConfigureSession())
    while not isinstance((await codex.next_event()).msg, SessionConfigured):
        pass
    await asyncio.sleep(0.05)
    while not codex.event_queue.async_q.empty():
        await codex.next_event()


class Measured:
    """Events delivered, wall seconds and process CPU seconds of one run."""

    def __init__(self, events: int, wall: float, cpu: float) -> None:
        self.events, self.wall, self.cpu = events, wall, cpu

    @property
    def rate(self) -> float:
        return self.events / self.wall

    @property
    def cpu_per_event(self) -> float:
        return self.cpu / self.events


def best(runs: list[Measured]) -> Measured:
    return max(runs, key=lambda m: m.rate)


class LoopThread:
    """An asyncio loop on a thread of its own, for the bare producers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="bare-loop")
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
