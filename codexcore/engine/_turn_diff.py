"""What a Turn changed on disk, as one git-style diff.

Patches report their own baselines exactly (the content each file had before
the Turn first touched it). Commands do not say what they write, so before the
first command of a Turn the tracker snapshots the writable roots: the only
places a confined command can write. The snapshot is bounded (file count,
file size, total bytes) and skips ``.git``; files beyond the bounds are left
out of the diff rather than making every Turn slow. At the end of the Turn,
every baseline is compared with the disk.

Every read opens without blocking and checks the open file: a path a command
turned into a FIFO, a device or a link to one is not read (it shows as removed,
with a warning saying what it is now), so a Turn always ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

from ..tools._safe_read import NotRegularFile, read_regular

MAX_FILES = 5_000
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 64 << 20
SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})

Baseline = dict[str, str | None]  # path -> text before the Turn (None: absent)


class TurnDiffTracker:
    """Collects baselines during one Turn; :meth:`diff` compares them with the disk."""

    def __init__(self, cwd: str) -> None:
        self._cwd = cwd
        self._baseline: Baseline = {}
        self._snapshot_roots: tuple[str, ...] = ()
        self.warnings: list[str] = []  # by diff(): files it could not read, and why

    @property
    def touched(self) -> bool:
        return bool(self._baseline or self._snapshot_roots)

    def before_patch(self, before: Iterable[tuple[str, str | None]]) -> None:
        """Record what the files a patch writes held before it (first touch wins)."""
        for path, content in before:
            self._baseline.setdefault(path, content)

    def before_command(self, roots: Sequence[str]) -> None:
        """Snapshot the writable roots once per Turn, before its first command.

        Blocking file I/O: call it in a worker thread.
        """
        if self._snapshot_roots:
            return
        self._snapshot_roots = tuple(roots)
        for path, content in _read_tree(roots):
            self._baseline.setdefault(path, content)

    def diff(self) -> str:
        """The Turn's changes, file by file in path order. Blocking: use a worker thread."""
        current = dict(_read_tree(self._snapshot_roots)) if self._snapshot_roots else {}
        paths = sorted(set(self._baseline) | set(current))
        parts = []
        refused: list[NotRegularFile] = []
        for path in paths:
            before = self._baseline.get(path)
            after = current[path] if path in current else _read_text(path, refused=refused)
            if before != after:
                parts.append(self._file_diff(path, before, after))
        self.warnings = [
            f"{self._shown(e.path)} {e.problem}: the turn diff shows it as removed" for e in refused
        ]
        return "".join(parts)

    def _shown(self, path: str) -> str:
        return os.path.relpath(path, self._cwd) if _under(path, self._cwd) else path

    def _file_diff(self, path: str, before: str | None, after: str | None) -> str:
        from ..tools.apply_patch import unified_diff  # the patch tools load with a first change

        shown = self._shown(path)
        # unified_diff shows an absolute path bare and a relative one under a/ and b/.
        a, b = (shown, shown) if os.path.isabs(shown) else (f"a/{shown}", f"b/{shown}")
        header = f"diff --git {a} {b}\n"
        if before is None:
            header += "new file mode 100644\n"
        elif after is None:
            header += "deleted file mode 100644\n"
        return header + unified_diff(before, after, shown, shown)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read_text(
    path: str, *, follow_links: bool = True, refused: list[NotRegularFile] | None = None
) -> str | None:
    """A file's text, or None when it is absent, too large, not text or not a regular
    file (a command may leave a FIFO or a link to ``/dev/zero`` in its place: it is
    opened without blocking and never read past the limit); that last is added to
    ``refused``."""
    try:
        data = read_regular(path, MAX_FILE_BYTES, follow_links=follow_links)
        return data.decode("utf-8")
    except NotRegularFile as exc:
        if refused is not None:
            refused.append(exc)
        return None
    except (OSError, UnicodeDecodeError):
        return None


def _read_tree(roots: Sequence[str]) -> Iterator[tuple[str, str | None]]:
    """(path, text) for the text files under ``roots``, within the bounds."""
    files = total = 0
    for path in _walk(roots):
        text = _read_text(path, follow_links=False)  # the walk yields no links
        if text is None:
            continue
        files += 1
        total += len(text)
        if files > MAX_FILES or total > MAX_TOTAL_BYTES:
            return
        yield path, text


def _walk(roots: Sequence[str]) -> Iterator[str]:
    seen: set[str] = set()
    for root in roots:
        for directory, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(names):
                path = os.path.join(directory, name)
                if path not in seen and os.path.isfile(path) and not os.path.islink(path):
                    seen.add(path)
                    yield path
