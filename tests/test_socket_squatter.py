"""A socket squatter: another user listening where our clients look for our server.

Without ``XDG_RUNTIME_DIR`` the default socket is in ``codexcore-UID`` in the
system temporary directory, which any user may create first. The squatter
here is a real process of another uid (``nobody``, 65534) listening on a real
socket; it counts every byte it receives. Clients (the ``codexcore control``
command, :class:`~codexcore.adapters.client.RemoteCodex`) must refuse it
before sending a byte: by its folder's owner and mode, and by the peer's uid
(``SO_PEERCRED``) when the folder looks right. The server must refuse to make
its socket in a folder it does not own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from codexcore.adapters.client import RemoteCodex, UnsafeSocket

from .server_helpers import PY, TOKEN, server_env

pytestmark = pytest.mark.anyio

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"  # one another user can run (ours may sit under /root)

SQUATTER = r"""
import os, socket, sys
path = sys.argv[1]
with socket.socket(socket.AF_UNIX) as server:
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen()
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        conn.settimeout(3)
        received = b""
        try:
            while b"\n" not in received:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                received += chunk
            # The forged answer the attack returned: whatever was asked, "ok".
            conn.sendall(b'{"jsonrpc": "2.0", "id": 1, "result": {"result": "ok"}}\n')
        except OSError:
            pass
        conn.close()
        if received == b"STOP\n":
            break
        print(f"connection {len(received)} bytes {received[:200]!r}", flush=True)
"""


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the squatter runs as another uid (nobody)")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} is missing: the squatter needs a Python another uid can run")


@contextlib.contextmanager
def temp_root() -> Iterator[Path]:
    """A short, world-writable sticky folder, as /tmp is (socket paths are short)."""
    path = Path(tempfile.mkdtemp(prefix="cx-sq-"))
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Squatter:
    """A process of uid ``nobody`` listening at a socket, reporting each connection."""

    def __init__(self, process: asyncio.subprocess.Process, path: Path) -> None:
        self.process, self.path = process, path

    async def connections(self) -> list[str]:
        """Every connection it saw: it is told to stop on a last one of ours, which it
        takes after every earlier one."""
        _reader, writer = await asyncio.open_unix_connection(str(self.path))
        writer.write(b"STOP\n")
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        assert self.process.stdout is not None
        out = await asyncio.wait_for(self.process.stdout.read(), 10)
        await self.process.wait()
        return [line for line in out.decode().splitlines() if line.startswith("connection")]


@contextlib.asynccontextmanager
async def squatter(path: Path) -> AsyncIterator[Squatter]:
    process = await asyncio.create_subprocess_exec(
        SYSTEM_PYTHON,
        "-I",
        "-c",
        SQUATTER,
        str(path),
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd="/",
        stdout=asyncio.subprocess.PIPE,
    )
    running = Squatter(process, path)
    try:
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), 10)
        assert ready == b"ready\n", ready
        yield running
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def squatted_folder(root: Path) -> Path:
    """``codexcore-0`` made first by the other user, open for us to connect."""
    folder = root / f"codexcore-{os.geteuid()}"
    folder.mkdir(mode=0o755)
    os.chown(folder, NOBODY, NOBODY)
    return folder


def control(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``codexcore control stdin ... SECRET``, the token in the environment, as a user runs it."""
    environ = server_env(None, CODEXCORE_TOKEN=TOKEN, **env)
    environ.pop("XDG_RUNTIME_DIR", None)
    who = ["--team", "t", "--sender", "s", "--session", "s1", "--agent", "a1"]
    return subprocess.run(
        [PY, "-m", "codexcore", "control", "stdin", *who, *args, SECRET],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )


SECRET = "the text nobody else may read"


async def test_control_refuses_a_squatted_default_folder_before_sending() -> None:
    _needs_root()
    with temp_root() as root:
        folder = squatted_folder(root)
        async with squatter(folder / "codexcore.sock") as other:
            done = await asyncio.to_thread(control, TMPDIR=str(root))
            seen = await other.connections()
    assert seen == [], seen  # not even a connection: the folder was judged first
    assert done.returncode != 0, done.stdout
    assert '"ok"' not in done.stdout
    assert f"{folder} belongs to uid {NOBODY}, not to this user" in done.stderr, done.stderr
    assert "nothing was sent" in done.stderr


async def test_the_client_library_refuses_a_squatted_default_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _needs_root()
    with temp_root() as root:
        folder = squatted_folder(root)
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        monkeypatch.setattr(tempfile, "tempdir", str(root))
        async with squatter(folder / "codexcore.sock") as other:
            with pytest.raises(UnsafeSocket, match=f"belongs to uid {NOBODY}"):
                async with RemoteCodex.connect_unix(token=TOKEN):
                    pass
            seen = await other.connections()
    assert seen == [], seen


@contextlib.contextmanager
def loosened_then_closed(root: Path) -> Iterator[Path]:
    """Our own folder, mode 0700, that was open for a moment: long enough for another
    user to start listening in it."""
    folder = root / "ours"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o777)
    yield folder


async def test_a_peer_of_another_uid_is_refused_in_a_folder_that_looks_right() -> None:
    _needs_root()
    with temp_root() as root, loosened_then_closed(root) as folder:
        path = folder / "s.sock"
        async with squatter(path) as other:
            os.chmod(folder, 0o700)  # now it looks like a private folder of ours
            done = await asyncio.to_thread(control, "--unix", str(path))
            with pytest.raises(UnsafeSocket, match=f"runs as uid {NOBODY}"):
                async with RemoteCodex.connect_unix(path, token=TOKEN):
                    pass
            seen = await other.connections()
    # Connected (that is how the peer's uid is learnt), and closed without a byte.
    assert seen == ["connection 0 bytes b''"] * 2, seen
    assert done.returncode != 0, done.stdout
    assert f"the process listening runs as uid {NOBODY}, not as this user" in done.stderr


async def serve_unix(*args: str, **env: str) -> tuple[int, str]:
    environ = server_env(None, CODEXCORE_TOKEN=TOKEN, **env)
    environ.pop("XDG_RUNTIME_DIR", None)
    process = await asyncio.create_subprocess_exec(
        PY, "-m", "codexcore", "serve", "--unix", *args, env=environ, stderr=subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, err.decode()


async def test_the_server_refuses_a_folder_it_does_not_own() -> None:
    _needs_root()
    with temp_root() as root:
        folder = squatted_folder(root)
        code, err = await serve_unix(TMPDIR=str(root))
        assert code == 1, err
        assert f"{folder} belongs to uid {NOBODY}, not to this user" in err
        assert list(folder.iterdir()) == []  # no socket was made there


async def test_the_server_refuses_a_linked_folder_and_an_explicit_tmp_path() -> None:
    with temp_root() as root:
        elsewhere = root / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        (root / f"codexcore-{os.geteuid()}").symlink_to(elsewhere)
        code, err = await serve_unix(TMPDIR=str(root))
        assert code == 1, err
        assert "is a symbolic link, not a directory" in err
        # --unix /tmp/x.sock: a folder every user may write to is no place for it.
        code, err = await serve_unix(str(root / "x.sock"))
        assert code == 1, err
        assert "is open to other users (mode 1777)" in err
        assert list(elsewhere.iterdir()) == []
