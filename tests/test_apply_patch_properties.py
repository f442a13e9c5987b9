"""Properties of apply_patch: generated patches turn ``before`` into ``after``; render/parse."""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from codexcore.tools.apply_patch import (
    AddFile,
    Chunk,
    DeleteFile,
    HunkLine,
    Patch,
    UpdateFile,
    apply_patch,
    parse_patch,
    plan_patch,
    render_patch,
)

# A small alphabet so hunks collide and context repeats; it includes lines that
# look like patch syntax and whitespace variants of one another.
_LINES = st.sampled_from(["a", "b", "c", "a ", " a", "", "@@", "*** End Patch", "-x", "+y"])
_ENDINGS = st.sampled_from(["\n", "\r\n"])


def _first_at_or_after(lines: Sequence[str], block: Sequence[str], start: int) -> int | None:
    size = len(block)
    for index in range(start, len(lines) - size + 1):
        if list(lines[index : index + size]) == list(block):
            return index
    return None


def _hunk_start(before: list[str], cursor: int, first: int, last: int) -> int:
    """Widen a hunk backwards until its old lines first occur (after ``cursor``) where meant."""
    start = first
    while start > cursor and _first_at_or_after(before, before[start:last], cursor) != start:
        start -= 1
    return start


def _diff_patch(before: list[str], after: list[str], use_anchors: bool) -> list[str]:
    """Hunks from difflib's grouped opcodes, with enough context to be unambiguous."""
    out: list[str] = []
    cursor = 0
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        first, last = group[0][1], group[-1][2]
        start = _hunk_start(before, cursor, first, last)
        anchor = before[start - 1] if use_anchors and start > cursor else ""
        usable = anchor.strip() and anchor == anchor.rstrip()
        out.append(f"@@ {anchor}" if usable else "@@")
        out.extend(" " + line for line in before[start:first])
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(" " + line for line in before[a1:a2])
            else:
                out.extend("-" + line for line in before[a1:a2])
                out.extend("+" + line for line in after[b1:b2])
        cursor = last
    return out


def _whole_file_patch(before: list[str], after: list[str]) -> list[str]:
    return ["@@", *("-" + line for line in before), *("+" + line for line in after)]


def _make_patch(before: list[str], after: list[str], whole_file: bool, use_anchors: bool) -> str:
    hunks = (
        _whole_file_patch(before, after) if whole_file else _diff_patch(before, after, use_anchors)
    )
    return "\n".join(["*** Begin Patch", "*** Update File: f.txt", *hunks, "*** End Patch"])


def _plan_new_content(before_text: str, patch: str) -> str | None:
    with tempfile.TemporaryDirectory() as directory:
        Path(directory, "f.txt").write_bytes(before_text.encode())
        (edit,) = plan_patch(parse_patch(patch), directory)
        return edit.new_content


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(_LINES, max_size=25),
    after=st.lists(_LINES, max_size=25),
    ending=_ENDINGS,
    whole_file=st.booleans(),
    use_anchors=st.booleans(),
)
def test_generated_patch_turns_before_into_after(
    before: list[str], after: list[str], ending: str, whole_file: bool, use_anchors: bool
) -> None:
    if before == after or (whole_file and not before and not after):
        return  # nothing to patch
    patch = _make_patch(before, after, whole_file, use_anchors)
    ending = ending if before else "\n"  # an empty file has no convention: LF
    before_text = "".join(line + ending for line in before)
    after_text = "".join(line + ending for line in after)
    assert _plan_new_content(before_text, patch) == after_text


@settings(max_examples=30, deadline=None)
@given(before=st.lists(_LINES, min_size=1, max_size=15), after=st.lists(_LINES, max_size=15))
def test_apply_patch_writes_after_to_disk(before: list[str], after: list[str]) -> None:
    if before == after:
        return
    patch = _make_patch(before, after, whole_file=False, use_anchors=False)
    with tempfile.TemporaryDirectory() as directory:
        target = Path(directory, "f.txt")
        target.write_bytes("".join(line + "\n" for line in before).encode())
        apply_patch(patch, directory)
        assert target.read_bytes() == "".join(line + "\n" for line in after).encode()


# -- render / parse round trip ------------------------------------------------

_UNIFIED_HEADER = re.compile(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@(?: .*)?")
_TEXT = st.text(st.characters(exclude_characters="\n\r", exclude_categories=["Cs"]), max_size=12)
_PATHS = st.text("abc/._- ", min_size=1, max_size=12).filter(lambda p: p == p.strip())
_ANCHORS = _TEXT.filter(
    lambda a: bool(a.strip()) and a == a.rstrip() and not _UNIFIED_HEADER.fullmatch(f"@@ {a}")
)
_HUNK_LINES = st.builds(HunkLine, st.sampled_from([" ", "-", "+"]), _TEXT)
_CHUNKS = st.builds(
    Chunk,
    st.none() | _ANCHORS,
    st.lists(_HUNK_LINES, min_size=1, max_size=5).map(tuple),
    st.booleans(),
)
_ADDS = st.builds(
    AddFile,
    _PATHS,
    st.lists(_TEXT, min_size=1, max_size=4).map(lambda ls: "".join(f"{x}\n" for x in ls)),
)
_DELETES = st.builds(DeleteFile, _PATHS)
_UPDATES = st.one_of(
    st.builds(UpdateFile, _PATHS, st.none(), st.lists(_CHUNKS, min_size=1, max_size=3).map(tuple)),
    st.builds(UpdateFile, _PATHS, _PATHS, st.lists(_CHUNKS, max_size=3).map(tuple)),
)
_PATCHES = st.builds(
    Patch, st.lists(_ADDS | _DELETES | _UPDATES, min_size=1, max_size=4).map(tuple)
)


@settings(max_examples=200, deadline=None)
@given(patch=_PATCHES)
def test_parse_of_render_is_identity(patch: Patch) -> None:
    assert parse_patch(render_patch(patch)) == patch
