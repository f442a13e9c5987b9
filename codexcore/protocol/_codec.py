"""The JSON codec for the wire types.

Encoding is on the hot path (every delta of every Task), so each class gets an
encoder generated from its fields once, the way attrs generates ``__init__``: a
single dict display with no per-field branching at run time. Measured in
``bench/bench_protocol.py``: about five times faster than ``attrs.asdict``.
orjson then serialises the dict (several times faster than the stdlib on these
small objects, and it emits tuples as arrays natively).

Decoding is where untrusted input arrives, so it is thorough: every problem
raises :class:`ProtocolError` with the path of the offending field. Unknown
extra fields are ignored so that newer peers can talk to older ones. Each
shape is compiled once into a decoder function (see "decoding" below).
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

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
    Union,
    fields_of,
)

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
Encoder = Callable[[Any], Any]


class _Memo(dict[K, V]):
    """Built on first lookup, kept after: ``memo[key]`` is one dict lookup once built.

    A builder may look up other keys (a record's fields, a variant's records);
    a record that contains itself is looked up when its decoder runs, not
    while it is built (see ``_compile``).
    """

    __slots__ = ("_build",)

    def __init__(self, build: Callable[[K], V]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, key: K) -> V:
        value = self[key] = self._build(key)
        return value


_REGISTRIES = (OPS, EVENT_MSGS, INPUT_ITEMS, FILE_CHANGES, CONNECTION_MSGS, TOOL_OUTPUT_ITEMS)


class ProtocolError(ValueError):
    """A message that cannot be decoded or is not valid.

    ``submission_id`` is the id of the submission it came in, or ``""`` when
    none could be read, so the error can be answered under that id.
    """

    def __init__(self, message: str, submission_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.submission_id = submission_id


# --- encoding ---------------------------------------------------------------


def _tag_of(cls: type[Any]) -> str | None:
    for registry in _REGISTRIES:
        tag = registry.tag_of.get(cls)
        if tag is not None:
            return tag
    return None


def encoder_for(cls: type[Any]) -> Encoder:
    """The generated function that turns an instance of ``cls`` into JSON-ready data."""
    return _ENCODERS[cls]


def _generate_encoder(cls: type[Any]) -> Encoder:
    namespace: dict[str, Any] = {}
    entries = []
    tag = _tag_of(cls)
    if tag is not None:
        entries.append(f"'type': {tag!r}")
    for index, field in enumerate(fields_of(cls)):
        convert = _converter(field.shape)
        if convert is None:
            entries.append(f"{field.name!r}: o.{field.name}")
        else:
            namespace[f"c{index}"] = convert
            entries.append(f"{field.name!r}: c{index}(o.{field.name})")
    source = f"def encode(o):\n    return {{{', '.join(entries)}}}\n"
    exec(compile(source, f"<codexcore encoder for {cls.__qualname__}>", "exec"), namespace)
    encode: Encoder = namespace["encode"]
    return encode


_ENCODERS: _Memo[type[Any], Encoder] = _Memo(_generate_encoder)


def _converter(shape: Shape) -> Encoder | None:
    """How to make a value of ``shape`` JSON-ready, or None when it already is."""
    if isinstance(shape, Scalar | Enum | Json):
        return None
    if isinstance(shape, Bytes):
        return _encode_bytes
    if isinstance(shape, Record):
        return encoder_for(shape.cls)
    if isinstance(shape, Union):
        return _encode_variant
    if isinstance(shape, Optional):
        return _optional_converter(_converter(shape.inner))
    if isinstance(shape, Seq):
        item = _converter(shape.item)
        return None if item is None else lambda seq: [item(x) for x in seq]
    value = _converter(shape.value)
    return None if value is None else lambda m: {k: value(v) for k, v in m.items()}


def _optional_converter(inner: Encoder | None) -> Encoder | None:
    if inner is None:
        return None
    return lambda v: None if v is None else inner(v)


def _encode_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _encode_variant(value: Any) -> Any:
    return encoder_for(type(value))(value)


def to_wire(value: Any) -> dict[str, Any]:
    """Any wire value (Op, EventMsg, Submission, Event …) as JSON-ready data."""
    data: dict[str, Any] = encoder_for(type(value))(value)
    return data


def encode_event(event: Event) -> bytes:
    """One Event as compact JSON (no trailing newline)."""
    msg = event.msg
    return orjson.dumps({"id": event.id, "seq": event.seq, "msg": _ENCODERS[msg.__class__](msg)})


def encode_submission(submission: Submission) -> bytes:
    """One Submission as compact JSON (no trailing newline)."""
    return orjson.dumps(to_wire(submission))


# --- decoding ---------------------------------------------------------------
#
# Each shape is compiled once into a decoder: a plain function of the JSON
# value. A decoder that meets a bad value raises _Invalid with the problem;
# every decoder it passes through on the way out adds its step of the path
# (".field", "[index]"), so a valid message builds no path strings at all.
# Against walking the shapes with the path in hand, as this did before:
# 1.4 to 1.9 times faster (bench/bench_protocol.py), the rest being mostly
# the attrs objects built.

Decoder = Callable[[Any], Any]


class _Invalid(Exception):
    """A bad value; ``where`` collects the path's steps, innermost first."""

    def __init__(self, message: str, *where: str) -> None:
        super().__init__(message)
        self.message = message
        self.where = list(where)

    def at(self, path: str) -> ProtocolError:
        return ProtocolError(f"{path}{''.join(reversed(self.where))}: {self.message}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _expected(what: str, value: Any) -> _Invalid:
    return _Invalid(f"expected {what}, got {_kind(value)}")


def decoder_for(shape: Shape) -> Decoder:
    """The compiled decoder of ``shape`` (raises ``_Invalid``; see the wrappers below)."""
    return _SHAPE_DECODERS[shape]


def _compile(shape: Shape) -> Decoder:
    if isinstance(shape, Optional):
        inner = decoder_for(shape.inner)
        return lambda value: None if value is None else inner(value)
    if isinstance(shape, Scalar):
        return _scalar_decoder(shape)
    if isinstance(shape, Enum):
        return _enum_decoder(shape.values)
    if isinstance(shape, Seq):
        return _seq_decoder(decoder_for(shape.item))
    if isinstance(shape, Map):
        return _map_decoder(decoder_for(shape.value))
    if isinstance(shape, Bytes):
        return _decode_bytes
    if isinstance(shape, Json):
        return _any_json
    if isinstance(shape, Record):
        cls = shape.cls
        if _contains_itself(cls):
            return _nesting_decoder(cls)
        return lambda value: _RECORD_DECODERS[cls](value)
    return _VARIANT_DECODERS[shape.registry]


MAX_DEPTH = 254
"""The deepest JSON the codec writes: orjson's encoder refuses containers nested
more than 254 levels. The decoder refuses an event or a Submission nested deeper,
so what it accepts can always be written back.

Only a ``Json`` field (an MCP tool's arguments or result, an output schema) can
make a decoded event or Submission deep: everything else is bounded by the schema
and ``MAX_NESTING`` (64 x 3 levels). So the document's depth is measured only when
one was decoded, and the common event pays nothing."""

MAX_NESTING = 64
"""How deep a record that can contain itself (an Event inside a ``session_history``
inside an Event …) may nest. Without a bound a peer's line of nested events ends
the decoder in ``RecursionError``, and well before that in a value the encoder
cannot write back (orjson writes at most 255 levels; each of these adds three)."""

_nesting = threading.local()


def _nesting_decoder(cls: type[Any]) -> Decoder:
    """The decoder of ``cls`` where it occurs inside a record: it counts how deep it is.

    Only nested occurrences pay for the count; a top-level Event decodes as before.
    """

    def decode(value: Any) -> Any:
        depth = getattr(_nesting, "depth", 0)
        if depth >= MAX_NESTING:
            raise _Invalid(f"nested more than {MAX_NESTING} deep")
        _nesting.depth = depth + 1
        try:
            # Looked up when used: the record is still being built when this is.
            return _RECORD_DECODERS[cls](value)
        finally:
            _nesting.depth = depth

    return decode


def _contains_itself(cls: type[Any]) -> bool:
    """Whether a value of ``cls`` can hold another one (through any fields and variants)."""
    seen: set[type[Any]] = set()
    pending = [f.shape for f in fields_of(cls)]
    while pending:
        shape = pending.pop()
        if isinstance(shape, Optional):
            pending.append(shape.inner)
        elif isinstance(shape, Seq):
            pending.append(shape.item)
        elif isinstance(shape, Map):
            pending.append(shape.value)
        elif isinstance(shape, Record | Union):
            members = (shape.cls,) if isinstance(shape, Record) else shape.registry.by_tag.values()
            for member in members:
                if member is cls:
                    return True
                if member not in seen:
                    seen.add(member)
                    pending.extend(f.shape for f in fields_of(member))
    return False


def _scalar_decoder(shape: Scalar) -> Decoder:
    py = shape.py
    what = f"an {shape.name}" if shape.name[0] in "aeiou" else f"a {shape.name}"

    def decode(value: Any) -> Any:
        if value.__class__ is py:
            return value
        # bool is an int in Python but not on the wire; an int is a fine float.
        if isinstance(value, bool) and py is not bool:
            raise _expected(what, value)
        if isinstance(value, py):
            return value
        if py is float and isinstance(value, int):
            return float(value)
        raise _expected(what, value)

    return decode


def _enum_decoder(values: tuple[str, ...]) -> Decoder:
    allowed = frozenset(values)

    def decode(value: Any) -> Any:
        if isinstance(value, str) and value in allowed:
            return value
        raise _Invalid(f"{value!r} is not one of {', '.join(values)}")

    return decode


def _seq_decoder(item: Decoder) -> Decoder:
    def decode(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise _expected("an array", value)
        items: list[Any] = []
        try:
            for x in value:
                items.append(item(x))
        except _Invalid as exc:
            exc.where.append(f"[{len(items)}]")
            raise
        return tuple(items)

    return decode


def _map_decoder(item: Decoder) -> Decoder:
    def decode(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _expected("an object", value)
        result: dict[str, Any] = {}
        key = ""
        try:
            for key, v in value.items():
                result[key] = item(v)
        except _Invalid as exc:
            exc.where.append(f".{key}")
            raise
        return result

    return decode


def _any_json(value: Any) -> Any:
    """A JSON value as it came: decoded JSON is JSON whatever it holds (its depth is
    checked with the whole document's: see ``MAX_DEPTH``)."""
    _nesting.saw_json = True
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether the JSON ``value`` nests containers more than ``limit`` deep (no recursion:
    a peer's depth must not become ours)."""
    pending = [(value, 1)] if isinstance(value, dict | list) else []
    while pending:
        container, depth = pending.pop()
        if depth > limit:
            return True
        for item in container.values() if isinstance(container, dict) else container:
            if isinstance(item, dict | list):
                pending.append((item, depth + 1))
    return False


def _decode_bytes(value: Any) -> bytes:
    if not isinstance(value, str):
        raise _expected("base64 text", value)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _Invalid("not valid base64") from None


def _compile_record(cls: type[Any]) -> Decoder:
    fields = tuple((f.name, decoder_for(f.shape), f.required) for f in fields_of(cls))

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _expected("an object", value)
        kwargs = {}
        name = ""
        try:
            for name, field, required in fields:
                if name in value:
                    kwargs[name] = field(value[name])
                elif required:
                    raise _Invalid("missing required field")
        except _Invalid as exc:
            exc.where.append(f".{name}")
            raise
        return cls(**kwargs)

    return decode


def _compile_variant(registry: Registry) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _expected("an object", value)
        tag = value.get("type")
        if tag is None:
            raise _Invalid("missing required field", ".type")
        cls = registry.by_tag.get(tag) if isinstance(tag, str) else None
        if cls is None:
            known = ", ".join(sorted(registry.by_tag))
            raise _Invalid(f"unknown {registry.name} type {tag!r} (known: {known})", ".type")
        return _RECORD_DECODERS[cls](value)

    return decode


_SHAPE_DECODERS: _Memo[Shape, Decoder] = _Memo(_compile)
_RECORD_DECODERS: _Memo[type[Any], Decoder] = _Memo(_compile_record)
_VARIANT_DECODERS: _Memo[Registry, Decoder] = _Memo(_compile_variant)


def from_wire(shape: Shape, value: Any, path: str) -> Any:
    """Decode JSON data of the given shape; raise ProtocolError naming ``path``."""
    try:
        return decoder_for(shape)(value)
    except _Invalid as exc:
        raise exc.at(path) from None


def decode_record(cls: type[T], value: Any, path: str) -> T:
    """Build ``cls`` from a JSON object, field by field."""
    try:
        record: T = _RECORD_DECODERS[cls](value)
    except _Invalid as exc:
        raise exc.at(path) from None
    return record


def decode_variant(registry: Registry, value: Any, path: str) -> Any:
    """Pick the variant of a tagged union by its ``type`` and decode it."""
    try:
        return _VARIANT_DECODERS[registry](value)
    except _Invalid as exc:
        raise exc.at(path) from None


def _load_object(data: bytes | str | dict[str, Any], what: str) -> dict[str, Any]:
    if isinstance(data, dict):
        return data
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"a {what} must be a JSON object, got {_kind(value)}")
    return value


def decode_submission(data: bytes | str | dict[str, Any]) -> Submission:
    """Decode and validate one Submission (bytes, text or already-parsed JSON)."""
    value = _load_object(data, "submission")
    sub_id = value.get("id")
    if not isinstance(sub_id, str):
        problem = "missing required field" if sub_id is None else "expected a string"
        raise ProtocolError(f"id: {problem}")
    if "op" not in value:
        raise ProtocolError("op: missing required field", sub_id)
    _nesting.saw_json = False
    try:
        op = decode_variant(OPS, value["op"], "op")
    except ProtocolError as exc:
        raise ProtocolError(exc.message, sub_id) from None
    # A Json field (an output schema, say) can make it deeper than the encoder writes.
    if _nesting.saw_json and _deeper_than(value, MAX_DEPTH):
        raise ProtocolError(f"submission: nested more than {MAX_DEPTH} levels deep", sub_id)
    return Submission(sub_id, op)


def decode_event(data: bytes | str | dict[str, Any]) -> Event:
    """Decode one Event, as a client of the engine receives it."""
    value = _load_object(data, "event")
    _nesting.saw_json = False
    event = decode_record(Event, value, "event")
    if _nesting.saw_json and _deeper_than(value, MAX_DEPTH):
        raise ProtocolError(f"event: nested more than {MAX_DEPTH} levels deep")
    return event
