"""Sessions that last: one append-only JSONL file per session, the rollout.

Layout: ``HOME/sessions/YYYY/MM/DD/rollout-<timestamp>-<session_id>.jsonl``,
one record a line:

- ``{"type": "session_meta", "session_id", "created_at", "cwd", "forked_from"}``
- ``{"type": "config", "config": {...}}``: at the start and on each reconfigure
- ``{"type": "turn", "items", "response_id"}``, ``{"type": "tool_outputs", …}``,
  ``{"type": "fork", "response_id"}``: every change to the History, so that
  replaying them rebuilds it exactly, bookmarks included
- ``{"type": "event", "event": {...}}``: every event but the streaming deltas
  (whose content the complete events carry), written before the event is
  queued for any UI

Each record is written with one ``os.write`` of a whole line to a file opened
for appending, with no buffering in between, so a process killed with
``kill -9`` loses at most the line being written (the page cache survives the
process). A torn or unreadable line, or a record of the wrong shape, is skipped
on read, never fatal.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import orjson

from ..protocol import (
    ConfigureSession,
    Event,
    ProtocolError,
    SessionSummary,
    decode_event,
    encode_event,
    to_wire,
)
from ..protocol._codec import decode_record
from ._config import SessionConfig
from ._history import History, Item, Journal

FORMAT = 1


def default_home() -> Path:
    return Path(os.environ.get("CODEXCORE_HOME") or Path.home() / ".codexcore")


class UnknownSession(LookupError):
    """No rollout records a session with that id."""


class RolloutWriter:
    """Appends records to one session's rollout file."""

    def __init__(self, path: Path) -> None:
        _make_private_dirs(path.parent)
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    @classmethod
    def create(cls, home: Path, session_id: str, now: datetime.datetime) -> RolloutWriter:
        day = home / "sessions" / f"{now:%Y}" / f"{now:%m}" / f"{now:%d}"
        return cls(day / f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{session_id}.jsonl")

    def record(self, record: dict[str, Any]) -> None:
        self._write(orjson.dumps(record) + b"\n")

    def record_event(self, event: Event) -> None:
        # The event's bytes are spliced in: no dict is built per event.
        self._write(b'{"type":"event","event":' + encode_event(event) + b"}\n")

    def _write(self, line: bytes) -> None:
        if self._fd is None:
            return
        written = os.write(self._fd, line)
        while written < len(line):  # rare: a short write to a regular file
            written += os.write(self._fd, line[written:])

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and any missing parents, each readable by its owner only.

    ``mkdir(parents=True, mode=…)`` applies the mode to the last level only.
    Directories that already exist keep their modes.
    """
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


def config_record(config: SessionConfig) -> dict[str, Any]:
    data = attrs.asdict(config, recurse=False)
    data["sandbox_policy"] = to_wire(config.sandbox_policy)
    return {"type": "config", "config": data}


def meta_record(
    session_id: str, now: datetime.datetime, cwd: str, forked_from: str | None
) -> dict[str, Any]:
    return {
        "type": "session_meta",
        "format": FORMAT,
        "session_id": session_id,
        "created_at": now.isoformat(),
        "cwd": cwd,
        "forked_from": forked_from,
    }


def journal(writer: RolloutWriter) -> Journal:
    """A History journal that records each change to the History in the rollout."""

    def record(kind: str, items: tuple[Item, ...], response_id: str | None) -> None:
        writer.record({"type": kind, "items": list(items), "response_id": response_id})

    return record


# --- reading -------------------------------------------------------------------


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every readable record; torn or corrupt lines are skipped."""
    with open(path, "rb") as file:
        for line in file:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record


def find_rollout(home: Path, session_id: str) -> Path:
    matches = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{session_id}.jsonl"))
    if not matches:
        raise UnknownSession(session_id)
    return matches[-1]


@attrs.frozen
class LoadedSession:
    session_id: str
    config: SessionConfig
    history: History
    path: Path


def load_session(home: Path, session_id: str) -> LoadedSession:
    """Rebuild a recorded session's configuration and History."""
    path = find_rollout(home, session_id)
    config: SessionConfig | None = None
    history = History()
    for record in read_records(path):
        kind = record.get("type")
        if kind == "config":
            config = _config_from(record.get("config")) or config
        elif kind in ("turn", "tool_outputs", "fork"):
            change = _history_change(record)
            if change is not None:
                history.replay(kind, *change)
    if config is None:
        raise UnknownSession(f"{session_id}: the rollout has no configuration record")
    return LoadedSession(session_id, config, history, path)


def _config_from(data: Any) -> SessionConfig | None:
    """The configuration a ``config`` record holds, or None when it is not one.

    The record has the fields of ``configure_session``, so its decoder checks
    every field's type; one left out keeps the engine's default.
    """
    try:
        op = decode_record(ConfigureSession, data, "config")
    except ProtocolError:
        return None
    fields = (field.name for field in attrs.fields(ConfigureSession))
    return SessionConfig(
        **{name: getattr(op, name) for name in fields if getattr(op, name) is not None}
    )


def _history_change(record: dict[str, Any]) -> tuple[tuple[Item, ...], str | None] | None:
    """A history record's items and response id, or None when they are not shaped so."""
    items = record.get("items") or ()
    response_id = record.get("response_id")
    if not isinstance(items, list | tuple) or not all(isinstance(i, dict) for i in items):
        return None
    if response_id is not None and not isinstance(response_id, str):
        return None
    return tuple(items), response_id


def read_events(path: Path) -> list[Event]:
    events = []
    for record in read_records(path):
        if record.get("type") == "event":
            try:
                events.append(decode_event(record["event"]))
            except (ValueError, KeyError):
                continue  # a newer event type than this reader knows
    return events


def list_sessions(home: Path, cwd: str | None = None, limit: int = 50) -> list[SessionSummary]:
    """Recorded sessions, most recently written first, optionally only those
    started in ``cwd``. Only files up to ``limit`` matches are read."""
    paths = sorted(
        (path for path in (home / "sessions").glob("*/*/*/rollout-*.jsonl") if path.is_file()),
        key=lambda path: path.stat().st_mtime_ns,
        reverse=True,
    )
    found = []
    for path in paths:
        summary = _summarize(path)
        if summary is None or (cwd is not None and summary.cwd != os.path.abspath(cwd)):
            continue
        found.append(summary)
        if len(found) >= limit:
            break
    return found


def _summarize(path: Path) -> SessionSummary | None:
    meta: dict[str, Any] | None = None
    user_messages: list[str] = []
    count = 0
    for record in read_records(path):
        kind = record.get("type")
        if kind == "session_meta":
            meta = record
        elif kind == "turn":
            items, _ = _history_change(record) or ((), None)
            for item in items:
                if item.get("type") == "message":
                    count += 1
                    if item.get("role") == "user":
                        user_messages.append(_text_of(item))
    if meta is None:
        return None
    updated = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
    return SessionSummary(
        session_id=str(meta.get("session_id")),
        created_at=str(meta.get("created_at")),
        updated_at=updated.isoformat(),
        cwd=str(meta.get("cwd")),
        first_user_message=user_messages[0] if user_messages else None,
        last_user_message=user_messages[-1] if user_messages else None,
        message_count=count,
        path=str(path),
        forked_from=_text_or_none(meta.get("forked_from")),
    )


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text_of(item: Item) -> str:
    parts = item.get("content")
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
        if path.stat().st_mtime < horizon:
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
