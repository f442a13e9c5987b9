r"""What an attachment hands its transport: encoded events (:class:`Out`) and connection
messages, as :data:`Frame`\ s; deltas marked so that they may be merged for a slow client."""

from __future__ import annotations

from codexcore.protocol import (
    AgentMessageDelta,
    AgentReasoningDelta,
    ConnectionMsg,
    Event,
    ExecCommandOutputDelta,
    encode_event,
)

NORMAL, TEXT_DELTA, OUTPUT_DELTA = 0, 1, 2
_KIND_OF = {
    AgentMessageDelta.TYPE: TEXT_DELTA,
    AgentReasoningDelta.TYPE: TEXT_DELTA,
    ExecCommandOutputDelta.TYPE: OUTPUT_DELTA,
}


def _encode(event: Event) -> bytes:
    """An event's JSON in a bytes object of its own size.

    orjson's result keeps the buffer it grew (4 kB for a 100-byte event, 120 kB
    for an 11 kB one): held in a replay buffer, that is ten to forty times the
    data. One copy (about 0.2 us) gives the memory back.
    """
    return memoryview(encode_event(event)).tobytes()


class Out:
    """One encoded event (JSON, no newline), shared by the replay buffer and the send queues.

    ``kind`` marks deltas, which may be merged or dropped for a slow client. ``event``
    is the event itself in the frames of an attachment that asked for it
    (``SessionHost.attach(events=True)``: a dialect in this process that would
    otherwise decode ``data`` again); None everywhere else (the replay buffer holds
    bytes only, and replayed or merged frames carry none).
    """

    __slots__ = ("data", "event", "kind", "seq")

    def __init__(
        self, seq: int, data: bytes, kind: int = NORMAL, event: Event | None = None
    ) -> None:
        self.seq, self.data, self.kind, self.event = seq, data, kind, event

    def with_event(self, event: Event) -> Out:
        """This frame, carrying ``event`` too (a copy: the shared one stays bytes only)."""
        return Out(self.seq, self.data, self.kind, event)

    @classmethod
    def of(cls, event: Event) -> Out:
        """``event`` encoded, with its kind."""
        return cls(event.seq, _encode(event), _KIND_OF.get(event.msg.TYPE, NORMAL))

    def __repr__(self) -> str:
        return f"Out(seq={self.seq}, {self.data[:60]!r})"


Frame = Out | ConnectionMsg
"""What an attachment hands its transport: an encoded event or a connection message."""
