"""One string field of a JSON object, decoded while the object is still being written.

A ``generate`` answer is a JSON object the model writes a few characters at a
time (structured output: ``{"code": "...", "componentCount": 3, ...}``). Its
``code`` is shown to the app as it is written: :class:`FieldStream` is fed the
pieces of the object's text, in order, and returns the decoded characters of
that one field's string value each piece completes, escapes included (an
escape cut between two pieces is held until it is whole), so that the pieces it
returns, joined, are exactly what ``json.loads`` reads for that field.
"""

from __future__ import annotations

import re

_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_PLAIN = re.compile(r'[^"\\]+')
_HIGH = range(0xD800, 0xDC00)
_LOW = range(0xDC00, 0xE000)


class FieldStream:
    """The string value of the top-level ``field`` of a JSON object fed piece by piece.

    Only the object's own keys count (a ``"code"`` key nested deeper, or a
    ``"code"`` inside another string, is not the field). A field whose value is
    not a string (``null``) yields nothing. Bad JSON yields what was read before it.
    """

    __slots__ = (
        "_depth",
        "_escape",
        "_expect_key",
        "_field",
        "_high",
        "_in_string",
        "_is_key",
        "_key",
        "_state",
        "done",
    )

    def __init__(self, field: str) -> None:
        self._field = field
        self._depth = 0
        self._in_string = False
        self._is_key = False  # the string being read is a key of the top object
        self._key: list[str] = []
        self._expect_key = False
        # "" (elsewhere), "colon" (after the field's key), "value" (before its value),
        # "target" (inside its string value)
        self._state = ""
        self._escape: str | None = None  # an escape begun: "\\" or "\\uXX..."
        self._high: int | None = None  # a high surrogate waiting for its low half
        self.done = False  # the field's string was read to its end

    def feed(self, text: str) -> str:
        """The field's characters that ``text`` (the next piece of the object) completes."""
        out: list[str] = []
        at, end = 0, len(text)
        while at < end:
            at = self._string(text, at, out) if self._in_string else self._structure(text, at)
        return "".join(out)

    # --- outside strings ----------------------------------------------------------------

    def _structure(self, text: str, at: int) -> int:
        char = text[at]
        if char == '"':
            self._in_string = True
            self._is_key = self._depth == 1 and self._expect_key
            self._key.clear()
            if self._state == "value":
                self._state, self._is_key = "target", False
            return at + 1
        if char in " \t\r\n":
            return at + 1
        if self._state == "colon" and char == ":":
            self._state = "value"
            return at + 1
        self._state = ""  # the field's value is no string (or the JSON is bad)
        if char in "{[":
            self._depth += 1
            self._expect_key = char == "{" and self._depth == 1
        elif char in "}]":
            self._depth -= 1
            self._expect_key = False
        elif char == ",":
            self._expect_key = self._depth == 1
        return at + 1

    # --- inside strings -----------------------------------------------------------------

    def _string(self, text: str, at: int, out: list[str]) -> int:
        if self._escape is not None:
            return self._continue_escape(text, at, out)
        plain = _PLAIN.match(text, at)
        if plain is not None:
            self._emit(plain.group(), out)
            return plain.end()
        if text[at] == "\\":
            self._escape = "\\"
            return self._continue_escape(text, at + 1, out)
        self._end_string(out)  # the closing quote
        return at + 1

    def _continue_escape(self, text: str, at: int, out: list[str]) -> int:
        escape = self._escape
        assert escape is not None
        while at < len(text) and (len(escape) < 2 or (escape[1] == "u" and len(escape) < 6)):
            escape += text[at]
            at += 1
        if len(escape) < 2 or (escape[1] == "u" and len(escape) < 6):
            self._escape = escape  # cut by the piece's end: the next piece completes it
            return at
        self._escape = None
        if escape[1] == "u":
            try:
                self._code_point(int(escape[2:], 16), out)
            except ValueError:
                self._emit(escape, out)  # not JSON; json.loads would refuse it anyway
        else:
            self._emit(_ESCAPES.get(escape[1], escape[1]), out)
        return at

    def _code_point(self, code: int, out: list[str]) -> None:
        """A ``\\uXXXX``: a surrogate pair becomes one character, as json.loads reads it."""
        high, self._high = self._high, None
        if high is not None and code in _LOW:
            self._put(chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)), out)
            return
        if high is not None:
            self._put(chr(high), out)
        if code in _HIGH:
            self._high = code
        else:
            self._put(chr(code), out)

    def _emit(self, chars: str, out: list[str]) -> None:
        if self._high is not None:
            high, self._high = self._high, None
            self._put(chr(high), out)
        self._put(chars, out)

    def _put(self, chars: str, out: list[str]) -> None:
        if self._state == "target":
            out.append(chars)
        elif self._is_key:
            self._key.append(chars)

    def _end_string(self, out: list[str]) -> None:
        if self._high is not None:
            high, self._high = self._high, None
            self._put(chr(high), out)
        self._in_string = False
        if self._state == "target":
            self._state, self.done = "", True
        elif self._is_key:
            self._expect_key = False
            if "".join(self._key) == self._field:
                self._state = "colon"
        self._is_key = False
