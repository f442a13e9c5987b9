"""Request bodies checked against the official openai SDK's own types, strictly.

The SDK's request types are TypedDicts, which check nothing at run time, and
pydantic's TypedDict validation lets unknown keys through. So this walks the
types itself: every key must be declared (a stray key fails), every required
key present, every value of its declared type (``Literal``s included), and,
stricter than the SDK, no value is ever null. With ``store: false`` no input
item may carry an ``id`` (the API rejects an id it never stored): there the
SDK's ``Required`` ``id`` of an output item's param type is dropped, and any
``id`` fails.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, Literal, Required, Union, get_args, get_origin

from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from openai.types.responses.response_input_item_param import ResponseInputItemParam

# typing_extensions' versions: they know the SDK's TypedDicts (typing's do not).
from typing_extensions import get_type_hints, is_typeddict

__all__ = ["body_problems", "item_problems"]

_SEQUENCES = {
    list,
    collections.abc.Iterable,
    collections.abc.Sequence,
    typing.List,  # noqa: UP006 (what the SDK's annotations name)
    typing.Iterable,
    typing.Sequence,
}
_MAPPINGS = {dict, collections.abc.Mapping, typing.Dict, typing.Mapping}  # noqa: UP006


def body_problems(body: dict[str, Any]) -> list[str]:
    """Why ``body`` is not a valid ``ResponseCreateParamsStreaming``; [] when it is."""
    checker = _Checker(no_ids=body.get("store") is False)
    return checker.check(body, ResponseCreateParamsStreaming, "body")


def item_problems(item: dict[str, Any], *, store: bool = False) -> list[str]:
    """Why ``item`` is not a valid ``ResponseInputItemParam``; [] when it is."""
    return _Checker(no_ids=not store).check(item, ResponseInputItemParam, "item")


class _Checker:
    def __init__(self, *, no_ids: bool) -> None:
        self.no_ids = no_ids

    def check(self, value: Any, shape: Any, path: str) -> list[str]:
        if value is None:
            return [f"{path}: null (send no null fields)"]
        origin = get_origin(shape)
        if shape is Any or shape is object:
            return []
        if origin is typing.Annotated:
            return self.check(value, get_args(shape)[0], path)
        if origin in (Union, types.UnionType):
            return self._union(value, get_args(shape), path)
        if origin is Literal:
            ok = value in get_args(shape)
            return [] if ok else [f"{path}: {value!r} not one of {get_args(shape)}"]
        if is_typeddict(shape):
            return self._typeddict(value, shape, path)
        if origin in _SEQUENCES or _is_sequence_not_str(shape):
            return self._sequence(value, shape, path)
        if origin in _MAPPINGS:
            return self._mapping(value, shape, path)
        if isinstance(shape, type):
            return self._scalar(value, shape, path)
        raise AssertionError(f"{path}: the checker does not know the type {shape!r}")

    def _union(self, value: Any, options: tuple[Any, ...], path: str) -> list[str]:
        """[] if any option fits; else the problems of the closest option: one of the
        value's kind (object, array …), whose ``type`` tag matches, with fewest problems."""
        failures: list[tuple[bool, bool, list[str]]] = []
        for option in options:
            if option is type(None):
                continue
            problems = self.check(value, option, path)
            if not problems:
                return []
            wrong_kind = problems[0].startswith(f"{path}: expected ")
            failures.append((wrong_kind, not _tag_matches(value, option), problems))
        if not failures:
            return [f"{path}: {value!r} matches no allowed type"]
        return min(failures, key=lambda f: (f[0], f[1], len(f[2])))[2]

    def _typeddict(self, value: Any, shape: Any, path: str) -> list[str]:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        hints = get_type_hints(shape)
        required = _required_keys(shape)
        problems = []
        if self.no_ids and _is_input_item(path):
            required.discard("id")
            if "id" in value:
                problems.append(f"{path}.id: store is false, so no item may carry an id")
        problems += [f"{path}: stray key {k!r}" for k in value if k not in hints]
        problems += [f"{path}: missing {k!r}" for k in sorted(required - value.keys())]
        for key, item in value.items():
            if key in hints and not (key == "id" and self.no_ids and _is_input_item(path)):
                problems += self.check(item, hints[key], f"{path}.{key}")
        return problems

    def _sequence(self, value: Any, shape: Any, path: str) -> list[str]:
        if not isinstance(value, list):
            return [f"{path}: expected an array, got {type(value).__name__}"]
        (element,) = get_args(shape) or (Any,)
        return [p for i, v in enumerate(value) for p in self.check(v, element, f"{path}[{i}]")]

    def _mapping(self, value: Any, shape: Any, path: str) -> list[str]:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        _, element = get_args(shape) or (str, Any)
        return [p for k, v in value.items() for p in self.check(v, element, f"{path}.{k}")]

    @staticmethod
    def _scalar(value: Any, shape: type, path: str) -> list[str]:
        if shape is float and isinstance(value, int) and not isinstance(value, bool):
            return []
        if shape is int and isinstance(value, bool):
            return [f"{path}: expected int, got bool"]
        if isinstance(value, shape):
            return []
        return [f"{path}: expected {shape.__name__}, got {type(value).__name__}"]


def _required_keys(shape: Any) -> set[str]:
    """The keys marked ``Required``: ``__required_keys__`` misses those of a TypedDict
    that inherits from a ``total=False`` one with string annotations (as the SDK's do)."""
    hints = get_type_hints(shape, include_extras=True)
    required: Any = Required  # typeshed's get_origin overloads cannot compare with it
    marked = {key for key, hint in hints.items() if get_origin(hint) is required}
    return marked | set(shape.__required_keys__)


def _is_input_item(path: str) -> bool:
    """``body.input[3]`` or a lone ``item``: where the store-false id rule applies."""
    return path == "item" or (path.startswith("body.input[") and path.endswith("]"))


def _is_sequence_not_str(shape: Any) -> bool:
    return getattr(get_origin(shape), "__name__", "") == "SequenceNotStr" or (
        getattr(shape, "__name__", "") == "SequenceNotStr"
    )


def _tag_matches(value: Any, option: Any) -> bool:
    if not (is_typeddict(option) and isinstance(value, dict) and "type" in value):
        return False
    tag = get_type_hints(option).get("type")
    return get_origin(tag) is Literal and value["type"] in get_args(tag)
