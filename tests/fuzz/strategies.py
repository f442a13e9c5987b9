"""Strategies that reach deep: valid wire values built from the codec's own shapes,
and mutations of valid frames (wrong types at any field, deep nesting, huge numbers,
lone surrogates, NaN, duplicate keys, flipped bytes, truncation, splices).

Random bytes alone stop at a decoder's first check; a valid frame with one thing
wrong runs the branches behind it.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from hypothesis import strategies as st

from codexcore.protocol import Event, Submission, to_wire
from codexcore.protocol._wire import (
    CONNECTION_MSGS,
    EVENT_MSGS,
    OPS,
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

from .. import protocol_samples as samples

JSON = Any

# --- valid values, from the shapes the codec decodes ---------------------------------

_INT64 = st.integers(-(2**63), 2**63 - 1)
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
_TEXT = st.text(max_size=20)  # no lone surrogates: orjson cannot encode them
_SCALARS: dict[type[Any], st.SearchStrategy[Any]] = {
    str: _TEXT,
    int: _INT64,
    float: _FLOATS,
    bool: st.booleans(),
}
_BUILDING: dict[Shape, st.SearchStrategy[Any]] = {}


def for_shape(shape: Shape) -> st.SearchStrategy[Any]:
    """Values of ``shape`` that the encoder accepts; recursive shapes are deferred."""
    if isinstance(shape, Scalar):
        return _SCALARS[shape.py]
    if isinstance(shape, Enum):
        return st.sampled_from(shape.values)
    if isinstance(shape, Bytes):
        return st.binary(max_size=20)
    if isinstance(shape, Json):
        leaves = st.none() | st.booleans() | _INT64 | _TEXT
        return leaves | st.lists(leaves, max_size=2) | st.dictionaries(_TEXT, leaves, max_size=2)
    if isinstance(shape, Optional):
        return st.none() | for_shape(shape.inner)
    if isinstance(shape, Seq):
        return st.lists(for_shape(shape.item), max_size=3).map(tuple)
    if isinstance(shape, Map):
        return st.dictionaries(_TEXT, for_shape(shape.value), max_size=3)
    if shape not in _BUILDING:
        _BUILDING[shape] = st.deferred(lambda: _build(shape))
    return _BUILDING[shape]


def _build(shape: Record | Union) -> st.SearchStrategy[Any]:
    if isinstance(shape, Union):
        return st.one_of([for_record(cls) for cls in shape.registry.by_tag.values()])
    return for_record(shape.cls)


def for_record(cls: type[Any]) -> st.SearchStrategy[Any]:
    fields = {f.name: for_shape(f.shape) for f in fields_of(cls)}
    return st.builds(cls, **fields)


def for_registry(registry: Registry) -> st.SearchStrategy[Any]:
    return for_shape(Union(registry))


OPS_ = for_registry(OPS)
EVENT_MSGS_ = for_registry(EVENT_MSGS)
CONNECTION_MSGS_ = for_registry(CONNECTION_MSGS)
SUBMISSIONS = st.builds(Submission, _TEXT, OPS_)
EVENTS = for_record(Event)

# --- arbitrary JSON and mutations of valid JSON ---------------------------------------

_ODD_NUMBERS = st.sampled_from(
    [0, -1, 2**63, -(2**63) - 1, 2**64, 10**30, 1e308, -0.0, 0.5, 1.5e-300]
)
_ODD_TEXT = st.sampled_from(["", "\x00", "\ud800", "\udfff", "\ufeff", "\u2028", "é", "\n"])
_LEAVES = st.one_of(st.none(), st.booleans(), _INT64, _ODD_NUMBERS, _FLOATS, _TEXT, _ODD_TEXT)
# Shallow on purpose: st.recursive costs several times more per case, and depth
# comes from the frames being mutated (and from "nest" below).
ANY_JSON: st.SearchStrategy[JSON] = st.one_of(
    _LEAVES,
    st.lists(_LEAVES, max_size=2),
    st.dictionaries(_TEXT, _LEAVES, max_size=2),
)


@st.composite
def mutated(draw: st.DrawFn, value: JSON) -> JSON:
    """``value`` with up to three changes, each at a random place in the tree."""
    for _ in range(draw(st.integers(1, 3))):
        value = _mutate_at(draw, value)
    return value


def _mutate_at(draw: st.DrawFn, value: JSON) -> JSON:
    children: list[Any] = []
    if isinstance(value, dict):
        children = list(value)
    elif isinstance(value, list):
        children = list(range(len(value)))
    # Go down with probability 2/3 while there is somewhere to go.
    if children and draw(_THIRDS) > 0:
        key = _pick(draw, children)
        copy = dict(value) if isinstance(value, dict) else list(value)
        copy[key] = _mutate_at(draw, value[key])
        return copy
    return _mutate_here(draw, value)


def _pick(draw: st.DrawFn, choices: list[Any]) -> Any:
    # An index costs one draw and no new strategy object, unlike sampled_from(choices).
    return choices[draw(st.integers(0, len(choices) - 1))]


_THIRDS = st.integers(0, 2)
_HOW = st.sampled_from(["replace", "drop", "add", "nest", "wrap", "type_tag", "empty"])
_KEYS = st.sampled_from(["type", "id", "seq", "op", "msg", "x"])
_DEPTHS = st.sampled_from([10, 100, 600, 2000])
_TAGS = st.sampled_from(
    sorted({*OPS.by_tag, *EVENT_MSGS.by_tag, *CONNECTION_MSGS.by_tag, "", "TYPE"})
)
_EMPTY: st.SearchStrategy[JSON] = st.sampled_from([{}, [], "", 0, None])


def _mutate_here(draw: st.DrawFn, value: JSON) -> JSON:
    how = draw(_HOW)
    if how == "drop" and isinstance(value, dict) and value:
        copy = dict(value)
        del copy[_pick(draw, list(copy))]
        return copy
    if how == "add" and isinstance(value, dict):
        return {**value, draw(_KEYS): draw(ANY_JSON)}
    if how == "nest":
        return Nested(value, draw(_DEPTHS))
    if how == "wrap":
        return [value]
    if how == "type_tag" and isinstance(value, dict):
        return {**value, "type": draw(_TAGS | ANY_JSON)}
    if how == "empty":
        return draw(_EMPTY)
    return draw(ANY_JSON)


class Nested:
    """``inner`` wrapped ``depth`` times in ``open``/``close``, serialised by :func:`dumps`
    without recursion (orjson refuses to write such depths)."""

    def __init__(self, inner: JSON, depth: int, open: bytes = b"[", close: bytes = b"]") -> None:
        self.inner, self.depth, self.open, self.close = inner, depth, open, close


def dumps(value: JSON, *, duplicate: bool = False) -> bytes:
    """JSON text of ``value``, whatever it holds: lone surrogates as escapes, huge and
    non-finite numbers as written, ``Nested`` values as deep arrays; with
    ``duplicate``, each object's first key is written twice (the second copy wins)."""
    if isinstance(value, Nested):
        return value.open * value.depth + dumps(value.inner) + value.close * value.depth
    if isinstance(value, dict):
        parts = [_key(k) + b":" + dumps(v, duplicate=duplicate) for k, v in value.items()]
        if duplicate and value:
            first = next(iter(value))
            parts.insert(0, _key(first) + b':"duplicate"')
        return b"{" + b",".join(parts) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(dumps(v, duplicate=duplicate) for v in value) + b"]"
    if isinstance(value, str):
        return _key(value)
    if isinstance(value, float) and value != value:
        return b"NaN"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()  # any size, as a peer might send it
    return orjson.dumps(value)


def _key(text: str) -> bytes:
    try:
        return orjson.dumps(text)
    except orjson.JSONEncodeError:  # a lone surrogate: write it as an escape
        escaped = "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
        return orjson.dumps(escaped).replace(b"\\\\u", b"\\u")


@st.composite
def mangled(draw: st.DrawFn, original: bytes) -> bytes:
    """``data`` with byte-level damage: flips, truncation, insertion, splices."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["flip", "truncate", "insert", "splice", "delete"]))
        at = draw(st.integers(0, len(data)))
        if how == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "truncate":
            del data[at:]
        elif how == "insert":
            data[at:at] = draw(
                st.sampled_from([b"\n", b"\r", b"\x00", b"\xff", b"\xc3", b'"', b"{", b"]", b"\\u"])
                | st.binary(max_size=4)
            )
        elif how == "splice":
            data[at:at] = data[draw(st.integers(0, len(data))) :]
        elif how == "delete" and at < len(data):
            del data[at : at + draw(st.integers(1, 8))]
    return bytes(data)


@st.composite
def frames(
    draw: st.DrawFn, pool: st.SearchStrategy[JSON], wrapper: tuple[bytes, bytes] | None = None
) -> bytes:
    """Bytes of one frame built from a value of ``pool``: as it is, mutated as JSON,
    damaged as bytes, or (rarely) random bytes. ``wrapper`` is a frame's own way to
    nest (an event inside a ``session_history`` event, say), used for deep nesting."""
    how = draw(st.integers(0, 9))
    if how == 9:
        return draw(st.binary(max_size=64))
    value = draw(pool)
    if how < 6 and draw(st.integers(0, 4)):
        value = draw(mutated(value))
    if wrapper is not None and how == 5:
        value = Nested(value, draw(st.sampled_from([1, 10, 100, 200, 300])), *wrapper)
    data = dumps(value, duplicate=how == 0)
    return data if how < 6 else draw(mangled(data))


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at arbitrary points (empty chunks included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=8)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# --- pools of valid frames: the golden samples (cheap) and generated values (varied) -----


def _pool(golden: list[JSON], generated: st.SearchStrategy[Any]) -> st.SearchStrategy[JSON]:
    # Mostly the samples: a generated value costs a few dozen draws, a sample one.
    sampled = st.sampled_from(golden)
    return st.one_of(*[sampled] * 7, generated.map(to_wire))


SUBMISSION_POOL = _pool(
    [to_wire(Submission(f"sub-{i}", op)) for i, op in enumerate(samples.OPS)], SUBMISSIONS
)
EVENT_POOL = _pool(
    [to_wire(Event(f"sub-{i}", i, msg)) for i, msg in enumerate(samples.EVENT_MSGS)], EVENTS
)
CONNECTION_POOL = _pool([to_wire(msg) for msg in samples.CONNECTION_MSGS], CONNECTION_MSGS_)
EVENT_WRAPPER = (
    b'{"id":"s","seq":1,"msg":{"type":"session_history","session_id":"x",'
    b'"offset":0,"total":1,"events":[',
    b"]}}",
)
"""How an event nests: inside a ``session_history`` answer's ``events``."""


def nested_events(depth: int) -> bytes:
    """An event inside ``depth`` nested ``session_history`` answers."""
    inner = {"id": "s", "seq": 1, "msg": {"type": "task_started"}}
    return dumps(Nested(inner, depth, *EVENT_WRAPPER))
