"""Fuzz: the native NDJSON framing, the Submission/Event codec and the handshake.

Contracts (from the docstrings): ``LineReader`` splits any byte stream the same
way whatever its chunking; ``decode_line`` never raises (a bad line is a
``Rejected`` with a code); ``decode_submission``, ``decode_event``,
``decode_hello``, ``decode_connection_msg`` and ``decode_server_message`` raise
only ``ProtocolError``; a client's ``parse_line`` raises only ``RemoteError``.
Valid values round-trip.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from codexcore import Rejected
from codexcore.adapters.client._link import Skipped, parse_line
from codexcore.adapters.client._types import RemoteError
from codexcore.adapters.transports._framing import LineReader, LineTooLong, decode_line
from codexcore.protocol import (
    Event,
    Hello,
    ProtocolError,
    Submission,
    decode_connection_msg,
    decode_event,
    decode_hello,
    decode_server_message,
    decode_submission,
    encode_connection_msg,
    encode_event,
    encode_submission,
    to_wire,
)
from codexcore.protocol._codec import MAX_NESTING

from . import strategies as s
from .conftest import attempt, fuzz

_SUBMISSION_FRAMES = s.frames(s.SUBMISSION_POOL)
_EVENT_FRAMES = s.frames(s.EVENT_POOL, s.EVENT_WRAPPER)
_CONNECTION_FRAMES = s.frames(s.CONNECTION_POOL)
_ANY_FRAME = st.one_of(_SUBMISSION_FRAMES, _EVENT_FRAMES, _CONNECTION_FRAMES)


# --- framing ---------------------------------------------------------------------------


def _read(reader: LineReader, chunks: list[bytes]) -> list[bytes | LineTooLong]:
    items: list[bytes | LineTooLong] = []
    for chunk in chunks:
        items += reader.feed(chunk)
        assert reader.buffered <= reader.limit
    return items + reader.finish()


def _expected_lines(stream: bytes, limit: int) -> list[bytes | LineTooLong]:
    """The specification, written plainly: split at ``\\n``; an over-long line is reported."""
    lines = stream.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line if len(line) <= limit else LineTooLong(limit) for line in lines]


@given(
    st.lists(_ANY_FRAME | st.sampled_from([b"", b" ", b"\r"]), max_size=4).map(b"\n".join),
    st.integers(1, 80),
    st.data(),
)
@fuzz(6_000)
def test_line_reader_is_chunking_independent(
    stream: bytes, limit: int, data: st.DataObject
) -> None:
    chunks = data.draw(s.chunked(stream))
    assert _read(LineReader(limit), chunks) == _expected_lines(stream, limit)


# --- a server reading a client's lines -----------------------------------------------------


@given(_ANY_FRAME)
@fuzz(12_000)
def test_decode_line_answers_every_line(line: bytes) -> None:
    decoded = decode_line(line)
    assert isinstance(decoded, Submission | Rejected | Hello)
    if isinstance(decoded, Rejected):
        assert decoded.message
        assert decoded.code in {
            "invalid_utf8",
            "invalid_json",
            "not_an_object",
            "bad_hello",
            "bad_submission",
        }


@given(_SUBMISSION_FRAMES)
@fuzz(10_000)
def test_decode_submission_raises_only_protocol_error(line: bytes) -> None:
    submission, error = attempt(lambda: decode_submission(line), ProtocolError)
    if isinstance(error, ProtocolError):
        assert error.message
        assert isinstance(error.submission_id, str)
    else:
        assert isinstance(submission, Submission)
        # What was accepted encodes back to a frame that decodes to the same value.
        assert decode_submission(encode_submission(submission)) == submission


@given(s.SUBMISSIONS)
@fuzz(6_000)
def test_submissions_round_trip(submission: Submission) -> None:
    line = encode_submission(submission)
    assert decode_submission(line) == submission
    assert decode_line(line) == submission


# --- a client reading a server's lines -----------------------------------------------------


@given(_EVENT_FRAMES)
# Found by this test: 200 nested events ended decode_event in RecursionError, and
# 100 decoded into an Event the encoder could not write back (orjson's depth limit).
@example(s.nested_events(100))
@example(s.nested_events(200))
@fuzz(10_000)
def test_decode_event_raises_only_protocol_error(line: bytes) -> None:
    event, error = attempt(lambda: decode_event(line), ProtocolError)
    if isinstance(error, ProtocolError):
        assert error.message
    else:
        assert isinstance(event, Event)
        assert decode_event(encode_event(event)) == event


@given(s.EVENTS)
@fuzz(5_000)
def test_events_round_trip(event: Event) -> None:
    assert decode_event(encode_event(event)) == event


@given(_ANY_FRAME)
@example(s.nested_events(200))
@fuzz(7_000)
def test_client_parse_line_raises_only_remote_error(line: bytes) -> None:
    parsed, error = attempt(lambda: parse_line(line), RemoteError)
    if error is not None:
        assert str(error)
    else:
        assert parsed is None or isinstance(parsed, Event | Skipped) or hasattr(parsed, "TYPE")


# --- the handshake -------------------------------------------------------------------------


@given(_CONNECTION_FRAMES)
@fuzz(7_000)
def test_handshake_decoders_raise_only_protocol_error(line: bytes) -> None:
    for decode in (decode_hello, decode_connection_msg, decode_server_message):
        decoded, error = attempt(lambda: decode(line), ProtocolError)  # noqa: B023
        if isinstance(error, ProtocolError):
            assert error.message
        else:
            assert decode_server_message(orjson.dumps(to_wire(decoded))) == decoded


@given(s.CONNECTION_MSGS_)
@fuzz(4_000)
def test_connection_msgs_round_trip(msg: Any) -> None:
    line = encode_connection_msg(msg)
    assert decode_connection_msg(line) == msg
    assert decode_server_message(line) == msg
    if isinstance(msg, Hello):
        assert decode_hello(line) == msg
        assert decode_line(line) == msg


def test_events_nested_past_the_limit_are_a_protocol_error() -> None:
    """Outside Hypothesis (which raises the recursion limit while it runs a test), as a
    server's line or a session file's record reaches the decoder."""
    for depth in (MAX_NESTING + 1, 300):
        with pytest.raises(ProtocolError, match=f"nested more than {MAX_NESTING} deep"):
            decode_event(s.nested_events(depth))
        assert parse_line(s.nested_events(depth)) == Skipped(1)
    assert decode_event(s.nested_events(MAX_NESTING)).seq == 1
