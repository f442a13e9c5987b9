"""Skills: folders holding a ``SKILL.md`` whose YAML front matter names and describes them.

Found under ``<project root>/.codexcore/skills/`` (``repo``; the project root is the git
root above the cwd, else the cwd) and ``$CODEXCORE_HOME/skills/`` (``user``), at any
depth. The catalogue (name, description, path) goes to the model once per session, as
a contextual message of its own beside the instructions (:func:`catalogue_item`); a
skill's body is read only when it is asked for (a ``skill`` input item,
:func:`skill_part`, or the model opening the file). A malformed ``SKILL.md`` is listed
with its problem and left out, never fatal.

As Codex's loader (``core/src/skills/loader.rs``): hidden entries and symlinks are
skipped, name and description are folded to one line, at most 64 and 1024
characters; a repo skill hides a user skill of the same name.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from .._logging import get_logger
from ..protocol import (
    InputItem,
    ListSkills,
    ListSkillsResponse,
    SkillErrorInfo,
    SkillInput,
    SkillMetadata,
    SkillScope,
    TextInput,
)
from ..protocol._value import Value
from ..tools._safe_read import FileRefused, FileTooLarge, read_regular
from ._frontmatter import FrontMatterError, parse_front_matter
from ._history import History, Item
from ._instructions import SKILLS_CATALOGUE_OPEN

log = get_logger(__name__)

SKILL_FILE = "SKILL.md"
REPO_SKILLS = (".codexcore", "skills")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_SKILL_BYTES = 256 * 1024
"""The largest ``SKILL.md`` read (listing or attaching); a larger one is an error."""
MAX_DIRS = 2000
"""Folders visited under one skills root before the walk stops (and says so)."""


class SkillError(ValueError):
    """A ``skill`` input item that cannot be attached; the message names the problem."""


@attrs.frozen(repr=False, eq=False)
class Catalogue(Value):
    skills: tuple[SkillMetadata, ...]
    errors: tuple[SkillErrorInfo, ...]


def project_root(cwd: str) -> str:
    """The git root at or above ``cwd`` (a ``.git`` folder or file), else ``cwd``."""
    here = Path(os.path.realpath(cwd))
    for folder in (here, *here.parents):
        try:
            if os.path.lexists(folder / ".git"):
                return str(folder)
        except OSError:  # an unreadable folder on the way up: no git root found there
            continue
    return str(here)


def skill_roots(cwd: str, home: str) -> list[tuple[str, SkillScope]]:
    """Where skills are looked for, in precedence order."""
    return [
        (os.path.join(project_root(cwd), *REPO_SKILLS), "repo"),
        (os.path.join(home, "skills"), "user"),
    ]


def discover(roots: Iterable[tuple[str, SkillScope]]) -> Catalogue:
    """Every skill under ``roots`` (by name, first root first) and every malformed one."""
    found: list[SkillMetadata] = []
    errors: list[SkillErrorInfo] = []
    for root, scope in roots:
        for path in _skill_files(root, errors):
            try:
                found.append(read_metadata(path, scope))
            except SkillError as exc:
                errors.append(SkillErrorInfo(path, str(exc)))
    by_name: dict[str, SkillMetadata] = {}
    for skill in found:
        by_name.setdefault(skill.name, skill)  # the first root's wins
    kept = sorted(by_name.values(), key=lambda s: (s.name, s.path))
    return Catalogue(tuple(kept), tuple(errors))


def _skill_files(root: str, errors: list[SkillErrorInfo]) -> list[str]:
    """The ``SKILL.md`` files under ``root``, breadth first; hidden entries and symlinks
    are skipped (a link could lead the walk anywhere, or round in a circle)."""
    try:
        base = os.path.realpath(root)
        if not os.path.isdir(base):
            return []
    except OSError:
        return []
    queue, files, visited = [base], [], 0
    while queue:
        folder = queue.pop(0)
        visited += 1
        if visited > MAX_DIRS:
            errors.append(SkillErrorInfo(folder, f"not searched: over {MAX_DIRS} folders"))
            break
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            errors.append(SkillErrorInfo(folder, f"cannot list: {exc.strerror or exc}"))
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                queue.append(entry.path)
            elif entry.name == SKILL_FILE and entry.is_file(follow_symlinks=False):
                files.append(entry.path)
    return files


def read_skill_text(path: str) -> str:
    """The text of the ``SKILL.md`` at ``path`` (a regular file, at most
    :data:`MAX_SKILL_BYTES`, UTF-8; opened without blocking, so a FIFO is refused)."""
    try:
        data = read_regular(path, MAX_SKILL_BYTES)
    except FileTooLarge:
        raise SkillError(f"larger than {MAX_SKILL_BYTES} bytes") from None
    except FileRefused as exc:
        raise SkillError(exc.problem) from None
    except OSError as exc:
        raise SkillError(f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_metadata(path: str, scope: SkillScope, text: str | None = None) -> SkillMetadata:
    """The skill at ``path`` from its front matter; :class:`SkillError` says what is wrong."""
    try:
        fields = parse_front_matter(read_skill_text(path) if text is None else text)
    except FrontMatterError as exc:
        raise SkillError(str(exc)) from None
    name = _field(fields, "name", MAX_NAME_CHARS)
    description = _field(fields, "description", MAX_DESCRIPTION_CHARS)
    return SkillMetadata(name, description, os.path.abspath(path), scope)


def _field(fields: dict[str, object], key: str, limit: int) -> str:
    value = fields.get(key)
    if value is None:
        raise SkillError(f"missing field `{key}` in the front matter")
    if not isinstance(value, str):
        raise SkillError(f"invalid {key}: expected text")
    line = " ".join(value.split())
    if not line:
        raise SkillError(f"missing field `{key}` in the front matter")
    if len(line) > limit:
        raise SkillError(f"invalid {key}: exceeds maximum length of {limit} characters")
    return line


class SkillCatalogues:
    """The catalogues read so far, by (skills roots): each project is walked once, until a
    ``force_reload``. Thread-safe: lookups run off the event loop."""

    def __init__(self) -> None:
        self._kept: dict[tuple[tuple[str, SkillScope], ...], Catalogue] = {}
        self._lock = threading.Lock()

    def get(self, cwd: str, home: str, *, reload: bool = False) -> Catalogue:
        roots = tuple(skill_roots(cwd, home))
        with self._lock:
            kept = None if reload else self._kept.get(roots)
        if kept is None:
            kept = discover(roots)
            with self._lock:
                self._kept[roots] = kept
        return kept

    def response(
        self, cwds: Iterable[str], home: str, *, reload: bool = False
    ) -> ListSkillsResponse:
        """``list_skills``' answer for ``cwds``: their skills and errors, each once."""
        skills: dict[str, SkillMetadata] = {}
        errors: dict[str, SkillErrorInfo] = {}
        for cwd in cwds:
            catalogue = self.get(cwd, home, reload=reload)
            skills.update((s.path, s) for s in catalogue.skills)
            errors.update((e.path, e) for e in catalogue.errors)
        listed = sorted(skills.values(), key=lambda s: (s.name, s.path))
        return ListSkillsResponse(tuple(listed), tuple(errors.values()))


MENTION = re.compile(r"\$([A-Za-z0-9][\w.-]*)")
"""``$name`` in the user's text: a mention of the skill ``name`` (as in Codex)."""


def mentioned_skills(catalogue: Catalogue, texts: Iterable[str]) -> list[SkillMetadata]:
    """The skills of ``catalogue`` that ``texts`` mention as ``$name``, once each, in
    order. A ``$WORD`` naming no skill (``$HOME``) is no mention; a mention can end a
    sentence (``use $deploy.``): the dot is not the name's."""
    names = [m.rstrip(".-") for text in texts for m in MENTION.findall(text)]
    by_name = {s.name: s for s in catalogue.skills}
    return [by_name[n] for n in dict.fromkeys(names) if n in by_name]


CATALOGUE_OPEN = SKILLS_CATALOGUE_OPEN
SKILL_OPEN = "<skill>"
"""How an attached skill's part begins (Codex's block)."""
CATALOGUE_CLOSE = "</skills_instructions>"
_HOW_TO = """\
### How to use skills
- The list above is the skills available in this session (name, description, file). \
Their bodies live on disk at the listed paths.
- If the user names a skill (with `$name` or plain text), or the task clearly matches a \
skill's description, use that skill for that turn: open its `SKILL.md` (with the shell \
tool) and follow it. Read only what you need; prefer the scripts and templates it points \
to over retyping them.
- If a skill's file cannot be read or its instructions do not fit, say so briefly and \
go on with the best fallback."""


MAX_CATALOGUE_CHARS = 32 * 1024
"""The skill lines sent to the model, at most: past that, how many were left out."""


def catalogue_text(skills: Iterable[SkillMetadata]) -> str | None:
    """The catalogue as the model reads it (Codex's ``render_skills_section``); None
    when there is no skill."""
    lines = [f"- {s.name}: {s.description} (file: {s.path})" for s in skills]
    if not lines:
        return None
    size = 0
    for kept, line in enumerate(lines):
        size += len(line) + 1
        if size > MAX_CATALOGUE_CHARS:
            left = len(lines) - kept
            lines = [*lines[:kept], f"- ({left} more skills not listed here for space)"]
            break
    head = (
        "## Skills\nA skill is a set of local instructions stored in a `SKILL.md` file. "
        "Below are the skills that can be used.\n### Available skills"
    )
    return "\n".join([CATALOGUE_OPEN, head, *lines, _HOW_TO, CATALOGUE_CLOSE])


def catalogue_item(catalogue: Catalogue) -> Item | None:
    """The catalogue as a contextual user message, sent once per session with its first
    request (beside the project instructions); None when there is no skill."""
    text = catalogue_text(catalogue.skills)
    if text is None:
        return None
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def skill_part(item: SkillInput) -> dict[str, str]:
    """The ``input_text`` part that hands the model the skill ``item`` asks for: the
    whole ``SKILL.md``, in Codex's ``<skill>`` block. Blocking (reads the file)."""
    where = f"skill {item.name!r} at {item.path}"
    if os.path.basename(item.path) != SKILL_FILE or not os.path.isabs(item.path):
        raise SkillError(f"{where}: path must be the absolute path of a {SKILL_FILE}")
    try:
        text = read_skill_text(item.path)
        skill = read_metadata(item.path, "repo", text)
    except SkillError as exc:
        raise SkillError(f"{where}: {exc}") from None
    if skill.name != item.name:
        raise SkillError(f"{where}: that file is the skill {skill.name!r}")
    body = f"{SKILL_OPEN}\n<name>{skill.name}</name>\n<path>{skill.path}</path>\n{text}\n</skill>"
    return {"type": "input_text", "text": body}


# --- what the engine calls (off the event loop where it reads files) ---------------------------


async def session_context(
    catalogues: SkillCatalogues, history: History, cwd: str, home: str
) -> list[Item]:
    """The catalogue message for a session's first request: only while its History is
    empty (a resumed or forked session has it already), none when there is no skill."""
    if history.last_response_id is not None or history.items():
        return []
    item = catalogue_item(await asyncio.to_thread(catalogues.get, cwd, home))
    return [item] if item is not None else []


async def list_skills(
    catalogues: SkillCatalogues, op: ListSkills, cwd: str, home: str
) -> ListSkillsResponse:
    """The answer to ``op``; its ``cwds`` are taken from the session's ``cwd``."""
    cwds = [os.path.join(cwd, c) for c in op.cwds] or [cwd]
    return await asyncio.to_thread(lambda: catalogues.response(cwds, home, reload=op.force_reload))


async def mention_parts(
    catalogues: SkillCatalogues, items: Sequence[InputItem], cwd: str, home: str
) -> list[dict[str, str]]:
    """The skills the input's text mentions as ``$name`` (and no item names already),
    as parts for its message (:func:`skill_part`). A mentioned skill that cannot be
    read now is left out (logged), never fatal."""
    texts = [item.text for item in items if isinstance(item, TextInput) and "$" in item.text]
    if not texts:
        return []
    given = {item.path for item in items if isinstance(item, SkillInput)}

    def parts() -> list[dict[str, str]]:
        found = []
        for skill in mentioned_skills(catalogues.get(cwd, home), texts):
            if skill.path in given:
                continue
            try:
                found.append(skill_part(SkillInput(skill.name, skill.path)))
            except SkillError as exc:
                log.warning("mentioned skill not attached", skill=skill.name, error=str(exc))
        return found

    return await asyncio.to_thread(parts)
