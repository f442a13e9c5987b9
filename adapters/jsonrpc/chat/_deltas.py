"""Cutting ``agent_message_delta`` texts out of their events' encoding, without parsing.

A Task's deltas are most of what the chat protocol's requests stream: the
session hands them over encoded (the native wire's lines), and decoding each
into a typed event costs several times the text's own size. Each delta's text
is cut out as the JSON string it is (``..."delta":"TEXT"}}``).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import orjson

from codexcore.adapters.jsonrpc._machine import Id
from codexcore.protocol import AgentMessageDelta, Event


def _json(value: Any) -> bytes:
    """``value`` as JSON (an id beyond 64 bits too, digit for digit)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode()


_DELTA_LAYOUT = [f.name for f in attrs.fields(Event)] == ["id", "seq", "msg"] and [
    f.name for f in attrs.fields(AgentMessageDelta)
] == ["delta"]
"""Whether a delta event's encoding ends with its text (``..."delta":"TEXT"}}``), which
:meth:`_Chat.take_deltas` reads without parsing. It holds while the envelope's last field
is ``msg`` and a delta's only field is ``delta``; if it ever fails, deltas are parsed."""

_DELTA_MIDDLE = b',"msg":{"type":"' + AgentMessageDelta.TYPE.encode() + b'","delta":'

_NOT_DONE = b',"done":false,"index":%d}}\n'
_DONE = b',"done":true,"index":%d}}\n'


def event_head(sub_id: str) -> bytes:
    """How the encoding of every event of submission ``sub_id`` begins."""
    return b'{"id":' + _json(sub_id) + b',"seq":'


def line_head(request_id: Id) -> bytes:
    """How every ``stream/chunk`` of request ``request_id`` begins, up to its chunk."""
    params = b'"params":{"requestId":' + _json(request_id) + b',"chunk":'
    return b'{"jsonrpc":"2.0","method":"stream/chunk",' + params


def cut_deltas(head: bytes, batch: list[bytes], start: int) -> tuple[list[bytes], int]:
    """The texts (JSON strings) of the run of deltas at ``batch[start:]`` whose encoding
    begins with ``head``, and the index of the first event after the run."""
    if not _DELTA_LAYOUT:
        return [], start
    after_head, after_middle = len(head), len(_DELTA_MIDDLE)
    texts = []
    at, end = start, len(batch)
    while at < end:
        data = batch[at]
        if not data.startswith(head):
            break
        middle = data.find(_DELTA_MIDDLE, after_head)
        if middle < 0 or not data[after_head:middle].isdigit():
            break
        at += 1
        texts.append(data[middle + after_middle : -2])
    return texts, at
