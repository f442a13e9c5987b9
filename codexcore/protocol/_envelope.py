"""The two envelopes that cross the queue pair (Event is defined with the EventMsgs)."""

from __future__ import annotations

import attrs

from ._events import Event
from ._ops import Op
from ._value import Value

__all__ = ["Event", "Submission"]


@attrs.frozen(repr=False, eq=False)
class Submission(Value):
    """A UI's request: ``id`` is chosen by the UI and names the work it starts."""

    id: str
    op: Op
