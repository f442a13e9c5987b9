"""Incremental Server-Sent Events decoder (WHATWG "event stream interpretation").

Pure: bytes in, events out, no I/O. Built for the common shape of streamed
model output, whole ``event: X\\ndata: {json}\\n\\n`` events (the ``event:`` line
optional), usually one per network chunk: such a chunk costs one UTF-8 decode
and one regex match. Anything else takes the general line parser.
"""

from __future__ import annotations

import re

import attrs

from ..protocol._value import Value

__all__ = ["SSEDecoder", "ServerSentEvent"]


# Dict-backed rather than slotted: attrs then writes the fields straight into
# __dict__, which builds about twice as fast, and one is built per delta.
@attrs.frozen(slots=False, repr=False, eq=False)
class ServerSentEvent(Value):
    """One dispatched event.

    ``event`` is the event type (``"message"`` when the stream named none),
    ``data`` the event's data lines joined with ``\\n``, ``id`` the stream's last
    event id at dispatch time (it persists across events, as the spec says) and
    ``retry`` the reconnection time in milliseconds if this event carried one.
    """

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


# Whole-chunk shapes for the fast path. ``.`` stops at "\n" but not at "\r",
# so the caller rules "\r" out first.
_SIMPLE_EVENT = re.compile(r"(?:event: (.*)\n)?data: (.*)\n\n")
_SIMPLE_EVENTS = re.compile(r"(?:(?:event: .*\n)?data: .*\n\n)+")


class SSEDecoder:
    """Feed it a body's bytes as they arrive; it returns the events completed so far.

    Chunk boundaries may fall anywhere, including inside a UTF-8 sequence or
    between ``\\r`` and ``\\n``: the events are the same as for the whole body.
    Lines end at ``\\r\\n``, ``\\n`` or ``\\r``. A blank line dispatches the
    pending event unless it has no ``data`` field. Comments (lines starting
    with ``:``) and unknown fields are ignored, one space after the colon is
    stripped, a leading byte-order mark is skipped and invalid UTF-8 becomes
    U+FFFD. One decoder serves one stream.
    """

    __slots__ = (
        "_at_boundary",
        "_data",
        "_event",
        "_last_id",
        "_retry",
        "_skip_lf",
        "_started",
        "_tail",
    )

    def __init__(self) -> None:
        self._reset()

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Consume ``chunk`` and return the events it completed, in order."""
        simple = self._simple(chunk)
        if simple is not None:
            last_id = self._last_id
            return [ServerSentEvent(event, data, last_id) for event, data in simple]
        return self._feed_lines(chunk)

    def feed_raw(self, chunk: bytes) -> list[tuple[str, str]]:
        """:meth:`feed`, but only each event's ``(event, data)``: no object per event
        (what a client that ignores ids and retry hints needs, on its hot path)."""
        simple = self._simple(chunk)
        if simple is not None:
            return simple
        return [(sse.event, sse.data) for sse in self._feed_lines(chunk)]

    def _simple(self, chunk: bytes) -> list[tuple[str, str]] | None:
        """The events of a chunk of whole ``event:``/``data:`` events, or None.

        Real streams arrive one or a few whole events per chunk; those take
        one decode and one regex match, and everything else the line parser.
        """
        if not self._at_boundary:
            return None
        try:
            text = chunk.decode()
        except UnicodeDecodeError:  # e.g. a character split across chunks
            return None
        if "\r" in text:
            return None
        match = _SIMPLE_EVENT.fullmatch(text)
        if match is not None:
            event, data = match.groups()
            return [(event or "message", data)]
        if _SIMPLE_EVENTS.fullmatch(text) is not None:
            return [(event or "message", data) for event, data in _SIMPLE_EVENT.findall(text)]
        return None

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: drop any unfinished event and reset for a new stream.

        The spec discards an event that lacks its terminating blank line, so
        this returns no events; it is there so callers can drive the decoder
        like any incremental codec (``feed`` ..., ``flush``).
        """
        self._reset()
        return []

    def _reset(self) -> None:
        self._tail = bytearray()  # an unfinished line
        self._skip_lf = False  # the last chunk ended in "\r": a leading "\n" pairs with it
        self._started = False  # a leading byte-order mark has been dealt with
        self._event = ""
        self._data: list[str] = []
        self._retry: int | None = None
        self._last_id: str | None = None
        # Nothing at all is buffered: the next chunk may take the fast path.
        self._at_boundary = False

    def _feed_lines(self, chunk: bytes) -> list[ServerSentEvent]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        if b"\r" in chunk:
            chunk = self._normalise(chunk)
        end = chunk.rfind(b"\n")
        if end < 0:
            self._tail += chunk  # only the new bytes are scanned: long lines stay linear
            self._at_boundary = False
            return []
        if self._tail:
            head = bytes(self._tail) + chunk[:end]
            self._tail = bytearray(chunk[end + 1 :])
        else:
            head = chunk[:end]
            self._tail += chunk[end + 1 :]
        # Only whole lines are decoded, so a character split across chunks is
        # always decoded in one piece.
        text = head.decode("utf-8", "replace")
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        events = self._parse_lines(text.split("\n"))
        self._at_boundary = not (
            self._tail or self._data or self._event or self._retry is not None or self._skip_lf
        )
        return events

    def _normalise(self, chunk: bytes) -> bytes:
        """Turn CR LF and lone CR line ends into LF; the tail never holds a CR."""
        if chunk.endswith(b"\r"):
            self._skip_lf = True
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _parse_lines(self, lines: list[str]) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                self._dispatch(events)
                continue
            colon = line.find(":")
            if colon == 0:
                continue
            if colon < 0:
                self._apply_field(line, "")
                continue
            value = line[colon + 1 :]
            self._apply_field(line[:colon], value[1:] if value.startswith(" ") else value)
        return events

    def _apply_field(self, field: str, value: str) -> None:
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if self._data:
            data = "\n".join(self._data)
            events.append(
                ServerSentEvent(self._event or "message", data, self._last_id, self._retry)
            )
            self._data = []
        self._event = ""
        self._retry = None
