"""The conversation as the model sees it, with a bookmark at every response.

History is a chain of immutable segments: one for each model response (the
Turn's input, then the response's output items), and one after it holding the
outputs of the tool calls that response made. A bookmark maps a
``response_id`` to the last segment of its Turn, answers included, so forking
from any earlier response is taking that segment as the new head and the
conversation stays well formed (every call answered). Nothing is copied, and
an abandoned branch stays reachable through its own bookmarks.

A compaction (:meth:`History.compact`) starts a new chain: one segment with no
parent and no response, holding the compacted conversation. Nothing before it
is sent again, and in ``server`` mode the next request names no
``previous_response_id`` (the provider's stored chain holds the whole old
conversation, which is what compacting is meant to leave behind).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from ..protocol._value import Value

Item = dict[str, Any]
Journal = Callable[[str, tuple[Item, ...], str | None], None]
"""Told each change to a History: (kind, items, response_id)."""


@attrs.frozen(repr=False, eq=False)
class Segment(Value):
    items: tuple[Item, ...]
    parent: Segment | None
    response_id: str | None
    compacted: bool = False  # the base of a chain: a compacted conversation


class UnknownBookmark(KeyError):
    """A ``last_response_id`` this Session never produced."""


class History:
    """The Session's conversation; :meth:`items` is what ``client`` mode resends.

    ``journal``, when set, is told every change (``turn``, ``tool_outputs``,
    ``fork``, ``compacted``) so a rollout can record it; :meth:`replay` applies
    a recorded change without telling the journal.
    """

    def __init__(self, journal: Journal | None = None) -> None:
        self.head: Segment | None = None
        self.journal = journal
        self._bookmarks: dict[str, Segment] = {}
        # Total tokens of the newest response (how full the context is), None after a
        # compaction or when unknown: what the auto-compact limit is checked against.
        self.context_tokens: int | None = None

    @property
    def last_response_id(self) -> str | None:
        """The newest response on the current branch (``previous_response_id``)."""
        for segment in self._walk():
            if segment.response_id is not None:
                return segment.response_id
        return None

    def fork(self, response_id: str, *, allow_external: bool = False) -> None:
        """Continue from the response ``response_id`` instead of the latest one.

        With ``allow_external`` (server mode) an id this Session never saw is
        taken on trust, since the provider stores it: the branch then starts
        from that response alone.
        """
        segment = self._bookmarks.get(response_id)
        if segment is None:
            if not allow_external:
                raise UnknownBookmark(response_id)
            segment = Segment((), None, response_id)
            self._bookmarks[response_id] = segment
        self.head = segment
        self.context_tokens = None  # that response's size is not known here
        self._tell("fork", (), response_id)

    def knows(self, response_id: str) -> bool:
        return response_id in self._bookmarks

    def record(self, items: Iterable[Item], response_id: str | None) -> None:
        """Append one Turn's input and output, bookmarked by its response.

        Items recorded after the newest response are sent with the next request.
        """
        self.head = Segment(tuple(items), self.head, response_id)
        if response_id is not None:
            self._bookmarks[response_id] = self.head
        self._tell("turn", self.head.items, response_id)

    def compact(self, items: Iterable[Item], *, forget: bool = True) -> None:
        """Replace the conversation by ``items`` (its compacted form): a new chain.

        With ``forget`` the bookmarks of the old conversation are dropped too, so a
        long session's memory holds only what it still sends; a rollout keeps them
        (``fork_session`` from the file still reaches them).
        """
        if forget:
            self._bookmarks.clear()
        self.context_tokens = None
        self.head = Segment(tuple(items), None, None, compacted=True)
        self._tell("compacted", self.head.items, None)

    def items(self) -> list[Item]:
        """Every item from the first Turn to the head, in order."""
        segments = list(self._walk())
        return [item for segment in reversed(segments) for item in segment.items]

    def record_tool_outputs(self, outputs: Iterable[Item], response_id: str | None) -> None:
        """Append the answers to ``response_id``'s calls; its bookmark moves to them."""
        self.head = Segment(tuple(outputs), self.head, None)
        if response_id is not None:
            self._bookmarks[response_id] = self.head
        self._tell("tool_outputs", self.head.items, response_id)

    def replay(self, kind: str, items: tuple[Item, ...], response_id: str | None) -> None:
        """Apply one recorded change (from a rollout) without journaling it."""
        journal, self.journal = self.journal, None
        try:
            if kind == "turn":
                self.record(items, response_id)
            elif kind == "tool_outputs":
                self.record_tool_outputs(items, response_id)
            elif kind == "fork" and response_id is not None:
                self.fork(response_id, allow_external=True)
            elif kind == "compacted":
                # A loaded session keeps the old bookmarks: fork_session may name one.
                self.compact(items, forget=False)
        finally:
            self.journal = journal

    def branch(self) -> list[tuple[str, tuple[Item, ...], str | None]]:
        """The changes that rebuild the current branch alone, oldest first."""
        segments = list(self._walk())[::-1]
        changes: list[tuple[str, tuple[Item, ...], str | None]] = []
        for index, segment in enumerate(segments):
            if segment.compacted:
                changes.append(("compacted", segment.items, None))
            elif segment.response_id is not None:
                changes.append(("turn", segment.items, segment.response_id))
            else:
                parent = segments[index - 1] if index else None
                answered = parent.response_id if parent is not None else None
                changes.append(("tool_outputs", segment.items, answered))
        return changes

    def _tell(self, kind: str, items: tuple[Item, ...], response_id: str | None) -> None:
        if self.journal is not None:
            self.journal(kind, items, response_id)

    def unsent_items(self) -> list[Item]:
        """Items recorded after the newest response: server mode must still send them."""
        segments = []
        for segment in self._walk():
            if segment.response_id is not None:
                break
            segments.append(segment)
        return [item for segment in reversed(segments) for item in segment.items]

    def latest_turn(self) -> tuple[str | None, list[Item]]:
        """The newest response's id and every item from its Turn to the head: the
        Turn's input and output, and whatever answers were recorded after it."""
        segments = []
        for segment in self._walk():
            segments.append(segment)
            if segment.response_id is not None:
                break
        response_id = segments[-1].response_id if segments else None
        return response_id, [item for segment in reversed(segments) for item in segment.items]

    def _walk(self) -> Iterator[Segment]:
        segment = self.head
        while segment is not None:
            yield segment
            segment = segment.parent
