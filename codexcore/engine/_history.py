"""The conversation as the model sees it, with a bookmark at every response.

History is a chain of immutable segments: one for each model response (the
Turn's input, then the response's output items), and one after it holding the
outputs of the tool calls that response made. A bookmark maps a
``response_id`` to the last segment of its Turn, answers included, so forking
from any earlier response is taking that segment as the new head and the
conversation stays well formed (every call answered). Nothing is copied, and
an abandoned branch stays reachable through its own bookmarks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import attrs

Item = dict[str, Any]


@attrs.frozen
class Segment:
    items: tuple[Item, ...]
    parent: Segment | None
    response_id: str | None


class UnknownBookmark(KeyError):
    """A ``last_response_id`` this Session never produced."""


class History:
    """The Session's conversation; :meth:`items` is what ``client`` mode resends."""

    def __init__(self) -> None:
        self.head: Segment | None = None
        self._bookmarks: dict[str, Segment] = {}

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

    def knows(self, response_id: str) -> bool:
        return response_id in self._bookmarks

    def record(self, items: Iterable[Item], response_id: str | None) -> None:
        """Append one Turn's input and output, bookmarked by its response.

        Items recorded after the newest response are sent with the next request.
        """
        self.head = Segment(tuple(items), self.head, response_id)
        if response_id is not None:
            self._bookmarks[response_id] = self.head

    def items(self) -> list[Item]:
        """Every item from the first Turn to the head, in order."""
        segments = list(self._walk())
        return [item for segment in reversed(segments) for item in segment.items]

    def record_tool_outputs(self, outputs: Iterable[Item], response_id: str | None) -> None:
        """Append the answers to ``response_id``'s calls; its bookmark moves to them."""
        self.head = Segment(tuple(outputs), self.head, None)
        if response_id is not None:
            self._bookmarks[response_id] = self.head

    def unsent_items(self) -> list[Item]:
        """Items recorded after the newest response: server mode must still send them."""
        segments = []
        for segment in self._walk():
            if segment.response_id is not None:
                break
            segments.append(segment)
        return [item for segment in reversed(segments) for item in segment.items]

    def _walk(self) -> Iterator[Segment]:
        segment = self.head
        while segment is not None:
            yield segment
            segment = segment.parent
