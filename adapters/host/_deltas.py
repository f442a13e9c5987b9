"""Merging runs of delta events for a connection that reads too slowly.

When a live attachment's send queue overflows, :func:`coalesce` merges each run
of consecutive deltas of one stream (``agent_message_delta``,
``agent_reasoning_delta``, ``exec_command_output_delta``) into one event that
carries the ``seq`` of the last event merged: the ``coalesced_deltas``
capability. Only socket connections are merged for (a lossless stdio
attachment holds the pump instead), so this module loads with the first
overflow, not with the host.
"""

from __future__ import annotations

import attrs

from codexcore.protocol import (
    AgentMessageDelta,
    AgentReasoningDelta,
    Event,
    ExecCommandOutputDelta,
    decode_event,
)

from ._config import KiB
from ._frames import NORMAL, OUTPUT_DELTA, Frame, Out

OUTPUT_CHUNK_LIMIT = 8 * KiB
"""Merged ``exec_command_output_delta`` chunks stay within the engine's 8 KiB."""


def _stream_of(event: Event) -> tuple[str, ...]:
    msg = event.msg
    if isinstance(msg, ExecCommandOutputDelta):
        return (event.id, msg.TYPE, msg.call_id, msg.stream)
    return (event.id, msg.TYPE)


def _merge(run: list[Event]) -> Out:
    """Consecutive deltas of one stream as one delta with the ``seq`` of the last."""
    last = run[-1]
    msg = last.msg
    if isinstance(msg, ExecCommandOutputDelta):
        chunk = b"".join(e.msg.chunk for e in run if isinstance(e.msg, ExecCommandOutputDelta))
        merged: Event = Event(last.id, last.seq, attrs.evolve(msg, chunk=chunk))
    else:
        assert isinstance(msg, AgentMessageDelta | AgentReasoningDelta)
        text = "".join(e.msg.delta for e in run if isinstance(e.msg, type(msg)))
        merged = Event(last.id, last.seq, attrs.evolve(msg, delta=text))
    return Out.of(merged)


def coalesce(items: list[Frame]) -> list[Frame]:
    """Merge every run of consecutive deltas of one stream (output chunks up to 8 KiB)."""
    result: list[Frame] = []
    run: list[Event] = []
    run_out: list[Out] = []
    run_size = 0

    def flush() -> None:
        if len(run_out) == 1:
            result.append(run_out[0])
        elif run_out:
            result.append(_merge(run))
        run.clear()
        run_out.clear()

    for item in items:
        if not isinstance(item, Out) or item.kind == NORMAL:
            flush()
            result.append(item)
            continue
        event = decode_event(item.data)
        size = len(event.msg.chunk) if isinstance(event.msg, ExecCommandOutputDelta) else 0
        fits = item.kind != OUTPUT_DELTA or run_size + size <= OUTPUT_CHUNK_LIMIT
        if not (run and fits and _stream_of(run[-1]) == _stream_of(event)):
            flush()
            run_size = 0
        run.append(event)
        run_out.append(item)
        run_size += size
    flush()
    return result
