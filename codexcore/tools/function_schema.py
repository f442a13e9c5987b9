"""A Python function's JSON Schema, from its signature, type hints and docstring.

What the model is told of a function tool: its name (the function's), its
description (the docstring's text before its first section) and the JSON Schema
of its parameters, each described by ``Annotated[T, "description"]`` or by the
docstring's ``Args:`` section (Google style; ``:param name:`` lines too).

Hints map to JSON Schema as the model needs them: ``str``, ``int``, ``float``,
``bool``; ``Literal`` and ``Enum`` classes to ``enum``; ``X | None`` to a
nullable ``X``; ``list``/``tuple``/``set`` to arrays; attrs and dataclass classes
to nested objects (their fields described likewise); ``dict[str, X]`` to an open
object. A hint it cannot describe is refused at registration, naming it.

Strict mode (the Responses API's ``"strict": true``) needs every object closed
(``additionalProperties: false``) and every property required: a parameter with a
default becomes a required, nullable one, and ``null`` then means "the default"
(unless the hint itself takes None). A schema with an open part (``dict``,
``Any``, an unannotated parameter) cannot be strict: it is sent non-strict,
with only the parameters without defaults required, unless strict was demanded,
which is then refused.

:func:`convert` turns the model's JSON arguments back into the hinted values
(attrs and dataclass instances, enums, tuples …) for the call.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

_SCALARS: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARRAYS = (list, tuple, set, frozenset, Sequence, typing.Sequence)
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|Todo):\s*$"
)
_GOOGLE_ARG = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARG_SECTIONS = ("Args", "Arguments", "Parameters", "Params", "Attributes")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


class SchemaError(TypeError):
    """A function or hint that cannot be offered to the model; the message names it."""


class _Open(Exception):
    """The schema has a part strict mode cannot take (raised only while building strict)."""


@attrs.frozen
class Parameter:
    """One parameter as the call binds it."""

    name: str
    hint: Any
    has_default: bool
    positional_only: bool


@attrs.frozen
class FunctionSchema:
    """What the model is sent of a function, and what binding its arguments needs."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool
    signature: tuple[Parameter, ...]


def function_schema(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool | None = None,
) -> FunctionSchema:
    """The schema of ``fn``. ``strict``: None makes it strict when it can be."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
        signature = inspect.signature(fn)
    except (NameError, TypeError, ValueError) as exc:
        raise SchemaError(f"cannot read the signature of {fn!r}: {exc}") from None
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    params: list[Parameter] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise SchemaError(
                f"{_qualname(fn)}: *{param.name} and **{param.name} cannot be described "
                "to the model; name each parameter"
            )
        hint = hints.get(param.name, Any)
        params.append(
            Parameter(
                param.name,
                hint,
                param.default is not param.empty,
                param.kind == param.POSITIONAL_ONLY,
            )
        )
    fields = [
        (p.name, p.hint, signature.parameters[p.name].default, arg_docs.get(p.name)) for p in params
    ]
    where = _qualname(fn)
    if strict is not False:
        try:
            schema = _object(fields, strict=True, where=where, seen=())
            return FunctionSchema(
                name or fn.__name__, description or summary, schema, True, tuple(params)
            )
        except _Open as exc:
            if strict:
                raise SchemaError(f"{where}: strict mode cannot take {exc}") from None
    schema = _object(fields, strict=False, where=where, seen=())
    return FunctionSchema(name or fn.__name__, description or summary, schema, False, tuple(params))


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The docstring's description (before its first section) and its parameters'."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0  # the current parameter's line's indentation: deeper lines continue it
    for line in doc.splitlines():
        stripped = line.strip()
        if (match := _SECTION.match(stripped)) is not None:
            section, current = match.group(1), None
        elif (match := _SPHINX_PARAM.match(stripped)) is not None:
            section, current = "Args", match.group(1)
            args[current] = match.group(2).strip()
        elif section is None:
            summary.append(line)
        elif section in _ARG_SECTIONS:
            depth = len(line) - len(line.lstrip())
            match = _GOOGLE_ARG.match(stripped)
            if match is not None and (current is None or depth <= indent):
                current, indent = match.group(1), depth
                args[current] = match.group(2).strip()
            elif current is not None and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), {k: v for k, v in args.items() if v}


def _qualname(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


# --- hints to schemas ---------------------------------------------------------------

Field = tuple[str, Any, Any, str | None]  # name, hint, default (or NO_DEFAULT), description
NO_DEFAULT: Any = inspect.Parameter.empty


def _object(
    fields: list[Field], *, strict: bool, where: str, seen: tuple[type, ...]
) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, hint, default, doc in fields:
        has_default = default is not NO_DEFAULT
        inner, annotated_doc = _unannotate(hint)
        schema = _schema(inner, strict=strict, where=f"{where}.{name}", seen=seen)
        described = annotated_doc or doc or ""
        shown = default.value if isinstance(default, enum.Enum) else default
        if has_default and strict and not _nullable(schema):
            schema = _make_nullable(schema)
            if isinstance(shown, str | int | float | bool):
                described = f"{described} (null: the default, {shown!r})".strip()
        elif has_default and not strict and isinstance(shown, str | int | float | bool | None):
            schema = {**schema, "default": shown}
        if described:
            schema = {**schema, "description": described}
        properties[name] = schema
        if strict or not has_default:
            required.append(name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _unannotate(hint: Any) -> tuple[Any, str | None]:
    """``Annotated[T, "text", ...]`` -> (T, "text"); anything else as it is."""
    if typing.get_origin(hint) is typing.Annotated:
        inner, *meta = typing.get_args(hint)
        texts = [m for m in meta if isinstance(m, str)]
        return inner, " ".join(texts) or None
    return hint, None


def _schema(hint: Any, *, strict: bool, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    hint, _ = _unannotate(hint)
    if hint is Any or hint is inspect.Parameter.empty or hint is object:
        return _open("an unannotated or Any parameter", strict, {})
    if hint is None or hint is type(None):
        return {"type": "null"}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum([member.value for member in hint], where)
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin = typing.get_origin(hint)
    if origin is Literal:
        return _enum(list(typing.get_args(hint)), where)
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(hint), strict=strict, where=where, seen=seen)
    if hint in _ARRAYS or origin in _ARRAYS:
        return _array(hint, strict=strict, where=where, seen=seen)
    if hint is dict or origin in (dict, Mapping, typing.Mapping):
        return _mapping(hint, strict=strict, where=where, seen=seen)
    if isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint)):
        return _class(hint, strict=strict, where=where, seen=seen)
    raise SchemaError(f"{where}: cannot describe the type {hint!r} to the model")


def _open(what: str, strict: bool, schema: dict[str, Any]) -> dict[str, Any]:
    if strict:
        raise _Open(what)
    return schema


def _enum(values: list[Any], where: str) -> dict[str, Any]:
    kinds = {_json_type(v, where) for v in values}
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    elif kinds == {"string", "null"} or kinds == {"integer", "null"}:
        schema = {"type": sorted(kinds, key=lambda k: k == "null"), **schema}
    return schema


def _json_type(value: Any, where: str) -> str:
    if value is None:
        return "null"
    for kind, name in _SCALARS.items():
        if type(value) is kind:
            return name
    raise SchemaError(f"{where}: the choice {value!r} is not a JSON string, number or boolean")


def _union(
    arms: tuple[Any, ...], *, strict: bool, where: str, seen: tuple[type, ...]
) -> dict[str, Any]:
    others = [a for a in arms if a is not type(None)]
    schemas = [_schema(a, strict=strict, where=where, seen=seen) for a in others]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    return _make_nullable(schema) if len(others) < len(arms) else schema


def _nullable(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_nullable(arm) for arm in schema.get("anyOf", ()))


def _make_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if _nullable(schema):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and kind not in ("object", "array") and "anyOf" not in schema:
        nullable = {**schema, "type": [kind, "null"]}
        if "enum" in schema:
            nullable["enum"] = [*schema["enum"], None]
        return nullable
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _array(hint: Any, *, strict: bool, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    args = typing.get_args(hint)
    origin = typing.get_origin(hint) or hint
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        items = [_schema(a, strict=strict, where=where, seen=seen) for a in args]
        fixed = {"type": "array", "prefixItems": items, "minItems": len(items)}
        return _open("a fixed-length tuple", strict, {**fixed, "maxItems": len(items)})
    if not args:
        return _open("an array of unannotated items", strict, {"type": "array"})
    return {"type": "array", "items": _schema(args[0], strict=strict, where=where, seen=seen)}


def _mapping(hint: Any, *, strict: bool, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    args = typing.get_args(hint)
    if args and _unannotate(args[0])[0] is not str:
        raise SchemaError(f"{where}: a mapping's keys must be str (JSON objects' keys are)")
    values = _schema(args[1], strict=False, where=where, seen=seen) if args else {}
    return _open(
        "an open object (a dict)", strict, {"type": "object", "additionalProperties": values}
    )


def _class(hint: type, *, strict: bool, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    if hint in seen:
        raise SchemaError(f"{where}: {hint.__qualname__} contains itself; nested types must end")
    fields = _class_fields(hint, where)
    schema = _object(fields, strict=strict, where=where, seen=(*seen, hint))
    doc, _ = parse_docstring(inspect.getdoc(hint) or "")
    if doc and not doc.startswith(f"{hint.__name__}("):  # a dataclass's generated doc
        schema = {**schema, "description": doc}
    return schema


def _class_fields(cls: type, where: str) -> list[Field]:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError) as exc:
        raise SchemaError(f"{where}: cannot read the fields of {cls.__qualname__}: {exc}") from None
    _, docs = parse_docstring(inspect.getdoc(cls) or "")
    if attrs.has(cls):
        return [
            (
                f.alias or f.name,
                hints.get(f.name, Any),
                NO_DEFAULT if f.default is attrs.NOTHING else f.default,
                f.metadata.get("description") or docs.get(f.name),
            )
            for f in attrs.fields(cls)
            if f.init
        ]
    return [
        (
            f.name,
            hints.get(f.name, Any),
            _dataclass_default(f),
            f.metadata.get("description") or docs.get(f.name),
        )
        for f in dataclasses.fields(cls)
        if f.init
    ]


def _dataclass_default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    return NO_DEFAULT if field.default_factory is dataclasses.MISSING else field.default_factory


# --- JSON back to values ---------------------------------------------------------------


class ArgumentError(ValueError):
    """The model's arguments do not fit the function; the message says how."""


def bind(
    signature: Sequence[Parameter], arguments: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The call's positional and keyword arguments from the model's JSON object."""
    unknown = set(arguments) - {p.name for p in signature}
    if unknown:
        raise ArgumentError(f"unknown argument(s): {', '.join(sorted(unknown))}")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in signature:
        present, value = _field_value(param.name, param.hint, param.has_default, arguments)
        if not present:
            continue
        if param.positional_only:
            args.append(value)
        else:
            kwargs[param.name] = value
    return args, kwargs


def _field_value(
    name: str, hint: Any, has_default: bool, arguments: Mapping[str, Any]
) -> tuple[bool, Any]:
    """(whether to pass it, the value): a missing or null one with a default is left out."""
    if name not in arguments:
        if has_default:
            return False, None
        raise ArgumentError(f"missing required argument {name!r}")
    value = arguments[name]
    if value is None and has_default and not _takes_none(hint):
        return False, None
    try:
        return True, convert(value, hint)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"argument {name!r}: {exc}") from None


def _takes_none(hint: Any) -> bool:
    hint, _ = _unannotate(hint)
    if hint is Any or hint is None or hint is type(None):
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(hint)
    if origin is Literal:
        return None in typing.get_args(hint)
    return False


def convert(value: Any, hint: Any) -> Any:
    """``value`` (decoded JSON) as ``hint`` asks: classes built, enums looked up."""
    hint, _ = _unannotate(hint)
    origin = typing.get_origin(hint)
    if value is None or hint is Any or origin is Literal:
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin in (typing.Union, types.UnionType):
        return _convert_union(value, typing.get_args(hint))
    if isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint)):
        return _instance(value, hint)
    if origin in _ARRAYS or hint in _ARRAYS:
        return _sequence(value, hint, origin)
    if origin in (dict, Mapping, typing.Mapping) and isinstance(value, dict):
        args = typing.get_args(hint)
        return {k: convert(v, args[1]) for k, v in value.items()} if args else value
    return value


def _convert_union(value: Any, arms: tuple[Any, ...]) -> Any:
    errors = []
    for arm in arms:
        if arm is type(None):
            continue
        try:
            converted = convert(value, arm)
        except (TypeError, ValueError) as exc:
            errors.append(str(exc))
            continue
        if _fits(converted, arm):
            return converted
    if errors:
        raise ValueError("; ".join(errors))
    return value


def _fits(value: Any, hint: Any) -> bool:
    hint, _ = _unannotate(hint)
    origin = typing.get_origin(hint) or hint
    if origin is Literal:
        return value in typing.get_args(hint)
    if hint is float:
        return isinstance(value, float)
    if isinstance(origin, type) and origin not in (Sequence, Mapping):
        if origin is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, origin)
    return True


def _instance(value: Any, cls: type) -> Any:
    if not isinstance(value, dict):
        raise TypeError(f"{cls.__name__} must be a JSON object, not {type(value).__name__}")
    fields = _class_fields(cls, cls.__qualname__)
    unknown = set(value) - {name for name, *_ in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(sorted(unknown))}")
    kwargs: dict[str, Any] = {}
    for name, hint, default, _ in fields:
        try:
            present, converted = _field_value(name, hint, default is not NO_DEFAULT, value)
        except ArgumentError as exc:
            raise ValueError(f"{cls.__name__}: {exc}") from None
        if present:
            kwargs[name] = converted
    return cls(**kwargs)


def _sequence(value: Any, hint: Any, origin: Any) -> Any:
    if not isinstance(value, list):
        raise TypeError(f"expected a JSON array, not {type(value).__name__}")
    args = [a for a in typing.get_args(hint) if a is not Ellipsis]
    if origin is tuple and len(args) > 1 and len(args) == len(typing.get_args(hint)):
        if len(value) != len(args):
            raise ValueError(f"expected {len(args)} items, not {len(value)}")
        return tuple(convert(v, a) for v, a in zip(value, args, strict=True))
    items = [convert(v, args[0]) for v in value] if args else value
    container = origin if origin in (tuple, set, frozenset) else list
    return container(items)
