"""The OpenRPC 1.3 document of the JSON-RPC dialect, generated from its method table.

Every method registered in :func:`~._methods.standard_methods` is in
it, with its params (from its attrs params class), its result schema and
summary (what it registered; a method registered without a result schema gets
``{}``), and the errors it can answer (from :data:`~._errors.ERRORS`).
OpenRPC 1.3 describes only what a client calls; what the runtime sends its
client (notifications such as ``stream/chunk``, requests such as
``ui.confirm.request``) is listed under the extensions ``x-notifications`` and
``x-client-requests``, each entry shaped as a method object, and a method names
the notifications it sends under ``x-notifications``.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any, Union

import attrs

from codexcore import __version__

from ._errors import BOUND_ERROR, COMMON_ERRORS, ERRORS
from ._methods import Method, MethodTable, Outbound, standard_methods

OPENRPC_VERSION = "1.3.2"
SCHEMAS = "#/components/schemas/"
ERRORS_REF = "#/components/errors/"

_SCALARS: Mapping[Any, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}


def openrpc_document(table: MethodTable | None = None) -> dict[str, Any]:
    """The document of ``table`` (default: the one every connection is served with)."""
    table = standard_methods() if table is None else table
    schemas = _Schemas()
    methods = [_method(found, table, schemas) for name in table.names if (found := table.get(name))]
    outbound = {
        "x-notifications": [_outbound(o, schemas) for o in table.outbound if o.result is None],
        "x-client-requests": [
            _outbound(o, schemas) for o in table.outbound if o.result is not None
        ],
    }
    return {
        "openrpc": OPENRPC_VERSION,
        "info": {
            "title": "codexcore JSON-RPC dialect",
            "version": __version__,
            "description": (
                "JSON-RPC 2.0 over NDJSON (one object per line) on stdio, TCP and Unix "
                "sockets: the Codelia runtime protocol, the Copilot-CLI-style chat protocol and "
                "Ralph-style session sockets on one dialect. See docs/jsonrpc.md."
            ),
        },
        "methods": methods,
        **outbound,
        "components": {
            "schemas": dict(sorted(schemas.defs.items())),
            "errors": {e.name: {"code": e.code, "message": e.meaning} for e in ERRORS},
        },
    }


def _method(method: Method[Any], table: MethodTable, schemas: _Schemas) -> dict[str, Any]:
    shapes = method.shapes or ((method.params,) if attrs.has(method.params) else ())
    found: dict[str, Any] = {
        "name": method.name,
        "paramStructure": "by-name",
        "params": schemas.descriptors(shapes[0]) if shapes else [],
        "result": {"name": "result", "schema": dict(method.result or {})},
        "errors": [{"$ref": ERRORS_REF + name} for name in _error_names(method, table)],
    }
    if method.summary:
        found["summary"] = method.summary
    if len(shapes) > 1:
        found["x-params-shapes"] = [schemas.of(shape) for shape in shapes]
    if method.notifications:
        found["x-notifications"] = list(method.notifications)
    return found


def _error_names(method: Method[Any], table: MethodTable) -> list[str]:
    """The errors ``method`` can answer: every method's, its own, and seed 001's bound's
    unless it is exempt from it (-32004 means two things: its own errors say which)."""
    bounded = method.name not in table.unbounded
    names = []
    for error in ERRORS:
        if error.name == BOUND_ERROR:
            listed = bounded
        else:
            listed = error.code in COMMON_ERRORS or error.code in method.errors
        if listed and (not error.methods or method.name in error.methods):
            names.append(error.name)
    return names


def _outbound(message: Outbound, schemas: _Schemas) -> dict[str, Any]:
    if isinstance(message.params, type):
        params = schemas.descriptors(message.params)
    else:
        required = message.params.get("required", [])
        params = [
            {"name": name, "schema": dict(schema), "required": name in required}
            for name, schema in message.params["properties"].items()
        ]
    found: dict[str, Any] = {
        "name": message.name,
        "summary": message.summary,
        "paramStructure": "by-name",
        "params": params,
    }
    if message.result is not None:
        found["result"] = {"name": "result", "schema": dict(message.result)}
    return found


class _Schemas:
    """JSON Schemas of attrs classes and their fields' type hints, shared under ``$ref``s."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self._names: dict[type, str] = {}

    def descriptors(self, cls: type) -> list[dict[str, Any]]:
        """One OpenRPC content descriptor per field of ``cls``: its wire name, and its schema
        from its type hint or, given, its ``metadata={"schema": ...}``."""
        hints = typing.get_type_hints(cls)
        return [
            {
                "name": field.metadata.get("wire", field.name),
                "schema": self._field(hints[field.name], field),
                "required": field.default is attrs.NOTHING,
            }
            for field in attrs.fields(cls)
        ]

    def of(self, cls: type) -> dict[str, Any]:
        """A ``$ref`` to the object schema of ``cls`` (added on first use)."""
        name = self._names.get(cls)
        if name is None:
            name = cls.__name__
            while name in self.defs:  # two classes of one name: keep both
                name += "_"
            self._names[cls] = name
            self.defs[name] = {}  # reserve first: classes may nest
            fields = self.descriptors(cls)
            properties = {d["name"]: d["schema"] for d in fields}
            required = [d["name"] for d in fields if d["required"]]
            self.defs[name] = {
                "type": "object",
                "title": cls.__name__,
                "description": inspect.getdoc(cls) or "",
                "properties": properties,
                "required": required,
            }
        return {"$ref": SCHEMAS + name}

    def _field(self, hint: Any, field: attrs.Attribute[Any]) -> dict[str, Any]:
        # A field decoded by hand (typed Any) states its schema in its metadata.
        schema = dict(field.metadata.get("schema") or self.hint(hint))
        default = field.default
        if default is not attrs.NOTHING and not isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            schema = {**schema, "default": default}
        return schema

    def hint(self, hint: Any) -> dict[str, Any]:
        """The schema of a type hint of the shapes the params classes use."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if hint is Any:
            return {}
        if hint is type(None):
            return {"type": "null"}
        if hint in _SCALARS:
            return {"type": _SCALARS[hint]}
        if origin in (Union, types.UnionType):
            return {"anyOf": [self.hint(option) for option in args]}
        if origin is typing.Literal:
            return {"enum": list(args)}
        if hint is dict or origin is dict:
            return {"type": "object"}
        if hint in (list, tuple) or origin in (list, tuple):
            items = [arg for arg in args if arg is not Ellipsis]
            return {"type": "array", **({"items": self.hint(items[0])} if items else {})}
        if attrs.has(hint):
            return self.of(hint)
        raise TypeError(f"no schema for params of type {hint!r}")
