"""Bounded command output: what is kept in memory and what is shown to the model.

Two layers bound a command's output:

* :class:`HeadTailBuffer` bounds what :func:`codexcore.tools.exec.run_command`
  *captures* (raw bytes, typically ~1 MiB per stream), so a command that writes
  gigabytes never costs more than a fixed amount of memory.
* :func:`format_for_model` bounds what goes back to the model as the function call
  output (UTF-8 text, typically ~10 kB), mirroring the Codex CLI's shell tool.

Both keep the beginning and the end of the output, because that is where commands
print what matters (a banner or the first error; a summary or the last error), and
both mark the cut with the same line: ``\\n[... N bytes omitted ...]\\n``.
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only for annotations: exec.py imports this module at runtime.
    from codexcore.tools.exec import ExecResult

__all__ = ["HeadTailBuffer", "format_for_model", "omission_marker", "truncate_middle"]

DEFAULT_MODEL_OUTPUT_LIMIT = 10_000

# Matches omission_marker() output, so a second cut can count what a first one dropped.
_MARKER_RE = re.compile(rb"\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n")


def omission_marker(omitted_bytes: int) -> str:
    """The line inserted where ``omitted_bytes`` bytes of output were cut out."""
    return f"\n[... {omitted_bytes} bytes omitted ...]\n"


class HeadTailBuffer:
    """An accumulator that keeps the first and the last bytes of a byte stream.

    Of everything passed to :meth:`append`, it retains the first ``limit // 2`` bytes
    (the head) and the last ``limit - limit // 2`` bytes (the tail) and only *counts*
    the bytes in between, so memory stays at most ``limit`` bytes (plus one chunk in
    flight) however much is appended. Bytes are retained verbatim; the cut is made
    at byte positions, and :meth:`decode` smooths it to UTF-8 character boundaries.

    This is deliberately mutable (it is fed chunk by chunk while a command runs) and
    not thread-safe; it belongs to one reader.
    """

    __slots__ = ("_head", "_head_cap", "_limit", "_omitted", "_tail", "_tail_cap", "_tail_len")

    def __init__(self, limit: int) -> None:
        """Create an empty buffer retaining at most ``limit`` bytes (``limit >= 0``)."""
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self._limit = limit
        self._head_cap = limit // 2
        self._tail_cap = limit - self._head_cap
        self._head = bytearray()
        # A deque of chunks rather than one bytearray: dropping from the front of
        # the tail then costs O(chunk), not O(tail), per append.
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self._omitted = 0

    @property
    def limit(self) -> int:
        """The maximum number of bytes retained."""
        return self._limit

    @property
    def total_bytes(self) -> int:
        """How many bytes were appended in all (retained + omitted)."""
        return len(self._head) + self._tail_len + self._omitted

    @property
    def omitted_bytes(self) -> int:
        """How many bytes were dropped between the head and the tail."""
        return self._omitted

    def append(self, data: bytes) -> None:
        """Add ``data`` to the end of the stream."""
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._push_tail(data)

    def _push_tail(self, data: bytes) -> None:
        if len(data) >= self._tail_cap:
            # The new data alone fills the tail: everything older in the tail goes.
            self._omitted += self._tail_len + len(data) - self._tail_cap
            self._tail.clear()
            kept = data[len(data) - self._tail_cap :]
            if kept:
                self._tail.append(kept)
            self._tail_len = len(kept)
            return
        self._tail.append(data)
        self._tail_len += len(data)
        self._trim_tail(self._tail_len - self._tail_cap)

    def _trim_tail(self, excess: int) -> None:
        while excess > 0:
            first = self._tail[0]
            cut = min(excess, len(first))
            if cut == len(first):
                self._tail.popleft()
            else:
                self._tail[0] = first[cut:]
            self._tail_len -= cut
            self._omitted += cut
            excess -= cut

    def ends_with(self, suffix: bytes) -> bool:
        """Whether the stream appended so far ends with ``suffix``.

        Only the retained tail is consulted; a suffix longer than the tail is
        reported as not matching.
        """
        if self._omitted == 0:
            return (bytes(self._head) + b"".join(self._tail)).endswith(suffix)
        return b"".join(self._tail).endswith(suffix)

    def decode(self) -> str:
        """The retained bytes as text, with :func:`omission_marker` where bytes were cut.

        Decodes UTF-8 with ``errors="replace"``. At a cut, a character split by the
        byte-level cut is dropped entirely rather than turned into U+FFFD, and the
        marker's count includes those few extra bytes, so it always states exactly
        how many bytes of the original stream are missing.
        """
        head = bytes(self._head)
        tail = b"".join(self._tail)
        if self._omitted == 0:
            return (head + tail).decode("utf-8", errors="replace")
        head_end = len(head) - _partial_char_suffix_len(head)
        tail_start = _continuation_prefix_len(tail)
        omitted = self._omitted + (len(head) - head_end) + tail_start
        return (
            head[:head_end].decode("utf-8", errors="replace")
            + omission_marker(omitted)
            + tail[tail_start:].decode("utf-8", errors="replace")
        )


def truncate_middle(text: str, limit_bytes: int) -> str:
    """Bound ``text`` to ``limit_bytes`` UTF-8 bytes by cutting out its middle.

    Text that fits is returned unchanged. Otherwise the result is the first
    ``limit_bytes // 2`` bytes and the last ``limit_bytes - limit_bytes // 2`` bytes
    (each shortened to the nearest character boundary, so no character is broken)
    joined by :func:`omission_marker`; the marker is not counted in the limit. If
    the cut-out middle itself contains a marker (from an earlier cut, such as the
    capture buffer's), the count includes the bytes that marker stood for, so the
    number shown is what is missing from the command's real output.
    """
    if limit_bytes < 0:
        raise ValueError(f"limit_bytes must be >= 0, got {limit_bytes}")
    # surrogatepass: round-trip any str exactly, even one with lone surrogates.
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit_bytes:
        return text
    head_end = _char_start_at_or_before(data, limit_bytes // 2)
    tail_start = _char_start_at_or_after(data, len(data) - (limit_bytes - limit_bytes // 2))
    return (
        data[:head_end].decode("utf-8", errors="surrogatepass")
        + omission_marker(_omitted_in(data[head_end:tail_start]))
        + data[tail_start:].decode("utf-8", errors="surrogatepass")
    )


def format_for_model(result: ExecResult, *, limit_bytes: int = DEFAULT_MODEL_OUTPUT_LIMIT) -> str:
    """The shell tool's function call output for ``result``, as a JSON string.

    Shape (as in the Codex CLI)::

        {"output": "<aggregated stdout+stderr, see truncate_middle>",
         "metadata": {"exit_code": 0, "duration_seconds": 1.2}}

    ``duration_seconds`` is rounded to one decimal. ``"timed_out": true`` is added to
    the metadata only when the command timed out. The output is bounded with
    :func:`truncate_middle` to ``limit_bytes`` (plus the marker). Non-ASCII text
    is emitted as-is (not ``\\u`` escaped): it is cheaper in tokens for the model.
    """
    metadata: dict[str, object] = {
        "exit_code": result.exit_code,
        "duration_seconds": round(result.duration_ms / 1000, 1),
    }
    if result.timed_out:
        metadata["timed_out"] = True
    payload = {
        "output": truncate_middle(result.aggregated_output, limit_bytes),
        "metadata": metadata,
    }
    return json.dumps(payload, ensure_ascii=False)


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _char_start_at_or_before(data: bytes, index: int) -> int:
    """The largest character boundary <= ``index`` (``index < len(data)``)."""
    while index > 0 and _is_continuation(data[index]):
        index -= 1
    return index


def _char_start_at_or_after(data: bytes, index: int) -> int:
    """The smallest character boundary >= ``index``."""
    while index < len(data) and _is_continuation(data[index]):
        index += 1
    return index


def _sequence_len(lead: int) -> int:
    """The length of the UTF-8 sequence ``lead`` starts (1 for ASCII or invalid)."""
    if lead >= 0xF0:
        return 4
    if lead >= 0xE0:
        return 3
    if lead >= 0xC0:
        return 2
    return 1


def _partial_char_suffix_len(data: bytes) -> int:
    """How many trailing bytes of ``data`` are an incomplete UTF-8 sequence."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if not _is_continuation(byte):
            return back if _sequence_len(byte) > back else 0
    return 0


def _continuation_prefix_len(data: bytes) -> int:
    """How many leading bytes of ``data`` continue a character that started earlier."""
    count = 0
    while count < min(3, len(data)) and _is_continuation(data[count]):
        count += 1
    return count


def _omitted_in(middle: bytes) -> int:
    """Bytes of original output that ``middle`` stands for (see truncate_middle)."""
    omitted = len(middle)
    for match in _MARKER_RE.finditer(middle):
        omitted += int(match.group(1)) - len(match.group(0))
    return omitted
