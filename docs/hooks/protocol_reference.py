"""MkDocs hook: the protocol reference page, generated at build time.

``docs/reference/protocol.md`` holds an introduction and the marker
``<!-- protocol-reference -->``; :func:`on_page_markdown` replaces the marker
with :func:`render_protocol_reference`, which is built from two sources only:

- :func:`codexcore.protocol.protocol_schema`, the JSON Schema generated from
  the wire types (every Op, EventMsg and connection message, with each field's
  type, whether it is required, its allowed values and default, and the
  variant's docstring);
- the golden fixtures in ``tests/golden/`` (``ops/``, ``events/``,
  ``handshake/``), one example per variant.

Nothing generated is committed. A variant without a golden fixture is a
warning, so ``mkdocs build --strict`` fails until the fixture exists.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.protocol_reference")

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
PAGE = "reference/protocol.md"
MARKER = "<!-- protocol-reference -->"

# The tagged unions, in the order the page shows them: (schema name, heading,
# anchor prefix, golden folder or None, what the variants are).
UNIONS = (
    ("Op", "Ops", "op", "ops", "the `op` of a Submission, from a UI to the engine"),
    ("EventMsg", "Events", "event", "events", "the `msg` of an Event, from the engine to a UI"),
    (
        "ConnectionMsg",
        "Connection messages",
        "conn",
        "handshake",
        "lines of their own on a socket connection (and the optional `hello` on stdio)",
    ),
    ("InputItem", "Input items", "input", None, "the `items` of `user_input` and `inject_input`"),
    ("FileChange", "File changes", "change", None, "the values of a patch's `changes`"),
    (
        "DynamicToolOutputItem",
        "Tool output items",
        "tool-output",
        None,
        "the `content_items` of `dynamic_tool_response`",
    ),
)
ENVELOPES = ("Submission", "Event")


class ProtocolReferenceError(Exception):
    """The schema and the fixtures do not fit together."""


# --- mkdocs hooks ------------------------------------------------------------------


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Put the generated reference in place of the marker on the reference page."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        log.warning("%s: the marker %s is missing; nothing was generated", PAGE, MARKER)
        return markdown
    reference, problems = _render()
    for problem in problems:
        log.warning("protocol reference: %s", problem)
    return markdown.replace(MARKER, reference)


# --- the page ----------------------------------------------------------------------


def render_protocol_reference(schema: dict[str, Any] | None = None) -> str:
    """The generated Markdown; raises :class:`ProtocolReferenceError` if a fixture is missing."""
    reference, problems = _render(schema)
    if problems:
        raise ProtocolReferenceError("; ".join(problems))
    return reference


def _render(schema: dict[str, Any] | None = None) -> tuple[str, list[str]]:
    if schema is None:
        from codexcore.protocol import protocol_schema

        schema = protocol_schema()
    writer = _Writer(schema)
    writer.page()
    return "\n".join(writer.lines) + "\n", writer.problems


class _Writer:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = schema["$defs"]
        self.lines: list[str] = []
        self.problems: list[str] = []
        # Where each definition is shown: its anchor on this page.
        self.anchors: dict[str, str] = {name: f"type-{name}" for name in self.defs}
        for union, _, prefix, _, _ in UNIONS:
            self.anchors[union] = f"union-{union}"
            for name in self.variants(union):
                self.anchors[name] = f"{prefix}-{self.tag(name)}"

    # --- structure

    def page(self) -> None:
        self.out("## Envelopes", "")
        self.out(
            "Every line a UI sends is a Submission and every line the engine sends is an "
            "Event; connection messages (below) are the only other lines.",
            "",
        )
        for name in ENVELOPES:
            self.record(name, example=None)
        for union, heading, _, folder, what in UNIONS:
            self.union(union, heading, folder, what)
        shared = sorted(
            name
            for name, definition in self.defs.items()
            if "properties" in definition
            and name not in ENVELOPES
            and not self.anchors[name].startswith(tuple(f"{u[2]}-" for u in UNIONS))
        )
        self.out("## Other types {#other-types}", "")
        self.out("Records that appear inside the variants above.", "")
        for name in shared:
            self.record(name, example=None)

    def union(self, union: str, heading: str, folder: str | None, what: str) -> None:
        names = self.variants(union)
        self.out(f"## {heading} {{#{self.anchors[union]}}}", "")
        self.out(
            f"`{union}`: {what}. Each is an object whose `type` names the variant; "
            "receivers ignore fields they do not know, and UIs ignore variants they do not know.",
            "",
        )
        self.out("| `type` | Python class | what it is |", "| --- | --- | --- |")
        for name in names:
            summary = _first_sentence(self.defs[name].get("description", ""))
            self.out(
                f"| [`{self.tag(name)}`](#{self.anchors[name]}) "
                f"| [`{name}`][codexcore.protocol.{name}] | {_cell(summary)} |"
            )
        self.out("")
        for name in names:
            example = self.golden(folder, self.tag(name)) if folder else None
            self.record(name, example=example, wanted=folder is not None)

    def record(self, name: str, *, example: Any, wanted: bool = False) -> None:
        definition = self.defs[name]
        tag = definition["properties"].get("type", {}).get("const")
        title = f"`{tag}`" if tag else name
        self.out(f"### {title} {{#{self.anchors[name]}}}", "")
        self.out(f"Python: [`codexcore.protocol.{name}`][codexcore.protocol.{name}]", "")
        description = _markdown(definition.get("description", ""))
        if description:
            self.out(description, "")
        self.fields(definition)
        if example is not None:
            self.out("Example (one line on the wire):", "", "```json")
            self.out(json.dumps(example, indent=2, ensure_ascii=False), "```", "")
        elif wanted:
            self.problems.append(f"{name} ({tag}) has no golden fixture in tests/golden/")

    def fields(self, definition: dict[str, Any]) -> None:
        properties: dict[str, Any] = definition["properties"]
        if list(properties) == ["type"]:
            self.out("No fields besides `type`.", "")
            return
        required = set(definition.get("required", ()))
        description = definition.get("description", "")
        self.out(
            "| field | type | required | allowed values | default | description |",
            "| --- | --- | --- | --- | --- | --- |",
        )
        for field, prop in properties.items():
            if field == "type" and "const" in prop:
                self.out(f'| `type` | string | yes | `"{prop["const"]}"` | | the variant\'s tag |')
                continue
            default = "" if field in required else f"`{json.dumps(prop.get('default'))}`"
            self.out(
                f"| `{field}` | {self.type_of(prop)} | {'yes' if field in required else 'no'} "
                f"| {self.allowed(prop)} | {default} "
                f"| {_cell(_about(field, description))} |"
            )
        self.out("")

    # --- types

    def type_of(self, prop: dict[str, Any]) -> str:
        if "$ref" in prop:
            name = prop["$ref"].rsplit("/", 1)[-1]
            return f"[{name}](#{self.anchors[name]})"
        if "anyOf" in prop:
            kinds = [self.type_of(p) for p in prop["anyOf"] if p.get("type") != "null"]
            return " or ".join(kinds) + " or null"
        kind = prop.get("type")
        if kind == "array":
            return f"array of {self.type_of(prop['items'])}"
        if kind == "object" and "additionalProperties" in prop:
            return f"object: string → {self.type_of(prop['additionalProperties'])}"
        if prop.get("contentEncoding") == "base64":
            return "string (base64)"
        if prop.get("description") == "any JSON value":
            return "any JSON"
        if isinstance(kind, str):
            return kind
        raise ProtocolReferenceError(f"no rendering for schema {prop!r}")

    def allowed(self, prop: dict[str, Any]) -> str:
        for candidate in [prop, *prop.get("anyOf", ())]:
            if "enum" in candidate:
                return ", ".join(f"`{value}`" for value in candidate["enum"])
        return ""

    # --- lookups

    def variants(self, union: str) -> list[str]:
        return [ref["$ref"].rsplit("/", 1)[-1] for ref in self.defs[union]["oneOf"]]

    def tag(self, name: str) -> str:
        return str(self.defs[name]["properties"]["type"]["const"])

    def golden(self, folder: str, tag: str) -> Any:
        path = GOLDEN / folder / f"{tag}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def out(self, *lines: str) -> None:
        self.lines.extend(lines)


# --- text ----------------------------------------------------------------------------

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc):`~?([^`]+)`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


def _markdown(docstring: str) -> str:
    """A docstring's reStructuredText literals and roles as Markdown code spans."""
    text = _ROLE.sub(lambda m: f"``{m.group(1).rsplit('.', 1)[-1]}``", docstring)
    return text.replace("``", "`")


def _sentences(docstring: str) -> Iterator[str]:
    for paragraph in _markdown(docstring).split("\n\n"):
        yield from _SENTENCE_END.split(" ".join(paragraph.split()))


def _first_sentence(docstring: str) -> str:
    return next(_sentences(docstring), "")


def _about(field: str, docstring: str) -> str:
    """The sentences of the variant's docstring that name ``field``."""
    return " ".join(s for s in _sentences(docstring) if f"`{field}`" in s)


def _cell(text: str) -> str:
    """Text that is safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
