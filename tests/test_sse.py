"""The SSE decoder: WHATWG semantics, whatever the chunking."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexcore.model import ServerSentEvent, SSEDecoder
from codexcore.testing import function_call_response, text_response


def decode(chunks: Iterable[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.flush()


def realistic_stream() -> bytes:
    """A reply with reasoning, multi-byte text and a function call, as the API frames it."""
    steps = [
        *text_response("Grüße — 日本語 🚀 done", reasoning="Thinking… ✓", chunks=4).steps,
        *function_call_response("shell", {"command": ["echo", "é"]}).steps,
    ]
    return b"".join(step for step in steps if isinstance(step, bytes))


@pytest.fixture(scope="module")
def stream() -> bytes:
    return realistic_stream()


@pytest.fixture(scope="module")
def expected(stream: bytes) -> list[ServerSentEvent]:
    return decode([stream])


def test_realistic_stream_decodes_whole(expected: list[ServerSentEvent]) -> None:
    assert len(expected) > 20
    assert expected[0].event == "response.created"
    assert all(event.data.startswith("{") for event in expected)
    assert any("🚀" in event.data for event in expected)


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_every_two_piece_split_gives_the_same_events(
    stream: bytes, expected: list[ServerSentEvent], line_end: bytes
) -> None:
    body = stream.replace(b"\n", line_end)
    for cut in range(len(body) + 1):
        assert decode([body[:cut], body[cut:]]) == expected, f"split at byte {cut}"


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_byte_by_byte_gives_the_same_events(
    stream: bytes, expected: list[ServerSentEvent], line_end: bytes
) -> None:
    body = stream.replace(b"\n", line_end)
    assert decode(body[i : i + 1] for i in range(len(body))) == expected


def test_one_event_per_chunk_matches_whole(stream: bytes, expected: list[ServerSentEvent]) -> None:
    chunks = [block + b"\n\n" for block in stream.split(b"\n\n") if block]
    assert decode(chunks) == expected


def test_crlf_and_cr_line_ends() -> None:
    body = b"event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n"
    assert decode([body]) == [
        ServerSentEvent("a", "1"),
        ServerSentEvent("b", "2"),
        ServerSentEvent("message", "3"),
    ]


def test_cr_then_lf_in_the_next_chunk_is_one_line_end() -> None:
    assert decode([b"data: x\r", b"\ndata: y\r", b"\n\r", b"\n"]) == [
        ServerSentEvent("message", "x\ny")
    ]


def test_comments_are_ignored() -> None:
    body = b": keep-alive\n\n:another\ndata: x\n: inside\n\n"
    assert decode([body]) == [ServerSentEvent("message", "x")]


def test_multi_line_data_joined_with_newlines() -> None:
    body = b"data: first\ndata:second\ndata\ndata:  indented\n\n"
    assert decode([body]) == [ServerSentEvent("message", "first\nsecond\n\n indented")]


def test_field_without_colon_has_empty_value() -> None:
    assert decode([b"data\n\n"]) == [ServerSentEvent("message", "")]
    assert decode([b"event\ndata: x\n\n"]) == [ServerSentEvent("message", "x")]


def test_only_one_leading_space_is_stripped() -> None:
    assert decode([b"event:  spaced\ndata:   x \n\n"]) == [ServerSentEvent(" spaced", "  x ")]


def test_event_without_data_is_not_dispatched() -> None:
    body = b"event: ping\n\nid: 7\n\nretry: 10\n\nevent: real\ndata: 1\n\n"
    assert decode([body]) == [ServerSentEvent("real", "1", id="7")]


def test_event_type_resets_after_dispatch() -> None:
    assert decode([b"event: a\ndata: 1\n\ndata: 2\n\n"]) == [
        ServerSentEvent("a", "1"),
        ServerSentEvent("message", "2"),
    ]


def test_id_persists_and_retry_is_per_event() -> None:
    body = b"id: 1\nretry: 250\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: x\0y\ndata: d\n\n"
    assert decode([body]) == [
        ServerSentEvent("message", "a", id="1", retry=250),
        ServerSentEvent("message", "b", id="1"),
        ServerSentEvent("message", "c", id=""),
        ServerSentEvent("message", "d", id=""),
    ]


def test_bad_retry_and_unknown_fields_are_ignored() -> None:
    body = b"retry: 1x\nfoo: bar\ndata: a\n\n"
    assert decode([body]) == [ServerSentEvent("message", "a")]


def test_leading_byte_order_mark_is_skipped() -> None:
    assert decode([b"\xef\xbb", b"\xbfdata: a\n\n"]) == [ServerSentEvent("message", "a")]
    assert decode([b"data: \xef\xbb\xbfa\n\n"]) == [ServerSentEvent("message", "\ufeffa")]


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert decode([b"data: a\xffb\n\n"]) == [ServerSentEvent("message", "a\ufffdb")]


def test_unfinished_event_is_dropped_at_end_of_stream() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n") == [ServerSentEvent("message", "a")]
    assert decoder.flush() == []
    assert decoder.feed(b"data: c\n\n") == [ServerSentEvent("message", "c")]


def test_empty_chunks_are_harmless() -> None:
    assert decode([b"", b"data: a", b"", b"\n", b"", b"\n", b""]) == [
        ServerSentEvent("message", "a")
    ]


def test_several_simple_events_in_one_chunk() -> None:
    body = b"event: a\ndata: 1\n\ndata: 2\n\nevent: c\ndata: {}\n\n"
    decoder = SSEDecoder()
    decoder.feed(b": warm up\n\n")
    assert decoder.feed(body) == [
        ServerSentEvent("a", "1"),
        ServerSentEvent("message", "2"),
        ServerSentEvent("c", "{}"),
    ]


# --- property: random events, random framing, random chunking --------------------------

_line_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]))


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    """A stream of random events and the events a decoder must produce from it."""
    line_end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    lines: list[str] = []
    expected: list[ServerSentEvent] = []
    last_id: str | None = None
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            lines.append(":" + draw(_line_text))
        name = draw(st.none() | _line_text)
        if name is not None:
            lines.append("event: " + name)
        new_id = draw(st.none() | _line_text.filter(lambda text: "\0" not in text))
        if new_id is not None:
            lines.append("id: " + new_id)
            last_id = new_id
        data = draw(st.lists(_line_text, max_size=3))
        lines += ["data: " + line for line in data]
        lines.append("")
        if data:
            expected.append(ServerSentEvent(name or "message", "\n".join(data), last_id))
    return "".join(line + line_end for line in lines).encode(), expected


@settings(max_examples=300, deadline=None)
@given(event_streams(), st.data())
def test_any_chunking_gives_the_specified_events(
    stream: tuple[bytes, list[ServerSentEvent]], data: st.DataObject
) -> None:
    body, expected = stream
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    chunks = [body[start:end] for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert decode(chunks) == expected


@settings(max_examples=300, deadline=None)
@given(event_streams(), st.data())
def test_feed_raw_gives_each_events_type_and_data(
    stream: tuple[bytes, list[ServerSentEvent]], data: st.DataObject
) -> None:
    """The model client's hot path skips event objects; it must not skip anything else."""
    body, expected = stream
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    chunks = [body[start:end] for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    decoder = SSEDecoder()
    raw = [pair for chunk in chunks for pair in decoder.feed_raw(chunk)]
    assert raw == [(event.event, event.data) for event in expected]
