"""Reading rollouts back: one session's records (resume, fork, its events), the
recorded sessions newest first (``sessions list``, ``list_sessions``) and pruning.

The file format and its guarantees are described in :mod:`._rollout`, which
writes them. A file that is not well formed is :class:`~._rollout.BadRollout`:
skipped and named when listing, refused when resuming or reading.
"""

from __future__ import annotations

import datetime
import glob
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import NoneType
from typing import Any

import attrs
import orjson

from .._logging import get_logger
from ..protocol import (
    ConfigureSession,
    Event,
    ProtocolError,
    SessionSummary,
    TokenCount,
    TokenUsage,
    decode_event,
    decode_submission,
)
from ..protocol._value import Value
from ..tools._safe_read import FileRefused, open_regular
from ._config import SessionConfig
from ._history import History, Item
from ._instructions import is_contextual
from ._rollout import BadRollout, UnknownSession, agent_id_of, events_of

log = get_logger(__name__)

MAX_ROLLOUT_BYTES = 1 << 30
"""The largest session file read back (resume, fork, listing, history); a larger one
is refused as bad, naming its size."""

_CHANGES = ("turn", "tool_outputs", "fork", "compacted")
_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "session_meta": {"session_id": (str,), "created_at": (str,), "cwd": (str,)},
    "config": {"config": (dict,)},
    "turn": {"items": (list,), "response_id": (str, NoneType)},
    "tool_outputs": {"items": (list,), "response_id": (str, NoneType)},
    "fork": {"response_id": (str,)},
    "compacted": {"items": (list,)},
    "event": {"event": (dict,)},
}
"""The fields each record type must have, and their JSON types. A record type
not listed here (one a newer writer added) is passed over by every reader."""


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record, in order; an unterminated last line (a torn write) is left out.

    Raises :class:`BadRollout` when the file cannot be read or a whole line is
    not a well-formed record.
    """
    for _, record in _numbered_records(path):
        yield record


def _numbered_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of the file as it was when opened (lines appended since are left
    for the next reader). Opened without blocking: anything but a regular file of at
    most :data:`MAX_ROLLOUT_BYTES` (a FIFO named like a session file) is bad."""
    try:
        file, left = open_regular(str(path), max_size=MAX_ROLLOUT_BYTES)
    except OSError as exc:
        raise BadRollout(path, _os_problem(exc)) from None
    with file:
        number = 0
        while left > 0:
            try:
                line = file.readline(left)
            except OSError as exc:
                raise BadRollout(path, _os_problem(exc)) from None
            number += 1
            left -= len(line)
            if not line.endswith(b"\n"):
                return  # the write of this line was cut short (or the file was)
            yield number, _parse(path, number, line)


def _os_problem(exc: OSError) -> str:
    if isinstance(exc, FileRefused):
        return exc.problem
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a session file"
    if isinstance(exc, PermissionError):
        return "cannot be read (permission denied)"
    return f"cannot be read ({exc.strerror or exc})"


def _parse(path: Path, number: int, line: bytes) -> dict[str, Any]:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        # orjson's own "line 1 column 7" would count within this one line only.
        reason = str(exc).split(": line ")[0]
        raise BadRollout(path, f"line {number} is not JSON ({reason})") from None
    problem = _shape_problem(record)
    if problem is not None:
        raise BadRollout(path, f"line {number} {problem}")
    assert isinstance(record, dict)
    return record


def _shape_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "is not a JSON object"
    kind = record.get("type")
    if not isinstance(kind, str):
        return "has no record type"
    for name, types in _FIELDS.get(kind, {}).items():
        if name not in record or not isinstance(record[name], types):
            return f"is a {kind} record whose {name!r} is missing or of the wrong type"
    items = record.get("items", [])  # a fork record may leave its items out
    if kind in _CHANGES and not (
        isinstance(items, list) and all(isinstance(i, dict) for i in items)
    ):
        return f"is a {kind} record whose items are not a list of objects"
    return None


_NAME_LENGTH = len("rollout-2026-01-01T00-00-00-.jsonl")


def find_rollout(home: Path, session_id: str) -> Path:
    """The rollout of the session ``session_id`` (the newest, should there be two)."""
    if not session_id or "/" in session_id or "\0" in session_id:
        raise UnknownSession(session_id)
    pattern = f"*/*/*/rollout-*-{glob.escape(session_id)}.jsonl"
    # The id must be the whole id: "*" would also match the head of a longer one.
    matches = sorted(
        path
        for path in (home / "sessions").glob(pattern)
        if len(path.name) == _NAME_LENGTH + len(session_id)
    )
    if not matches:
        raise UnknownSession(session_id)
    return matches[-1]


def recorded_agent_id(home: Path, session_id: str) -> str | None:
    """The agent id of the session recorded as ``session_id`` under ``home``; None when
    no such session is recorded or its file cannot be read."""
    try:
        path = find_rollout(home, session_id)
        for record in read_records(path):
            if record["type"] == "session_meta":
                return agent_id_of(record)
            break
    except (UnknownSession, BadRollout, OSError):
        return None
    return None


@attrs.frozen(repr=False, eq=False)
class LoadedSession(Value):
    """A recorded session rebuilt: ``token_total`` is the session's token usage so far
    (from its last ``token_count``; None when it recorded none)."""

    session_id: str
    config: SessionConfig
    history: History
    path: Path
    token_total: TokenUsage | None = None
    agent_id: str | None = None


def load_session(home: Path, session_id: str) -> LoadedSession:
    """Rebuild a recorded session's configuration and History.

    A call the History holds no output for (the process ended while it ran)
    is answered as aborted, before the next change and at the end, so the
    conversation sent next is one the API accepts. Raises
    :class:`UnknownSession` and :class:`BadRollout`.
    """
    path = find_rollout(home, session_id)
    meta = config = None
    history = History()
    number = 0
    last_count: dict[str, Any] | None = None
    for number, record in _numbered_records(path):
        kind = record["type"]
        if kind == "session_meta":
            meta = record
        elif kind == "config":
            config = _config_from(path, number, record["config"])
        elif kind in _CHANGES:
            if kind != "tool_outputs":
                _close_unanswered(history)
            history.replay(kind, tuple(record.get("items") or ()), record.get("response_id"))
        elif kind == "event" and _is_token_count(record.get("event")):
            last_count = record["event"]
    if meta is None:
        raise BadRollout(path, _missing("session_meta", path, number))
    if config is None:
        raise BadRollout(path, _missing("config", path, number))
    _close_unanswered(history)
    return LoadedSession(
        session_id, config, history, path, _token_total(last_count), agent_id_of(meta)
    )


def _is_token_count(event: Any) -> bool:
    """Whether a recorded event is a ``token_count`` (any other shape is not one)."""
    msg = event.get("msg") if isinstance(event, dict) else None
    return isinstance(msg, dict) and msg.get("type") == "token_count"


def _token_total(recorded: dict[str, Any] | None) -> TokenUsage | None:
    """The session total a recorded ``token_count`` event reports, if it is readable."""
    if recorded is None:
        return None
    try:
        msg = decode_event(recorded).msg
    except (ValueError, KeyError):
        return None
    if isinstance(msg, TokenCount) and msg.info is not None:
        return msg.info.total_token_usage
    return None


def _missing(kind: str, path: Path, records: int) -> str:
    """Why a file has no ``kind`` record."""
    if records:
        return f"has no {kind} record"
    try:
        empty = path.stat().st_size == 0
    except OSError as exc:
        return _os_problem(exc)
    return "is empty" if empty else "holds no whole line (its first write was cut short)"


def _close_unanswered(history: History) -> None:
    """Answer, as aborted, the calls of the newest Turn that nothing answered."""
    # The request builders (with the tools they describe) load with a resume, not
    # with every Session.
    from ._requests import CUT_OFF, aborted_output, unanswered_calls

    response_id, items = history.latest_turn()
    calls = unanswered_calls(items)
    if calls:
        outputs = tuple(aborted_output(call, CUT_OFF) for call in calls)
        history.replay("tool_outputs", outputs, response_id)


def _config_from(path: Path, number: int, data: dict[str, Any]) -> SessionConfig:
    """The recorded configuration, checked as a ``configure_session`` would be."""
    names = {field.name for field in attrs.fields(ConfigureSession)}
    op = {"type": "configure_session", **{k: v for k, v in data.items() if k in names}}
    try:
        submission = decode_submission({"id": "config", "op": op})
    except ProtocolError as exc:
        raise BadRollout(
            path, f"line {number} is a config record that is not valid: {exc}"
        ) from None
    assert isinstance(submission.op, ConfigureSession)
    return SessionConfig().overlay(submission.op)


def read_events(path: Path) -> list[Event]:
    """The events recorded in ``path``, oldest first (raises :class:`BadRollout`)."""
    return events_of(read_records(path))


def read_session_events(path: Path) -> list[Event]:
    """The events of the recorded session in ``path``: as :func:`read_events`, and a
    file that records no session (no ``session_meta``), as listing skips it, is bad."""
    records = list(read_records(path))
    if not any(record["type"] == "session_meta" for record in records):
        raise BadRollout(path, _missing("session_meta", path, len(records)))
    return events_of(records)


def _log_bad(exc: BadRollout) -> None:
    # The message itself names the file: a program that configured no logging
    # shows only the message (Python's last-resort handler, on stderr).
    log.warning(f"skipping a session file that cannot be read: {exc}", path=str(exc.path))


def list_sessions(
    home: Path,
    cwd: str | None = None,
    limit: int | None = 50,
    *,
    on_bad: Callable[[BadRollout], None] = _log_bad,
) -> list[SessionSummary]:
    """Recorded sessions, most recently written first, optionally only those
    started in ``cwd``. Only files up to ``limit`` matches are read.

    A file that cannot be read as a session is skipped and handed to
    ``on_bad`` (by default: logged as a warning naming it).
    """
    found = []
    for path in _newest_first(home):
        try:
            summary = _summarize(path)
        except BadRollout as exc:
            on_bad(exc)
            continue
        if cwd is not None and summary.cwd != os.path.abspath(cwd):
            continue
        found.append(summary)
        if limit is not None and len(found) >= limit:
            break
    return found


def _newest_first(home: Path) -> list[Path]:
    def mtime(path: Path) -> int:
        try:
            return path.stat().st_mtime_ns
        except OSError:
            return 0  # reading it will say what is wrong

    paths = (home / "sessions").glob("*/*/*/rollout-*.jsonl")
    return sorted(paths, key=mtime, reverse=True)


def _summarize(path: Path) -> SessionSummary:
    meta: dict[str, Any] | None = None
    user_messages: list[str] = []
    prompts: list[str] = []  # the user_message events: what the user asked, nothing else
    count = records = 0
    for record in read_records(path):
        records += 1
        kind = record["type"]
        if kind == "session_meta":
            meta = record
        elif kind == "turn":
            for item in record["items"]:
                if item.get("type") == "message" and not is_contextual(item):
                    count += 1
                    if item.get("role") == "user":
                        user_messages.append(_text_of(item))
        elif kind == "event" and (prompt := _prompt_of(record["event"])) is not None:
            prompts.append(prompt)
    # Older rollouts record no user_message: their user items stand in (shell records too).
    user_messages = prompts or user_messages
    if meta is None:
        raise BadRollout(path, _missing("session_meta", path, records))
    try:
        updated = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
    except OSError as exc:
        raise BadRollout(path, _os_problem(exc)) from None
    forked_from = meta.get("forked_from")
    return SessionSummary(
        session_id=meta["session_id"],
        created_at=meta["created_at"],
        updated_at=updated.isoformat(),
        cwd=meta["cwd"],
        first_user_message=user_messages[0] if user_messages else None,
        last_user_message=user_messages[-1] if user_messages else None,
        message_count=count,
        path=str(path),
        forked_from=forked_from if isinstance(forked_from, str) else None,
        agent_id=agent_id_of(meta),
    )


def _prompt_of(event: dict[str, Any]) -> str | None:
    msg = event.get("msg")
    if isinstance(msg, dict) and msg.get("type") == "user_message":
        message = msg.get("message")
        return message if isinstance(message, str) else None
    return None


def _text_of(item: Item) -> str:
    parts = item.get("content") or []
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return " ".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") == "input_text" and isinstance(p.get("text"), str)
    )


def prune_sessions(
    home: Path, older_than_days: float, now: float | None = None, *, dry_run: bool = False
) -> list[Path]:
    """Delete rollouts not written to for ``older_than_days``; returns what was deleted
    (or, with ``dry_run``, what would be)."""
    horizon = (now if now is not None else datetime.datetime.now().timestamp()) - (
        older_than_days * 86400
    )
    removed = []
    for path in sorted((home / "sessions").glob("*/*/*/rollout-*.jsonl")):
        try:
            stale = not path.is_dir() and path.lstat().st_mtime < horizon
        except OSError:
            continue  # gone meanwhile
        if stale:
            if not dry_run:
                path.unlink()
            removed.append(path)
    if dry_run:
        return removed
    for directory in sorted((home / "sessions").glob("*/*/*"), reverse=True):
        for level in (directory, directory.parent, directory.parent.parent):
            if level.is_dir() and not any(level.iterdir()):
                level.rmdir()
    return removed
