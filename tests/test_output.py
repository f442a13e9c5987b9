"""HeadTailBuffer, truncate_middle and format_for_model."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codexcore.tools.exec import ExecResult
from codexcore.tools.output import (
    HeadTailBuffer,
    format_for_model,
    omission_marker,
    truncate_middle,
)


def _feed(buffer: HeadTailBuffer, chunks: list[bytes]) -> HeadTailBuffer:
    for chunk in chunks:
        buffer.append(chunk)
    return buffer


def _result(
    output: str, *, exit_code: int = 0, duration_ms: int = 0, timed_out: bool = False
) -> ExecResult:
    return ExecResult(
        exit_code=exit_code,
        stdout=output,
        stderr="",
        aggregated_output=output,
        duration_ms=duration_ms,
        timed_out=timed_out,
    )


# ---------------------------------------------------------------------------
# HeadTailBuffer


def test_buffer_under_the_limit_keeps_everything() -> None:
    buffer = _feed(HeadTailBuffer(10), [b"abc", b"def"])
    assert buffer.decode() == "abcdef"
    assert (buffer.total_bytes, buffer.omitted_bytes) == (6, 0)


def test_buffer_over_the_limit_keeps_head_and_tail() -> None:
    buffer = _feed(HeadTailBuffer(6), [b"0123", b"4567", b"89"])
    assert buffer.omitted_bytes == 4
    assert buffer.total_bytes == 10
    assert buffer.decode() == "012" + omission_marker(4) + "789"


def test_buffer_with_odd_limit_gives_the_extra_byte_to_the_tail() -> None:
    buffer = _feed(HeadTailBuffer(5), [b"abcdefghij"])
    assert buffer.decode() == "ab" + omission_marker(5) + "hij"


def test_buffer_with_zero_limit_only_counts() -> None:
    buffer = _feed(HeadTailBuffer(0), [b"abc", b"de"])
    assert buffer.decode() == omission_marker(5)
    assert buffer.total_bytes == 5


def test_buffer_rejects_negative_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        HeadTailBuffer(-1)


def test_buffer_decode_does_not_split_characters_at_the_cut() -> None:
    # "é" is 2 bytes: the head ends and the tail starts inside one.
    data = "aé" + "x" * 20 + "éb"
    buffer = _feed(HeadTailBuffer(4), [data.encode()])
    text = buffer.decode()
    assert "\ufffd" not in text
    assert text == "a" + omission_marker(len(data.encode()) - 2) + "b"


def test_buffer_decode_replaces_invalid_utf8() -> None:
    assert _feed(HeadTailBuffer(100), [b"a\xffb"]).decode() == "a\ufffdb"


def test_buffer_ends_with() -> None:
    buffer = _feed(HeadTailBuffer(4), [b"abc\n"])
    assert buffer.ends_with(b"\n")
    buffer.append(b"xyz")
    assert not buffer.ends_with(b"\n")
    assert buffer.ends_with(b"yz")


@given(
    chunks=st.lists(st.binary(max_size=50), max_size=20),
    limit=st.integers(min_value=0, max_value=64),
)
def test_buffer_keeps_exactly_the_first_and_last_bytes(chunks: list[bytes], limit: int) -> None:
    data = b"".join(chunks)
    buffer = _feed(HeadTailBuffer(limit), chunks)
    assert buffer.total_bytes == len(data)
    if len(data) <= limit:
        assert buffer.omitted_bytes == 0
        return
    head, tail = limit // 2, limit - limit // 2
    assert buffer.omitted_bytes == len(data) - limit
    # Compare with a byte-level reference: decode() of pure ASCII maps 1:1.
    ascii_chunks = [bytes(b % 128 for b in chunk) for chunk in chunks]
    ascii_data = b"".join(ascii_chunks)
    expected = (
        ascii_data[:head].decode()
        + omission_marker(len(data) - limit)
        + ascii_data[len(ascii_data) - tail :].decode()
    )
    assert _feed(HeadTailBuffer(limit), ascii_chunks).decode() == expected


@given(text=st.text(max_size=200), limit=st.integers(min_value=0, max_value=64))
def test_buffer_decode_of_valid_utf8_has_no_replacement_chars(text: str, limit: int) -> None:
    text = text.replace("\ufffd", "")
    data = text.encode()
    decoded = _feed(
        HeadTailBuffer(limit), [data[i : i + 7] for i in range(0, len(data), 7)]
    ).decode()
    assert "\ufffd" not in decoded


# ---------------------------------------------------------------------------
# truncate_middle


def test_truncate_leaves_short_text_alone() -> None:
    assert truncate_middle("hello", 5) == "hello"


def test_truncate_cuts_the_middle_with_a_marker() -> None:
    assert truncate_middle("0123456789", 4) == "01" + omission_marker(6) + "89"


def test_truncate_counts_bytes_an_earlier_marker_stood_for() -> None:
    captured = "a" * 10 + omission_marker(1000) + "b" * 10
    result = truncate_middle(captured, 4)
    assert result == "aa" + omission_marker(8 + 1000 + 8) + "bb"


@given(text=st.text(max_size=300), limit=st.integers(min_value=0, max_value=100))
def test_truncate_never_breaks_characters(text: str, limit: int) -> None:
    result = truncate_middle(text, limit)
    if len(text.encode("utf-8", "surrogatepass")) <= limit:
        assert result == text
        return
    head, _, tail = result.partition(omission_marker(0)[:6])  # "\n[... "
    assert text.startswith(head)
    tail = tail.split("...]\n", 1)[1]
    assert text.endswith(tail)
    assert len(head.encode("utf-8", "surrogatepass")) <= limit // 2
    assert len(tail.encode("utf-8", "surrogatepass")) <= limit - limit // 2


def test_truncate_rejects_negative_limit() -> None:
    with pytest.raises(ValueError, match="limit_bytes"):
        truncate_middle("x", -1)


# ---------------------------------------------------------------------------
# format_for_model


def test_format_shape_matches_the_codex_shell_tool() -> None:
    payload = json.loads(format_for_model(_result("hi\n", exit_code=3, duration_ms=1234)))
    assert payload == {"output": "hi\n", "metadata": {"exit_code": 3, "duration_seconds": 1.2}}


def test_format_flags_timeouts() -> None:
    payload = json.loads(format_for_model(_result("", exit_code=124, timed_out=True)))
    assert payload["metadata"] == {"exit_code": 124, "duration_seconds": 0.0, "timed_out": True}


def test_format_bounds_the_output() -> None:
    payload = json.loads(format_for_model(_result("x" * 50_000), limit_bytes=1000))
    output = payload["output"]
    assert output == "x" * 500 + omission_marker(49_000) + "x" * 500


def test_format_keeps_non_ascii_readable() -> None:
    text = format_for_model(_result("héllo"))
    assert "héllo" in text
    assert json.loads(text)["output"] == "héllo"


def test_format_cuts_on_character_boundaries() -> None:
    output = json.loads(format_for_model(_result("€" * 1000), limit_bytes=100))["output"]
    head, marker_and_tail = output.split("\n[...", 1)
    assert head == "€" * 16  # 48 bytes: the 17th character would cross byte 50
    assert marker_and_tail.endswith("€" * 16)
    assert "bytes omitted" in marker_and_tail
