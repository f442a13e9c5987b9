"""Seed 000's skills on the JSON-RPC dialect: ``skills.list``, ``context.inspect``'s
``include_skills``, and ``$name`` mentions in ``run.start``.

* ``skills.list {cwd?, force_reload?}`` -> ``{skills, errors, truncated}`` in Codelia's
  shape (``SkillMetadata``: ``id`` (the first 24 hex digits of the SHA-256 of the
  path, as Codelia's), ``name``, ``description``, ``path``, ``dir``, ``scope``,
  ``mtime_ms``), from the engine's ``list_skills``. The Codelia TUI asks for it as it
  starts, when ``supports_skills_list`` is declared, and waits for it before its first run.
* ``context.inspect {include_skills: true}`` adds ``skills {root_dir, working_dir,
  catalog, loaded_versions}``: the project root and cwd the catalogue was read for,
  the catalogue, and the skills this connection's runs attached.
* The TUI's skills picker inserts ``$name`` into the prompt (Codelia's runtime then
  tells its model which skills were mentioned). The engine attaches each skill a
  prompt mentions so (as Codex does); here the mentions are kept for
  ``loaded_versions``.
"""

from __future__ import annotations

import hashlib
import os
import re
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import RpcError
from codexcore.engine import project_root
from codexcore.protocol import InputItem, ListSkills, ListSkillsResponse, SkillMetadata, TextInput

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable
    from codexcore.adapters.jsonrpc._server import RpcContext

MAX_LISTED = 500
"""Skills one answer lists; past that, ``truncated`` is true."""
MENTION = re.compile(r"\$([A-Za-z0-9][\w.-]*)")


@attrs.frozen
class SkillsList:
    cwd: str | None = None
    force_reload: bool | None = None


@attrs.define
class _Kept:
    """A connection's latest catalogue (for mentions) and the skills its runs attached."""

    catalogue: ListSkillsResponse | None = None
    loaded: dict[str, int] = attrs.field(factory=dict)  # path -> mtime_ms when attached


_KEPT: weakref.WeakKeyDictionary[RpcContext, _Kept] = weakref.WeakKeyDictionary()


def _kept(ctx: RpcContext) -> _Kept:
    kept = _KEPT.get(ctx)
    if kept is None:
        kept = _KEPT[ctx] = _Kept()
    return kept


async def list_skills(ctx: RpcContext, cwd: str | None, reload: bool) -> ListSkillsResponse:
    """The engine's ``list_skills`` answer for the connection's session (at ``cwd``)."""
    from ._runs import state_of

    answer = await state_of(ctx).ask_engine(
        ListSkills((cwd,) if cwd else (), reload), ListSkillsResponse
    )
    if not isinstance(answer.msg, ListSkillsResponse):
        raise RpcError(SERVER_ERROR, f"skills.list failed: {getattr(answer.msg, 'message', '')}")
    if cwd is None:
        _kept(ctx).catalogue = answer.msg
    return answer.msg


def _mtime_ms(path: str) -> int:
    try:
        return int(os.stat(path).st_mtime * 1000)
    except OSError:
        return 0


def _skill(skill: SkillMetadata) -> dict[str, Any]:
    return {
        "id": hashlib.sha256(skill.path.encode()).hexdigest()[:24],
        "name": skill.name,
        "description": skill.description,
        "path": skill.path,
        "dir": os.path.dirname(skill.path),
        "scope": skill.scope,
        "mtime_ms": _mtime_ms(skill.path),
    }


def catalog(response: ListSkillsResponse) -> dict[str, Any]:
    """Codelia's ``SkillCatalog`` of the engine's answer."""
    return {
        "skills": [_skill(s) for s in response.skills[:MAX_LISTED]],
        "errors": [{"path": e.path, "message": e.message} for e in response.errors],
        "truncated": len(response.skills) > MAX_LISTED,
    }


async def skills_list(ctx: RpcContext, params: SkillsList) -> dict[str, Any]:
    return catalog(await list_skills(ctx, params.cwd, params.force_reload is True))


async def inspect_skills(ctx: RpcContext, cwd: str) -> dict[str, Any]:
    """``context.inspect``'s ``skills``."""
    response = await list_skills(ctx, None, False)
    loaded = _kept(ctx).loaded
    return {
        "root_dir": project_root(cwd),
        "working_dir": cwd,
        "catalog": catalog(response),
        "loaded_versions": [{"path": p, "mtime_ms": m} for p, m in sorted(loaded.items())],
    }


async def note_mentions(ctx: RpcContext, items: Sequence[InputItem]) -> None:
    """Keep, for ``context.inspect``'s ``loaded_versions``, the skills the run's text
    mentions as ``$name`` (the engine attaches them to the input itself)."""
    texts = [i.text for i in items if isinstance(i, TextInput) and "$" in i.text]
    if not texts:
        return
    kept = _kept(ctx)
    response = kept.catalogue or await list_skills(ctx, None, False)
    by_name = {s.name: s for s in response.skills}
    names = [m.rstrip(".-") for text in texts for m in MENTION.findall(text)]
    for name in dict.fromkeys(names):
        if name in by_name:
            kept.loaded[by_name[name].path] = _mtime_ms(by_name[name].path)


_SKILL = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "path": {"type": "string"},
        "dir": {"type": "string"},
        "scope": {"enum": ["repo", "user"]},
        "mtime_ms": {"type": "integer", "minimum": 0},
    },
    "required": ["id", "name", "description", "path", "dir", "scope", "mtime_ms"],
}
CATALOG: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skills": {"type": "array", "items": _SKILL},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
                "required": ["path", "message"],
            },
        },
        "truncated": {"type": "boolean"},
    },
    "required": ["skills", "errors", "truncated"],
}
INSPECT_SKILLS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "root_dir": {"type": "string"},
        "working_dir": {"type": "string"},
        "catalog": CATALOG,
        "loaded_versions": {"type": "array"},
    },
    "required": ["root_dir", "working_dir", "catalog", "loaded_versions"],
}


def add_skills_methods(table: MethodTable) -> None:
    """Register ``skills.list`` (which makes ``supports_skills_list`` true)."""
    table.add(
        "skills.list",
        skills_list,
        SkillsList,
        summary="The skills catalogue (repo and user skills) and the malformed SKILL.md files",
        result=CATALOG,
        errors=(SERVER_ERROR,),
    )
