"""Sessions that last: one append-only JSONL file per session, the rollout.

Layout: ``HOME/sessions/YYYY/MM/DD/rollout-<timestamp>-<session_id>.jsonl``,
one record a line:

- ``{"type": "session_meta", "session_id", "created_at", "cwd", "forked_from", "agent_id"}``
- ``{"type": "config", "config": {...}}``: at the start, on each reconfigure and
  on each change of the per-turn settings (``override_turn_context``,
  ``user_turn``), so a resumed or forked session runs under the latest ones.
  What the model was told of its environment (the initial context and its
  short updates) is in the History's own records, so resume and fork know
  what not to send again
- ``{"type": "turn", "items", "response_id"}``, ``{"type": "tool_outputs", …}``,
  ``{"type": "fork", "response_id"}``, ``{"type": "compacted", "items",
  "response_id": null}``: every change to the History, so that replaying them
  rebuilds it exactly, bookmarks included (a ``compacted`` record holds the
  whole replacement history, Codex's ``CompactedItem.replacement_history``, so
  resuming needs no model and rebuilds exactly what was sent)
- ``{"type": "event", "event": {...}}``: every event but the streaming deltas
  (whose content the complete events carry), recorded before the event is
  queued for any UI
- ``{"type": "approval", "op", "call_id", "decision", "reason"}``: each approval
  answer the engine accepted, with the user's reason (skipped when loading)

A new session's file is created at its first change to the History (the
model's first answer): what came before is held in memory and written with
it, so a session that never had a conversation (a first request that
failed) leaves no file behind. From then on each record is written with one
``os.write`` of a whole line to a file opened for appending, with no
buffering in between, so a process killed with ``kill -9`` loses at most the
line being written (the page cache survives the process).

A line counts once its newline is written: an unterminated last line is a
write cut short and is left out when reading; resuming cuts it off before
appending, so every line of a file is a whole record except, at most, its
last. Any other line that is not a well-formed record makes the file bad
(:class:`BadRollout`): it is skipped, with a warning, when listing, and
refused when resuming or reading.
"""

from __future__ import annotations

import contextlib
import datetime
import glob
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
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
    encode_event,
    to_wire,
)
from ..protocol._value import Value
from ._config import SessionConfig
from ._history import History, Item, Journal
from ._instructions import is_contextual

log = get_logger(__name__)

FORMAT = 1

log = get_logger(__name__)


def default_home() -> Path:
    return Path(os.environ.get("CODEXCORE_HOME") or Path.home() / ".codexcore")


class UnknownSession(LookupError):
    """No rollout records a session with that id."""


class BadRollout(Exception):
    """A rollout file that cannot be read as a session.

    ``str()`` is one line naming the file and the problem; ``path`` and
    ``problem`` hold each.
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


class RolloutWriter:
    """Appends records to one session's rollout file.

    ``RolloutWriter(path)`` continues the existing file ``path``, cutting off
    a torn last line first. A ``deferred`` writer (see :meth:`create`) holds
    its records in memory until the first :meth:`record_change`, then
    creates the file and writes them all with that change in one ``write``.

    Recording never fails the session: a write that fails (a full disk, a
    file system gone read-only) is dropped, any part of its line already
    written is cut off again so the next record starts on a line of its own,
    and writing is tried again with the next record. Records still held
    (the session's metadata and configuration, at least) stay held until
    they are written, so the file always begins with them. The first
    failure, and the first success after failures, leave a message for the
    engine to show as a warning (:meth:`take_news`).
    """

    def __init__(self, path: Path, *, deferred: bool = False) -> None:
        self.path = path
        self.news: str | None = None
        self._fd: int | None = None
        self._held: list[bytes] | None = [] if deferred else None
        self._due = not deferred  # whether the file should exist by now
        self._closed = False
        self._failure: OSError | None = None
        self._lost = 0
        if not deferred:
            self._open(0)
            if self._fd is not None:
                self._cut_torn_tail()

    @classmethod
    def create(cls, home: Path, session_id: str, now: datetime.datetime) -> RolloutWriter:
        """A deferred writer for a new session's file."""
        day = home / "sessions" / f"{now:%Y}" / f"{now:%m}" / f"{now:%d}"
        path = day / f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{session_id}.jsonl"
        return cls(path, deferred=True)

    def record(self, record: dict[str, Any]) -> None:
        self._write(orjson.dumps(record) + b"\n")

    def record_event(self, event: Event) -> None:
        # The event's bytes are spliced in: no dict is built per event.
        self._write(b'{"type":"event","event":' + encode_event(event) + b"}\n")

    def record_change(self, kind: str, items: tuple[Item, ...], response_id: str | None) -> None:
        """Record a change to the History: the session has content, so its file exists now."""
        self._due = True
        self._write(
            orjson.dumps({"type": kind, "items": list(items), "response_id": response_id}) + b"\n"
        )

    def held_events(self) -> list[Event] | None:
        """The events a deferred writer holds, oldest first; None once they are written."""
        if self._held is None:
            return None
        return _events_of(orjson.loads(line) for line in self._held)

    def take_news(self) -> str | None:
        """The message about recording to show the user, once; None if nothing changed."""
        news, self.news = self.news, None
        return news

    def close(self) -> None:
        self._closed = True
        self._held = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self, flags: int, *, make_dirs: bool = False) -> None:
        try:
            if make_dirs:
                _make_private_dirs(self.path.parent)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | flags, 0o600)
        except OSError as exc:
            self._failed(exc)

    def _cut_torn_tail(self) -> None:
        """Cut off an unterminated last line (a write that a crash cut short):
        appending after it would glue the next record onto it and lose both.
        Readers already leave it out, so the session loses nothing more."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        keep = _whole_lines_length(self._fd, size)
        if keep < size:
            log.warning("cutting off a torn last line", path=str(self.path), bytes=size - keep)
            os.ftruncate(self._fd, keep)

    def _write(self, line: bytes) -> None:
        if self._closed:
            return
        if self._fd is None:
            if not self._due:
                assert self._held is not None
                self._held.append(line)  # a new file waits for the session's first content
                return
            if not self._reopen():
                self._lost += 1
                return
        fd = self._fd
        assert fd is not None  # opened above, or the record was dropped
        data = b"".join([*self._held, line]) if self._held else line
        try:
            _write_whole(fd, data)
        except OSError as exc:
            self._failed(exc)
            self._lost += 1
            return
        self._held = None
        if self._failure is not None:
            self.news = (
                f"session recording works again ({self.path}); {self._lost} record(s) "
                "written meanwhile were lost"
            )
            self._failure, self._lost = None, 0

    def _reopen(self) -> bool:
        """Open the file to write the next record: create a new one (``O_EXCL``,
        so a path planted in advance fails the recording rather than taking it),
        or reopen one whose opening failed before."""
        exclusive = os.O_EXCL if self._held is not None else 0
        self._open(os.O_CREAT | exclusive, make_dirs=True)
        return self._fd is not None

    def _failed(self, exc: OSError) -> None:
        if self._failure is None:
            self.news = (
                f"cannot record the session in {self.path}: {exc.strerror or exc}; "
                "the session goes on unrecorded until writing works again"
            )
            log.warning("rollout.write_failed", path=str(self.path), error=str(exc))
        self._failure = exc


def _whole_lines_length(fd: int, size: int, chunk: int = 64 * 1024) -> int:
    """The length of the file's whole lines: up to and including its last newline."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        data = os.pread(fd, end - start, start)
        newline = data.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _write_whole(fd: int, data: bytes) -> None:
    """Write all of ``data`` at the end of the file, or none of it.

    A write that fails after a short one (the disk filled up half-way) cuts
    the part already written, so no torn line is left for the next record to
    be glued onto. The file is only ever appended to by this one writer, so
    its size less what was written is where the line began.
    """
    written = 0
    try:
        while written < len(data):  # a short write to a regular file is rare
            written += os.write(fd, data[written:])
    except OSError:
        if written:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, os.fstat(fd).st_size - written)
        raise


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
    session_id: str,
    now: datetime.datetime,
    cwd: str,
    forked_from: str | None,
    agent_id: str | None = None,
) -> dict[str, Any]:
    return {
        "type": "session_meta",
        "format": FORMAT,
        "session_id": session_id,
        "created_at": now.isoformat(),
        "cwd": cwd,
        "forked_from": forked_from,
        "agent_id": agent_id,
    }


def derived_agent_id(session_id: str) -> str:
    """The agent id of a session recorded before agent ids were: derived from its id,
    so it is the same on every resume."""
    return "codexcore:" + hashlib.sha256(session_id.encode()).hexdigest()[:12]


def agent_id_of(meta: dict[str, Any]) -> str:
    """The agent id a ``session_meta`` record names (or the one derived for an old one)."""
    recorded = meta.get("agent_id")
    return (
        recorded
        if isinstance(recorded, str) and recorded
        else derived_agent_id(str(meta["session_id"]))
    )


def journal(writer: RolloutWriter) -> Journal:
    """A History journal that records each change to the History in the rollout."""
    return writer.record_change


# --- reading -------------------------------------------------------------------

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
    try:
        with open(path, "rb") as file:
            for number, line in enumerate(file, 1):
                if not line.endswith(b"\n"):
                    return  # the write of this line was cut short
                yield number, _parse(path, number, line)
    except OSError as exc:
        raise BadRollout(path, _os_problem(exc)) from None


def _os_problem(exc: OSError) -> str:
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
    return _events_of(read_records(path))


def read_session_events(path: Path) -> list[Event]:
    """The events of the recorded session in ``path``: as :func:`read_events`, and a
    file that records no session (no ``session_meta``), as listing skips it, is bad."""
    records = list(read_records(path))
    if not any(record["type"] == "session_meta" for record in records):
        raise BadRollout(path, _missing("session_meta", path, len(records)))
    return _events_of(records)


def _events_of(records: Iterable[dict[str, Any]]) -> list[Event]:
    events = []
    for record in records:
        if record.get("type") == "event":
            try:
                events.append(decode_event(record["event"]))
            except (ValueError, KeyError):
                continue  # a newer event type than this reader knows
    return events


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
