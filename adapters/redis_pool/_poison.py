"""Poison entries: stream entries a reader of the pool cannot decode.

Every stream the pool reads has one decoder here, and every decoder one way
to fail, :class:`Poison`, naming why in at most ``REASON_CHARS`` characters
(which field, what is wrong with it: never the payload, which may carry
secrets). The reader then moves the entry aside with
:meth:`DeadLetters.move` and goes on with the next entry: one bad entry
(a foreign producer, a codexcore of another version, a hand-typed ``XADD``)
never stops a worker, a session or a gateway.

Moving aside is: acknowledged (``XACK`` when the stream is read in a
consumer group), deleted from its stream, logged at warning with the stream,
the entry id and the reason, and appended with its original fields (each
as ``f:<name>``) and the reason to the dead-letter stream
(``<prefix>:dead-letter``, trimmed to about ``PoolConfig.dead_letter_maxlen``
entries). The ``XDEL`` decides who appends: when several readers meet the
same entry (every gateway follows a session's events), only the one whose
``XDEL`` removed it writes the dead letter.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from redis.exceptions import RedisError

from codexcore._logging import get_logger
from codexcore.engine import Rejected
from codexcore.protocol import Event, ProtocolError, Submission, decode_event, decode_submission

from ._keys import Keys, event_id

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = get_logger(__name__)

Fields = dict[bytes, bytes]

DEAD_LETTER_MAXLEN = 10_000
"""Dead letters kept (approximately: Redis trims whole nodes)."""

SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""What a session id on the sessions stream may be (gateways make UUIDs): no braces,
which would move its keys to another hash slot, and no spaces or control characters."""

REASON_CHARS = 200
LOGGED_FIELDS = 8


class Poison(Exception):
    """An entry that cannot be decoded; ``reason`` says why (bounded, never the payload).

    ``submission_id`` is the id of the submission it was meant to be, when that
    much could be read (its ``error`` event then goes under that id).
    """

    def __init__(self, reason: str, submission_id: str = "") -> None:
        super().__init__(reason[:REASON_CHARS])
        self.reason = reason[:REASON_CHARS]
        self.submission_id = submission_id


def session_of(fields: Fields) -> str:
    """The session an entry of the sessions stream offers."""
    raw = fields.get(b"session")
    if raw is None:
        raise Poison("no 'session' field")
    try:
        session_id = raw.decode()
    except UnicodeDecodeError:
        raise Poison("the 'session' field is not UTF-8") from None
    if not SESSION_ID.fullmatch(session_id):
        raise Poison("the 'session' field is not a session id")
    return session_id


def input_of(fields: Fields) -> Submission | Rejected:
    """A submission a gateway accepted (``s``), or one it could not pass on (``r``)."""
    if b"r" in fields:
        return _rejected_of(fields[b"r"])
    data = fields.get(b"s")
    if data is None:
        raise Poison("neither an 's' (submission) nor an 'r' (rejection) field")
    try:
        return decode_submission(data)
    except ProtocolError as exc:
        raise Poison(f"'s' is not a submission: {exc.message}", exc.submission_id) from None


def _rejected_of(data: bytes) -> Rejected:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise Poison("'r' is not JSON") from None
    if not isinstance(value, dict):
        raise Poison("'r' is not a JSON object")
    sub_id = value.get("id")
    sub_id = sub_id if isinstance(sub_id, str) else ""
    missing = [k for k in ("id", "message", "code") if not isinstance(value.get(k), str)]
    if missing:
        raise Poison(f"'r' lacks the string field(s) {', '.join(missing)}", sub_id)
    return Rejected(value["id"], value["message"], value["code"])


def event_of(entry_id: bytes, fields: Fields) -> Event:
    """An event a worker wrote to a session's event stream, under the entry id its
    seq gives (an event under another id was not written by an owner)."""
    data = fields.get(b"e")
    if data is None:
        raise Poison("no 'e' (event) field")
    try:
        event = decode_event(data)
    except ProtocolError as exc:
        raise Poison(f"'e' is not an event: {exc.message}") from None
    if entry_id != event_id(event.seq).encode():
        raise Poison(f"an event of seq {event.seq} under another entry id")
    return event


def field_names(fields: Fields) -> list[str]:
    """The first few field names, for a log line (the values stay out of it)."""
    return [name[:32].decode(errors="replace") for name in list(fields)[:LOGGED_FIELDS]]


class DeadLetters:
    """Moves poison entries aside for one reader (``reader`` names it in the dead letter)."""

    def __init__(self, redis: Redis, keys: Keys, maxlen: int, reader: str) -> None:
        self._redis = redis
        self.key = keys.dead_letter
        self._maxlen = maxlen
        self._reader = reader
        self._moves: set[asyncio.Task[bool]] = set()

    async def move(
        self,
        stream: str,
        entry_id: bytes | str,
        fields: Fields,
        poison: Poison,
        *,
        group: str | None = None,
        deleted: bool = False,
    ) -> bool:
        """Acknowledge, delete, log and dead-letter one entry (``deleted``: a script
        took it out already); True once it is out of its stream, whoever moved it.

        Redis trouble is logged, not raised, and answers False: the entry then stays
        where it was (still pending, for a consumer group, so a later claim tries again).
        """
        entry = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        log.warning(
            "poison entry moved aside",
            stream=stream,
            id=entry,
            why=poison.reason,
            fields=field_names(fields),
            dead_letter=self.key,
            reader=self._reader,
        )
        redis: Any = self._redis
        try:
            if not deleted:
                async with redis.pipeline(transaction=True) as pipe:
                    if group is not None:
                        pipe.xack(stream, group, entry)
                    pipe.xdel(stream, entry)
                    if not (await pipe.execute())[-1]:
                        return True  # another reader moved it first
            letter: dict[Any, Any] = {
                "stream": stream,
                "id": entry,
                "reason": poison.reason,
                "reader": self._reader,
            }
            letter.update({b"f:" + name: value for name, value in fields.items()})
            await redis.xadd(self.key, letter, maxlen=self._maxlen, approximate=True)
        except (RedisError, OSError) as exc:
            log.warning(
                "could not move a poison entry aside", stream=stream, id=entry, error=str(exc)
            )
            return False
        return True

    def move_soon(
        self,
        stream: str,
        entry_id: bytes,
        fields: Fields,
        poison: Poison,
        *,
        deleted: bool = False,
        then: Callable[[bool], None] | None = None,
    ) -> None:
        """:meth:`move` from code that may not wait; ``then`` gets its answer."""
        task = asyncio.create_task(self.move(stream, entry_id, fields, poison, deleted=deleted))
        self._moves.add(task)
        task.add_done_callback(self._moves.discard)
        if then is not None:
            task.add_done_callback(lambda done: then(not done.cancelled() and done.result()))
