"""unified_diff cuts the common head and tail before difflib: its hunks must still
turn the old text into the new one, with correct line numbers."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from codexcore.tools.apply_patch import unified_diff

HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
LINES = st.lists(st.sampled_from(["a", "b", "c", "", "d e"]), max_size=40)


def apply(old: list[str], diff: str) -> list[str]:
    """Apply a unified diff's hunks, checking every context and removed line."""
    out: list[str] = []
    position = 0
    for line in diff.splitlines():
        if match := HEADER.match(line):
            start = int(match.group(1)) - (0 if match.group(2) == "0" else 1)
            out += old[position:start]
            position = start
        elif line.startswith(("---", "+++", "\\")):
            continue
        elif line.startswith("+"):
            out.append(line[1:])
        elif line.startswith(("-", " ")):
            assert old[position] == line[1:], f"line {position + 1} does not match"
            if line.startswith(" "):
                out.append(line[1:])
            position += 1
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
