"""Value semantics of the frozen classes built on ``Value``: the same as attrs writes.

Each case declares one class twice, once with attrs' own methods and once on
``Value`` with ``repr=False, eq=False``, and checks that users see no
difference: equality, hashing (sets and dict keys), reprs, evolve.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from codexcore.protocol import Submission, TextInput, UserInput
from codexcore.protocol._value import Value


@attrs.frozen
class Plain:
    name: str
    size: int = 0
    hidden: str = attrs.field(default="x", repr=False)
    loose: str = attrs.field(default="", eq=False)
    lower: str = attrs.field(default="", eq=str.lower)
    shown: int = attrs.field(default=0, repr=lambda value: f"<{value}>")


@attrs.frozen(repr=False, eq=False)
class Fast(Value):
    name: str
    size: int = 0
    hidden: str = attrs.field(default="x", repr=False)
    loose: str = attrs.field(default="", eq=False)
    lower: str = attrs.field(default="", eq=str.lower)
    shown: int = attrs.field(default=0, repr=lambda value: f"<{value}>")


@attrs.frozen(repr=False, eq=False)
class Other(Value):
    name: str
    size: int = 0


@attrs.frozen(repr=False, eq=False)
class Holder(Value):
    items: list[Any]


CASES: list[dict[str, Any]] = [
    {"name": "a"},
    {"name": "a", "size": 3, "hidden": "secret"},
    {"name": "a", "loose": "one", "lower": "MiXeD", "shown": 7},
]


@pytest.mark.parametrize("fields", CASES)
def test_repr_is_the_one_attrs_writes(fields: dict[str, Any]) -> None:
    assert repr(Fast(**fields)) == repr(Plain(**fields)).replace("Plain(", "Fast(")


def test_equality_follows_the_fields_eq_settings() -> None:
    assert Fast("a", 1) == Fast("a", 1)
    assert Fast("a", 1) != Fast("a", 2)
    assert Fast("a", loose="one") == Fast("a", loose="two")  # eq=False: not compared
    assert Fast("a", lower="ABC") == Fast("a", lower="abc")  # compared by its key
    assert Fast("a", hidden="p") != Fast("a", hidden="q")  # repr=False is still compared
    # The same outcomes as attrs' own methods, pair by pair.
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"name": "a", "size": 1}, {"name": "a", "size": 1}),
        ({"name": "a"}, {"name": "b"}),
        ({"name": "a", "lower": "Q"}, {"name": "a", "lower": "q"}),
        ({"name": "a", "hidden": "p"}, {"name": "a", "hidden": "q"}),
    ]
    for left, right in pairs:
        assert (Fast(**left) == Fast(**right)) == (Plain(**left) == Plain(**right))


def test_values_of_other_classes_are_never_equal() -> None:
    assert Fast("a") != Other("a")
    assert Fast("a") != ("a", 0)
    assert Fast("a").__eq__(object()) is NotImplemented


def test_equal_values_hash_alike_and_work_as_keys() -> None:
    assert hash(Fast("a", lower="X")) == hash(Fast("a", lower="x"))
    assert len({Fast("a", 1), Fast("a", 1), Fast("a", 2)}) == 2
    assert {Fast("a"): 1}[Fast("a", loose="ignored")] == 1


def test_a_value_holding_an_unhashable_field_is_unhashable_like_attrs() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(Holder([1]))


def test_a_value_that_contains_itself_repr_once() -> None:
    holder = Holder([])
    holder.items.append(holder)
    assert repr(holder) == "Holder(items=[...])"


def test_evolve_keeps_value_semantics() -> None:
    first = Fast("a", 1)
    assert attrs.evolve(first, size=2) == Fast("a", 2)
    assert attrs.evolve(first, size=2) != first


def test_wire_types_compare_hash_and_print_as_values() -> None:
    one = Submission(id="s1", op=UserInput(items=(TextInput(text="hi"),)))
    two = Submission(id="s1", op=UserInput(items=(TextInput(text="hi"),)))
    assert one == two
    assert hash(one) == hash(two)
    assert repr(one).startswith("Submission(id='s1', op=UserInput(")
