"""unified_diff cuts the common head and tail before difflib, and splits a long span
on lines unique to both sides: its hunks must still turn the old text into the new
one, with correct line numbers."""

from __future__ import annotations

import difflib
import re
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from codexcore.tools import _patch_diff
from codexcore.tools.apply_patch import unified_diff

HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")
LINES = st.lists(st.sampled_from(["a", "b", "c", "", "d e"]), max_size=40)


def apply(old: list[str], diff: str) -> list[str]:
    """Apply a unified diff's hunks, checking every context and removed line, and each
    hunk header's start and length on both sides."""
    out: list[str] = []
    position = 0
    expected: list[int] = []  # the hunk's old and new lengths still to see
    for line in diff.splitlines():
        if match := HEADER.match(line):
            assert not any(expected), "the previous hunk is shorter than its header"
            old_start, old_len, new_start, new_len = (
                int(group) if group is not None else 1 for group in match.groups()
            )
            start = old_start - (0 if old_len == 0 else 1)
            out += old[position:start]
            position = start
            assert len(out) == new_start - (0 if new_len == 0 else 1), "bad new start"
            expected = [old_len, new_len]
        elif line.startswith(("---", "+++", "\\")):
            continue
        elif line.startswith("+"):
            out.append(line[1:])
            expected[1] -= 1
        elif line.startswith(("-", " ")):
            assert old[position] == line[1:], f"line {position + 1} does not match"
            expected[0] -= 1
            if line.startswith(" "):
                out.append(line[1:])
                expected[1] -= 1
            position += 1
    assert not any(expected), "the last hunk is shorter than its header"
    return out + old[position:]


@settings(max_examples=300, deadline=None)
@given(LINES, LINES, LINES)
def test_hunks_rebuild_the_new_text(
    head: list[str], old_mid: list[str], new_mid: list[str]
) -> None:
    common_tail = ["z", "y", "x", "w"]
    old = [*head, *old_mid, *common_tail]
    new = [*head, *new_mid, *common_tail]
    diff = unified_diff("\n".join(old) + "\n", "\n".join(new) + "\n", "f", "f")
    assert apply(old, diff) == new


def test_line_numbers_of_a_change_deep_in_a_file() -> None:
    old = [f"line {i}" for i in range(1, 1001)]
    new = list(old)
    new[699] = "changed"
    diff = unified_diff("\n".join(old) + "\n", "\n".join(new) + "\n", "f", "f")
    assert "@@ -697,7 +697,7 @@\n line 697\n line 698\n line 699\n-line 700\n+changed\n" in diff


@settings(max_examples=300, deadline=None)
@given(LINES, LINES, st.lists(st.integers(0, 200), max_size=4))
def test_anchored_hunks_rebuild_the_new_text(
    old: list[str], new_mid: list[str], uniques: list[int]
) -> None:
    """The long-span path (forced here on short texts): anchors on unique lines, difflib
    between them, must still give hunks that turn the old text into the new one."""
    markers = [f"unique {n}" for n in uniques]
    old = [*markers[:2], *old, *markers[2:]]
    new = [*markers[:1], *new_mid, *markers[1:3], "added"]
    with patch.object(_patch_diff, "PATIENCE_FROM", 0):
        diff = unified_diff(
            "".join(f"{line}\n" for line in old), "".join(f"{line}\n" for line in new), "f", "f"
        )
    assert apply(old, diff) == new


def test_a_patch_across_a_long_file_gives_difflibs_own_diff() -> None:
    """200 scattered edits, an insertion and a deletion in 20,000 lines: the anchored
    diff is difflib's, hunk for hunk (and no longer takes difflib's second or so)."""
    old = [f"value_{i} = compute({i})" for i in range(20_000)]
    new = list(old)
    for i in range(50, 20_000, 100):
        new[i] += "  # changed"
    new.insert(7_000, "inserted")
    del new[12_000:12_005]
    text_old, text_new = "\n".join(old) + "\n", "\n".join(new) + "\n"
    lines_old, lines_new = text_old.splitlines(True), text_new.splitlines(True)
    expected = "".join(difflib.unified_diff(lines_old, lines_new, "a/f", "b/f", n=3))
    assert unified_diff(text_old, text_new, "f", "f") == expected


def test_a_long_file_of_repeated_lines_still_diffs() -> None:
    """No line is unique, so there is no anchor: difflib aligns the span as before."""
    old = ["same"] * 3_000
    new = ["same"] * 1_500 + ["other"] + ["same"] * 1_500
    diff = unified_diff("\n".join(old) + "\n", "\n".join(new) + "\n", "f", "f")
    assert apply(old, diff) == new
    assert diff.count("\n+other\n") == 1
