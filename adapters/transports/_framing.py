"""NDJSON framing: a pure, incremental line reader and the native dialect's line decoder.

The reader is fed bytes as they arrive (split anywhere, even inside a UTF-8
sequence) and returns whole lines. It never holds more than ``limit`` bytes:
a line that grows past the limit is reported once, as :class:`LineTooLong`,
at the moment it crosses the limit, and everything up to its ``\\n`` is then
discarded as it arrives. No I/O happens here, so every case is tested with
plain bytes.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from codexcore.engine import Rejected, parse_submission
from codexcore.protocol import Hello, ProtocolError, Submission, decode_hello
from codexcore.protocol._value import Value

DEFAULT_MAX_LINE_BYTES = 1024 * 1024


@attrs.frozen(repr=False, eq=False)
class LineTooLong(Value):
    """A line longer than ``limit`` bytes (not counting its ``\\n``) was discarded."""

    limit: int


Item = bytes | LineTooLong


class LineReader:
    """Splits a byte stream into ``\\n``-terminated lines of at most ``limit`` bytes.

    ``feed(data)`` returns the items completed by ``data``, in order: each
    line's bytes (without the ``\\n``), or a :class:`LineTooLong` in place of a
    line that was too long. ``finish()`` at end of input returns the last,
    unterminated line if there is one.
    """

    __slots__ = ("_buffer", "_discarding", "limit")

    def __init__(self, limit: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if limit < 1:
            raise ValueError(f"limit must be positive, not {limit!r}")
        self.limit = limit
        self._buffer = bytearray()
        self._discarding = False

    @property
    def buffered(self) -> int:
        """How many bytes of an unfinished line are held (never more than ``limit``)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Item]:
        items: list[Item] = []
        start, size = 0, len(data)
        buffer = self._buffer
        while start < size:
            newline = data.find(b"\n", start)
            end = size if newline < 0 else newline
            if self._discarding:
                if newline < 0:
                    break
                self._discarding = False
            elif len(buffer) + (end - start) > self.limit:
                items.append(LineTooLong(self.limit))
                buffer.clear()
                self._discarding = newline < 0
            elif newline < 0:
                buffer += data[start:]
            elif buffer:
                buffer += data[start:newline]
                items.append(bytes(buffer))
                buffer.clear()
            else:
                items.append(data[start:newline])
            if newline < 0:
                break
            start = newline + 1
        return items

    def finish(self) -> list[Item]:
        """End of input: an unterminated last line is still a line (then the reader is reset)."""
        items: list[Item] = [bytes(self._buffer)] if self._buffer else []
        self._buffer.clear()
        self._discarding = False
        return items


# --- the native dialect: what a client's line means ----------------------------------


def is_blank(line: bytes) -> bool:
    """Blank lines (only whitespace) are skipped without an answer."""
    return not line or line.isspace()  # as not line.strip(), without copying the line


def decode_line(line: bytes) -> Submission | Rejected | Hello:
    """A client's line as a Submission, a ``hello``, or a :class:`Rejected` naming the problem.

    The codes of the rejections: ``invalid_utf8``, ``invalid_json``,
    ``not_an_object``, ``bad_hello`` and, for a submission that fails
    validation, ``bad_submission``.
    """
    try:
        value: Any = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return _undecodable(line, exc)
    if not isinstance(value, dict):
        return Rejected("", f"a line must be a JSON object, got {_kind(value)}", "not_an_object")
    if value.get("type") == "hello" and "op" not in value:
        try:
            return decode_hello(value)
        except ProtocolError as exc:
            return Rejected("", f"bad hello: {exc.message}", "bad_hello")
    return parse_submission(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"


def _undecodable(line: bytes, exc: orjson.JSONDecodeError) -> Rejected:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        byte = line[bad.start]
        return Rejected(
            "",
            f"the line is not valid UTF-8 (byte 0x{byte:02x} at offset {bad.start})",
            "invalid_utf8",
        )
    return Rejected("", f"invalid JSON: {exc}", "invalid_json")
