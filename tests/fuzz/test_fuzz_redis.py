"""Fuzz: the worker pool's stream entry decoders (``adapters/redis_pool/_poison.py``).

Contract: ``session_of``, ``input_of`` and ``event_of`` take any entry a Redis
stream can hold (any field names, any bytes) and either decode it or raise
:class:`Poison` with a short reason (a warning's and a dead letter's ``reason``:
bounded, never the payload); what the pool's own writers produce decodes back
to what they wrote.
"""

from __future__ import annotations

import uuid

import orjson
from hypothesis import given
from hypothesis import strategies as st

from codexcore import Rejected
from codexcore.adapters.redis_pool._poison import (
    REASON_CHARS,
    Poison,
    event_of,
    input_of,
    session_of,
)
from codexcore.protocol import Event, Submission, encode_event, encode_submission

from . import strategies as s
from .conftest import attempt, fuzz

_NAMES = st.sampled_from([b"session", b"s", b"r", b"e", b"foo", b"", b"\xff"]) | st.binary(
    max_size=8
)
_REJECTION = st.fixed_dictionaries(
    {}, optional={"id": s._LEAVES, "message": s._LEAVES, "code": s._LEAVES, "x": s._LEAVES}
).map(s.dumps)
_VALUES = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"not json", b"[1, 2]", b"{}", b"null", b'"x"', b"\xff\xfe"]),
    _REJECTION,
    s.frames(s.SUBMISSION_POOL),
    s.frames(s.EVENT_POOL, s.EVENT_WRAPPER),
    st.uuids().map(lambda u: str(u).encode()),
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
)
_ENTRIES = st.dictionaries(_NAMES, _VALUES, max_size=4)


def _named(poison: Poison) -> None:
    assert poison.reason
    assert len(poison.reason) <= REASON_CHARS
    assert isinstance(poison.submission_id, str)


@given(_ENTRIES)
@fuzz(3_000)
def test_session_of_decodes_or_names_the_poison(fields: dict[bytes, bytes]) -> None:
    session_id, error = attempt(lambda: session_of(fields), Poison)
    if isinstance(error, Poison):
        _named(error)
    else:
        assert session_id == fields[b"session"].decode()
        assert not {"{", "}"} & set(session_id)


@given(st.uuids())
@fuzz(500)
def test_a_gateway_session_entry_decodes(session: uuid.UUID) -> None:
    assert session_of({b"session": str(session).encode()}) == str(session)


@given(_ENTRIES)
@fuzz(4_000)
def test_input_of_decodes_or_names_the_poison(fields: dict[bytes, bytes]) -> None:
    item, error = attempt(lambda: input_of(fields), Poison)
    if isinstance(error, Poison):
        _named(error)
    else:
        assert isinstance(item, Submission | Rejected)


@given(s.SUBMISSIONS, st.text(max_size=20), st.text(max_size=20), st.text(max_size=20))
@fuzz(1_000)
def test_what_a_gateway_writes_decodes_back(
    submission: Submission, rid: str, message: str, code: str
) -> None:
    assert input_of({b"s": encode_submission(submission)}) == submission
    rejected = {"id": rid, "message": message, "code": code}
    assert input_of({b"r": orjson.dumps(rejected)}) == Rejected(rid, message, code)


@given(st.sampled_from([b"0-1", b"3-1", b"1795868315825-0"]), _ENTRIES)
@fuzz(3_000)
def test_event_of_decodes_or_names_the_poison(entry_id: bytes, fields: dict[bytes, bytes]) -> None:
    event, error = attempt(lambda: event_of(entry_id, fields), Poison)
    if isinstance(error, Poison):
        _named(error)
    else:
        assert isinstance(event, Event)
        assert entry_id == f"{event.seq}-1".encode()


@given(s.EVENTS)
@fuzz(1_000)
def test_what_a_worker_writes_decodes_back(event: Event) -> None:
    data = encode_event(event)
    assert event_of(f"{event.seq}-1".encode(), {b"e": data}) == event
