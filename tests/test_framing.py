"""The NDJSON line reader and the native dialect's line decoder: pure, fed plain bytes."""

from __future__ import annotations

import itertools

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codexcore import Rejected
from codexcore.adapters.transports._framing import LineReader, LineTooLong, decode_line, is_blank
from codexcore.protocol import Hello, Interrupt, Peer, Submission


def feed_all(reader: LineReader, chunks: list[bytes]) -> list[bytes | LineTooLong]:
    items: list[bytes | LineTooLong] = []
    for chunk in chunks:
        items += reader.feed(chunk)
    return items + reader.finish()


def test_lines_come_out_whole_without_their_newline() -> None:
    reader = LineReader()
    assert reader.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert reader.feed(b":2}\n\n") == [b'{"b":2}', b""]
    assert reader.buffered == 0


def test_an_unterminated_last_line_is_still_a_line_at_the_end() -> None:
    reader = LineReader()
    assert reader.feed(b'{"a":1}') == []
    assert reader.finish() == [b'{"a":1}']
    assert reader.finish() == []


def test_a_line_of_exactly_the_limit_passes() -> None:
    reader = LineReader(limit=4)
    assert reader.feed(b"abcd\nabcde\nab") == [b"abcd", LineTooLong(4)]
    assert reader.feed(b"cd\n") == [b"abcd"]


def test_an_over_long_line_is_reported_once_and_never_held() -> None:
    reader = LineReader(limit=10)
    items = reader.feed(b"ok\n" + b"x" * 8)
    assert items == [b"ok"]
    assert reader.buffered == 8
    assert reader.feed(b"xxx") == [LineTooLong(10)]  # reported the moment it crosses
    for _ in range(1000):  # a megabyte more of the same line: nothing kept, nothing said
        assert reader.feed(b"y" * 1000) == []
        assert reader.buffered == 0
    assert reader.feed(b"yyy\nnext\n") == [b"next"]


def test_an_over_long_line_inside_one_chunk() -> None:
    reader = LineReader(limit=3)
    assert reader.feed(b"a\nbbbbbbb\nc\n") == [b"a", LineTooLong(3), b"c"]


def test_an_over_long_line_cut_by_the_end_of_input() -> None:
    reader = LineReader(limit=3)
    assert reader.feed(b"abcdef") == [LineTooLong(3)]
    assert reader.finish() == []


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        LineReader(limit=0)


STREAM = (
    b'{"id":"s1","op":{"type":"interrupt"}}\n'
    b"\xff\xfe not utf-8\n"
    + b"z" * 46
    + b"\n"
    + '{"id":"\u00e9\u4e2d","op":{"type":"interrupt"}}\n'.encode()
    + b"\n"
    b"tail"
)
EXPECTED = [
    b'{"id":"s1","op":{"type":"interrupt"}}',
    b"\xff\xfe not utf-8",
    LineTooLong(45),
    '{"id":"\u00e9\u4e2d","op":{"type":"interrupt"}}'.encode(),
    b"",
    b"tail",
]


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_splitting_the_input_anywhere_changes_nothing(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    reader = LineReader(limit=45)
    assert feed_all(reader, chunks) == EXPECTED


def test_byte_by_byte() -> None:
    reader = LineReader(limit=45)
    chunks = [STREAM[i : i + 1] for i in range(len(STREAM))]
    items = []
    for chunk in chunks:
        items += reader.feed(chunk)
        assert reader.buffered <= 45
    assert items + reader.finish() == EXPECTED


@given(st.binary(max_size=300), st.integers(min_value=1, max_value=40))
def test_never_more_than_the_limit_buffered(data: bytes, limit: int) -> None:
    reader = LineReader(limit=limit)
    out = []
    for i in range(0, len(data), 7):
        out += reader.feed(data[i : i + 7])
        assert reader.buffered <= limit
    out += reader.finish()
    lines = [x for x in out if isinstance(x, bytes)]
    assert all(len(line) <= limit and b"\n" not in line for line in lines)
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    assert len(out) == len(expected)
    for got, want in zip(out, expected, strict=True):
        assert got == (want if len(want) <= limit else LineTooLong(limit))


# --- what a line means ------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "code", "message"),
    [
        (b"{", "invalid_json", "invalid JSON"),
        (b'{"id": "a",}', "invalid_json", "invalid JSON"),
        (b"\xff\xfe{}", "invalid_utf8", "not valid UTF-8 (byte 0xff at offset 0)"),
        (b'{"id": "\xe9"}', "invalid_utf8", "byte 0xe9 at offset 8"),
        (b"[1, 2]", "not_an_object", "got an array"),
        (b'"text"', "not_an_object", "got a string"),
        (b"42", "not_an_object", "got a number"),
        (b"null", "not_an_object", "got null"),
        (b"true", "not_an_object", "got a boolean"),
        (b'{"op": {"type": "interrupt"}}', "bad_submission", "id: missing required field"),
        (b'{"id": "s", "op": {"type": "dance"}}', "bad_submission", "unknown Op type"),
        (b'{"type": "hello", "protocol_version": 1}', "bad_hello", "client: missing"),
    ],
)
def test_malformed_lines_are_rejected_with_a_code(line: bytes, code: str, message: str) -> None:
    decoded = decode_line(line)
    assert isinstance(decoded, Rejected)
    assert decoded.code == code
    assert message in decoded.message


def test_a_bad_submission_keeps_its_id() -> None:
    decoded = decode_line(b'{"id": "s9", "op": {"type": "dance"}}')
    assert isinstance(decoded, Rejected)
    assert decoded.id == "s9"


def test_good_lines() -> None:
    assert decode_line(b'{"id": "s1", "op": {"type": "interrupt"}}\r') == Submission(
        "s1", Interrupt()
    )
    hello = orjson.dumps(
        {"type": "hello", "protocol_version": 1, "client": {"name": "ui", "version": "2"}}
    )
    assert decode_line(hello) == Hello(1, Peer("ui", "2"))
    assert is_blank(b"  \r")
    assert is_blank(b"")
    assert not is_blank(b"{}")
