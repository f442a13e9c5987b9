"""The apply_patch tool: parsing, matching, planning, committing, argv detection."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from codexcore.tools import _patch_fs
from codexcore.tools.apply_patch import (
    AddFile,
    Chunk,
    DeleteFile,
    HunkLine,
    Patch,
    PatchApplyError,
    PatchInvocation,
    PatchParseError,
    UpdateFile,
    apply_patch,
    commit_edits,
    extract_patch_from_argv,
    is_bare_patch,
    is_path_writable,
    parse_patch,
    paths_touched,
    plan_patch,
    render_patch,
    unified_diff,
    write_targets,
)


def _patch(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


def _snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under ``root``: its mode and, for files, its bytes."""
    entries: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        entries[str(path.relative_to(root))] = (info.st_mode, data)
    return entries


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


# -- parsing ------------------------------------------------------------------


def test_parse_all_operations() -> None:
    text = _patch(
        "*** Add File: path/new.txt",
        "+line one",
        "+line two",
        "*** Delete File: path/old.txt",
        "*** Update File: path/src.py",
        "*** Move to: path/renamed.py",
        "@@ def f():",
        " context",
        "-old line",
        "+new line",
        "@@",
        " more context",
        "-x",
        "+y",
        "*** End of File",
    )
    assert parse_patch(text) == Patch(
        (
            AddFile("path/new.txt", "line one\nline two\n"),
            DeleteFile("path/old.txt"),
            UpdateFile(
                "path/src.py",
                "path/renamed.py",
                (
                    Chunk(
                        "def f():",
                        (
                            HunkLine(" ", "context"),
                            HunkLine("-", "old line"),
                            HunkLine("+", "new line"),
                        ),
                    ),
                    Chunk(
                        None,
                        (HunkLine(" ", "more context"), HunkLine("-", "x"), HunkLine("+", "y")),
                        is_end_of_file=True,
                    ),
                ),
            ),
        )
    )
    assert parse_patch(render_patch(parse_patch(text))) == parse_patch(text)


def test_chunk_old_and_new_lines() -> None:
    chunk = Chunk(None, (HunkLine(" ", "a"), HunkLine("-", "b"), HunkLine("+", "c")))
    assert chunk.old_lines == ("a", "b")
    assert chunk.new_lines == ("a", "c")


@pytest.mark.parametrize(
    "text",
    [
        # no @@ before the first hunk
        "*** Begin Patch\n*** Update File: f\n-a\n+b\n*** End Patch",
        # whitespace around marker lines
        "  *** Begin Patch \n  *** Update File:   f  \n@@  \n-a\n+b\n *** End Patch  ",
        # heredoc wrapper and surrounding blank lines
        "\n\n<<'EOF'\n*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch\nEOF\n\n",
        '<<"EOF"\n*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch\nEOF',
        # CRLF patch text
        "*** Begin Patch\r\n*** Update File: f\r\n@@\r\n-a\r\n+b\r\n*** End Patch\r\n",
        # unified-diff style header without anchor text
        "*** Begin Patch\n*** Update File: f\n@@ -1,1 +1,1 @@\n-a\n+b\n*** End Patch",
    ],
)
def test_lenient_forms_parse_to_the_same_patch(text: str) -> None:
    chunk = Chunk(None, (HunkLine("-", "a"), HunkLine("+", "b")))
    expected = Patch((UpdateFile("f", None, (chunk,)),))
    assert parse_patch(text) == expected


def test_blank_lines_in_a_hunk_are_empty_context_and_between_chunks_ignored() -> None:
    patch = parse_patch(_patch("*** Update File: f", "@@ def f", " a", "", "-b", "", "@@", "+c"))
    update = patch.operations[0]
    assert isinstance(update, UpdateFile)
    assert update.chunks[0] == Chunk(
        "def f", (HunkLine(" ", "a"), HunkLine(" ", ""), HunkLine("-", "b"), HunkLine(" ", ""))
    )
    assert update.chunks[1] == Chunk(None, (HunkLine("+", "c"),))


def test_unified_header_keeps_trailing_anchor_text() -> None:
    patch = parse_patch(_patch("*** Update File: f", "@@ -3,2 +3,2 @@ def g():", "-a", "+b"))
    update = patch.operations[0]
    assert isinstance(update, UpdateFile)
    assert update.chunks[0].context == "def g():"


def test_pure_rename_has_no_chunks() -> None:
    patch = parse_patch(_patch("*** Update File: a", "*** Move to: b"))
    assert patch == Patch((UpdateFile("a", "b", ()),))


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("", 1, "Begin Patch"),
        ("*** Add File: x\n+a\n*** End Patch", 1, "'*** Begin Patch' as the first line"),
        ("*** Begin Patch\n*** Add File: x\n+a", 3, "'*** End Patch' as the last line"),
        (_patch("*** Frobnicate File: x"), 2, "unexpected line '*** Frobnicate File: x'"),
        (_patch("*** Add File: "), 2, "needs a path"),
        (_patch("*** Update File: x"), 2, "has no hunks"),
        (_patch("*** Update File: x", "@@", "@@", "-a"), 3, "empty hunk"),
        (_patch("*** Update File: x", "@@", "*** End of File"), 3, "empty hunk"),
        (_patch("*** Update File: x", "@@", "-a", "oops"), 5, "unexpected line 'oops'"),
        (_patch("*** Update File: x", "-a", "*** End of File", "+b"), 5, "expected '@@'"),
        (_patch("*** Delete File: x", "*** Move to: y"), 3, "must directly follow"),
        (_patch("*** Delete File: x", "+stray"), 3, "unexpected line '+stray'"),
        (_patch(), 2, "no file operations"),
        (_patch("*** Delete File: x", "*** End Patch", "*** Delete File: y"), 3, "unexpected"),
        (_patch("*** Add File: a\0b", "+x"), 2, "contains a NUL byte"),
        (_patch("*** Delete File: \0"), 2, "contains a NUL byte"),
        (_patch("*** Update File: x", "*** Move to: y\0", "@@", "-a"), 3, "NUL byte"),
        (_patch("*** Add File: x\udcff\ud800", "+x"), 2, "not valid UTF-8"),
        (_patch(f"*** Add File: d/{'n' * 256}/f", "+x"), 2, "name too long (256 bytes"),
        (_patch(f"*** Add File: {'é' * 128}", "+x"), 2, "name too long (256 bytes"),
        (_patch(f"*** Delete File: {'d/' * 2048}"), 2, "path is too long (4096 bytes"),
    ],
)
def test_malformed_patches_report_line_and_expectation(text: str, line: int, fragment: str) -> None:
    with pytest.raises(PatchParseError) as caught:
        parse_patch(text)
    assert caught.value.line_number == line
    assert fragment in caught.value.message
    assert f"line {line}" in str(caught.value)


def test_line_numbers_count_leading_blank_lines() -> None:
    with pytest.raises(PatchParseError) as caught:
        parse_patch("\n\n*** Begin Patch\n*** Bogus\n*** End Patch\n")
    assert caught.value.line_number == 4


# -- applying -----------------------------------------------------------------


def test_add_creates_file_and_parent_directories(tmp_path: Path) -> None:
    result = apply_patch(_patch("*** Add File: a/b/new.txt", "+one", "+two"), str(tmp_path))
    assert (tmp_path / "a/b/new.txt").read_bytes() == b"one\ntwo\n"
    (edit,) = result.edits
    assert edit.kind == "add"
    assert edit.path == str(tmp_path / "a/b/new.txt")
    assert edit.old_content is None
    assert edit.new_content == "one\ntwo\n"
    assert edit.unified_diff.startswith("--- /dev/null\n+++ b/a/b/new.txt\n")
    assert result.summary == "Success. Updated the following files:\nA a/b/new.txt"


def test_add_with_no_lines_creates_an_empty_file(tmp_path: Path) -> None:
    patch = _patch("*** Add File: pkg/__init__.py", "*** Add File: pkg/mod.py", "+x = 1")
    apply_patch(patch, str(tmp_path))
    assert (tmp_path / "pkg/__init__.py").read_bytes() == b""
    assert (tmp_path / "pkg/mod.py").read_bytes() == b"x = 1\n"


def test_add_over_existing_file_replaces_it_and_records_old_content(tmp_path: Path) -> None:
    _write(tmp_path, "f.txt", "old\n")
    (edit,) = apply_patch(_patch("*** Add File: f.txt", "+new"), str(tmp_path)).edits
    assert (tmp_path / "f.txt").read_text() == "new\n"
    assert edit.old_content == "old\n"
    assert "-old\n+new\n" in edit.unified_diff


def test_delete_removes_file(tmp_path: Path) -> None:
    _write(tmp_path, "gone.txt", "bye\n")
    result = apply_patch(_patch("*** Delete File: gone.txt"), str(tmp_path))
    assert not (tmp_path / "gone.txt").exists()
    (edit,) = result.edits
    assert (edit.kind, edit.old_content, edit.new_content) == ("delete", "bye\n", None)
    assert edit.unified_diff.startswith("--- a/gone.txt\n+++ /dev/null\n")
    assert result.summary.endswith("\nD gone.txt")


def test_update_replaces_lines(tmp_path: Path) -> None:
    _write(tmp_path, "f.py", "a\nb\nc\n")
    result = apply_patch(_patch("*** Update File: f.py", "@@", " a", "-b", "+B"), str(tmp_path))
    assert (tmp_path / "f.py").read_text() == "a\nB\nc\n"
    (edit,) = result.edits
    assert edit.unified_diff == ("--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    assert result.summary == "Success. Updated the following files:\nM f.py"


def test_move_with_content_change(tmp_path: Path) -> None:
    _write(tmp_path, "old/name.txt", "x\ny\n")
    result = apply_patch(
        _patch("*** Update File: old/name.txt", "*** Move to: new/dir/name.txt", "@@", "-x", "+X"),
        str(tmp_path),
    )
    assert not (tmp_path / "old/name.txt").exists()
    assert (tmp_path / "new/dir/name.txt").read_text() == "X\ny\n"
    (edit,) = result.edits
    assert edit.move_path == str(tmp_path / "new/dir/name.txt")
    assert edit.unified_diff.startswith("--- a/old/name.txt\n+++ b/new/dir/name.txt\n")
    assert result.summary.endswith("\nM new/dir/name.txt")


def test_pure_rename_keeps_content_and_mode(tmp_path: Path) -> None:
    source = _write(tmp_path, "run.sh", "#!/bin/sh\necho hi")
    source.chmod(0o755)
    (edit,) = apply_patch(
        _patch("*** Update File: run.sh", "*** Move to: bin/run.sh"), str(tmp_path)
    ).edits
    target = tmp_path / "bin/run.sh"
    assert not source.exists()
    assert target.read_bytes() == b"#!/bin/sh\necho hi"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert edit.unified_diff == "--- a/run.sh\n+++ b/bin/run.sh\n"


def test_move_onto_existing_file_replaces_it(tmp_path: Path) -> None:
    _write(tmp_path, "a.txt", "a\n")
    _write(tmp_path, "b.txt", "b\n")
    apply_patch(_patch("*** Update File: a.txt", "*** Move to: b.txt"), str(tmp_path))
    assert not (tmp_path / "a.txt").exists()
    assert (tmp_path / "b.txt").read_text() == "a\n"


def test_several_hunks_and_files_in_one_patch(tmp_path: Path) -> None:
    _write(tmp_path, "one.txt", "1\n2\n3\n4\n5\n6\n7\n8\n")
    _write(tmp_path, "two.txt", "keep\n")
    _write(tmp_path, "three.txt", "bye\n")
    result = apply_patch(
        _patch(
            "*** Update File: one.txt",
            "@@",
            " 1",
            "-2",
            "+two",
            "@@",
            " 6",
            "-7",
            "+seven",
            " 8",
            "*** Update File: two.txt",
            "@@",
            "+added",
            "*** Delete File: three.txt",
            "*** Add File: four.txt",
            "+4",
        ),
        str(tmp_path),
    )
    assert (tmp_path / "one.txt").read_text() == "1\ntwo\n3\n4\n5\n6\nseven\n8\n"
    assert (tmp_path / "two.txt").read_text() == "keep\nadded\n"
    assert not (tmp_path / "three.txt").exists()
    assert (tmp_path / "four.txt").read_text() == "4\n"
    assert result.summary == (
        "Success. Updated the following files:\nA four.txt\nM one.txt\nM two.txt\nD three.txt"
    )


def test_end_of_file_hunk_matches_only_at_the_end(tmp_path: Path) -> None:
    _write(tmp_path, "f", "x\nend\nx\nend\n")
    apply_patch(
        _patch("*** Update File: f", "@@", " x", "-end", "+END", "*** End of File"), str(tmp_path)
    )
    assert (tmp_path / "f").read_text() == "x\nend\nx\nEND\n"


def test_end_of_file_hunk_fails_when_lines_are_not_last(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\nb\nc\n")
    with pytest.raises(PatchApplyError, match="not at the end of the file"):
        apply_patch(
            _patch("*** Update File: f", "@@", "-a", "+A", "*** End of File"), str(tmp_path)
        )


def test_context_anchor_seeks_before_matching(tmp_path: Path) -> None:
    _write(tmp_path, "f.py", "def f():\n    return 1\n\ndef g():\n    return 1\n")
    apply_patch(
        _patch("*** Update File: f.py", "@@ def g():", "-    return 1", "+    return 2"),
        str(tmp_path),
    )
    assert (tmp_path / "f.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 2\n"


def test_hunks_are_searched_after_the_previous_one(tmp_path: Path) -> None:
    _write(tmp_path, "f", "x\ny\nx\ny\n")
    apply_patch(_patch("*** Update File: f", "@@", "-x", "+1", "@@", "-x", "+2"), str(tmp_path))
    assert (tmp_path / "f").read_text() == "1\ny\n2\ny\n"


def test_out_of_order_hunk_error_says_so(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\nb\nc\n")
    with pytest.raises(PatchApplyError, match="hunks must be in file order"):
        apply_patch(_patch("*** Update File: f", "@@", "-c", "+C", "@@", "-a", "+A"), str(tmp_path))


def test_pure_insertion_goes_after_its_anchor_or_at_the_end(tmp_path: Path) -> None:
    _write(tmp_path, "f", "class A:\n    x = 1\nclass B:\n    y = 2\n")
    apply_patch(
        _patch("*** Update File: f", "@@ class B:", "+    z = 3", "@@", "+# end"),
        str(tmp_path),
    )
    assert (
        tmp_path / "f"
    ).read_text() == "class A:\n    x = 1\nclass B:\n    z = 3\n    y = 2\n# end\n"


@pytest.mark.parametrize(
    ("file_line", "patch_line"),
    [
        ("value = 1   \t", "value = 1"),  # trailing whitespace
        ("        value = 1", "value = 1"),  # surrounding whitespace
        ("msg = \u201cit\u2019s\u201d \u2014 ok\u2026", 'msg = "it\'s" - ok...'),  # quotes, dashes
        ("a\u00a0=\u2009b \u2212 c", "a = b - c"),  # nbsp, thin space, minus sign
    ],
)
def test_each_leniency_level_matches(tmp_path: Path, file_line: str, patch_line: str) -> None:
    _write(tmp_path, "f", f"before\n{file_line}\nafter\n")
    apply_patch(
        _patch("*** Update File: f", "@@", " before", f"-{patch_line}", "+new"), str(tmp_path)
    )
    assert (tmp_path / "f").read_text() == "before\nnew\nafter\n"


def test_stricter_match_later_beats_lenient_match_earlier(tmp_path: Path) -> None:
    _write(tmp_path, "f", "x = 1  \nx = 1\n")
    apply_patch(_patch("*** Update File: f", "@@", "-x = 1", "+y"), str(tmp_path))
    assert (tmp_path / "f").read_text() == "x = 1  \ny\n"


def test_fuzzy_matched_context_keeps_the_files_text(tmp_path: Path) -> None:
    _write(tmp_path, "f", "say(\u201chi\u201d)  \nold\n")
    apply_patch(_patch("*** Update File: f", "@@", ' say("hi")', "-old", "+new"), str(tmp_path))
    assert (tmp_path / "f").read_text() == "say(\u201chi\u201d)  \nnew\n"


def test_trailing_blank_context_is_dropped_when_it_does_not_match(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\nb\n")
    patch = "*** Begin Patch\n*** Update File: f\n@@\n-b\n+c\n\n*** End Patch\n"
    apply_patch(patch, str(tmp_path))
    assert (tmp_path / "f").read_text() == "a\nc\n"


def test_crlf_file_keeps_crlf(tmp_path: Path) -> None:
    _write(tmp_path, "f.txt", "a\r\nb\r\nc\r\n")
    apply_patch(_patch("*** Update File: f.txt", "@@", " a", "-b", "+B", "+B2"), str(tmp_path))
    assert (tmp_path / "f.txt").read_bytes() == b"a\r\nB\r\nB2\r\nc\r\n"


def test_unterminated_last_line_stays_unterminated_when_untouched(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\nb\nc")
    apply_patch(_patch("*** Update File: f", "@@", "-a", "+A", " b"), str(tmp_path))
    assert (tmp_path / "f").read_bytes() == b"A\nb\nc"


def test_writing_the_end_of_an_unterminated_file_adds_the_newline(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\nb")
    apply_patch(_patch("*** Update File: f", "@@", " b", "+c", "*** End of File"), str(tmp_path))
    assert (tmp_path / "f").read_bytes() == b"a\nb\nc\n"


def test_bom_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "f", "\ufeffa\nb\n")
    apply_patch(_patch("*** Update File: f", "@@", "-a", "+A"), str(tmp_path))
    assert (tmp_path / "f").read_text(encoding="utf-8") == "\ufeffA\nb\n"


def test_file_mode_is_preserved(tmp_path: Path) -> None:
    script = _write(tmp_path, "run.sh", "#!/bin/sh\necho a\n")
    script.chmod(0o755)
    apply_patch(_patch("*** Update File: run.sh", "@@", "-echo a", "+echo b"), str(tmp_path))
    assert script.read_text() == "#!/bin/sh\necho b\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


def test_update_through_a_symlink_edits_the_target_and_keeps_the_link(tmp_path: Path) -> None:
    real = _write(tmp_path, "real.txt", "a\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    apply_patch(_patch("*** Update File: link.txt", "@@", "-a", "+b"), str(tmp_path))
    assert (tmp_path / "link.txt").is_symlink()
    assert real.read_text() == "b\n"


def test_two_updates_of_one_file_compose(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\nb\n")
    edits = plan_patch(
        parse_patch(
            _patch("*** Update File: f", "@@", "-a", "+A", "*** Update File: f", "@@", "-A", "+AA")
        ),
        str(tmp_path),
    )
    assert [edit.old_content for edit in edits] == ["a\nb\n", "A\nb\n"]
    commit_edits(edits)
    assert (tmp_path / "f").read_text() == "AA\nb\n"


def test_absolute_paths_are_accepted(tmp_path: Path) -> None:
    target = tmp_path / "abs.txt"
    apply_patch(_patch(f"*** Add File: {target}", "+x"), "/")
    assert target.read_text() == "x\n"


def test_plan_writes_nothing(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\n")
    before = _snapshot(tmp_path)
    plan_patch(
        parse_patch(
            _patch(
                "*** Update File: f", "*** Move to: g", "@@", "-a", "+b", "*** Add File: d/n", "+n"
            )
        ),
        str(tmp_path),
    )
    assert _snapshot(tmp_path) == before


# -- failures leave the tree untouched ----------------------------------------


def _assert_fails_untouched(tmp_path: Path, patch: str, error: type[Exception]) -> Exception:
    before = _snapshot(tmp_path)
    with pytest.raises(error) as caught:
        apply_patch(patch, str(tmp_path))
    assert _snapshot(tmp_path) == before
    return caught.value


def test_missing_context_names_file_and_lines(tmp_path: Path) -> None:
    _write(tmp_path, "src/f.py", "a\nb\n")
    error = _assert_fails_untouched(
        tmp_path,
        _patch("*** Update File: src/f.py", "@@", " nope", "-also nope", "+x"),
        PatchApplyError,
    )
    assert isinstance(error, PatchApplyError)
    assert error.path == str(tmp_path / "src/f.py")
    assert "src/f.py" in str(error)
    assert "nope\nalso nope" in str(error)


def test_missing_anchor_names_it(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\n")
    error = _assert_fails_untouched(
        tmp_path, _patch("*** Update File: f", "@@ def missing():", "-a", "+b"), PatchApplyError
    )
    assert "'@@ def missing():'" in str(error)


def test_update_of_absent_file_fails(tmp_path: Path) -> None:
    error = _assert_fails_untouched(
        tmp_path, _patch("*** Update File: nope.txt", "@@", "-a", "+b"), PatchApplyError
    )
    assert "nope.txt" in str(error)


def test_delete_of_missing_file_fails(tmp_path: Path) -> None:
    _write(tmp_path, "keep.txt", "k\n")
    error = _assert_fails_untouched(tmp_path, _patch("*** Delete File: nope.txt"), PatchApplyError)
    assert "nope.txt" in str(error)


def test_delete_of_directory_fails(tmp_path: Path) -> None:
    _write(tmp_path, "dir/f", "x\n")
    _assert_fails_untouched(tmp_path, _patch("*** Delete File: dir"), PatchApplyError)


def test_malformed_patch_fails_with_line_number(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\n")
    error = _assert_fails_untouched(
        tmp_path,
        _patch("*** Update File: f", "@@", "-a", "+b", "*** Nonsense"),
        PatchParseError,
    )
    assert isinstance(error, PatchParseError)
    assert error.line_number == 6


def test_second_file_failing_leaves_first_unchanged(tmp_path: Path) -> None:
    _write(tmp_path, "first.txt", "one\n")
    _write(tmp_path, "second.txt", "two\n")
    _assert_fails_untouched(
        tmp_path,
        _patch(
            "*** Update File: first.txt",
            "@@",
            "-one",
            "+ONE",
            "*** Add File: made/new.txt",
            "+new",
            "*** Update File: second.txt",
            "@@",
            "-missing",
            "+x",
        ),
        PatchApplyError,
    )
    assert not (tmp_path / "made").exists()


def test_non_utf8_update_fails(tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    _assert_fails_untouched(
        tmp_path, _patch("*** Update File: bin", "@@", "-a", "+b"), PatchApplyError
    )


def test_add_under_a_file_fails_at_plan_time(tmp_path: Path) -> None:
    _write(tmp_path, "file", "x\n")
    _assert_fails_untouched(tmp_path, _patch("*** Add File: file/child", "+x"), PatchApplyError)


def test_commit_refuses_files_changed_since_planning(tmp_path: Path) -> None:
    target = _write(tmp_path, "f", "a\n")
    edits = plan_patch(
        parse_patch(_patch("*** Add File: other", "+o", "*** Update File: f", "@@", "-a", "+b")),
        str(tmp_path),
    )
    target.write_text("a\nedited by the user\n")
    with pytest.raises(PatchApplyError, match="changed since the patch was planned"):
        commit_edits(edits)
    assert target.read_text() == "a\nedited by the user\n"
    assert not (tmp_path / "other").exists()


def test_commit_failure_while_staging_changes_nothing(tmp_path: Path) -> None:
    _write(tmp_path, "f", "a\n")
    edits = plan_patch(
        parse_patch(
            _patch(
                "*** Update File: f",
                "@@",
                "-a",
                "+b",
                "*** Add File: made/deep/new",
                "+n",
                "*** Add File: blocker/sub/new",
                "+n",
            )
        ),
        str(tmp_path),
    )
    _write(tmp_path, "blocker", "now a file\n")  # appears after planning
    before = _snapshot(tmp_path)
    with pytest.raises(PatchApplyError, match="nothing was changed"):
        commit_edits(edits)
    assert _snapshot(tmp_path) == before  # temp files and created directories removed


def test_commit_failure_while_renaming_reports_changed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "a", "a\n")
    _write(tmp_path, "b", "b\n")
    edits = plan_patch(
        parse_patch(
            _patch("*** Update File: a", "@@", "-a", "+A", "*** Update File: b", "@@", "-b", "+B")
        ),
        str(tmp_path),
    )
    real_replace = os.replace
    calls: list[str] = []

    def flaky_replace(source: str, target: str, **directories: Any) -> None:
        calls.append(target)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        real_replace(source, target, **directories)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(PatchApplyError, match=f"already changed: {tmp_path / 'a'}"):
        commit_edits(edits)
    monkeypatch.undo()
    assert (tmp_path / "a").read_text() == "A\n"
    assert (tmp_path / "b").read_text() == "b\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # no temp files left


# -- paths --------------------------------------------------------------------


def test_paths_touched_include_move_targets(tmp_path: Path) -> None:
    _write(tmp_path, "a", "x\n")
    _write(tmp_path, "d", "x\n")
    edits = plan_patch(
        parse_patch(
            _patch(
                "*** Update File: a",
                "*** Move to: sub/b",
                "*** Add File: c",
                "+c",
                "*** Delete File: d",
            )
        ),
        str(tmp_path),
    )
    assert paths_touched(edits) == [
        str(tmp_path / "a"),
        str(tmp_path / "sub/b"),
        str(tmp_path / "c"),
        str(tmp_path / "d"),
    ]


def test_path_escape_with_dotdot_is_not_writable(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    edits = plan_patch(parse_patch(_patch("*** Add File: ../outside.txt", "+x")), str(root))
    (path,) = paths_touched(edits)
    assert path == str(tmp_path / "outside.txt")
    assert not is_path_writable(path, [str(root)])
    assert is_path_writable(str(root / "inside/new.txt"), [str(root)])
    assert is_path_writable(path, [str(root), str(tmp_path)])


def test_symlink_escape_is_not_writable(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("s\n")
    (root / "escape").symlink_to(outside)
    (root / "file_link").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(outside / "not_yet.txt")
    roots = [str(root)]
    assert not is_path_writable(str(root / "escape/secret.txt"), roots)
    assert not is_path_writable(str(root / "escape/new/deep.txt"), roots)
    assert not is_path_writable(str(root / "file_link"), roots)
    assert not is_path_writable(str(root / "dangling"), roots)
    assert is_path_writable(str(root / "real.txt"), roots)


def test_roots_are_resolved_too(tmp_path: Path) -> None:
    real_root = tmp_path / "real"
    real_root.mkdir()
    (tmp_path / "alias").symlink_to(real_root)
    assert is_path_writable(str(real_root / "f"), [str(tmp_path / "alias")])
    assert is_path_writable(str(tmp_path / "alias/f"), [str(real_root)])
    assert not is_path_writable(str(tmp_path / "realx/f"), [str(real_root)])


def test_relative_paths_are_never_writable(tmp_path: Path) -> None:
    assert not is_path_writable("f.txt", [str(tmp_path)])
    assert not is_path_writable(str(tmp_path / "f"), ["relative/root"])


# -- unified diff -------------------------------------------------------------


def test_a_nul_in_file_content_is_content(tmp_path: Path) -> None:
    apply_patch(_patch("*** Add File: f", "+a\0b"), str(tmp_path))
    assert (tmp_path / "f").read_bytes() == b"a\0b\n"


def test_a_name_of_255_bytes_is_a_name() -> None:
    (operation,) = parse_patch(_patch(f"*** Add File: d/{'n' * 255}", "+x")).operations
    assert operation.path == f"d/{'n' * 255}"


def test_a_working_directory_with_a_nul_is_refused_before_any_os_call() -> None:
    with pytest.raises(PatchApplyError, match=r"working directory path .* contains a NUL"):
        plan_patch(parse_patch(_patch("*** Add File: x", "+x")), "/tmp/a\0b")


def _outside_and_root(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    root.mkdir()
    _write(outside, "a", "a\n")
    _write(outside, "b", "b\n")
    return root, outside


def test_write_targets_resolve_symlinks_to_where_each_edit_lands(tmp_path: Path) -> None:
    root, outside = _outside_and_root(tmp_path)
    (root / "link").symlink_to(outside / "a")
    (root / "gone").symlink_to(outside / "b")
    (root / "dir").symlink_to(outside / "d")
    _write(root, "src", "s\n")
    patch = _patch(
        "*** Update File: link",
        "@@",
        "-a",
        "+A",
        "*** Add File: dir/new/deep",
        "+n",
        "*** Delete File: gone",
        "*** Update File: src",
        "*** Move to: ../outside/moved",
    )
    edits = plan_patch(parse_patch(patch), str(root))
    assert write_targets(edits) == [
        (str(root / "link"), str(outside / "a")),
        (str(root / "dir/new/deep"), str(outside / "d/new/deep")),
        (str(root / "gone"), str(root / "gone")),  # the link goes, not the file it names
        (str(root / "src"), str(root / "src")),
        (str(outside / "moved"), str(outside / "moved")),
    ]
    commit_edits(edits)
    assert (outside / "a").read_text() == "A\n"
    assert (outside / "d/new/deep").read_text() == "n\n"
    assert not (root / "gone").is_symlink()
    assert (outside / "b").read_text() == "b\n"
    assert (outside / "moved").read_text() == "s\n"
    assert not (root / "src").exists()


def test_a_symlink_removed_earlier_in_the_patch_is_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    root, outside = _outside_and_root(tmp_path)
    (root / "link").symlink_to(outside / "a")
    patch = _patch("*** Delete File: link", "*** Add File: link", "+new")
    edits = plan_patch(parse_patch(patch), str(root))
    assert write_targets(edits) == [(str(root / "link"), str(root / "link"))]
    commit_edits(edits)
    assert not (root / "link").is_symlink()
    assert (root / "link").read_text() == "new\n"
    assert (outside / "a").read_text() == "a\n"


def test_a_path_written_then_removed_lists_both_targets(tmp_path: Path) -> None:
    root, outside = _outside_and_root(tmp_path)
    _write(root, "inside.txt", "i\n")
    (root / "dir").symlink_to(outside / "d")
    (outside / "d/x").symlink_to(root / "inside.txt")  # leads back in
    patch = _patch("*** Update File: dir/x", "@@", "-i", "+I", "*** Delete File: dir/x")
    edits = plan_patch(parse_patch(patch), str(root))
    assert write_targets(edits) == [
        (str(root / "dir/x"), str(root / "inside.txt")),
        (str(root / "dir/x"), str(outside / "d/x")),  # the entry removed lies outside
    ]


def test_a_hard_link_to_a_file_outside_is_replaced_not_written_through(tmp_path: Path) -> None:
    """A hard link has no target to resolve: the rename gives the workspace name a new
    file, and the one outside keeps its text."""
    root, outside = _outside_and_root(tmp_path)
    os.link(outside / "a", root / "hard")
    apply_patch(_patch("*** Update File: hard", "@@", "-a", "+A"), str(root))
    assert (root / "hard").read_text() == "A\n"
    assert (outside / "a").read_text() == "a\n"


def test_a_symlink_repointed_after_planning_is_refused_not_followed(tmp_path: Path) -> None:
    root, outside = _outside_and_root(tmp_path)
    (root / "link").symlink_to(outside / "a")
    _write(outside, "b", "a\n")  # same text as the approved target: only the path differs
    edits = plan_patch(parse_patch(_patch("*** Update File: link", "@@", "-a", "+A")), str(root))
    (root / "link").unlink()
    (root / "link").symlink_to(outside / "b")
    with pytest.raises(PatchApplyError, match=re.escape(f"now leads to {outside / 'b'}, not to")):
        commit_edits(edits)
    assert (outside / "a").read_text() == "a\n"
    assert (outside / "b").read_text() == "a\n"


def _swap_after_the_check(monkeypatch: pytest.MonkeyPatch, swap: Any) -> None:
    """Run ``swap`` between commit_edits' checks and its first write: the race window."""
    checks = _patch_fs._verify_unchanged

    def check_then_swap(edits: Any) -> None:
        checks(edits)
        swap()

    monkeypatch.setattr(_patch_fs, "_verify_unchanged", check_then_swap)


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside = _outside_and_root(tmp_path)
    _write(root, "sub/f.txt", "f\n")
    _write(outside, "d/f.txt", "f\n")
    patch = _patch("*** Update File: sub/f.txt", "@@", "-f", "+F", "*** Add File: sub/new", "+n")
    edits = plan_patch(parse_patch(patch), str(root))

    def swap() -> None:
        (root / "sub").rename(root / "sub.away")
        (root / "sub").symlink_to(outside / "d")

    _swap_after_the_check(monkeypatch, swap)
    with pytest.raises(
        PatchApplyError, match=re.escape(f"{root / 'sub'} is no longer the directory")
    ):
        commit_edits(edits)
    assert sorted(os.listdir(outside / "d")) == ["f.txt"]
    assert (outside / "d/f.txt").read_text() == "f\n"
    assert sorted(os.listdir(root / "sub.away")) == ["f.txt"]


def test_a_target_swapped_for_a_symlink_after_the_check_is_replaced_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside = _outside_and_root(tmp_path)
    target = _write(root, "f.txt", "f\n")
    edits = plan_patch(parse_patch(_patch("*** Update File: f.txt", "@@", "-f", "+F")), str(root))

    def swap() -> None:
        target.unlink()
        target.symlink_to(outside / "a")

    _swap_after_the_check(monkeypatch, swap)
    commit_edits(edits)
    assert (outside / "a").read_text() == "a\n"
    assert not target.is_symlink()
    assert target.read_text() == "F\n"


def test_unified_diff_headers_and_missing_newline_marker() -> None:
    assert unified_diff("a\nb", "a\nc\n", "f.txt", "f.txt") == (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
    )
    assert unified_diff(None, "x\n", "n", "n") == "--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n"
    assert unified_diff("x\n", None, "/abs/o", "/abs/o") == (
        "--- /abs/o\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )
    assert unified_diff("same\n", "same\n", "f", "f") == ""


# -- argv ---------------------------------------------------------------------

_BODY = "*** Begin Patch\n*** Add File: x\n+y\n*** End Patch"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["apply_patch", _BODY], PatchInvocation(_BODY)),
        (["applypatch", _BODY], PatchInvocation(_BODY)),
        (["bash", "-lc", f"apply_patch <<'EOF'\n{_BODY}\nEOF\n"], PatchInvocation(_BODY)),
        (["bash", "-lc", f"apply_patch <<EOF\n{_BODY}\nEOF"], PatchInvocation(_BODY)),
        (["/bin/zsh", "-c", f'applypatch << "PATCH"\n{_BODY}\nPATCH\n'], PatchInvocation(_BODY)),
        (
            ["bash", "-lc", f"cd x && apply_patch <<EOF\n{_BODY}\nEOF\n"],
            PatchInvocation(_BODY, "x"),
        ),
        (
            ["bash", "-lc", f"cd 'my dir' && apply_patch <<'EOF'\n{_BODY}\nEOF"],
            PatchInvocation(_BODY, "my dir"),
        ),
        (["bash", "-lc", f"apply_patch <<'EOF'\n{_BODY}"], PatchInvocation(_BODY)),
        (["bash", "-lc", "ls -la"], None),
        (["bash", "-lc", "echo hi; apply_patch <<'EOF'\n*** Begin Patch\nEOF"], None),
        (["bash", "-lc", f"apply_patch <<'EOF'\n{_BODY}\nEOF\necho done"], None),
        (["bash", "-lc", f"cd $HOME && apply_patch <<'EOF'\n{_BODY}\nEOF"], None),
        (["bash", "-x", f"apply_patch <<'EOF'\n{_BODY}\nEOF"], None),
        (["apply_patch"], None),
        (["python", "-c", "print(1)"], None),
        ([], None),
    ],
)
def test_extract_patch_from_argv(argv: list[str], expected: PatchInvocation | None) -> None:
    assert extract_patch_from_argv(argv) == expected


def test_extracted_heredoc_parses() -> None:
    invocation = extract_patch_from_argv(["bash", "-lc", f"apply_patch <<'EOF'\n{_BODY}\nEOF\n"])
    assert invocation is not None
    assert parse_patch(invocation.patch) == Patch((AddFile("x", "y\n"),))


def test_argv_heredoc_literal_parses() -> None:
    invocation = extract_patch_from_argv(["apply_patch", f"<<'EOF'\n{_BODY}\nEOF\n"])
    assert invocation is not None
    assert parse_patch(invocation.patch) == Patch((AddFile("x", "y\n"),))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([_BODY], True),
        (["  " + _BODY], True),
        (["***", "Begin", "Patch", "*** Add File: x"], True),
        (["bash", "-lc", _BODY], True),
        (["apply_patch", _BODY], False),
        (["ls"], False),
        ([], False),
    ],
)
def test_is_bare_patch(argv: list[str], expected: bool) -> None:
    assert is_bare_patch(argv) is expected
