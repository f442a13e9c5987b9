"""A command in a PTY (codexcore.tools.pty), against real processes: it has a terminal as
its controlling terminal, reads what is written to it, and dies whole when killed; the
same inside bubblewrap."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from codexcore.tools.pty import start_in_pty

from .server_helpers import PY

pytestmark = pytest.mark.anyio

WAIT = 20.0

# Stdlib only: it may run inside the sandbox.
TERMINAL_CHILD = r"""
import os, sys
tty = open("/dev/tty", "rb+", buffering=0)  # only with a controlling terminal
print("isatty", os.isatty(0), os.isatty(1), "leader", os.getsid(0) == os.getpid() or "fork")
print("ready", flush=True)
line = sys.stdin.readline().strip()
print("got:" + line, flush=True)
"""


class Screen:
    """What the terminal showed, chunk by chunk (the ``on_output`` of a command)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.changed = asyncio.Event()

    async def __call__(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.changed.set()

    async def until(self, pattern: str) -> re.Match[bytes]:
        async with asyncio.timeout(WAIT):
            while (found := re.search(pattern.encode(), b"".join(self.chunks))) is None:
                self.changed.clear()
                await self.changed.wait()
        return found


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


async def test_a_command_gets_a_controlling_terminal_and_what_is_written_to_it(
    tmp_path: Path,
) -> None:
    screen = Screen()
    command = await start_in_pty([PY, "-c", TERMINAL_CHILD], cwd=str(tmp_path), on_output=screen)
    await screen.until("ready")
    assert command.write(b"hello\n") == 6
    assert await asyncio.wait_for(command.wait(), WAIT) == 0
    text = bytes(command.output).decode()
    assert "isatty True True leader True" in text, text
    assert "hello\r\n" in text  # the terminal echoes what was typed
    assert "got:hello" in text
    assert b"".join(screen.chunks) == bytes(command.output)
    with pytest.raises(ProcessLookupError):
        command.write(b"late\n")


async def test_kill_ends_the_command_and_what_it_started(tmp_path: Path) -> None:
    script = "sleep 300 & echo child=$!; sleep 300"
    screen = Screen()
    command = await start_in_pty(["sh", "-c", script], cwd=str(tmp_path), on_output=screen)
    child = int((await screen.until(r"child=(\d+)")).group(1))
    assert not gone(child)
    assert not gone(command.process.pid)
    waiting = asyncio.create_task(command.wait())
    await asyncio.sleep(0)  # let it start waiting: the cancel lands inside wait()
    waiting.cancel()  # how an interrupt ends it
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert gone(command.process.pid)
    assert gone(child), "the command's background job outlived it"


async def test_inside_bubblewrap(tmp_path: Path) -> None:
    from codexcore.tools.sandbox import SandboxSpec, probe_sandbox, wrap_command

    sandbox = probe_sandbox()
    if sandbox.kind != "bwrap" or sandbox.executable is None:
        pytest.skip(f"no working bubblewrap here: {sandbox.reason}")
    bwrap = sandbox.executable

    def confined(inner: list[str]) -> tuple[list[str], tuple[int, ...]]:
        return list(
            wrap_command(
                inner,
                SandboxSpec(mode="read-only"),
                str(tmp_path),
                bwrap=bwrap,
                seccomp_fd=None,
            )
        ), ()

    screen = Screen()
    command = await start_in_pty(
        [PY, "-c", TERMINAL_CHILD], cwd=str(tmp_path), on_output=screen, wrap=confined
    )
    await screen.until("ready")
    command.write(b"from outside\n")
    assert await asyncio.wait_for(command.wait(), WAIT) == 0
    text = bytes(command.output).decode()
    assert "isatty True True" in text, text
    assert "got:from outside" in text
