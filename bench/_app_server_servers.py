"""The servers ``bench_app_server.py`` measures, one small table (argv and environment each),
the scripted model behind them, and the sampling of a server's process tree for memory.

Adding a server is one entry of :data:`SERVERS`. ``codex`` is the real ``codex
app-server`` of the pinned Codex CLI (``_vs_codex_cli.py`` installs it into
``bench/.codex-cli/``), configured as ``bench_vs_codex.py`` configures it: a
``model_provider`` at the scripted Responses server in its ``CODEX_HOME``. ``codexcore``
is ``python -m codexcore app-server`` with ``OPENAI_BASE_URL`` and ``CODEXCORE_HOME``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _vs_codex_cli import CLI_DIR, KEY_VARIABLE, MODEL, codex_config, find_codex
from _vs_codex_model import COMMAND_MARK, BenchModel, TimedServer, scripted_server
from _vs_codex_procs import TreeMemory

from codexcore.testing import ScriptedResponse, text_response

STREAM_MARK = "stream a long answer"
"""What, in a user message, asks the model for :data:`DELTAS` text deltas."""
DELTAS = 2000
"""The text deltas of the events/s Turn's answer (one short word each)."""


class AppServerModel(BenchModel):
    """``bench_vs_codex.py``'s stateless model (a command on ``COMMAND_MARK``, else a short
    answer), plus a long answer in :data:`DELTAS` deltas when asked to stream one."""

    def _decide(self, body: dict[str, Any]) -> ScriptedResponse:
        items = [item for item in body.get("input") or [] if isinstance(item, dict)]
        last_user = next((i for i in reversed(items) if i.get("role") == "user"), None)
        if items and items[-1] is last_user and STREAM_MARK in str(last_user):
            return text_response("word " * DELTAS, chunks=DELTAS)
        return super()._decide(body)


def model_server() -> AbstractContextManager[tuple[TimedServer, BenchModel]]:
    """:class:`AppServerModel` on a timed local Responses server, in a thread of this process."""
    return scripted_server(AppServerModel())


def prompt(turn: int) -> str:
    """The thread's Turn ``turn`` (from 1): every fifth runs ``echo hello``."""
    if turn % 5 == 0:
        return f"Turn {turn}: {COMMAND_MARK} in the shell, then tell me what it printed."
    return f"Turn {turn}: just acknowledge this."


# --- the servers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """One app-server: its argv (``--listen ws://127.0.0.1:0`` is added for WebSocket), its
    environment for a model at a base URL with a home folder of its own, and why it
    cannot run here (None when it can)."""

    name: str
    argv: Callable[[], list[str]]
    env: Callable[[str, Path], dict[str, str]]
    missing: Callable[[], str | None]


def _base_env(home: Path) -> dict[str, str]:
    """This environment without model or agent settings, with an empty ``HOME`` (a login
    shell then reads no dotfiles of this machine)."""
    drop = ("OPENAI_", "CODEX_", "CODEXCORE_", "RUST_LOG")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    (home / "user").mkdir(parents=True, exist_ok=True)
    return {**env, "HOME": str(home / "user")}


def _codex_binary() -> Path | None:
    return find_codex(CLI_DIR)


def _codex_argv() -> list[str]:
    binary = _codex_binary()
    assert binary is not None
    return [str(binary), "app-server"]


def _codex_env(base_url: str, home: Path) -> dict[str, str]:
    codex_home = home / "codex-home"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config(base_url))
    return {**_base_env(home), "CODEX_HOME": str(codex_home), KEY_VARIABLE: "sk-bench-dummy"}


def _codex_missing() -> str | None:
    if _codex_binary() is None:
        return f"the pinned Codex CLI is not installed in {CLI_DIR} (run without --no-install)"
    return None


def _codexcore_env(base_url: str, home: Path) -> dict[str, str]:
    return {
        **_base_env(home),
        "CODEXCORE_HOME": str(home / "codexcore-home"),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-bench-dummy",
        "PYTHONUNBUFFERED": "1",
    }


def _codexcore_missing() -> str | None:
    """Whether ``codexcore app-server`` exists: its ``--help`` answers without an error."""
    done = subprocess.run(
        [sys.executable, "-m", "codexcore", "app-server", "--help"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        return "codexcore app-server not available (`python -m codexcore app-server --help` failed)"
    return None


SERVERS = (
    Server("codexcore", lambda: [sys.executable, "-m", "codexcore", "app-server"],
           _codexcore_env, _codexcore_missing),
    Server("codex", _codex_argv, _codex_env, _codex_missing),
)  # fmt: skip


def thread_params(workdir: Path) -> dict[str, Any]:
    """``thread/start``'s params, the same for every server: no approvals, no sandbox."""
    return {
        "cwd": str(workdir),
        "model": MODEL,
        "approvalPolicy": "never",
        "sandbox": "danger-full-access",
    }


@contextmanager
def scratch() -> Iterator[Path]:
    """A scratch folder outside /tmp (Codex declines to put its helper links under it)."""
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    path = Path(tempfile.mkdtemp(prefix="bench-app-server-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- memory -------------------------------------------------------------------------------


@contextmanager
def sampled(pid: int, every: float = 0.002) -> Iterator[TreeMemory]:
    """The process tree under ``pid`` sampled from a thread while the block runs (see
    :class:`TreeMemory`: the peak of the summed Pss). Sampling costs CPU: such runs are
    not timed."""
    memory = TreeMemory()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            memory.sample(pid)
            time.sleep(every)

    sampler = threading.Thread(target=sample, name="tree-memory", daemon=True)
    sampler.start()
    try:
        yield memory
    finally:
        stop.set()
        sampler.join()
        memory.sample(pid)
