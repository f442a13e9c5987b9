"""Parse and render the apply_patch text format.

Grammar (Codex's, with the lenient spots marked *)::

    patch     := "*** Begin Patch" operation+ "*** End Patch"
    operation := "*** Add File: " PATH ("+" TEXT)*
               | "*** Delete File: " PATH
               | "*** Update File: " PATH ["*** Move to: " PATH] chunk*
    chunk     := ("@@" | "@@ " ANCHOR) hunk_line+ ["*** End of File"]
    hunk_line := (" " | "-" | "+") TEXT

Leniency, where it cannot change what the patch means:

* leading/trailing blank lines and whitespace around the marker lines;
* a heredoc wrapper (``<<'EOF'`` ... ``EOF``, also ``<<EOF``/``<<"EOF"``), as some
  models send the shell form as the patch itself;
* the first chunk of an Update may omit its ``@@`` line;
* an empty (or whitespace-only) line inside a hunk is an empty context line;
  blank lines between chunks and between operations are ignored;
* a unified-diff header ``@@ -1,3 +1,4 @@ TEXT`` keeps only TEXT as the anchor;
* an Update with a Move and no chunks is a pure rename;
* an Add with no lines creates an empty file (``__init__.py``, ``.gitkeep``), as Codex does.

Everything else that is not in the grammar (an unknown ``***`` line, a hunk with
no lines, a missing Begin/End, a patch with no operation, a path with a NUL byte)
raises ``PatchParseError`` with the 1-based line number and what was expected.
"""

from __future__ import annotations

import re

from ._patch_types import (
    AddFile,
    Chunk,
    DeleteFile,
    FileOperation,
    HunkLine,
    HunkOp,
    Patch,
    PatchParseError,
    UpdateFile,
)

BEGIN_PATCH = "*** Begin Patch"
END_PATCH = "*** End Patch"
ADD_FILE = "*** Add File:"
DELETE_FILE = "*** Delete File:"
UPDATE_FILE = "*** Update File:"
MOVE_TO = "*** Move to:"
END_OF_FILE = "*** End of File"

_HUNK_OPS: dict[str, HunkOp] = {" ": " ", "-": "-", "+": "+"}
_HEREDOC_OPENERS = frozenset({"<<EOF", "<<'EOF'", '<<"EOF"'})
_UNIFIED_HEADER = re.compile(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@(?: (?P<rest>.*))?")
_EXPECTED_OPERATION = (
    "expected '*** Add File: PATH', '*** Delete File: PATH' or '*** Update File: PATH'"
)

_Line = tuple[int, str]
"""A patch line: its 1-based number in the input and its text without the line end."""


def parse_patch(text: str) -> Patch:
    """Parse ``text`` into a ``Patch``; raise ``PatchParseError`` if it is malformed.

    Pure: touches no file. Paths are returned as written (stripped of surrounding
    whitespace); resolving them is the planner's job.
    """
    body, end_number = _strip_envelope(_split_lines(text))
    operations = _BodyParser(body).parse()
    if not operations:
        raise PatchParseError(
            f"the patch has no file operations; {_EXPECTED_OPERATION}", end_number
        )
    return Patch(tuple(operations))


def render_patch(patch: Patch) -> str:
    """Render ``patch`` in the canonical form; ``parse_patch(render_patch(p)) == p``.

    Every chunk gets an explicit ``@@`` line; the text ends with a newline.
    """
    out = [BEGIN_PATCH]
    for operation in patch.operations:
        out.extend(_render_operation(operation))
    out.append(END_PATCH)
    return "\n".join(out) + "\n"


def _render_operation(operation: FileOperation) -> list[str]:
    if isinstance(operation, AddFile):
        lines = operation.content.split("\n")
        if lines[-1] == "":
            lines.pop()
        return [f"{ADD_FILE} {operation.path}", *("+" + line for line in lines)]
    if isinstance(operation, DeleteFile):
        return [f"{DELETE_FILE} {operation.path}"]
    out = [f"{UPDATE_FILE} {operation.path}"]
    if operation.move_path is not None:
        out.append(f"{MOVE_TO} {operation.move_path}")
    for chunk in operation.chunks:
        out.append("@@" if chunk.context is None else f"@@ {chunk.context}")
        out.extend(line.op + line.text for line in chunk.lines)
        if chunk.is_end_of_file:
            out.append(END_OF_FILE)
    return out


def _split_lines(text: str) -> list[_Line]:
    # Only "\n" ends a line (str.splitlines would also split on \f, \x1c, U+2028, ...
    # which can legitimately occur inside source lines); a CR before it is dropped.
    return [(number, line.removesuffix("\r")) for number, line in enumerate(text.split("\n"), 1)]


def _trim_blank(lines: list[_Line]) -> list[_Line]:
    start, end = 0, len(lines)
    while start < end and not lines[start][1].strip():
        start += 1
    while end > start and not lines[end - 1][1].strip():
        end -= 1
    return lines[start:end]


def _strip_envelope(lines: list[_Line]) -> tuple[list[_Line], int]:
    """Return the lines between Begin and End Patch, and End Patch's line number."""
    trimmed = _trim_blank(lines)
    if not trimmed:
        raise PatchParseError(f"the patch is empty; expected '{BEGIN_PATCH}'", 1)
    if (
        len(trimmed) >= 2
        and trimmed[0][1].strip() in _HEREDOC_OPENERS
        and trimmed[-1][1].strip() == "EOF"
    ):
        trimmed = _trim_blank(trimmed[1:-1]) or trimmed
    first_number, first = trimmed[0]
    if first.strip() != BEGIN_PATCH:
        raise PatchParseError(
            f"expected '{BEGIN_PATCH}' as the first line, got {first.strip()!r}", first_number
        )
    last_number, last = trimmed[-1]
    if len(trimmed) < 2 or last.strip() != END_PATCH:
        raise PatchParseError(
            f"expected '{END_PATCH}' as the last line, got {last.strip()!r}", last_number
        )
    return trimmed[1:-1], last_number


def _marker_argument(stripped: str, marker: str, number: int) -> str | None:
    """The path after ``marker`` if ``stripped`` is that marker line, else None."""
    if not stripped.startswith(marker):
        return None
    path = stripped[len(marker) :].strip()
    if not path:
        raise PatchParseError(f"'{marker}' needs a path after it", number)
    if "\0" in path:
        # No file has such a name: the OS calls would raise ValueError, not a patch error.
        raise PatchParseError(f"the path after '{marker}' contains a NUL byte", number)
    return path


def _anchor(header: str) -> str | None:
    """The anchor text of an ``@@`` line (``header`` is right-stripped), or None."""
    unified = _UNIFIED_HEADER.fullmatch(header)
    if unified is not None:
        text = unified.group("rest") or ""
    else:
        # Keep the anchor's own indentation: exact matching prefers it.
        text = header[3:] if header.startswith("@@ ") else header[2:]
    return text if text.strip() else None


class _BodyParser:
    """A cursor over the lines between Begin and End Patch."""

    def __init__(self, lines: list[_Line]) -> None:
        self._lines = lines
        self._i = 0

    def _more(self) -> bool:
        return self._i < len(self._lines)

    def _peek(self) -> _Line:
        return self._lines[self._i]

    def parse(self) -> list[FileOperation]:
        operations: list[FileOperation] = []
        while self._more():
            number, raw = self._peek()
            self._i += 1
            stripped = raw.strip()
            if stripped:
                operations.append(self._operation(number, stripped))
        return operations

    def _operation(self, number: int, stripped: str) -> FileOperation:
        if (path := _marker_argument(stripped, ADD_FILE, number)) is not None:
            return self._add(number, path)
        if (path := _marker_argument(stripped, DELETE_FILE, number)) is not None:
            return DeleteFile(path)
        if (path := _marker_argument(stripped, UPDATE_FILE, number)) is not None:
            return self._update(number, path)
        if stripped.startswith(MOVE_TO):
            raise PatchParseError(f"'{MOVE_TO}' must directly follow '{UPDATE_FILE}'", number)
        raise PatchParseError(f"unexpected line {stripped!r}; {_EXPECTED_OPERATION}", number)

    def _add(self, number: int, path: str) -> AddFile:
        content: list[str] = []
        while self._more() and self._peek()[1].startswith("+"):
            content.append(self._peek()[1][1:] + "\n")
            self._i += 1
        return AddFile(path, "".join(content))

    def _update(self, number: int, path: str) -> UpdateFile:
        move_path = None
        if self._more():
            move_number, raw = self._peek()
            move_path = _marker_argument(raw.strip(), MOVE_TO, move_number)
            if move_path is not None:
                self._i += 1
        chunks: list[Chunk] = []
        while self._more():
            raw = self._peek()[1]
            if not raw.strip():
                self._i += 1  # blank lines between chunks
            elif raw.strip().startswith("***"):
                break
            else:
                chunks.append(self._chunk(first=not chunks))
        if not chunks and move_path is None:
            raise PatchParseError(
                f"'{UPDATE_FILE} {path}' has no hunks; expected '@@' followed by hunk lines",
                number,
            )
        return UpdateFile(path, move_path, tuple(chunks))

    def _chunk(self, *, first: bool) -> Chunk:
        number, raw = self._peek()
        context = None
        if raw.rstrip().startswith("@@"):
            context = _anchor(raw.rstrip())
            self._i += 1
        elif not first:
            raise PatchParseError(f"expected '@@' to start the next hunk, got {raw!r}", number)
        lines, is_end_of_file = self._hunk_lines()
        if not lines:
            raise PatchParseError(
                "empty hunk; expected lines starting with ' ' (context), '-' or '+'", number
            )
        return Chunk(context, tuple(lines), is_end_of_file)

    def _hunk_lines(self) -> tuple[list[HunkLine], bool]:
        lines: list[HunkLine] = []
        while self._more():
            number, raw = self._peek()
            op = _HUNK_OPS.get(raw[:1])
            if op is not None:
                lines.append(HunkLine(op, raw[1:]))
            elif not raw.strip():
                lines.append(HunkLine(" ", ""))  # the model dropped a blank line's space
            elif raw.strip() == END_OF_FILE:
                self._i += 1
                return lines, True
            elif raw.rstrip().startswith("@@") or raw.strip().startswith("***"):
                return lines, False
            else:
                raise PatchParseError(
                    f"unexpected line {raw!r} in a hunk; hunk lines start with ' ' (context),"
                    " '-' (remove) or '+' (add)",
                    number,
                )
            self._i += 1
        return lines, False
