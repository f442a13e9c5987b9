"""The hot path of a delta-heavy run: a run's ``agent_message_delta`` events become
``agent.event`` lines without being parsed, decoded into an ``Event`` or re-encoded.

A delta is in :data:`~._events.NOT_SENT` (a Codelia UI gets the whole message),
so only a client that asked for every EventMsg (``codexcore_events``) gets a line per
delta: ``{"type": "codexcore.agent_message_delta", "delta": ...}`` with the event's
native seq as ``meta.codexcore`` (``{"seq": N}``: its id is the run's, its msg the
``event``), byte for byte what the generic path (:func:`~._runs.agent_events`,
then ``notify``) writes for it.
"""

from __future__ import annotations

import attrs
import orjson

from codexcore.protocol import AgentMessageDelta, Event

LAYOUT = [f.name for f in attrs.fields(Event)] == ["id", "seq", "msg"] and [
    f.name for f in attrs.fields(AgentMessageDelta)
] == ["delta"]
"""Whether a delta event's encoding is ``{"id":ID,"seq":N,"msg":{"type":...,"delta":TEXT}}``,
which :func:`take_deltas` cuts without parsing; if it ever fails, deltas are parsed."""

_MIDDLE = b',"msg":{"type":"' + AgentMessageDelta.TYPE.encode() + b'","delta":'
_EVENT = b',"event":{"type":"codexcore.' + AgentMessageDelta.TYPE.encode() + b'","delta":'
_META = b'},"meta":{"codexcore":{"seq":'
_END = b"}}}}\n"


def event_head(run_id: str) -> bytes:
    """How the native encoding of each of ``run_id``'s events begins."""
    return b'{"id":' + orjson.dumps(run_id) + b',"seq":'


def is_delta(head: bytes, data: bytes) -> bool:
    """Whether ``data`` is a delta :func:`take_deltas` takes, of the run whose
    :func:`event_head` is ``head``: a check that spares every other event the hot path."""
    if not LAYOUT or not data.startswith(head):
        return False
    comma = data.find(b",", len(head))
    return comma > 0 and data.startswith(_MIDDLE, comma)


def take_deltas(
    run_id: str, seq: int, batch: list[bytes], start: int, into: list[bytes] | None
) -> tuple[int, int]:
    """Take the run of ``run_id``'s delta events at ``batch[start:]``: with ``into``, add
    each one's ``agent.event`` line (numbered from ``seq``) to it; without, skip them.

    Returns the index of the first event not taken and the next ``seq``. An event of
    another run, of another type or encoded otherwise stops the run of deltas.
    """
    if not LAYOUT:
        return start, seq
    rid = orjson.dumps(run_id)
    head = event_head(run_id)
    line_head = b'{"jsonrpc":"2.0","method":"agent.event","params":{"run_id":' + rid + b',"seq":'
    # One formatting a line (the run's seq, the delta's text, its native seq): no
    # intermediate bytes. The native seq ends at the first comma after ``head``.
    line = line_head.replace(b"%", b"%%") + b"%d" + _EVENT + b"%s" + _META + b"%s" + _END
    after_head, after_middle = len(head), len(_MIDDLE)
    at, end = start, len(batch)
    while at < end:
        data = batch[at]
        comma = data.find(b",", after_head)
        if (
            comma < 0
            or not data.startswith(head)
            or not data.startswith(_MIDDLE, comma)
            or not data.endswith(b"}}")
        ):
            break
        at += 1
        if into is not None:
            into.append(line % (seq, data[comma + after_middle : -2], data[after_head:comma]))
            seq += 1
    return at, seq
