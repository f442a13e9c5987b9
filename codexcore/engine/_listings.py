"""What a Session can use, listed on request: ``list_skills`` and ``list_mcp_tools``.

Both are answered at once, beside whatever runs: a running Task goes on
undisturbed. Skills are read from the skills folders, or from the catalogue
the engine keeps (:class:`~._skills.SkillCatalogues`); MCP tools are what the
Session's servers offer now, with each server's state (a server still
starting is listed as such, never waited for).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import ListSkills, Submission
from ._mcp import McpManager
from ._skills import list_skills as skills_answer

if TYPE_CHECKING:
    from ._codex import Codex


async def list_skills(codex: Codex, sub: Submission, _: object) -> None:
    """The skills under the Session's cwd (or the defaults') and the ``cwds`` asked for."""
    assert isinstance(sub.op, ListSkills)
    cwd = codex._session_config().cwd
    answer = await skills_answer(codex._skills, sub.op, cwd, str(codex._home()))
    await codex._emit(sub.id, answer)


async def list_mcp_tools(codex: Codex, sub: Submission, _: object) -> None:
    """What the MCP servers offer and where each is, now: never waits for a startup."""
    session = codex._require_session()
    if session.mcp is not None:
        answer = session.mcp.list_response()
    else:
        answer = McpManager(codex.config.mcp_servers, codex._emitter(sub.id), "").list_response()
    await codex._emit(sub.id, answer)
