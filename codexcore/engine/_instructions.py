"""The initial context: what the model is told once per session, and short updates.

As in Codex, two contextual user messages go before the first user message of
a session: ``<user_instructions>`` (the AGENTS.md files) and
``<environment_context>`` (cwd, policies, shell, date, timezone). Later
changes of the cwd or a policy are sent as an ``<environment_context>`` that
holds only what changed. What was sent is in the History itself, so a
resumed or forked session (whose History is rebuilt from its rollout) knows
what its model was told (:func:`told_in`) and sends nothing twice.

The initial context is a small list of parts (:data:`CONTEXT_PARTS`), each
making at most one item: another feature adds its own contextual item by
adding a part.

AGENTS.md discovery follows Codex's ``project_doc``: the project root is the
nearest directory at or above the cwd holding ``.git`` (a directory or a
file), else the cwd itself; every ``AGENTS.md`` from that root down to the
cwd is read, root first, after the global one in ``$CODEXCORE_HOME``. The
text is capped (``project_doc_max_bytes``, 32 KiB by default): the cut is
said in a warning naming the file where it fell.
"""

from __future__ import annotations

import codecs
import datetime
import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import attrs

from ..protocol._value import Value
from ..tools._safe_read import read_head
from ._config import SessionConfig
from ._history import Item

PROJECT_DOC = "AGENTS.md"
USER_INSTRUCTIONS_OPEN = "<user_instructions>"
USER_INSTRUCTIONS_CLOSE = "</user_instructions>"
ENVIRONMENT_CONTEXT_OPEN = "<environment_context>"
ENVIRONMENT_CONTEXT_CLOSE = "</environment_context>"

Scope = Literal["global", "project"]


# --- AGENTS.md ---------------------------------------------------------------------------


@attrs.frozen(repr=False, eq=False)
class ProjectDoc(Value):
    """One AGENTS.md read: where, whose (``global``: ``$CODEXCORE_HOME``'s), its size,
    and how many of its bytes were sent (fewer when the cap cut it)."""

    path: str
    scope: Scope
    size: int
    sent_bytes: int


@attrs.frozen(repr=False, eq=False)
class ProjectDocs(Value):
    """The AGENTS.md files for a cwd, root first, and their text as the model gets it."""

    root: str
    files: tuple[ProjectDoc, ...]
    text: str
    max_bytes: int
    warnings: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        return any(doc.sent_bytes < doc.size for doc in self.files)


def project_root(cwd: str) -> str:
    """The nearest directory at or above ``cwd`` holding ``.git``, else ``cwd``."""
    here = cwd
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return cwd
        here = parent


def agents_paths(cwd: str, home: str | None) -> list[tuple[str, Scope]]:
    """The AGENTS.md files that exist for ``cwd``: the global one in ``home``, then
    one per directory from the project root down to ``cwd``."""
    return _discover(os.path.abspath(cwd), home)[1]


def _discover(cwd: str, home: str | None) -> tuple[str, list[tuple[str, Scope]]]:
    found: list[tuple[str, Scope]] = []
    if home is not None and _present(path := os.path.join(home, PROJECT_DOC)):
        found.append((path, "global"))
    root = project_root(cwd)
    relative = os.path.relpath(cwd, root)
    parts = [] if relative == os.curdir else relative.split(os.sep)
    directory = root
    for part in [None, *parts]:
        if part is not None:
            directory = os.path.join(directory, part)
        if _present(path := os.path.join(directory, PROJECT_DOC)):
            found.append((path, "project"))
    return root, found


def _present(path: str) -> bool:
    """Whether there is an AGENTS.md at ``path`` to read: anything but a directory (a
    FIFO or a device is found, then refused by the read with a warning, never read)."""
    return os.path.lexists(path) and not os.path.isdir(path)


def read_project_docs(cwd: str, home: str | None, max_bytes: int) -> ProjectDocs:
    """The AGENTS.md text for ``cwd``, at most ``max_bytes`` of it (0: none is read).

    Files are joined by a blank line, root first. No more than the budget is
    read of any file. A project AGENTS.md that is a symlink leading outside
    the project root is left out (a checked-out repository must not be able
    to send, say, ``~/.ssh/id_rsa`` to the model provider), as is a file that
    cannot be read; each with a warning. The cap cuts on a character
    boundary, with a warning naming the file it cut and how much was left out.
    """
    if max_bytes <= 0:
        return ProjectDocs(project_root(os.path.abspath(cwd)), (), "", max_bytes)
    root, found = _discover(os.path.abspath(cwd), home)
    docs: list[ProjectDoc] = []
    texts: list[str] = []
    warnings: list[str] = []
    budget = max_bytes
    for path, scope in found:
        if scope == "project" and _leads_outside(path, root):
            warnings.append(
                f"{path} leads outside the project ({os.path.realpath(path)}); it is left out"
            )
            continue
        try:
            # The link check again at the open: a link swapped in meanwhile is refused.
            size, text, sent = _read_capped(path, budget, (root,) if scope == "project" else None)
        except OSError as exc:
            warnings.append(f"cannot read {path}: {exc.strerror or exc}; it is left out")
            continue
        docs.append(ProjectDoc(path, scope, size, sent))
        if text.strip():
            texts.append(text)
        budget -= sent
    cut = [doc for doc in docs if doc.sent_bytes < doc.size]
    if cut:
        warnings.append(_cut_warning(cut, max_bytes))
    return ProjectDocs(root, tuple(docs), "\n\n".join(texts), max_bytes, tuple(warnings))


def _leads_outside(path: str, root: str) -> bool:
    """Whether ``path`` is a symlink whose target is not under ``root``."""
    if not os.path.islink(path):
        return False
    target, inside = os.path.realpath(path), os.path.realpath(root)
    return not target.startswith(inside.rstrip(os.sep) + os.sep)


def _read_capped(path: str, budget: int, within: tuple[str, ...] | None) -> tuple[int, str, int]:
    """The file's size, its text up to ``budget`` bytes (a character cut in two is
    left out whole), and how many of its bytes that text is. Raises ``OSError``
    (:class:`~..tools._safe_read.NotRegularFile` for a FIFO, a device...)."""
    data, size = read_head(
        path, budget, within=within
    )  # a FIFO or a device is refused, never waited on
    final = len(data) >= size  # the whole file was read: no character can be cut
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = decoder.decode(data, final=final)
    held, _ = decoder.getstate()
    return size, text, len(data) - len(held)


def _cut_warning(cut: list[ProjectDoc], max_bytes: int) -> str:
    left_out = sum(doc.size - doc.sent_bytes for doc in cut)
    also = f" (also {', '.join(d.path for d in cut[1:])})" if len(cut) > 1 else ""
    return (
        f"AGENTS.md files hold more than project_doc_max_bytes ({max_bytes} bytes): "
        f"cut in {cut[0].path}; {left_out} bytes left out{also}"
    )


# --- the environment ---------------------------------------------------------------------


@attrs.frozen(repr=False, eq=False)
class Environment(Value):
    """What the model is told of where and under what rules it works; a field left
    None (in an update) did not change."""

    cwd: str | None = None
    approval_policy: str | None = None
    sandbox_mode: str | None = None
    network_access: bool | None = None
    writable_roots: tuple[str, ...] | None = None

    @classmethod
    def of(cls, config: SessionConfig) -> Environment:
        policy = config.sandbox_policy
        return cls(
            config.cwd,
            config.approval_policy,
            policy.type,
            policy.network_access or policy.type == "danger-full-access",
            policy.writable_roots,
        )

    def changes_to(self, other: Environment) -> Environment:
        """Only the fields where ``other`` differs from this."""
        fields = attrs.fields(Environment)
        return Environment(
            **{
                f.name: getattr(other, f.name)
                for f in fields
                if getattr(other, f.name) != getattr(self, f.name)
            }
        )

    def updated(self, update: Environment) -> Environment:
        fields = attrs.fields(Environment)
        return Environment(
            **{
                f.name: getattr(self, f.name)
                if getattr(update, f.name) is None
                else getattr(update, f.name)
                for f in fields
            }
        )

    def is_empty(self) -> bool:
        return self == Environment()


def _escape(value: str) -> str:
    # html (with its entity table) loads at the first Turn, not at every server's start.
    import html

    return html.escape(value, quote=False)


def _tag(name: str, value: str) -> str:
    return f"  <{name}>{_escape(value)}</{name}>"


def environment_text(env: Environment, extra: Sequence[tuple[str, str]] = ()) -> str:
    """``env`` (and ``extra`` fields, e.g. shell and date) as Codex's XML block."""
    lines = [ENVIRONMENT_CONTEXT_OPEN]
    if env.cwd is not None:
        lines.append(_tag("cwd", env.cwd))
    if env.approval_policy is not None:
        lines.append(_tag("approval_policy", env.approval_policy))
    if env.sandbox_mode is not None:
        lines.append(_tag("sandbox_mode", env.sandbox_mode))
    if env.network_access is not None:
        lines.append(_tag("network_access", "enabled" if env.network_access else "restricted"))
    if env.writable_roots == ():
        lines.append("  <writable_roots />")  # said, so a change to none is said too
    elif env.writable_roots is not None:
        roots = "".join(f"\n    <root>{_escape(r)}</root>" for r in env.writable_roots)
        lines.append(f"  <writable_roots>{roots}\n  </writable_roots>")
    lines.extend(_tag(name, value) for name, value in extra)
    lines.append(ENVIRONMENT_CONTEXT_CLOSE)
    return "\n".join(lines)


_FIELD = re.compile(r"<(cwd|approval_policy|sandbox_mode|network_access)>(.*?)</\1>", re.S)
_ROOTS = re.compile(r"<writable_roots>(.*?)</writable_roots>", re.S)
_ROOT = re.compile(r"<root>(.*?)</root>", re.S)


def parse_environment(text: str) -> Environment:
    """The fields an ``<environment_context>`` block states (the inverse of
    :func:`environment_text` for the fields that make up an :class:`Environment`)."""
    import html

    found = {name: html.unescape(value) for name, value in _FIELD.findall(text)}
    roots = _ROOTS.search(text)
    network = found.get("network_access")
    listed = tuple(html.unescape(r) for r in _ROOT.findall(roots.group(1))) if roots else None
    return Environment(
        found.get("cwd"),
        found.get("approval_policy"),
        found.get("sandbox_mode"),
        None if network is None else network == "enabled",
        () if listed is None and "<writable_roots />" in text else listed,
    )


def shell_name(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The user's shell as Codex names it (``bash``, ``zsh`` …), from ``$SHELL``."""
    return os.path.basename(environ.get("SHELL") or "") or "sh"


def timezone_name(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The IANA name of the local timezone (``Europe/Paris``), as well as it is known."""
    if tz := (environ.get("TZ") or "").lstrip(":"):
        return tz
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        return target.split("zoneinfo/", 1)[1]
    return datetime.datetime.now().astimezone().tzname() or "UTC"


# --- the parts of the initial context ------------------------------------------------------


@attrs.frozen(repr=False, eq=False)
class ContextInputs(Value):
    """What the parts of the initial context are made from."""

    config: SessionConfig
    home: str | None
    max_bytes: int
    shell: str
    today: str
    timezone: str


ContextPart = Callable[[ContextInputs, Callable[[str], None]], Item | None]
"""Makes one contextual item (or none) and reports warnings through its second argument."""


def contextual_message(text: str) -> Item:
    """A contextual user message: how Codex sends what is not the user's own words."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def user_instructions_part(inputs: ContextInputs, warn: Callable[[str], None]) -> Item | None:
    docs = read_project_docs(inputs.config.cwd, inputs.home, inputs.max_bytes)
    for warning in docs.warnings:
        warn(warning)
    if not docs.text:
        return None
    return contextual_message(
        f"{USER_INSTRUCTIONS_OPEN}\n\n{docs.text}\n\n{USER_INSTRUCTIONS_CLOSE}"
    )


def environment_part(inputs: ContextInputs, warn: Callable[[str], None]) -> Item | None:
    extra = (("shell", inputs.shell), ("current_date", inputs.today), ("timezone", inputs.timezone))
    return contextual_message(environment_text(Environment.of(inputs.config), extra))


CONTEXT_PARTS: list[ContextPart] = [user_instructions_part, environment_part]
"""The initial context, in order. Another feature adds its own item by appending a part."""


def initial_context(inputs: ContextInputs) -> tuple[list[Item], list[str]]:
    """The initial context's items and the warnings made assembling it."""
    warnings: list[str] = []
    items = [item for part in CONTEXT_PARTS if (item := part(inputs, warnings.append))]
    return items, warnings


def _message_text(item: Item) -> str | None:
    if item.get("type") != "message" or item.get("role") != "user":
        return None
    parts = item.get("content")
    if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], dict):
        return None
    text = parts[0].get("text")
    return text if isinstance(text, str) else None


SKILLS_CATALOGUE_OPEN = "<skills_instructions>"
"""How the skills catalogue message begins (sent by :mod:`._skills`, once per session)."""

CONTEXTUAL_OPENINGS: list[str] = [
    USER_INSTRUCTIONS_OPEN,
    ENVIRONMENT_CONTEXT_OPEN,
    SKILLS_CATALOGUE_OPEN,
]
"""How contextual user messages begin; a feature that adds a part adds its opening tag."""


def is_contextual(item: Item) -> bool:
    """Whether ``item`` is a contextual user message, not words the user typed."""
    text = _message_text(item)
    return text is not None and text.startswith(tuple(CONTEXTUAL_OPENINGS))


def told_in(items: Iterable[Item]) -> Environment | None:
    """What a conversation has told its model of its environment (None: nothing yet,
    so the initial context is still to send)."""
    told: Environment | None = None
    for item in items:
        text = _message_text(item)
        if text is not None and text.startswith(ENVIRONMENT_CONTEXT_OPEN):
            update = parse_environment(text)
            told = update if told is None else told.updated(update)
    return told


class ContextTracker:
    """What a Session's model has been told of its environment, and what to tell next.

    :meth:`pending` says what the next request must carry (the whole initial
    context when nothing was told yet, a short update when the cwd or a policy
    changed, else nothing); :meth:`sent` is called once that request's input is
    in the History.
    """

    def __init__(self, home: str | None, max_bytes: int, told: Environment | None) -> None:
        self.home = home
        self.max_bytes = max_bytes
        self.told = told

    @property
    def initial_due(self) -> bool:
        """Whether the whole initial context is still to send (reading files for it)."""
        return self.told is None

    def pending(self, config: SessionConfig) -> tuple[list[Item], list[str]]:
        """The contextual items for the next request under ``config``, and warnings.

        Reads AGENTS.md (blocking I/O) only when the initial context is due.
        """
        if self.told is None:
            now = datetime.datetime.now().astimezone()
            inputs = ContextInputs(
                config, self.home, self.max_bytes, shell_name(), f"{now:%Y-%m-%d}", timezone_name()
            )
            return initial_context(inputs)
        update = self.told.changes_to(Environment.of(config))
        if update.is_empty():
            return [], []
        return [contextual_message(environment_text(update))], []

    def sent(self, config: SessionConfig) -> None:
        self.told = Environment.of(config)
