"""File text as lines with their own endings: applying hunks, and unified diffs."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ._patch_match import Replacement, locate_chunks
from ._patch_types import Chunk

_BOM = "\ufeff"
_NO_NEWLINE = "\\ No newline at end of file\n"

_Line = tuple[str, str]
"""A file line: its text and its ending ("\\n", "\\r\\n", or "" for an unterminated last line)."""


def split_lines(text: str) -> list[_Line]:
    """Split ``text`` on "\\n" only, keeping each line's ending (CRLF counts as one)."""
    parts = text.split("\n")
    lines = [(part[:-1], "\r\n") if part.endswith("\r") else (part, "\n") for part in parts[:-1]]
    if parts[-1]:
        lines.append((parts[-1], ""))
    return lines


def preferred_ending(text: str) -> str:
    """The ending of the first line, as rustfmt, Ruff and Codex pick it; "\\n" if none."""
    newline = text.find("\n")
    return "\r\n" if newline > 0 and text[newline - 1] == "\r" else "\n"


def apply_chunks(content: str, chunks: Sequence[Chunk], path: str, shown: str) -> str:
    """Return ``content`` with ``chunks`` applied; raise ``PatchApplyError`` if one misses.

    Line endings: lines kept from the file (untouched or context lines) keep their
    own text and ending, so a fuzzy-matched context line is not rewritten; '+' lines
    are written as the patch gives them, ended with the file's preferred ending.
    Hence the final newline: an unterminated last line stays so while it remains
    the last line; once the patch adds lines after it or replaces it, every line is
    terminated. An update never removes a final newline. A BOM is kept.
    """
    bom = _BOM if content.startswith(_BOM) else ""
    body = content[len(bom) :]
    lines = split_lines(body)
    placed = locate_chunks([text for text, _ in lines], chunks, path, shown)
    result = _splice(lines, placed, preferred_ending(body))
    return bom + "".join(text + ending for text, ending in result)


def _splice(lines: list[_Line], placed: list[Replacement], ending: str) -> list[_Line]:
    out: list[_Line] = []
    cursor = 0
    for replacement in placed:
        out.extend(lines[cursor : replacement.start])
        cursor = replacement.start
        for hunk_line in replacement.lines:
            if hunk_line.op == "+":
                out.append((hunk_line.text, ending))
                continue
            if hunk_line.op == " ":
                out.append(lines[cursor])
            cursor += 1
    out.extend(lines[cursor:])
    # Only the last line may lack an ending: one that moved inward gets one.
    return [(text, line_end or ending) for text, line_end in out[:-1]] + out[-1:]


def unified_diff(
    old: str | None, new: str | None, path_a: str, path_b: str, *, context: int = 3
) -> str:
    """A git-style unified diff from ``old`` to ``new`` (None: the file is absent).

    Headers are ``--- a/PATH_A`` and ``+++ b/PATH_B`` (``/dev/null`` for an absent
    side; an absolute path is shown without the a/ b/ prefix). A line without a
    final newline is followed by git's ``\\ No newline at end of file``. Equal texts
    give "" unless the paths differ (a rename), which gives the two headers alone.
    """
    from ._patch_diff import unified_lines  # difflib loads only when a diff is made

    from_file = "/dev/null" if old is None else _label("a", path_a)
    to_file = "/dev/null" if new is None else _label("b", path_b)
    diff = unified_lines(_diff_lines(old), _diff_lines(new), from_file, to_file, context)
    out = [line if line.endswith("\n") else f"{line}\n{_NO_NEWLINE}" for line in diff]
    if not out and old is not None and new is not None and path_a != path_b:
        out = [f"--- {from_file}\n", f"+++ {to_file}\n"]
    return "".join(out)


def _label(prefix: str, path: str) -> str:
    return path if os.path.isabs(path) else f"{prefix}/{path}"


def _diff_lines(text: str | None) -> list[str]:
    if text is None:
        return []
    return [line + ending for line, ending in split_lines(text)]
