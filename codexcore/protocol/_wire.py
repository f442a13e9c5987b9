"""The registry of wire classes and the shapes that describe them.

Theory of operation: every wire class is a frozen attrs class carrying a
snake_case ``TYPE`` tag. Its field annotations are the single source of truth
for the wire form: :func:`shape_of` turns them into a small tree of ``Shape``
values, and the codec and the JSON Schema generator both walk that tree. Adding
a variant is declaring a class; nothing else needs to learn about it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar, get_args, get_origin

import attrs

from ._value import Value

T = TypeVar("T")


class Tagged(Value):
    """Base of every tagged variant; ``TYPE`` is its wire tag (set by ``register``).

    Wire classes are declared ``@attrs.frozen(repr=False, eq=False)``: their
    ``__eq__``, ``__hash__`` and ``__repr__`` come from :class:`Value`, as
    attrs would write them, without compiling three methods per class at
    import (see ``_value.py``).
    """

    __slots__ = ()
    TYPE: ClassVar[str]


class Registry:
    """The variants of one tagged union, keyed by their ``type`` tag."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.by_tag: dict[str, type[Any]] = {}
        self.tag_of: dict[type[Any], str] = {}

    def register(self, tag: str) -> Callable[[type[T]], type[T]]:
        """Class decorator (above ``@attrs.frozen``): tag the class and record it."""

        def wrap(cls: type[T]) -> type[T]:
            if tag in self.by_tag:
                raise ValueError(f"{self.name} tag {tag!r} is declared twice")
            cls.TYPE = tag  # type: ignore[attr-defined]
            self.by_tag[tag] = cls
            self.tag_of[cls] = tag
            return cls

        return wrap


OPS = Registry("Op")
EVENT_MSGS = Registry("EventMsg")
INPUT_ITEMS = Registry("InputItem")
FILE_CHANGES = Registry("FileChange")
CONNECTION_MSGS = Registry("ConnectionMsg")
TOOL_OUTPUT_ITEMS = Registry("DynamicToolOutputItem")


# --- shapes -----------------------------------------------------------------


@attrs.frozen(repr=False, eq=False)
class Scalar(Value):
    py: type[Any]  # str, int, float or bool
    name: str  # JSON type name


@attrs.frozen(repr=False, eq=False)
class Enum(Value):
    values: tuple[str, ...]


@attrs.frozen(repr=False, eq=False)
class Optional(Value):
    inner: Shape


@attrs.frozen(repr=False, eq=False)
class Seq(Value):
    item: Shape


@attrs.frozen(repr=False, eq=False)
class Map(Value):
    value: Shape


@attrs.frozen(repr=False, eq=False)
class Bytes(Value):
    """Raw bytes, carried as base64 text on the wire."""


@attrs.frozen(repr=False, eq=False)
class Record(Value):
    cls: type[Any]


@attrs.frozen(repr=False, eq=False)
class Json(Value):
    """Any JSON value, carried as it is: what a peer's own schema describes (an MCP
    tool's arguments and result). Spelled ``Annotated[Any, JSON]`` (see ``JsonValue``)."""


@attrs.frozen(repr=False, eq=False)
class Union(Value):
    registry: Registry


Shape = Scalar | Enum | Optional | Seq | Map | Bytes | Record | Union | Json

JSON = Json()
"""The marker of a field that holds any JSON value: ``Annotated[Any, JSON]``."""

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


@attrs.frozen(repr=False, eq=False)
class Field(Value):
    name: str
    shape: Shape
    required: bool
    default: Any


_FIELDS: dict[type[Any], tuple[Field, ...]] = {}


def fields_of(cls: type[Any]) -> tuple[Field, ...]:
    """The wire fields of an attrs class, computed once per class."""
    cached = _FIELDS.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        cached = tuple(_field(a, hints[a.name]) for a in attrs.fields(cls))
        _FIELDS[cls] = cached
    return cached


def _field(attribute: Any, hint: Any) -> Field:
    has_default = attribute.default is not attrs.NOTHING
    default = attribute.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        default = default.factory()
    return Field(attribute.name, shape_of(hint), not has_default, default)


def shape_of(hint: Any) -> Shape:
    """Translate a field annotation into its wire shape."""
    if hint in _SCALARS:
        return Scalar(hint, _SCALARS[hint])
    if hint is bytes:
        return Bytes()
    origin, args = get_origin(hint), get_args(hint)
    if origin is typing.Annotated:
        # Tagged unions are spelled Annotated[A | B, REGISTRY] (see _types.py).
        marker = args[1]
        if isinstance(marker, Json):
            return marker
        return Union(marker) if isinstance(marker, Registry) else shape_of(args[0])
    if origin is Literal:
        return Enum(tuple(str(a) for a in args))
    if origin in (types.UnionType, typing.Union):
        return _optional(args)
    if origin is tuple:
        return Seq(shape_of(args[0]))
    if origin is dict:
        return Map(shape_of(args[1]))
    if isinstance(hint, type) and attrs.has(hint):
        return Record(hint)
    raise TypeError(f"no wire shape for annotation {hint!r}")


def _optional(args: tuple[Any, ...]) -> Shape:
    members = [a for a in args if a is not type(None)]
    if len(members) == len(args):
        raise TypeError(f"unions on the wire must be tagged registries, got {args!r}")
    inner = members[0] if len(members) == 1 else typing.Union[tuple(members)]  # noqa: UP007
    return Optional(shape_of(inner))
