"""What the control receiver keeps and reads: the durable dedupe store, content_ref, the audit.

:class:`DedupeStore` is a SQLite table keyed by (team, session_id, agent_id,
request_id). :meth:`~DedupeStore.claim` is the atomic lookup-and-insert: one
``INSERT ... ON CONFLICT`` statement, committed before the input reaches the
engine, so a request claimed by a server that is then killed (SIGKILL) is
still known to the server that restarts on the same file: a retry is answered
as a duplicate and never runs again (at most once). A claim whose request was
not carried out (rejected, busy, not found) is released, so a retry is judged
afresh. Rows older than the TTL count as absent and are purged as new ones
come.

:func:`read_content_ref` opens a referenced file under an allowed base
directory, one path component at a time with ``O_NOFOLLOW`` from the base's
descriptor, so no symlink below the base is followed and nothing can be
swapped between a check and the read; size and sha256 are checked on the bytes
read.

:class:`Audit` writes one structlog entry per step (and, if configured, one
JSONL line), never the message text unless verbose message logging is on.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import orjson

from codexcore._logging import get_logger

from ._wire import ContentRef, Invalid, now_utc, text_encoding

log = get_logger("codexcore.control")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (
    team TEXT NOT NULL,
    session_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    result TEXT,
    detail TEXT,
    at REAL NOT NULL,
    PRIMARY KEY (team, session_id, agent_id, request_id)
)
"""

Key = tuple[str, str, str, str]

PENDING = "pending"
"""The result of a claimed request not yet answered (or whose server was killed)."""

_PURGE_EVERY = 256


class DedupeStore:
    """Accepted request keys for ``ttl`` seconds, in SQLite at ``path`` (``:memory:``: none)."""

    def __init__(self, path: str, ttl: float) -> None:
        self.path = path
        self.ttl = ttl
        if path != ":memory:":
            _private_parent(Path(path))
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        if path != ":memory:":
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)
            # WAL: a committed claim survives the process being killed; NORMAL sync
            # loses nothing on a process crash (only an OS crash could).
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=2000")
        self._db.execute(_SCHEMA)
        self._claims = 0

    def claim(self, key: Key) -> tuple[str, str | None] | None:
        """Claim ``key``: None when it is new (or expired) and now ours; else the
        first request's (result, detail), ``PENDING`` while it is not answered."""
        now = time.time()
        cursor = self._db.execute(
            "INSERT INTO seen VALUES (?, ?, ?, ?, ?, NULL, ?) "
            "ON CONFLICT DO UPDATE SET result = excluded.result, detail = NULL, at = excluded.at "
            "WHERE seen.at < ?",
            (*key, PENDING, now, now - self.ttl),
        )
        self._claims += 1
        if self._claims % _PURGE_EVERY == 0:
            self._db.execute("DELETE FROM seen WHERE at < ?", (now - self.ttl,))
        if cursor.rowcount == 1:
            return None
        row = self._db.execute(
            "SELECT result, detail FROM seen WHERE team = ? AND session_id = ? "
            "AND agent_id = ? AND request_id = ?",
            key,
        ).fetchone()
        return (str(row[0]), row[1]) if row is not None else None

    def finish(self, key: Key, result: str, detail: str | None) -> None:
        """Record the first answer to a claimed key (a duplicate gets its detail)."""
        self._db.execute(
            "UPDATE seen SET result = ?, detail = ? WHERE team = ? AND session_id = ? "
            "AND agent_id = ? AND request_id = ?",
            (result, detail, *key),
        )

    def release(self, key: Key) -> None:
        """Forget a claim whose request was not carried out: a retry is judged afresh."""
        self._db.execute(
            "DELETE FROM seen WHERE team = ? AND session_id = ? AND agent_id = ? "
            "AND request_id = ?",
            key,
        )

    def close(self) -> None:
        self._db.close()


def _private_parent(path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)


# --- content_ref -----------------------------------------------------------------------------


def _within(path: str, bases: tuple[str, ...]) -> tuple[str, list[str]]:
    """The base ``path`` is under and the components below it; raises :class:`Invalid`."""
    if not os.path.isabs(path) or "\0" in path:
        raise Invalid("content_ref.path: must be an absolute path")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise Invalid("content_ref.path: '..' is not allowed")
    for base in bases:
        base_parts = [part for part in base.split("/") if part not in ("", ".")]
        below = parts[len(base_parts) :]
        if parts[: len(base_parts)] == base_parts and below:
            return base, below
    raise Invalid("content_ref.path: not under any allowed content directory")


def _open_below(base: str, below: list[str]) -> int:
    """A descriptor of ``base/below...``, never following a symlink below the base."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in below[:-1]:
            next_fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        return os.open(below[-1], flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def read_content_ref(ref: ContentRef, bases: tuple[str, ...], encoding: str, limit: int) -> str:
    """The text a ``content_ref`` points at, checked; raises :class:`Invalid` naming the rule.

    Blocking: call it off the event loop.
    """
    if not bases:
        raise Invalid("content_ref: not accepted here (no allowed content directory is configured)")
    if ref.expires_at is not None and ref.expires_at <= now_utc():
        raise Invalid("content_ref.expires_at: the reference has expired")
    if ref.size_bytes > limit:
        raise Invalid(f"content_ref.size_bytes: over this receiver's limit of {limit} bytes")
    codec = text_encoding(_charset(ref.mime) or encoding)
    base, below = _within(ref.path, bases)
    try:
        fd = _open_below(base, below)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Invalid("content_ref.path: a symlink below the allowed directory") from None
        raise Invalid(f"content_ref.path: cannot open ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise Invalid("content_ref.path: not a regular file")
        data = file.read(ref.size_bytes + 1)
    if len(data) != ref.size_bytes:
        found = f"more than {ref.size_bytes}" if len(data) > ref.size_bytes else str(len(data))
        raise Invalid(f"content_ref.size_bytes: the file has {found} bytes, not {ref.size_bytes}")
    if hashlib.sha256(data).hexdigest() != ref.sha256.lower():
        raise Invalid("content_ref.sha256: does not match the file's bytes")
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        raise Invalid(f"content_ref: not valid {codec} (byte {exc.start})") from None
    if not text:
        raise Invalid("content_ref: empty payload")
    return text


def _charset(mime: str) -> str | None:
    kind, *params = (part.strip() for part in mime.split(";"))
    if not kind.lower().startswith("text/"):
        raise Invalid(f"content_ref.mime: {kind[:64]!r} is not text")
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"')
    return None


# --- audit -----------------------------------------------------------------------------------

AUDIT_FIELDS = ("request_id", "team", "session_id", "agent_id", "sender", "result", "duplicate")


def open_audit_file(path: str) -> int:
    """``path`` opened to append, created 0600 if missing; raises :class:`OSError`.

    Never follows a symlink planted at ``path`` (``O_NOFOLLOW``: the records
    would be appended to whatever it points at), and refuses anything but a
    regular file of this user's with one link (a hard link to another file, a
    FIFO that would block the server); an existing file's wider mode is narrowed
    to 0600.
    """
    _private_parent(Path(path))
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symlink (not followed)") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if info.st_uid != os.getuid():
            raise OSError(errno.EPERM, "owned by another user")
        if info.st_nlink != 1:
            raise OSError(errno.EMLINK, "it has other hard links")
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
        os.set_blocking(fd, True)
    except OSError:
        os.close(fd)
        raise
    return fd


class Audit:
    """One record per request, ack, retry, duplicate, rejection and timeout.

    Each goes to structlog (stderr, level info) as ``control <step>`` and, with
    ``path``, as a JSON line appended to that file (mode 0600, opened by
    :func:`open_audit_file`; a file it refuses is said in the log, once). ``verbose``: records of
    requests carry the message text (``content``); otherwise never.
    """

    def __init__(self, path: str | None, *, verbose: bool, side: str) -> None:
        self.verbose = verbose
        self.side = side
        self._fd: int | None = None
        if path:  # None or "": the log only
            try:
                self._fd = open_audit_file(path)
            except OSError as exc:
                # The records still go to the log; the file is not written anywhere else.
                log.error("control audit file refused", path=path, why=str(exc))

    def record(self, step: str, fields: dict[str, Any], *, text: str | None = None) -> None:
        entry = {name: fields.get(name) for name in AUDIT_FIELDS}
        entry.update({k: v for k, v in fields.items() if k not in entry and v is not None})
        if text is not None and self.verbose:
            entry["content"] = text
        log.info(f"control {step}", side=self.side, **entry)
        if self._fd is not None:
            line = {"at": now_utc().isoformat(), "side": self.side, "step": step, **entry}
            with contextlib.suppress(OSError):
                os.write(self._fd, orjson.dumps(line) + b"\n")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
