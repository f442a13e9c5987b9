"""A JSON Schema (draft 2020-12) of the whole protocol, generated from the wire types."""

from __future__ import annotations

import inspect
from typing import Any

import attrs

from ._codec import to_wire
from ._envelope import Event, Submission
from ._wire import (
    CONNECTION_MSGS,
    EVENT_MSGS,
    FILE_CHANGES,
    INPUT_ITEMS,
    OPS,
    TOOL_OUTPUT_ITEMS,
    Bytes,
    Enum,
    Json,
    Map,
    Optional,
    Record,
    Registry,
    Scalar,
    Seq,
    Shape,
    fields_of,
)

SCHEMA_ID = "https://codexcore.dev/schema/protocol.json"


def protocol_schema() -> dict[str, Any]:
    """The schema: ``Submission``, ``Event``, ``ConnectionMsg``; every variant under ``$defs``."""
    builder = _Builder()
    builder.record(Submission)
    builder.record(Event)
    for registry in (
        OPS,
        EVENT_MSGS,
        INPUT_ITEMS,
        FILE_CHANGES,
        CONNECTION_MSGS,
        TOOL_OUTPUT_ITEMS,
    ):
        builder.union(registry)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "codexcore protocol",
        "description": (
            "Submissions travel from a UI to codexcore, Events back; connection "
            "messages (hello, welcome, ...) frame a socket connection."
        ),
        "oneOf": [
            {"$ref": "#/$defs/Submission"},
            {"$ref": "#/$defs/Event"},
            {"$ref": "#/$defs/ConnectionMsg"},
        ],
        "$defs": dict(sorted(builder.defs.items())),
    }


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def shape(self, shape: Shape) -> dict[str, Any]:
        if isinstance(shape, Scalar):
            return {"type": shape.name}
        if isinstance(shape, Enum):
            return {"type": "string", "enum": list(shape.values)}
        if isinstance(shape, Optional):
            return {"anyOf": [self.shape(shape.inner), {"type": "null"}]}
        if isinstance(shape, Seq):
            return {"type": "array", "items": self.shape(shape.item)}
        if isinstance(shape, Map):
            return {"type": "object", "additionalProperties": self.shape(shape.value)}
        if isinstance(shape, Bytes):
            return {"type": "string", "contentEncoding": "base64"}
        if isinstance(shape, Json):
            return {"description": "any JSON value"}
        if isinstance(shape, Record):
            return self.record(shape.cls)
        return self.union(shape.registry)

    def union(self, registry: Registry) -> dict[str, Any]:
        if registry.name not in self.defs:
            self.defs[registry.name] = {}  # reserve first: unions may nest
            variants = [self.record(cls) for _, cls in sorted(registry.by_tag.items())]
            self.defs[registry.name] = {"oneOf": variants}
        return {"$ref": f"#/$defs/{registry.name}"}

    def record(self, cls: type[Any]) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}
            self.defs[name] = self._object(cls)
        return {"$ref": f"#/$defs/{name}"}

    def _object(self, cls: type[Any]) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        tag = getattr(cls, "TYPE", None)
        if tag is not None:
            properties["type"] = {"const": tag}
            required.append("type")
        for field in fields_of(cls):
            prop = self.shape(field.shape)
            if not field.required:
                default = field.default
                # A record's default (an empty answer) is shown as it goes on the wire.
                prop = {
                    **prop,
                    "default": to_wire(default) if attrs.has(type(default)) else default,
                }
            properties[field.name] = prop
            if field.required:
                required.append(field.name)
        doc = inspect.getdoc(cls) or ""
        return {
            "type": "object",
            "title": tag or cls.__name__,
            "description": doc,
            "properties": properties,
            "required": required,
        }
