"""Griffe extension: codexcore's reStructuredText docstring markup, read as Markdown.

codexcore's docstrings are written for ``help()`` and Sphinx-style readers:
``:class:`~codexcore.Codex```, ``\\ s`` after a role, and ``::`` before an
indented code block. mkdocstrings renders docstrings as Markdown, so this
extension rewrites them when griffe loads the package:

- a role becomes a cross-reference to the API reference, shown as code
  (``~`` keeps only the last name, as in Sphinx); a target that the reference
  does not render (a private helper, say) stays plain code, with no warning;
- ``\\ `` (an escaped space) disappears;
- ``word::`` before an indented block becomes ``word:``, and the block stays
  an indented (code) block.

Enabled in ``mkdocs.yml`` under the python handler's ``extensions``.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")
_LITERAL_BLOCK = re.compile(r"::\n\n")
_EXPLICIT_TITLE = re.compile(r"(.+?)\s*<([^<>]+)>")


class RstRoles(griffe.Extension):
    """Rewrites every docstring of a package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in _walk(pkg, set()):
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value, obj)


def _walk(obj: griffe.Object, seen: set[str]) -> list[griffe.Object]:
    if obj.path in seen:
        return []
    seen.add(obj.path)
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            assert isinstance(member, griffe.Object)
            found += _walk(member, seen)
    return found


def rewrite(text: str, obj: griffe.Object | None = None) -> str:
    """``text`` with its roles, escaped spaces and ``::`` made Markdown."""
    package = None
    if obj is not None:
        module = obj if isinstance(obj, griffe.Module) else obj.module
        # What a leading "." means: the package itself, or the module's package.
        package = module.path if module.is_init_module else module.path.rpartition(".")[0]

    def role(match: re.Match[str]) -> str:
        short, target = match.group(1), match.group(2)
        explicit = _EXPLICIT_TITLE.fullmatch(target)  # Sphinx's "Title <target>"
        if explicit is not None:
            target = explicit.group(2)
        identifier = _absolute(target, package)
        if obj is not None and "." not in target:
            with contextlib.suppress(griffe.NameResolutionError):
                identifier = obj.resolve(target)  # a bare name, in the object's scope
        title = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
        if explicit is not None:
            title = explicit.group(1).strip()
        return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'

    text = _ROLE.sub(role, text)
    text = text.replace("\\ ", "")
    return _LITERAL_BLOCK.sub(":\n\n", text)


def _absolute(target: str, package: str | None) -> str:
    """A role's target as a full dotted path: ``.x`` is ``x`` in ``package``, ``..x``
    one level up."""
    if not target.startswith(".") or package is None:
        return target
    name = target.lstrip(".")
    parts = package.split(".")
    ups = len(target) - len(name) - 1
    return ".".join([*parts[: len(parts) - ups], name])
