"""Find where each hunk of an Update applies in a file's lines.

Pure functions over lists of line texts (without line endings).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from ..protocol._value import Value
from ._patch_types import Chunk, HunkLine, PatchApplyError

# Typographic characters models swap for ASCII (or the other way round).
_PUNCTUATION = str.maketrans(
    {
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys(
            "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "
        ),
        "\u2026": "...",
    }
)


def normalise_punctuation(text: str) -> str:
    """``text`` stripped, with typographic dashes, quotes, spaces and ellipses in ASCII."""
    return text.translate(_PUNCTUATION).strip()


def _exact(text: str) -> str:
    return text


MATCH_LEVELS: tuple[Callable[[str], str], ...] = (
    _exact,
    str.rstrip,
    str.strip,
    normalise_punctuation,
)
"""How lines are compared, strictest first; the first level that matches anywhere wins."""


def seek_lines(
    lines: Sequence[str], pattern: Sequence[str], start: int, *, at_end: bool = False
) -> int | None:
    """Index of the first run of ``lines`` at or after ``start`` equal to ``pattern``.

    Each level of ``MATCH_LEVELS`` is tried over the whole range before the next,
    more lenient one, so an exact match later in the file beats a fuzzy one before
    it. With ``at_end`` the run must be the last ``len(pattern)`` lines. An empty
    pattern matches at ``start``.
    """
    if not pattern:
        return start
    size = len(pattern)
    last = len(lines) - size
    candidates = range(max(start, last) if at_end else start, last + 1)
    if not candidates:
        return None
    window = list(lines[candidates.start : candidates.stop - 1 + size])
    for key in MATCH_LEVELS:
        # Only the lines still in range are keyed, and only for a lenient
        # level: the exact pass costs a C-level scan for the first line.
        wanted = [key(line) for line in pattern]
        keyed = window if key is _exact else [key(line) for line in window]
        found = _find_run(keyed, wanted, len(candidates))
        if found is not None:
            return candidates.start + found
    return None


def _find_run(keyed: list[str], wanted: list[str], starts: int) -> int | None:
    """The first ``i < starts`` with ``keyed[i : i + len(wanted)] == wanted``."""
    i = 0
    while True:
        try:
            i = keyed.index(wanted[0], i, starts)
        except ValueError:
            return None
        if keyed[i : i + len(wanted)] == wanted:
            return i
        i += 1


@attrs.frozen(repr=False, eq=False)
class Replacement(Value):
    """A hunk placed in the file: its body aligned so its first old line is ``start``.

    A pure insertion (no old lines) inserts before the line at ``start``.
    """

    start: int
    lines: tuple[HunkLine, ...]

    @property
    def old_count(self) -> int:
        """How many file lines the hunk consumes (context and removed lines)."""
        return sum(1 for line in self.lines if line.op != "+")


def locate_chunks(
    lines: Sequence[str], chunks: Sequence[Chunk], path: str, shown: str
) -> list[Replacement]:
    """Place every chunk, in order, each searched after the previous one.

    A chunk's ``@@`` anchor is sought first (from the end of the previous chunk) and
    its old lines after the anchor. A chunk with no old lines inserts right after
    its anchor, or at the end of the file when it has none. Raises
    ``PatchApplyError`` naming ``shown`` and listing the lines not found.
    """
    placed: list[Replacement] = []
    cursor = 0
    for number, chunk in enumerate(chunks, 1):
        start = cursor
        if chunk.context is not None:
            anchor = seek_lines(lines, [chunk.context], cursor)
            if anchor is None:
                raise _anchor_not_found(chunk.context, number, path, shown)
            start = anchor + 1
        replacement = _place(lines, chunk, start)
        if replacement is None:
            raise _lines_not_found(lines, chunk, start, number, path, shown)
        placed.append(replacement)
        cursor = replacement.start + replacement.old_count
    return placed


def _variants(chunk: Chunk) -> list[tuple[HunkLine, ...]]:
    """The chunk's body, then without trailing blank context lines.

    A blank line between two hunks in the patch parses as trailing empty context;
    when the file has no blank line there, the hunk still means the same edit.
    """
    body = list(chunk.lines)
    while body and body[-1] == HunkLine(" ", ""):
        body.pop()
    return [chunk.lines] if len(body) == len(chunk.lines) else [chunk.lines, tuple(body)]


def _place(lines: Sequence[str], chunk: Chunk, start: int) -> Replacement | None:
    for body in _variants(chunk):
        old = [line.text for line in body if line.op != "+"]
        if not old:
            has_anchor = chunk.context is not None and not chunk.is_end_of_file
            return Replacement(start if has_anchor else len(lines), body)
        index = seek_lines(lines, old, start, at_end=chunk.is_end_of_file)
        if index is not None:
            return Replacement(index, body)
    return None


def _anchor_not_found(context: str, number: int, path: str, shown: str) -> PatchApplyError:
    return PatchApplyError(
        f"Failed to find the context line '@@ {context}' of hunk {number} in {shown}"
        " (after the previous hunk)",
        path,
    )


def _lines_not_found(
    lines: Sequence[str], chunk: Chunk, start: int, number: int, path: str, shown: str
) -> PatchApplyError:
    old = chunk.old_lines
    where = ""
    if chunk.context is not None:
        where += f" after '@@ {chunk.context}'"
    if chunk.is_end_of_file:
        where += " at the end of the file (*** End of File)"
    hint = ""
    elsewhere = seek_lines(lines, old, 0)
    if elsewhere is not None and elsewhere < start:
        hint = (
            f"\n(These lines occur at line {elsewhere + 1}, before where this hunk's search"
            f" starts, line {start + 1}: hunks must be in file order.)"
        )
    elif elsewhere is not None:
        hint = f"\n(These lines occur at line {elsewhere + 1}, not at the end of the file.)"
    return PatchApplyError(
        f"Failed to find the expected lines of hunk {number} in {shown}{where}:\n"
        + "\n".join(old)
        + hint,
        path,
    )
