"""Fuzz: apply_patch's parser, and planning and committing a patch on a temporary tree.

Contracts (from the docstrings): ``parse_patch`` raises only ``PatchParseError``
(with a 1-based line number within the text, when it names one) and what it
returns renders back to itself (``parse_patch(render_patch(p)) == p``);
planning and committing raise only ``PatchError``, and when they do no file has
changed; when they do not, the files hold what the plan said.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from codexcore.tools.apply_patch import (
    AddFile,
    Chunk,
    DeleteFile,
    FileEdit,
    HunkLine,
    Patch,
    PatchError,
    PatchParseError,
    UpdateFile,
    commit_edits,
    is_path_writable,
    parse_patch,
    paths_touched,
    plan_patch,
    render_patch,
    resolve_path,
)

from . import strategies as s
from .conftest import attempt, fuzz

# Few names and few line texts, so that hunks find (or just miss) their lines in the
# files of the tree; names that are odd for a filesystem but stay inside it.
_NAMES = st.sampled_from(
    ["a.txt", "b.txt", "dir/c.txt", "new.txt", "dir", "./a.txt", "dir/../b.txt", "x" * 300]
)
_TEXTS = st.sampled_from(["one", "two", "three", "", " two", "two ", "“q”", "*** End Patch", "@@"])
_HUNK_LINES = st.builds(HunkLine, st.sampled_from([" ", "-", "+"]), _TEXTS)
_CHUNKS = st.builds(
    Chunk,
    st.none() | st.sampled_from(["one", "three", "-1 +1 @@"]),
    st.lists(_HUNK_LINES, min_size=1, max_size=4).map(tuple),
    st.booleans(),
)
_OPERATIONS = st.one_of(
    st.builds(
        AddFile, _NAMES, st.lists(_TEXTS, max_size=3).map(lambda ls: "".join(f"{x}\n" for x in ls))
    ),
    st.builds(DeleteFile, _NAMES),
    st.builds(
        UpdateFile, _NAMES, st.none() | _NAMES, st.lists(_CHUNKS, min_size=1, max_size=3).map(tuple)
    ),
)
PATCHES = st.builds(Patch, st.lists(_OPERATIONS, min_size=1, max_size=3).map(tuple))

_MARKERS = [
    "*** Begin Patch",
    "*** End Patch",
    "*** Add File: a.txt",
    "*** Update File: a.txt",
    "*** Delete File: a.txt",
    "*** Move to: b.txt",
    "*** End of File",
    "*** Add File:",
    "*** Add File: a\x00b",
    "@@",
    "@@ -1,2 +1,3 @@ one",
    "<<'EOF'",
    "EOF",
    "+",
    "",
    " ",
    "\r",
]


@st.composite
def patch_texts(draw: st.DrawFn) -> str:
    """A rendered patch with lines dropped, repeated, moved or inserted, or damaged as bytes."""
    lines = render_patch(draw(PATCHES)).split("\n")
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines)))
        how = draw(st.integers(0, 3))
        if how == 0 and at < len(lines):
            del lines[at]
        elif how == 1 and at < len(lines):
            lines.insert(draw(st.integers(0, len(lines))), lines[at])
        else:
            lines.insert(at, draw(st.sampled_from(_MARKERS) | st.text(max_size=8)))
    text = "\n".join(lines)
    if draw(st.integers(0, 3)) == 0:
        text = draw(s.mangled(text.encode())).decode("utf-8", "replace")
    return text


# --- parsing ---------------------------------------------------------------------------------


@given(patch_texts() | st.text(max_size=40))
@example("*** Begin Patch\n*** Delete File: \x00\n*** End Patch")
@fuzz(6_000)
def test_parse_raises_only_parse_errors_and_renders_back(text: str) -> None:
    patch, error = attempt(lambda: parse_patch(text), PatchParseError)
    if isinstance(error, PatchParseError):
        assert error.message
        assert error.line_number is None or 1 <= error.line_number <= text.count("\n") + 1
    else:
        assert parse_patch(render_patch(patch)) == patch


# --- planning and committing on a temporary tree -------------------------------------------------


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def _confined(patch: Patch, root: str) -> bool:
    """Every path the patch names resolves inside ``root`` (a mutation may aim elsewhere)."""
    for operation in patch.operations:
        paths = [operation.path, getattr(operation, "move_path", None)]
        # A NUL byte makes a path name no file, anywhere: the patch must refuse it.
        named = [p for p in paths if isinstance(p, str) and "\0" not in p]
        if not all(is_path_writable(resolve_path(p, root), [root]) for p in named):
            return False
    return True


@given(text=patch_texts())
# Found by this test: a NUL byte in a path ended planning in ValueError (issue 13, item 8).
@example(text="*** Begin Patch\n*** Add File: a\x00b\n+x\n*** End Patch\n")
@example(text="*** Begin Patch\n*** Update File: a.txt\n*** Move to: b\x00\n*** End Patch")
@fuzz(2_500)
def test_planning_and_committing_raise_only_patch_errors(tree: Path, text: str) -> None:
    patch, error = attempt(lambda: parse_patch(text), PatchParseError)
    if error is not None:
        return
    root = str(tree)
    _reset(tree)
    if not _confined(patch, root):
        return
    before = _snapshot(tree)
    edits, error = attempt(lambda: plan_patch(patch, root), PatchError)
    if error is None:
        assert all(is_path_writable(p, [root]) for p in paths_touched(edits))
        _, error = attempt(lambda: commit_edits(edits), PatchError)
    if error is not None:
        assert str(error)
        assert _snapshot(tree) == before, "a failed patch changed files"
        return
    for path, content in _final_state(edits).items():
        if content is None:
            assert not os.path.lexists(path)
        else:
            assert Path(path).read_bytes() == content.encode()


_TREE = {"a.txt": b"one\ntwo\nthree\n", "b.txt": b"two\n", "dir/c.txt": b"one"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tree for every case, put back as it was before each (creating and removing
    a directory per case costs more than the case itself on a journalled disk)."""
    return tmp_path_factory.mktemp("patch-tree")


def _reset(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        name = str(path.relative_to(root))
        if name not in _TREE and name != "dir":
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    (root / "dir").mkdir(exist_ok=True)
    for name, body in _TREE.items():
        target = root / name
        if not target.is_file() or target.read_bytes() != body:
            target.write_bytes(body)


def _final_state(edits: list[FileEdit]) -> dict[str, str | None]:
    """Each path's content after the edits, in order (None: no file)."""
    state: dict[str, str | None] = {}
    for edit in edits:
        if edit.move_path is not None:
            state[edit.path] = None
        state[edit.move_path or edit.path] = edit.new_content
    return state
