"""Fuzz: every file reader given a path that may be anything (issue 26).

A session file, an AGENTS.md, a SKILL.md, a file a patch updates or deletes, and
config.toml, each put in place as a regular file of any bytes (some over the
reader's limit, sparse), a FIFO, /dev/zero, /dev/urandom, /dev/null, a link to
one of those, a directory, a socket or a dangling link. Contract: each reader
returns or raises its own documented error at once, naming the path when it
is not a regular file; none blocks (a FIFO would) or reads without end (a
device would): either would hang or exhaust memory, failing the run.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from codexcore.config import ConfigError, load_settings
from codexcore.engine._instructions import read_project_docs
from codexcore.engine._rollout import BadRollout, UnknownSession
from codexcore.engine._rollout_reader import list_sessions, load_session
from codexcore.engine._skills import SkillError, read_skill_text
from codexcore.tools.apply_patch import PatchError, parse_patch, plan_patch

from .conftest import attempt, fuzz

SPECIAL = ("fifo", "dev_zero", "dev_urandom", "dev_null", "link_fifo", "socket")
KINDS = ("bytes", "sparse", "dir", "dangling", *SPECIAL)
SESSION_ID = "5f0c9f1e-0000-4000-8000-00000000beef"

kinds = st.sampled_from(KINDS)
contents = st.binary(max_size=512) | st.text(max_size=256).map(str.encode)


@contextmanager
def placed(name: str, kind: str, content: bytes) -> Iterator[Path]:
    """A fresh folder holding ``name`` (folders on its way made) as ``kind``."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        server = None
        if kind == "bytes":
            path.write_bytes(content)
        elif kind == "sparse":  # larger than every reader's limit, no disk used
            path.touch()
            os.truncate(path, 2 << 30)
        elif kind == "dir":
            path.mkdir()
        elif kind == "dangling":
            path.symlink_to(Path(directory, "absent"))
        elif kind in ("fifo", "link_fifo"):
            target = path if kind == "fifo" else Path(directory, "pipe")
            os.mkfifo(target)
            if kind == "link_fifo":
                path.symlink_to(target)
        elif kind == "socket":
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(path))
        else:
            path.symlink_to("/dev/" + kind.removeprefix("dev_"))
        try:
            yield path
        finally:
            if server is not None:
                server.close()


@given(kinds, contents)
@fuzz(400)
def test_session_files(kind: str, content: bytes) -> None:
    name = f"sessions/2026/01/01/rollout-2026-01-01T00-00-00-{SESSION_ID}.jsonl"
    with placed(name, kind, content) as path:
        home = path.parents[4]
        bad: list[BadRollout] = []
        listed = list_sessions(home, on_bad=bad.append)
        loaded, error = attempt(lambda: load_session(home, SESSION_ID), BadRollout, UnknownSession)
    if kind in SPECIAL:
        assert listed == []
        assert loaded is None
        assert isinstance(error, BadRollout)
        assert "not a regular file" in error.problem
        assert [b.path for b in bad] == [path]
    if kind == "sparse":
        assert isinstance(error, BadRollout)
        assert "limit" in error.problem


@given(kinds, contents)
@fuzz(400)
def test_agents_md(kind: str, content: bytes) -> None:
    with placed("project/AGENTS.md", kind, content) as path:
        (path.parent / ".git").mkdir()
        docs = read_project_docs(str(path.parent), None, 4096)
    assert len(docs.text.encode()) <= 4096 + 3 * 4096  # replacement characters at worst
    if kind in SPECIAL:
        assert docs.text == ""
        assert len(docs.warnings) == 1
        assert str(path) in docs.warnings[0]
        # A link is refused for leading outside the project before it is opened.
        assert "not a regular file" in docs.warnings[0] or "leads outside" in docs.warnings[0]


@given(kinds, contents)
@fuzz(400)
def test_skill_files(kind: str, content: bytes) -> None:
    with placed("skills/demo/SKILL.md", kind, content) as path:
        text, error = attempt(lambda: read_skill_text(str(path)), SkillError)
    if kind in SPECIAL:
        assert text is None
        assert "not a regular file" in str(error)
    if kind == "sparse":
        assert text is None
        assert "larger than" in str(error)


@given(kinds, contents, st.sampled_from(("update", "delete")))
@fuzz(400)
def test_patches_on_any_file(kind: str, content: bytes, operation: str) -> None:
    body = (
        "*** Update File: f.txt\n@@\n-a\n+b\n"
        if operation == "update"
        else "*** Delete File: f.txt\n"
    )
    patch = parse_patch(f"*** Begin Patch\n{body}*** End Patch")
    with placed("work/f.txt", kind, content) as path:
        edits, error = attempt(lambda: plan_patch(patch, str(path.parent)), PatchError)
    if kind in SPECIAL:
        assert edits is None
        assert "f.txt is a " in str(error)
        assert "not a regular file" in str(error)
    if kind == "sparse":
        assert edits is None
        assert "apply_patch edits files up to" in str(error)


@given(kinds, contents)
@fuzz(300)
def test_config_toml(kind: str, content: bytes) -> None:
    with placed("home/config.toml", kind, content) as path:
        home = str(path.parent)
        loaded, error = attempt(
            lambda: load_settings(home=home, environ={"HOME": home}), ConfigError
        )
    if kind in SPECIAL:
        assert loaded is None
        assert "not a regular file" in str(error)
