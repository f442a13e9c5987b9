"""The apply_patch tool: Codex's patch format, parsed, verified and applied atomically.

The engine's flow::

    invocation = extract_patch_from_argv(argv)        # or the tool call's own input
    workdir = os.path.join(cwd, invocation.workdir or "")
    edits = plan_patch(parse_patch(invocation.patch), workdir)  # reads, verifies, writes nothing
    targets = write_targets(edits)  # each path -> where it really lands, symlinks resolved
    if all(is_target_writable(t, roots) for _, t in targets): ...  # else ask the user
    commit_edits(edits)  # writes exactly those targets, or refuses if one moved since
    summarize(edits, cwd)

``apply_patch(text, cwd)`` does parse + plan + commit in one go (no writability
check). Errors: ``PatchParseError`` (line number and what was expected; also a
path no file can have, such as one with a NUL byte or an over-long name, so no
caller hands one to ``os``), ``PatchApplyError`` (the file, and for a hunk the
lines not found); both are ``PatchError``. When either is raised no file has
changed, save for the one case ``commit_edits`` documents (an OS failure among
its final renames), whose error lists the files already changed.

Decisions, where Codex leaves room:

* Add over an existing file replaces it (as Codex does); ``FileEdit.old_content``
  and the diff show what is replaced. A Move onto an existing file replaces it.
* Final newline: lines the patch adds end with the file's newline (``\\n`` or
  ``\\r\\n``, taken from its first line); lines kept from the file keep theirs. So an
  unterminated last line stays unterminated unless the patch adds lines after it
  or replaces it. (Codex always ends an updated file with a newline; we only do so
  when the patch writes the file's end.) Add content always ends with ``\\n``.
* Matching tolerates, level by level over the whole search range: exact, then
  trailing whitespace, then surrounding whitespace, then typographic punctuation.
  Matched context lines keep the file's text: only '+' lines are written from the
  patch. A hunk with trailing blank context is retried without it.
* A hunk of only '+' lines inserts after its ``@@`` anchor, or at the end of the
  file without one (Codex always appends at the end).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ._patch_argv import extract_patch_from_argv, is_bare_patch
from ._patch_fs import (
    commit_edits,
    display_path,
    is_path_writable,
    is_target_writable,
    paths_touched,
    plan_patch,
    resolve_path,
    write_targets,
)
from ._patch_match import MATCH_LEVELS, normalise_punctuation, seek_lines
from ._patch_parse import parse_patch, render_patch
from ._patch_text import unified_diff
from ._patch_types import (
    AddFile,
    ApplyResult,
    Chunk,
    DeleteFile,
    EditKind,
    FileEdit,
    FileOperation,
    HunkLine,
    HunkOp,
    Patch,
    PatchApplyError,
    PatchError,
    PatchInvocation,
    PatchParseError,
    UpdateFile,
)

__all__ = [
    "MATCH_LEVELS",
    "AddFile",
    "ApplyResult",
    "Chunk",
    "DeleteFile",
    "EditKind",
    "FileEdit",
    "FileOperation",
    "HunkLine",
    "HunkOp",
    "Patch",
    "PatchApplyError",
    "PatchError",
    "PatchInvocation",
    "PatchParseError",
    "UpdateFile",
    "apply_patch",
    "commit_edits",
    "display_path",
    "extract_patch_from_argv",
    "is_bare_patch",
    "is_path_writable",
    "is_target_writable",
    "normalise_punctuation",
    "parse_patch",
    "paths_touched",
    "plan_patch",
    "render_patch",
    "resolve_path",
    "seek_lines",
    "summarize",
    "unified_diff",
    "write_targets",
]


def apply_patch(text: str, cwd: str) -> ApplyResult:
    """Parse, plan and commit ``text`` against ``cwd``; all files change or none.

    Does not check writability: callers that confine writes plan, check
    ``write_targets`` with ``is_target_writable``, then ``commit_edits`` themselves.
    """
    edits = plan_patch(parse_patch(text), cwd)
    commit_edits(edits)
    return ApplyResult(tuple(edits), summarize(edits, cwd))


def summarize(edits: Sequence[FileEdit], cwd: str) -> str:
    """Codex's success text: ``A``dded, then ``M``odified, then ``D``eleted paths.

    Paths are shown relative to ``cwd`` when under it; a moved file is listed
    under its new path; each path once.
    """
    groups: dict[str, dict[str, None]] = {"A": {}, "M": {}, "D": {}}
    for edit in edits:
        letter = {"add": "A", "update": "M", "delete": "D"}[edit.kind]
        groups[letter][display_path(edit.move_path or edit.path, os.path.abspath(cwd))] = None
    lines = [f"{letter} {path}" for letter, paths in groups.items() for path in paths]
    return "\n".join(["Success. Updated the following files:", *lines])
