"""The sending side of a client: the connection in use, written by one writer at a time,
and the submissions sent on it that the server has not answered yet.

Unanswered submissions are written again on each new connection after a drop (the
server runs each id once and acknowledges every copy, ``duplicate: true`` for the
later ones), so the outbox also counts the acks still due for copies and drops them:
the UI sees one answer per submission. Their number is what ``max_unanswered`` bounds.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

import orjson

from codexcore._logging import get_logger
from codexcore.protocol import Submission, encode_submission

from ._link import Link

log = get_logger("codexcore.adapters.client")  # the public module's name, as before the split

MAX_RESENT_TRACKED = 1024
"""Submissions whose extra acks are still counted; the oldest are forgotten first."""


class Pending:
    """A submission not answered yet, and on how many connections it was written."""

    __slots__ = ("copies", "submission")

    def __init__(self, submission: Submission) -> None:
        self.submission = submission
        self.copies = 0


class Outbox:
    """The connection to write to, and the unanswered submissions by id.

    ``check_open`` runs before each write, under the lock: it raises once the
    client's stream has ended, so nothing is sent after ``shutdown_complete``.
    """

    def __init__(self, check_open: Callable[[], None]) -> None:
        self._check_open = check_open
        self.link: Link | None = None
        """The connection in use; None while reconnecting (and once the client ended)."""
        self._lock = asyncio.Lock()
        self._pending: dict[str, Pending] = {}
        self._extra_acks: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.room = asyncio.Event()
        """Set when a submission is answered (or the client ends): one waiting for room
        to submit looks again."""

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._pending

    # --- the connection ------------------------------------------------------------------

    async def adopt(self, link: Link) -> tuple[str, ...]:
        """Take ``link``, just welcomed, into use and write every unanswered submission
        on it again; their ids."""
        async with self._lock:
            self.link = link
            resent = tuple(self._pending)
            for entry in self._pending.values():
                link.write(encode_submission(entry.submission) + b"\n")
                entry.copies += 1
            if resent:
                try:
                    await link.drain()
                except (ConnectionError, OSError) as exc:
                    link.abort(f"resending failed: {exc!r}")
        return resent

    async def drop(self, link: Link) -> None:
        """``link`` was lost: writes wait for the next connection (unless one is in use)."""
        async with self._lock:
            if self.link is link:
                self.link = None

    def take(self) -> Link | None:
        """The client ended: the connection in use, for the caller to close; none after."""
        link, self.link = self.link, None
        return link

    # --- writing -------------------------------------------------------------------------

    async def send(self, submission: Submission) -> None:
        """Write ``submission`` now if connected, else on the next connection; either way
        it is unanswered until its answer comes."""
        line = encode_submission(submission) + b"\n"
        async with self._lock:
            self._check_open()
            entry = self._pending[submission.id] = Pending(submission)
            link = self.link
            if link is None or link.closing:
                return  # sent when the connection is back
            link.write(line)
            entry.copies += 1
            try:
                await link.drain()
            except (ConnectionError, OSError) as exc:
                link.abort(f"writing failed: {exc!r}")  # the reader reconnects and resends

    async def write_json(self, value: dict[str, Any]) -> None:
        """Write ``value`` as one line now; ConnectionError while reconnecting (no copy
        is kept: the caller retries)."""
        async with self._lock:
            self._check_open()
            link = self.link
            if link is None or link.closing:
                raise ConnectionError("not connected (reconnecting)")
            link.write(orjson.dumps(value) + b"\n")
            await link.drain()

    # --- answers ---------------------------------------------------------------------------

    def answered(self, sub_id: str) -> Pending | None:
        """``sub_id`` is answered: no longer unanswered; what it was, None if it was not."""
        entry = self._pending.pop(sub_id, None)
        if entry is not None:
            self.room.set()
        return entry

    def first_ack(self, sub_id: str) -> bool:
        """An ack arrived: is it the first for ``sub_id``? A submission resent after a
        reconnect may be acknowledged once per copy (``duplicate: true`` for the later
        ones): the UI sees one answer."""
        entry = self.answered(sub_id)
        if entry is not None:
            if entry.copies > 1:
                self._extra_acks[sub_id] = entry.copies - 1
                while len(self._extra_acks) > MAX_RESENT_TRACKED:
                    self._extra_acks.popitem(last=False)
            return True
        extra = self._extra_acks.get(sub_id)
        if extra is None:
            return True
        if extra <= 1:
            del self._extra_acks[sub_id]
        else:
            self._extra_acks[sub_id] = extra - 1
        log.debug("an ack of a resent copy", sub_id=sub_id)
        return False
