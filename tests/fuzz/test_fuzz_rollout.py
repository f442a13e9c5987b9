"""Fuzz: session files (rollouts) as the engine reads them back.

Contracts (from the docstrings): a torn or unreadable line is skipped on read,
never fatal. ``read_records`` yields only objects; ``read_events`` and
``list_sessions`` never fail on a file's content; ``load_session`` rebuilds the
session or raises ``UnknownSession``, and what it rebuilds has the shapes the
engine relies on.
"""

from __future__ import annotations

import datetime
import tempfile
from pathlib import Path
from typing import Any, get_args

import attrs
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from codexcore.engine._config import SessionConfig
from codexcore.engine._rollout import (
    BadRollout,
    RolloutWriter,
    UnknownSession,
    config_record,
    journal,
    meta_record,
)
from codexcore.engine._rollout_reader import list_sessions, load_session, read_events, read_records
from codexcore.protocol import ConfigureSession, Event, SandboxPolicy, SessionSummary
from codexcore.protocol._types import ApprovalPolicy, HistoryMode, ReasoningEffort, SandboxMode

from .. import protocol_samples as samples
from . import strategies as s
from .conftest import attempt, fuzz

SESSION_ID = "7d7bcf52-3c38-4f4c-a0c3-4c1f0d1b8e6a"
_NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)
_USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
_CALL = {
    "type": "function_call",
    "call_id": "c1",
    "name": "shell",
    "arguments": '{"command":["ls"]}',
}
_OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "a\nb"}
_REPLY = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "ok"}],
}


def _valid_lines() -> list[bytes]:
    """A rollout as the engine writes one: meta, config, turns, tool outputs, a fork, events."""
    with tempfile.TemporaryDirectory() as directory:
        writer = RolloutWriter(Path(directory, "r.jsonl"))
        writer.record(meta_record(SESSION_ID, _NOW, "/work", None))
        writer.record(config_record(SessionConfig(cwd="/work", sandbox_policy=samples.SANDBOX)))
        record = journal(writer)
        record("turn", (_USER, _CALL), "resp_1")
        record("tool_outputs", (_OUTPUT,), "resp_1")
        record("turn", (_REPLY,), "resp_2")
        record("fork", (), "resp_1")
        for seq, msg in enumerate(samples.EVENT_MSGS[:6]):
            writer.record_event(Event("sub-1", seq, msg))
        writer.close()
        return Path(directory, "r.jsonl").read_bytes().splitlines(keepends=True)


VALID_LINES = _valid_lines()
_RECORDS = [orjson.loads(line) for line in VALID_LINES]


@st.composite
def rollouts(draw: st.DrawFn) -> bytes:
    """A rollout with records mutated as JSON, lines damaged, dropped or repeated, and
    perhaps a torn last line."""
    lines = list(VALID_LINES)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines) - 1))
        how = draw(st.integers(0, 5))
        if how <= 2:
            record = draw(s.mutated(_RECORDS[at % len(_RECORDS)]))
            lines[at] = s.dumps(record, duplicate=how == 0) + b"\n"
        elif how == 3:
            lines[at] = draw(s.mangled(lines[at]))
        elif how == 4:
            lines.insert(at, draw(st.binary(max_size=20)) + b"\n")
        else:
            del lines[at]
    body = b"".join(lines)
    if draw(st.integers(0, 3)) == 0:  # a crash in the middle of a write
        body = body[: draw(st.integers(0, len(body)))]
    return body


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home for every case, its session file rewritten each time (creating and
    removing directories per case costs more than the case on a journalled disk);
    beside the file, a directory named like a session file."""
    home = tmp_path_factory.mktemp("codexcore-home")
    (home / "sessions" / "2026" / "11" / "22" / f"rollout-{_STAMP}-other.jsonl").mkdir(parents=True)
    return home


_STAMP = "2026-11-22T12-00-00"


def _replacing(index: int, record: dict[str, Any]) -> bytes:
    """The valid rollout with its line ``index`` replaced by ``record``."""
    lines = list(VALID_LINES)
    lines[index] = orjson.dumps(record) + b"\n"
    return b"".join(lines)


@given(body=rollouts())
# Found by this test: each of these made listing or loading fail with an internal
# error (KeyError, AttributeError, TypeError) or load a configuration with the wrong
# types; a directory named like a session file (the fixture makes one) broke listing.
@example(body=_replacing(1, {"type": "config"}))
@example(body=_replacing(1, {"type": "config", "config": {"model": None, "cwd": 5}}))
@example(body=_replacing(1, {"type": "config", "config": {"sandbox_policy": {"type": 1}}}))
@example(body=_replacing(2, {"type": "turn", "items": [1], "response_id": "r"}))
@example(body=_replacing(2, {"type": "turn", "items": "ab", "response_id": "r"}))
@example(body=_replacing(2, {"type": "turn", "items": [], "response_id": ["r"]}))
@example(
    body=_replacing(
        2, {"type": "turn", "items": [{"type": "message", "role": "user", "content": [1]}]}
    )
)
@example(body=_replacing(0, {"type": "session_meta", "session_id": "s", "forked_from": False}))
@example(body=_replacing(5, {"type": "fork", "items": 1, "response_id": "resp_1"}))
@example(body=_replacing(2, {"type": "turn", "items": []}))
# An event record whose event has no message (found by this test, 2026-11-25).
@example(body=_replacing(6, {"type": "event", "event": {"id": "x", "seq": 0, "msg": None}}))
@example(body=_replacing(6, {"type": "event", "event": None}))
@example(
    body=_replacing(
        3,
        {
            "type": "tool_outputs",
            "items": [{"type": "function_call_output", "call_id": ["c1"], "output": "x"}],
            "response_id": "resp_1",
        },
    )
)
@fuzz(3_000)
def test_reading_a_session_file_never_fails_on_its_content(home: Path, body: bytes) -> None:
    """A file's content can make it *bad* (BadRollout: skipped and named when listing,
    refused when loading), never raise anything else, and what loads is well formed."""
    path = home / "sessions" / "2026" / "11" / "22" / f"rollout-{_STAMP}-{SESSION_ID}.jsonl"
    path.write_bytes(body)
    records, bad = attempt(lambda: list(read_records(path)), BadRollout)
    if bad is None:
        assert all(isinstance(record, dict) for record in records)
        assert all(isinstance(event, Event) for event in read_events(path))
    skipped: list[BadRollout] = []
    for summary in list_sessions(home, on_bad=skipped.append):
        _assert_well_formed_summary(summary)
    # The directory named like a session file (the fixture's) is always named.
    assert any("is a directory" in str(exc) for exc in skipped), skipped
    loaded, error = attempt(lambda: load_session(home, SESSION_ID), UnknownSession, BadRollout)
    if error is None:
        _assert_well_formed_config(loaded.config)
        assert all(isinstance(item, dict) for item in loaded.history.items())


def _assert_well_formed_summary(summary: SessionSummary) -> None:
    for field in ("session_id", "created_at", "updated_at", "cwd", "path"):
        assert isinstance(getattr(summary, field), str), (field, summary)
    assert isinstance(summary.message_count, int)
    for field in ("first_user_message", "last_user_message", "forked_from"):
        assert getattr(summary, field) is None or isinstance(getattr(summary, field), str)


def _assert_well_formed_config(config: SessionConfig) -> None:
    """Each field holds what its annotation says (the engine uses them unchecked)."""
    for name in ("model", "instructions", "cwd"):
        assert isinstance(getattr(config, name), str), (name, config)
    assert config.base_url is None or isinstance(config.base_url, str)
    assert config.approval_policy in get_args(ApprovalPolicy)
    assert config.history_mode in get_args(HistoryMode)
    assert config.reasoning_effort is None or config.reasoning_effort in get_args(ReasoningEffort)
    policy = config.sandbox_policy
    assert isinstance(policy, SandboxPolicy)
    assert policy.type in get_args(SandboxMode)
    assert isinstance(policy.writable_roots, tuple)
    assert all(isinstance(root, str) for root in policy.writable_roots)
    assert isinstance(policy.network_access, bool)


def test_a_recorded_configuration_loads_exactly(home: Path) -> None:
    """The reader decodes a config record with configure_session's decoder: the two
    must keep the same fields, and a valid record must load as it was written."""
    assert {f.name for f in attrs.fields(SessionConfig)} == {
        f.name for f in attrs.fields(ConfigureSession)
    }
    path = home / "sessions" / "2026" / "11" / "22" / f"rollout-{_STAMP}-{SESSION_ID}.jsonl"
    path.write_bytes(b"".join(VALID_LINES))
    loaded = load_session(home, SESSION_ID)
    assert loaded.config == SessionConfig(cwd="/work", sandbox_policy=samples.SANDBOX)
    assert [item["type"] for item in loaded.history.items()] == [
        "message",
        "function_call",
        "function_call_output",
    ]
