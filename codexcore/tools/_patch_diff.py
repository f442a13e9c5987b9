"""Unified diffs of file lines: difflib's hunks and format, aligned piecewise.

difflib's matcher is quadratic-ish in the length it has to align, and a patch
that touches a long file from top to bottom left it aligning the whole file
(about a second for 200 hunks over 20,000 lines). So the common head and tail
are cut first, and a long span left is split on the lines that occur exactly
once on each side, in the order both sides have them (the anchors of a
patience diff, as ``git diff --patience`` finds them); difflib aligns only the
short stretches between anchors. This module is imported only when a diff is
made: ``exec``'s start-up does not pay for difflib.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Sequence
from typing import Literal

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]
"""difflib's edit operation: tag, a[i1:i2], b[j1:j2]."""

PATIENCE_FROM = 1_000
"""A changed span of this many lines (on either side) is split on anchors before difflib."""


def unified_lines(
    a: Sequence[str], b: Sequence[str], from_file: str, to_file: str, context: int
) -> list[str]:
    """What ``difflib.unified_diff(a, b, from_file, to_file, n=context)`` yields for
    lines that keep their endings; the alignment may differ inside long spans."""
    groups = list(_Grouper(opcodes(a, b)).get_grouped_opcodes(context))
    if not groups:
        return []
    out = [f"--- {from_file}\n", f"+++ {to_file}\n"]
    for group in groups:
        out.append(_hunk_header(group))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in a[i1:i2]]
                continue
            out += ["-" + line for line in a[i1:i2]]
            out += ["+" + line for line in b[j1:j2]]
    return out


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """The edit operations from ``a`` to ``b``, adjacent equal runs merged."""
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    codes: list[Opcode] = [("equal", 0, head, 0, head)]
    middle = _middle(a[head : len(a) - tail], b[head : len(b) - tail])
    codes += _shifted(middle, head, head)
    codes.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return _merged(codes)


def _middle(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    if len(a) >= PATIENCE_FROM or len(b) >= PATIENCE_FROM:
        return _anchored(a, b)
    return _aligned(a, b)


def _aligned(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    if not a or not b:
        return [("insert" if b else "delete", 0, len(a), 0, len(b))] if a or b else []
    return difflib.SequenceMatcher(None, a, b).get_opcodes()


def _anchored(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """difflib between consecutive anchors: lines unique on both sides, in order."""
    codes: list[Opcode] = []
    i0 = j0 = 0
    for i, j in _anchors(a, b):
        if i > i0 or j > j0:
            codes += _shifted(_aligned(a[i0:i], b[j0:j]), i0, j0)
        if i == i0 and j == j0 and codes and codes[-1][0] == "equal":
            codes[-1] = ("equal", codes[-1][1], i + 1, codes[-1][3], j + 1)  # a longer run
        else:
            codes.append(("equal", i, i + 1, j, j + 1))
        i0, j0 = i + 1, j + 1
    codes += _shifted(_aligned(a[i0:], b[j0:]), i0, j0)
    return codes


def _anchors(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """The longest chain of unique-line pairs increasing on both sides (patience sorting)."""
    in_a, in_b = Counter(a), Counter(b)
    where_b = {line: j for j, line in enumerate(b) if in_b[line] == 1}
    pairs = [(i, where_b[line]) for i, line in enumerate(a) if in_a[line] == 1 and line in where_b]
    pile_tops: list[int] = []  # the smallest j ending a chain of each length
    pile_pairs: list[int] = []  # the pair (index in pairs) holding that j
    previous = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pile = bisect.bisect_left(pile_tops, j)
        if pile:
            previous[k] = pile_pairs[pile - 1]
        if pile == len(pile_tops):
            pile_tops.append(j)
            pile_pairs.append(k)
        else:
            pile_tops[pile], pile_pairs[pile] = j, k
    chain: list[tuple[int, int]] = []
    k = pile_pairs[-1] if pile_pairs else -1
    while k >= 0:
        chain.append(pairs[k])
        k = previous[k]
    return chain[::-1]


def _shifted(codes: list[Opcode], di: int, dj: int) -> list[Opcode]:
    return [(tag, i1 + di, i2 + di, j1 + dj, j2 + dj) for tag, i1, i2, j1, j2 in codes]


def _merged(codes: list[Opcode]) -> list[Opcode]:
    """Empty operations dropped, adjacent equal runs joined (difflib's grouping expects it)."""
    out: list[Opcode] = []
    for code in codes:
        tag, i1, i2, j1, j2 = code
        if i1 == i2 and j1 == j2:
            continue
        if tag == "equal" and out and out[-1][0] == "equal":
            out[-1] = ("equal", out[-1][1], i2, out[-1][3], j2)
        else:
            out.append(code)
    return out


class _Grouper(difflib.SequenceMatcher[str]):
    """difflib's own hunk grouping (``get_grouped_opcodes``) over opcodes made here."""

    def __init__(self, codes: list[Opcode]) -> None:
        super().__init__(None, "", "")
        self._codes = codes

    def get_opcodes(self) -> list[Opcode]:
        return self._codes


def _hunk_header(group: Sequence[tuple[str, int, int, int, int]]) -> str:
    first, last = group[0], group[-1]
    return f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"


def _range(start: int, stop: int) -> str:
    """A hunk's range as difflib writes it: 1-based, its length left out when 1."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"
