"""The two envelopes that cross the queue pair."""

from __future__ import annotations

import attrs

from ._events import EventMsg
from ._ops import Op


@attrs.frozen
class Submission:
    """A UI's request: ``id`` is chosen by the UI and names the work it starts."""

    id: str
    op: Op


@attrs.frozen
class Event:
    """What the engine reports.

    ``id`` is the id of the submission the event belongs to (for a Task's
    events, the submission that started it). ``seq`` counts the Session's
    events from 0 with no gaps, so a UI can order, deduplicate and resume.
    """

    id: str
    seq: int
    msg: EventMsg
