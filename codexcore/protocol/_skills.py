"""The wire types of skills: the ``list_skills`` op, its answer, and the ``skill`` input item.

Codex's names (``Op::ListSkills``, ``ListSkillsResponseEvent``, ``SkillMetadata``,
``SkillErrorInfo``, ``UserInput::Skill``). Unlike Codex's answer, which nests one
entry per cwd, ``list_skills_response`` lists every skill found once, with the errors.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._value import Value
from ._wire import EVENT_MSGS, INPUT_ITEMS, OPS, Tagged

SkillScope = Literal["repo", "user"]
"""Where a skill was found: the project's ``.codexcore/skills/`` (``repo``) or
``$CODEXCORE_HOME/skills/`` (``user``)."""


@attrs.frozen(repr=False, eq=False)
class SkillMetadata(Value):
    """A skill of the catalogue: from its ``SKILL.md``'s front matter, and where it lies
    (``path`` is the absolute path of that ``SKILL.md``)."""

    name: str
    description: str
    path: str
    scope: SkillScope


@attrs.frozen(repr=False, eq=False)
class SkillErrorInfo(Value):
    """A ``SKILL.md`` that could not be used, and why (it is left out of the catalogue)."""

    path: str
    message: str


@OPS.register("list_skills")
@attrs.frozen(repr=False, eq=False)
class ListSkills(Tagged):
    """The skills for ``cwds`` (default: the Session's cwd), answered by
    ``list_skills_response``. A catalogue is read once per project and kept;
    ``force_reload`` reads the folders again. Never disturbs a running Task."""

    cwds: tuple[str, ...] = ()
    force_reload: bool = False


@EVENT_MSGS.register("list_skills_response")
@attrs.frozen(repr=False, eq=False)
class ListSkillsResponse(Tagged):
    """The answer to ``list_skills``: the skills, by name (a repo skill hides a user skill
    of the same name), and the ``SKILL.md`` files that are malformed, each with its problem."""

    skills: tuple[SkillMetadata, ...]
    errors: tuple[SkillErrorInfo, ...] = ()


@INPUT_ITEMS.register("skill")
@attrs.frozen(repr=False, eq=False)
class SkillInput(Tagged):
    """Use the skill ``name`` whose ``SKILL.md`` is at ``path``: its whole text goes to
    the model with this input. A file that cannot be read or is no skill is refused."""

    name: str
    path: str
