"""Driving a Codex engine in tests: read events with timeouts that say what was seen."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs

from codexcore import Codex, EngineConfig, SessionConfig
from codexcore.engine._instructions import is_contextual
from codexcore.protocol import TERMINAL_EVENT_TYPES, Event, Op
from codexcore.testing import ScriptedModel

M = TypeVar("M")

NOISE = frozenset(
    {"agent_message_delta", "agent_reasoning_delta", "exec_command_output_delta", "token_count"}
)


def engine_config(cwd: Path, **session: Any) -> EngineConfig:
    """Defaults for tests: a temp cwd, fast retries, no real provider."""
    return EngineConfig(
        session=SessionConfig(cwd=str(cwd), **session),
        retry_base_delay=0.01,
        stream_idle_timeout=5.0,
    )


def typed_input(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's input without the contextual messages (AGENTS.md, environment
    context) the engine adds: what the user and the model said."""
    return [item for item in request["input"] if not is_contextual(item)]


def contextual_input(request: dict[str, Any]) -> list[str]:
    """The texts of a request's contextual messages, in order."""
    return [i["content"][0]["text"] for i in request["input"] if is_contextual(i)]


@attrs.frozen
class Seen(Generic[M]):
    """An event whose message type the test asked for."""

    id: str
    seq: int
    msg: M


class Recorder:
    """Reads a Codex's events, keeping them all for assertions."""

    def __init__(self, codex: Codex) -> None:
        self.codex = codex
        self.events: list[Event] = []

    async def submit(self, op: Op, *, id: str | None = None) -> str:
        return await self.codex.submit(op, id=id)

    async def until(self, kind: type[M], *, id: str | None = None, within: float = 10.0) -> Seen[M]:
        """Read until an event of ``kind`` (and ``id``) arrives; return it."""
        try:
            async with asyncio.timeout(within):
                while True:
                    event = await self.codex.next_event()
                    self.events.append(event)
                    if isinstance(event.msg, kind) and (id is None or event.id == id):
                        return Seen(event.id, event.seq, event.msg)
        except TimeoutError:
            raise AssertionError(
                f"no {kind.__name__} within {within} s; saw {self.types(noise=True)}"
            ) from None

    async def drain(self) -> None:
        """Read to the end of the stream."""
        async for event in self.codex.events():
            self.events.append(event)

    def types(self, *, noise: bool = False, id: str | None = None) -> list[str]:
        return [
            e.msg.TYPE
            for e in self.events
            if (noise or e.msg.TYPE not in NOISE) and (id is None or e.id == id)
        ]

    def of(self, kind: type[M]) -> list[M]:
        return [e.msg for e in self.events if isinstance(e.msg, kind)]

    def check_invariants(self) -> None:
        """seq counts from 0 without gaps; each task_started has exactly one terminal,
        and Tasks never overlap: the next starts only after the last one ended."""
        assert [e.seq for e in self.events] == list(range(len(self.events)))
        started = Counter(e.id for e in self.events if e.msg.TYPE == "task_started")
        ended = Counter(e.id for e in self.events if e.msg.TYPE in TERMINAL_EVENT_TYPES)
        for sub_id, count in started.items():
            assert ended[sub_id] == count, f"task {sub_id}: {count} started, {ended[sub_id]} ended"
        running: str | None = None
        for e in self.events:
            if e.msg.TYPE == "task_started":
                assert running is None, f"task {e.id} started while {running} still ran"
                running = e.id
            elif e.msg.TYPE in TERMINAL_EVENT_TYPES and e.id == running:
                running = None


@asynccontextmanager
async def running_engine(
    model: ScriptedModel, cwd: Path, **session: Any
) -> AsyncIterator[Recorder]:
    async with Codex(engine_config(cwd, **session), transport=model.mock_transport()) as codex:
        recorder = Recorder(codex)
        yield recorder
        recorder.check_invariants()
