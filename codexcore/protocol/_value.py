"""Value semantics shared by codexcore's frozen attrs classes, written once.

attrs compiles ``__repr__``, ``__eq__`` and ``__hash__`` from source for every
class it builds: about half the cost of declaring a small frozen class, and
codexcore declares about a hundred on the way to its first model request
(the wire types, the model's stream events, the settings, the patch types).
Classes declared ``@attrs.frozen(repr=False, eq=False)`` on top of
:class:`Value` get the same three methods from here instead, read from the
class's ``__attrs_attrs__`` on first use:

- ``__eq__``: equal to an instance of the very same class whose compared
  fields are equal (field by field, in order, as attrs does), otherwise
  ``NotImplemented``;
- ``__hash__``: the class and the hashed fields' values, so equal values hash
  alike (an unhashable field, a ``dict`` say, makes the value unhashable, as
  with attrs);
- ``__repr__``: ``ClassName(field=value, ...)``, exactly attrs' format, with
  the fields' ``repr=False`` and custom repr callables honoured.

``eq=False`` keeps attrs from writing ``__eq__`` and, with it, the
``__hash__`` of a frozen class, so both are inherited from here.

It lives in ``protocol`` because the wire types need it and ``protocol``
imports nothing else of codexcore's; the model, tools and configuration
modules import it from here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Value"]

_Key = Callable[[Any], Any] | None


class _Spec:
    """What the generic methods need of one attrs class, computed on first use."""

    __slots__ = ("eq", "hash", "repr")

    def __init__(self, cls: type[Any]) -> None:
        fields: tuple[Any, ...] = cls.__attrs_attrs__
        self.eq: tuple[tuple[str, _Key], ...] = tuple((a.name, a.eq_key) for a in fields if a.eq)
        self.hash: tuple[tuple[str, _Key], ...] = tuple(
            (a.name, a.eq_key) for a in fields if a.hash is True or (a.hash is None and a.eq)
        )
        self.repr: tuple[tuple[str, Callable[[Any], str]], ...] = tuple(
            (a.name, repr if a.repr is True else a.repr) for a in fields if a.repr is not False
        )


_SPECS: dict[type[Any], _Spec] = {}
_repr_context = threading.local()


def _spec(cls: type[Any]) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        spec = _SPECS[cls] = _Spec(cls)
    return spec


class Value:
    """Base of frozen attrs classes declared with ``repr=False, eq=False``.

    See the module's docstring. Subclasses stay slotted: this base has no
    instance attributes.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        cls = self.__class__
        if other.__class__ is not cls:
            return NotImplemented
        for name, key in _spec(cls).eq:
            if key is None:
                if not getattr(self, name) == getattr(other, name):
                    return False
            elif not key(getattr(self, name)) == key(getattr(other, name)):
                return False
        return True

    def __hash__(self) -> int:
        cls = self.__class__
        return hash(
            (
                cls,
                *(
                    getattr(self, name) if key is None else key(getattr(self, name))
                    for name, key in _spec(cls).hash
                ),
            )
        )

    def __repr__(self) -> str:
        # attrs' guard against a value that contains itself: "..." the second time.
        try:
            active: set[int] = _repr_context.active
        except AttributeError:
            active = _repr_context.active = set()
        if id(self) in active:
            return "..."
        active.add(id(self))
        try:
            cls = self.__class__
            name = cls.__qualname__.rsplit(">.", 1)[-1]
            fields = ", ".join(
                f"{field}={show(getattr(self, field))}" for field, show in _spec(cls).repr
            )
            return f"{name}({fields})"
        finally:
            active.discard(id(self))
