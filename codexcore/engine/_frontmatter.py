"""The YAML front matter of a ``SKILL.md``: the small part of YAML skills use.

Between a first line ``---`` and the next ``---``: top-level ``key: value`` lines,
where a value is plain (folded over indented continuation lines, a `` #`` comment
cut), single- or double-quoted, or a block scalar (``|``, ``>``, with ``-``/``+``);
a key with an indented block under it (a nested mapping or list, as ``metadata:``)
is kept as its raw text. Anything else is an error naming its line: a skill's file is
the user's, and a silent misreading would hide the mistake.
"""

from __future__ import annotations

import io
import json
import re

_KEY = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:\s+(.*)|\s*)$")
_BLOCK = re.compile(r"^([|>])([+-]?)\s*(?:#.*)?$")


class FrontMatterError(ValueError):
    """The front matter is missing or not the YAML this reader takes."""


def front_matter_lines(text: str) -> list[str]:
    """The lines between the opening and the closing ``---`` (the body is never split)."""
    lines = iter(io.StringIO(text.lstrip("\ufeff")))
    if next(lines, "").strip() != "---":
        raise FrontMatterError("missing YAML front matter delimited by ---")
    inside: list[str] = []
    for line in lines:
        if line.strip() in ("---", "..."):
            if not inside:
                raise FrontMatterError("the YAML front matter is empty")
            return inside
        inside.append(line.rstrip("\r\n"))
    raise FrontMatterError("missing YAML front matter delimited by --- (no closing ---)")


def parse_front_matter(text: str) -> dict[str, object]:
    """The front matter's top-level keys and their values (text)."""
    lines = front_matter_lines(text)
    fields: dict[str, object] = {}
    at = 0
    while at < len(lines):
        line = lines[at]
        if not line.strip() or line.lstrip().startswith("#"):
            at += 1
            continue
        where = f"front matter line {at + 2}"
        if line[0] in " \t":
            raise FrontMatterError(f"{where}: unexpected indentation")
        match = _KEY.match(line)
        if match is None:
            raise FrontMatterError(f"{where}: expected `key: value`")
        key, raw = match.group(1), (match.group(2) or "").strip()
        if key in fields:
            raise FrontMatterError(f"{where}: `{key}` is given twice")
        block, at = _indented(lines, at + 1)
        fields[key] = _value(raw, block, where)
    return fields


def _indented(lines: list[str], at: int) -> tuple[list[str], int]:
    """The indented (or blank) lines from ``at``, and where they end."""
    start = at
    while at < len(lines) and (not lines[at].strip() or lines[at][0] in " \t"):
        at += 1
    block = lines[start:at]
    while block and not block[-1].strip():
        block.pop()
    return block, at


def _value(raw: str, block: list[str], where: str) -> object:
    block_scalar = _BLOCK.match(raw)
    if block_scalar is not None:
        return _block_scalar(block, block_scalar.group(1), block_scalar.group(2))
    if not raw:
        return "\n".join(block) if block else None  # a nested block, kept raw; or null
    if raw[0] in "'\"":
        if block:
            raise FrontMatterError(f"{where}: a quoted value must end on its line")
        return _quoted(raw, where)
    if raw[0] in "[{&*!|>@`":
        raise FrontMatterError(f"{where}: unsupported YAML value {raw[:20]!r} (quote it)")
    parts = [_plain(raw), *(_plain(b.strip()) for b in block if b.strip())]
    return " ".join(p for p in parts if p)


def _plain(text: str) -> str:
    cut = text.find(" #")
    return (text[:cut] if cut >= 0 else text).strip()


def _quoted(raw: str, where: str) -> str:
    quote = raw[0]
    end = _closing_quote(raw, quote)
    if end < 0:
        raise FrontMatterError(f"{where}: unterminated {quote}quoted{quote} value")
    rest = raw[end + 1 :].strip()
    if rest and not rest.startswith("#"):
        raise FrontMatterError(f"{where}: text after the quoted value")
    body = raw[1:end]
    if quote == "'":
        return body.replace("''", "'")
    try:
        value = json.loads(f'"{body}"')
    except json.JSONDecodeError:
        raise FrontMatterError(f"{where}: bad escape in the double-quoted value") from None
    assert isinstance(value, str)
    return value


def _closing_quote(raw: str, quote: str) -> int:
    at = 1
    while at < len(raw):
        char = raw[at]
        if quote == '"' and char == "\\":
            at += 2
            continue
        if char == quote:
            if quote == "'" and raw[at + 1 : at + 2] == "'":
                at += 2
                continue
            return at
        at += 1
    return -1


def _block_scalar(block: list[str], style: str, chomp: str) -> str:
    indents = [len(b) - len(b.lstrip(" ")) for b in block if b.strip()]
    indent = min(indents, default=0)
    rows = [b[indent:] if b.strip() else "" for b in block]
    text = "\n".join(rows)
    if style == ">":  # folded: lines join with spaces, blank lines stay breaks
        text = re.sub(r"(?<!\n)\n(?!\n)", " ", text)
    if chomp == "-":
        return text
    return text + "\n"
