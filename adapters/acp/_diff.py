"""Whole old and new texts from a unified diff, for ACP's ``diff`` tool call content.

ACP shows an edit as ``{path, oldText, newText}``; the engine reports an
updated file as a unified diff. The adapter reads the file as it is when the
event is handled, which may be before the patch was written (an approval
request, or a ``patch_apply_begin`` handled at once) or after it (the engine
writes right after ``patch_apply_begin``): so the diff is tried forwards
(the file is the old text) and then backwards (the file is already the new
text). Pure text in, text out.
"""

from __future__ import annotations

import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"

Hunk = list[tuple[str, str]]
"""A hunk's lines as (tag, text with its line ending): tag ' ', '-' or '+'."""


class DiffMismatch(Exception):
    """The diff does not fit the text it was applied to."""


def old_and_new(current: str, unified_diff: str) -> tuple[str, str]:
    """(old text, new text) of a file whose text is now ``current``, either side of the diff.

    Raises :class:`DiffMismatch` when ``current`` is neither side.
    """
    hunks = parse_hunks(unified_diff)
    try:
        return current, apply_hunks(current, hunks, reverse=False)
    except DiffMismatch:
        return apply_hunks(current, hunks, reverse=True), current


def parse_hunks(unified_diff: str) -> list[Hunk]:
    """The hunks of a unified diff (file headers skipped); a missing final newline
    marker removes the line ending of the line before it."""
    hunks: list[Hunk] = []
    for line in unified_diff.splitlines(keepends=True):
        if _HUNK.match(line):
            hunks.append([])
        elif hunks and line.rstrip("\n") == _NO_NEWLINE and hunks[-1]:
            tag, text = hunks[-1][-1]
            hunks[-1][-1] = (tag, text.rstrip("\n"))
        elif hunks and line[:1] in (" ", "-", "+"):
            text = line[1:]
            hunks[-1].append((line[0], text if text.endswith("\n") else text + "\n"))
    return hunks


def apply_hunks(text: str, hunks: list[Hunk], *, reverse: bool) -> str:
    """``text`` with ``hunks`` applied (undone when ``reverse``), each found at or after
    the end of the one before; raises :class:`DiffMismatch` when one does not fit."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    drop, add = ("+", "-") if reverse else ("-", "+")
    for hunk in hunks:
        before = [t for tag, t in hunk if tag in (" ", drop)]
        after = [t for tag, t in hunk if tag in (" ", add)]
        found = _find(lines, before, at)
        out += lines[at:found]
        out += after
        at = found + len(before)
    out += lines[at:]
    return "".join(out)


def _find(lines: list[str], block: list[str], start: int) -> int:
    if not block:
        return len(lines) if start >= len(lines) else start
    for index in range(start, len(lines) - len(block) + 1):
        if lines[index : index + len(block)] == block:
            return index
    raise DiffMismatch("a hunk does not match the file")
