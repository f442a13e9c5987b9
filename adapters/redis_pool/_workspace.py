"""Whether every worker sees the same workspace: a marker file with a random id.

Sessions move between workers, so their working directory must be one shared
volume mounted at the same path everywhere. Each worker reads (or, first of
all, creates) ``<cwd>/.codexcore-workspace`` and publishes its id with its
heartbeat; ``codexcore doctor --redis`` compares them with its own view.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from codexcore.tools._safe_read import read_regular

MARKER = ".codexcore-workspace"


def workspace_id(directory: str | Path) -> str:
    """The workspace's id as this machine sees it (created if absent); raises OSError."""
    path = Path(directory) / MARKER
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        # The marker is in a shared workspace: a FIFO there must not hang the worker.
        return read_regular(str(path), 4096).decode("utf-8", "replace").strip()
    marker = secrets.token_hex(16)
    try:
        os.write(fd, marker.encode() + b"\n")
    finally:
        os.close(fd)
    return marker
