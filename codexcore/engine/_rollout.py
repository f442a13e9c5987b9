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

A rollout has one writer at a time: the writer holds an advisory lock on its
file from opening to closing, and a second session resuming it is refused
(:mod:`._rollout_lock`). Readers need no lock.

This module writes rollouts (:class:`RolloutWriter` and its records);
:mod:`._rollout_reader` reads them back (resume, fork, listing, pruning).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import orjson

from .._logging import get_logger
from ..protocol import (
    Event,
    decode_event,
    encode_event,
    to_wire,
)
from ._config import SessionConfig
from ._history import Item, Journal
from ._rollout_lock import RolloutLock, take_lock, try_lock

log = get_logger(__name__)

FORMAT = 1


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

    ``RolloutWriter(path, lock=...)`` continues the existing file ``path``
    through a descriptor that holds its lock (see :mod:`._rollout_lock`;
    without ``lock`` the file is opened and locked here, raising
    ``SessionBusy`` when another session holds it), cutting off a torn last
    line first. A ``deferred`` writer (see :meth:`create`) holds its records
    in memory until the first :meth:`record_change`, then creates and locks
    the file and writes them all with that change in one ``write``. The lock
    is held until :meth:`close` (or the process ends, however it ends).

    Recording never fails the session: a write that fails (a full disk, a
    file system gone read-only) is dropped, any part of its line already
    written is cut off again so the next record starts on a line of its own,
    and writing is tried again with the next record. Records still held
    (the session's metadata and configuration, at least) stay held until
    they are written, so the file always begins with them. The first
    failure, and the first success after failures, leave a message for the
    engine to show as a warning (:meth:`take_news`).
    """

    def __init__(
        self, path: Path, *, deferred: bool = False, lock: RolloutLock | None = None
    ) -> None:
        self.path = path
        self.news: str | None = None
        self._fd: int | None = None
        self._held: list[bytes] | None = [] if deferred else None
        self._due = not deferred  # whether the file should exist by now
        self._closed = False
        self._failure: OSError | None = None
        self._lost = 0
        if deferred:
            return
        try:
            lock = lock or take_lock(path, session_id_of(path))
        except OSError as exc:
            self._failed(exc)
            return
        self._fd = lock.take()
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
        return events_of(orjson.loads(line) for line in self._held)

    def take_news(self) -> str | None:
        """The message about recording to show the user, once; None if nothing changed."""
        news, self.news = self.news, None
        return news

    def shared_lock(self) -> RolloutLock | None:
        """A second descriptor sharing this writer's lock, for the writer that takes
        over when the session is resumed in place; None if the file is not open."""
        if self._fd is None:
            return None
        return RolloutLock(self.path, os.dup(self._fd))

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
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | flags, 0o600)
        except OSError as exc:
            self._failed(exc)
            return
        # Only a session resumed in the instant after this file was created can
        # hold it; it rebuilt its History from it, so this one records no more.
        if not try_lock(fd):
            os.close(fd)
            self._failed(OSError(errno.EWOULDBLOCK, "another session opened this file"))
            return
        self._fd = fd

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


_NAME_PREFIX = len("rollout-2026-01-01T00-00-00-")


def session_id_of(path: Path) -> str:
    """The session id in a rollout's file name (``rollout-<timestamp>-<id>.jsonl``)."""
    return path.name[_NAME_PREFIX:].removesuffix(".jsonl") or path.name


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
    # A client's tools are that client's to answer, not the session's: never recorded.
    del data["dynamic_tools"]
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


def events_of(records: Iterable[dict[str, Any]]) -> list[Event]:
    """The events among ``records``, oldest first (an unknown event type is left out)."""
    events = []
    for record in records:
        if record.get("type") == "event":
            try:
                events.append(decode_event(record["event"]))
            except (ValueError, KeyError):
                continue  # a newer event type than this reader knows
    return events
