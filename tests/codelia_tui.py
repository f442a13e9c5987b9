"""Driving the real Codelia TUI (seed 000's UI) in tmux against ``codexcore serve --stdio``.

The TUI is the published binary (npm ``@codelia/tui-linux-x64``, pinned), installed
by ``.ci/install-codelia-tui`` into ``.ci/codelia/``. It starts its runtime from
``CODELIA_RUNTIME_CMD`` and ``CODELIA_RUNTIME_ARGS``; here those name this
interpreter and ``-m codexcore serve --stdio``, nothing else, so the TUI talks to
codexcore exactly as a user's would. tmux is the terminal: it answers the
cursor-position query the TUI's inline mode sends, and ``capture-pane`` reads
the screen, scrollback included.

The TUI runs with ``--debug``: that is what makes it show the lines a Codelia
UI otherwise hides (an ``agent.event`` type it does not know, as
``event: TYPE``; every line the runtime writes to stderr, as
``[runtime] ...``; ``runtime status: ...``), so a test can see them.

Every wait is bounded and, when it times out, says what the screen showed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "@codelia/tui-linux-x64"
VERSION = "0.1.81"
# The same package and version as .ci/install-codelia-tui installs.
BINARY = ROOT / ".ci" / "codelia" / "node_modules" / PACKAGE / "bin" / "codelia-tui"

WIDTH, HEIGHT = 120, 50
EXITED = "[codelia-tui exited:"  # what the pane's shell prints, then the status
SEE_SCREEN = " (the TUI's screen is in the captured stdout)"
POLL = 0.05  # seconds between looks at the screen while waiting for a condition

# What a Codelia TUI shows only when something went wrong: an error line (a
# failed RPC, `runtime status: error`, a runtime stderr line that looks like an
# error), a failed tool (✖), an agent.event type outside AgentEvent (shown as
# `event: TYPE` in debug mode), a JSON line it could not place, the runtime dying.
PROBLEMS = (
    re.compile(r"(?im)^.*\berror\b.*$"),
    re.compile(r"(?m)^.*✖.*$"),
    re.compile(r"(?im)^.*traceback.*$"),
    re.compile(r"(?m)^\s*event: \S+\s*$"),
    re.compile(r'(?m)^\s*(?:\[runtime\]\s*)?\{".*$'),
    re.compile(r"(?m)^.*runtime exited.*$"),
)
# The status bar once model.list has answered (before, it reads `model: -/- [-]`).
STATUS_BAR = re.compile(
    r"model: (?P<provider>(?!-/)[^\s/]+)/(?P<model>(?!- )\S+) \[(?P<reasoning>[^\]]*)\]"
)


def tui_binary() -> Path:
    """The installed TUI; skips the test, saying why, when it or tmux is missing."""
    if not BINARY.is_file() or not os.access(BINARY, os.X_OK):
        pytest.skip(
            f"the Codelia TUI ({PACKAGE}@{VERSION}) is not installed at {BINARY}: "
            "run .ci/install-codelia-tui (it needs npm and the npm registry)"
        )
    installed = json.loads((BINARY.parents[1] / "package.json").read_text())["version"]
    if installed != VERSION:
        pytest.skip(
            f"{PACKAGE} {installed} is installed, these tests pin {VERSION}: "
            "run .ci/install-codelia-tui"
        )
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: run .ci/install-codelia-tui (apt-get install tmux)")
    return BINARY


def runtime_env(home: Path, tmp: Path) -> dict[str, str]:
    """The environment the TUI (and so its runtime) starts with: this Python's
    ``-m codexcore serve --stdio`` as the runtime, a private CODEXCORE_HOME and
    HOME, and nothing from the developer's OPENAI_*, CODEXCORE_* or CODELIA_*."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "CODEXCORE_", "CODELIA_", "TMUX"))
    }
    env.update(
        CODELIA_RUNTIME_CMD=sys.executable,
        CODELIA_RUNTIME_ARGS="-m codexcore serve --stdio",
        CODEXCORE_HOME=str(home),
        HOME=str(tmp),
        LANG="C.UTF-8",
        LC_ALL="C.UTF-8",
        TERM="xterm-256color",
        PYTHONUNBUFFERED="1",
    )
    return env


def write_config(home: Path, base_url: str, model: str, **settings: str) -> None:
    """codexcore's config.toml in ``home``: the scripted server, one attempt per request."""
    home.mkdir(parents=True, exist_ok=True)
    lines = [f'model = "{model}"']
    lines += [f'{key} = "{value}"' for key, value in settings.items()]
    lines += ["[provider]", f'base_url = "{base_url}"', "max_attempts = 1"]
    (home / "config.toml").write_text("\n".join(lines) + "\n")


class CodeliaTui:
    """One TUI in a private tmux server; use :meth:`running`."""

    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket = socket
        self.env = env
        self.pid = 0
        self.children: dict[int, str] = {}  # pid -> /proc start time, seen while running

    # --- tmux ------------------------------------------------------------------------------

    def tmux(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", "/dev/null", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"tmux {shlex.join(args)}: {done.stderr.strip()}")
        return done.stdout

    @classmethod
    @contextlib.contextmanager
    def running(
        cls, *, cwd: Path, home: Path, tmp: Path, args: tuple[str, ...] = ()
    ) -> Iterator[CodeliaTui]:
        """The TUI started in ``cwd`` with ``--debug`` and ``args``; on the way out,
        whatever still runs is killed, and a failing test's output holds the screen."""
        # The tmux socket in a short directory of its own: a Unix socket's path is at
        # most 107 bytes, and a test's tmp_path can be longer.
        tui = cls(Path(tempfile.mkdtemp(prefix="ctui-")) / "tmux.sock", runtime_env(home, tmp))
        # A shell between tmux and the TUI reports its exit status on screen: tmux
        # 3.3 sometimes never reaps a pane's process (pane_dead_status stays empty).
        tui.tmux(
            "set-option", "-g", "remain-on-exit", "on", ";",
            "set-option", "-g", "history-limit", "10000", ";",
            "new-session", "-d", "-s", "tui", "-x", str(WIDTH), "-y", str(HEIGHT),
            "-c", str(cwd), "--", "sh", "-c", f'"$0" "$@"; echo "{EXITED} $?"',
            str(tui_binary()), "--debug", *args,
        )  # fmt: skip
        tui.pid = int(tui.tmux("display-message", "-p", "-t", "tui", "#{pane_pid}").strip())
        try:
            yield tui
        except BaseException:  # the test failed: show what the user saw
            print(tui.report())
            raise
        finally:
            tui._teardown()

    def _teardown(self) -> None:
        self._note_children()
        self.tmux("kill-server", check=False)
        for pid, started in self.children.items():
            if _start_time(pid) == started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.socket.parent, ignore_errors=True)

    # --- the screen ------------------------------------------------------------------------

    def screen(self) -> str:
        """Everything the pane shows and has scrolled off, wrapped lines joined."""
        text = self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "tui", check=False)
        return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")

    def report(self) -> str:
        screen = self.screen()
        runtime = [line for line in screen.splitlines() if "[runtime]" in line]
        return (
            f"--- the Codelia TUI's screen ---\n{screen}\n"
            f"--- the runtime's stderr, as the TUI showed it ---\n" + "\n".join(runtime)
        )

    def wait_for(self, pattern: str, *, within: float = 15.0) -> re.Match[str]:
        """Wait until the screen matches ``pattern`` (a regex, multiline); return the match."""
        compiled = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + within
        while True:
            self._note_children()
            match = compiled.search(self.screen())
            if match is not None:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the screen did not show {pattern!r} within {within} s{SEE_SCREEN}"
                )
            time.sleep(POLL)

    def problems(self) -> list[str]:
        """The error, failed-tool, unknown-event and stray-JSON lines on the screen."""
        screen = self.screen()
        return [m.group(0).strip() for p in PROBLEMS for m in p.finditer(screen)]

    # --- typing ----------------------------------------------------------------------------

    def ready(self, *, within: float = 15.0) -> re.Match[str]:
        """Wait for the status bar to name a model (the TUI holds prompts back until then)."""
        return self.wait_for(STATUS_BAR.pattern, within=within)

    def type(self, text: str) -> None:
        """Type ``text`` (literally: no key names)."""
        self.tmux("send-keys", "-t", "tui", "-l", text)

    def submit(self, text: str) -> None:
        """Type ``text`` into the composer and press Enter."""
        self.type(text)
        self.press("Enter")

    def press(self, key: str) -> None:
        """Press one key, by tmux's name for it (``y``, ``Enter``, ``Tab``, ``C-c``)."""
        self.tmux("send-keys", "-t", "tui", key)

    def quit(self, *, presses: int = 1, within: float = 10.0) -> int:
        """Ctrl-C, as a user quits (once at the idle prompt; twice quickly during a run,
        which force-quits); wait for the TUI to exit, then for every process it started
        (the runtime and its commands) to be gone. Returns the TUI's exit status
        (128 + N when signal N ended it)."""
        self._note_children()
        for _ in range(presses):
            self.press("C-c")
        status = self.wait_for(rf"^{re.escape(EXITED)} (\d+)$", within=within)[1]
        deadline = time.monotonic() + within
        left = self._wait_children_gone(deadline)
        assert not left, f"processes left after the TUI quit: {left}{SEE_SCREEN}"
        return int(status)

    # --- processes -------------------------------------------------------------------------

    def processes(self) -> list[str]:
        """The command lines of everything the TUI runs now (the runtime, its commands)."""
        self._note_children()
        return [_cmdline(pid) for pid in _descendants(self.pid) if not _zombie(pid)]

    def wait_for_process(self, needle: str, *, within: float = 15.0, whole: bool = False) -> None:
        """Wait until one of :meth:`processes` contains ``needle`` (``whole``: is it,
        so that ``sleep 30`` is the sleep itself, not the shell line that will start it)."""
        deadline = time.monotonic() + within

        def found(line: str) -> bool:
            return line.strip() == needle if whole else needle in line

        while not any(found(line) for line in self.processes()):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no process with {needle!r} within {within} s: {self.processes()}{SEE_SCREEN}"
                )
            time.sleep(POLL)

    def wait_no_process(self, needle: str, *, within: float = 15.0) -> None:
        """Wait until none of :meth:`processes` contains ``needle``."""
        deadline = time.monotonic() + within
        while left := [line for line in self.processes() if needle in line]:
            if time.monotonic() > deadline:
                raise AssertionError(f"still running after {within} s: {left}{SEE_SCREEN}")
            time.sleep(POLL)

    def _note_children(self) -> None:
        """Remember every live descendant of the TUI (the runtime and its commands)."""
        for pid in _descendants(self.pid):
            started = _start_time(pid)
            if started is not None:
                self.children.setdefault(pid, started)

    def _wait_children_gone(self, deadline: float) -> list[str]:
        while True:
            left = [
                f"{pid} {_cmdline(pid)}"
                for pid, started in self.children.items()
                if _start_time(pid) == started and not _zombie(pid)
            ]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(POLL)


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after it.
    return raw[raw.rindex(")") + 2 :].split()


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return None if fields is None else fields[19]


def _zombie(pid: int) -> bool:
    fields = _stat(pid)
    return fields is None or fields[0] == "Z"


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    return "?"


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None:
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
