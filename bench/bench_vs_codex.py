"""codexcore against the OpenAI Codex CLI, as whole processes, on the same scripted model.

The Codex CLI (npm package ``@openai/codex``, a Rust binary) is what users
would pick instead of codexcore. Both run here against one local scripted
Responses-API server (``codexcore.testing.ScriptedResponsesServer``), so the
model costs the same on both sides and can be subtracted:

1. **Fixed costs**, the bare limits beside the figures: ``python -c pass``,
   ``codexcore --help``, ``codex --version``, and the scripted server
   answering one curl-like request.
2. **One Task, whole process**: a prompt whose first model response runs a
   command (``echo hello``) and whose second is the final message:
   ``codexcore exec --json --ephemeral`` against
   ``codex exec --json --skip-git-repo-check --ephemeral``. A warm-up run of
   each, then ``--runs`` runs of each, alternating: the median wall time, its
   spread, the model's share (time the server spent answering), the phases
   (spawn to the first request, the command, the last answer to exit) and
   the CPU time. Then a few more runs of each with the process tree sampled
   every 2 ms from ``/proc`` for its peak memory (see ``TreeMemory``).
3. **A 20-Turn session over stdio**: ``codexcore serve --stdio`` (NDJSON
   Submissions/Events) against ``codex app-server`` (JSON-RPC), each started
   once; 20 user inputs in sequence, each answered with a final message, every
   fifth after one command. Time per Turn minus the model's share, median and
   p90.

The Codex CLI is installed into ``bench/.codex-cli/`` (``npm install --prefix``,
pinned to ``--codex-version``) if missing and called through its native
binary, not the node shim. Its ``CODEX_HOME`` is ``bench/.codex-home/``
(recreated each run; Codex must not have it under /tmp), whose
``config.toml`` defines a model provider for the scripted server
(``wire_api = "responses"``, a dummy key variable) and turns off Codex's
network features (plugins, remote plugins, the update check, analytics).
Both folders hold a ``.gitignore`` of ``*``. Both sides run with approvals
off and no sandbox (``never`` / ``danger-full-access``), so neither waits for
a person, and with an empty ``HOME``: Codex runs login shells, which would
otherwise time this machine's dotfiles (one row shows Codex with them).
codexcore runs from a regular (not editable) install of the working tree
in ``bench/.codexcore-venv/``, made and kept up to date by ``_installed.py``
(a venv of the same interpreter holding only codexcore and its dependencies,
pinned to the dev venv's versions, bytecode compiled by pip), as a user's
install runs. One extra row shows the dev venv's editable install
(``.venv/bin/codexcore``) for comparison.

Run ``.venv/bin/python bench/bench_vs_codex.py`` (``--quick`` for a smoke
run, ``--runs N`` for more runs). The output is Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import http.client
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from _common import Table, fmt_ms, machine_info, percentile, verdict
from _installed import VENV, ensure_installed, source_digest, user_environment

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    shell_call,
    text_response,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLI_DIR = HERE / ".codex-cli"
CODEX_HOME = HERE / ".codex-home"
CODEXCORE = VENV / "bin" / "codexcore"
"""codexcore as users install it: see ``_installed.py`` (main() installs it if stale)."""
PYTHON = VENV / "bin" / "python"
DEV_CODEXCORE = Path(sys.executable).parent / "codexcore"
"""The dev venv's editable install, for one comparison row."""

CODEX_VERSION = "0.169.0"
"""The ``@openai/codex`` version installed when none is there (the one measured)."""

MODEL = "gpt-5.5"
"""A slug in Codex's bundled catalogue, so Codex runs with real model metadata."""

KEY_VARIABLE = "CODEX_BENCH_API_KEY"
PROVIDER = "codexcore-bench"
PROMPT = "Run `echo hello` in the shell, then tell me what it printed."
COMMAND_MARK = "run `echo hello`"
"""What, in a user message, asks the scripted model for the command (case aside)."""
FINAL = "It printed hello."
TIMEOUT = 120.0
"""Seconds any one process (or one Turn) may take before the benchmark kills it."""

# Codex's launcher (bin/codex.js) picks the native binary this way.
_TARGETS = {
    ("Linux", "x86_64"): ("x86_64-unknown-linux-musl", "@openai/codex-linux-x64"),
    ("Linux", "aarch64"): ("aarch64-unknown-linux-musl", "@openai/codex-linux-arm64"),
    ("Darwin", "x86_64"): ("x86_64-apple-darwin", "@openai/codex-darwin-x64"),
    ("Darwin", "arm64"): ("aarch64-apple-darwin", "@openai/codex-darwin-arm64"),
}


# --- the Codex CLI ----------------------------------------------------------------------


def _ignore_all(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("# made by bench/bench_vs_codex.py\n*\n")


def find_codex(cli_dir: Path) -> Path | None:
    """The native ``codex`` binary inside the installed package, or None."""
    target, package = _TARGETS.get((platform.system(), platform.machine()), ("", ""))
    if not target:
        raise SystemExit(f"no Codex binary for {platform.system()} {platform.machine()}")
    modules = cli_dir / "node_modules"
    for candidate in (
        modules / package / "vendor" / target / "bin" / "codex",
        modules / "@openai" / "codex" / "vendor" / target / "bin" / "codex",  # older layout
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            with candidate.open("rb") as binary:
                if binary.read(2) != b"#!":  # a native executable, not a script shim
                    return candidate
    return None


def install_codex(cli_dir: Path, version: str) -> Path:
    """``npm install --prefix cli_dir @openai/codex@version`` unless it is there; the binary."""
    _ignore_all(cli_dir)
    found = find_codex(cli_dir)
    installed = _installed_version(cli_dir)
    if found is not None and installed == version:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to install @openai/codex (apt-get install npm)")
    print(f"installing @openai/codex@{version} into {cli_dir} …", file=sys.stderr, flush=True)
    subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(cli_dir),
            "--no-audit",
            "--no-fund",
            f"@openai/codex@{version}",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found = find_codex(cli_dir)
    if found is None:
        raise SystemExit(f"@openai/codex@{version} installed, but no native binary was found")
    return found


def _installed_version(cli_dir: Path) -> str | None:
    manifest = cli_dir / "node_modules" / "@openai" / "codex" / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return str(version)


def codex_config(base_url: str) -> str:
    """``$CODEX_HOME/config.toml``: the scripted provider, no approvals, no network features."""
    return f"""\
# Written by bench/bench_vs_codex.py: Codex against the local scripted Responses server.
model = "{MODEL}"
model_provider = "{PROVIDER}"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.{PROVIDER}]
name = "codexcore benchmark (scripted)"
base_url = "{base_url}"
wire_api = "responses"
env_key = "{KEY_VARIABLE}"

[features]
plugins = false
remote_plugin = false

[analytics]
enabled = false
"""


def write_codex_home(home: Path, base_url: str) -> None:
    """A fresh ``CODEX_HOME`` holding only ``config.toml`` (and a ``.gitignore``)."""
    resolved = home.resolve()
    if resolved.is_relative_to("/tmp") or resolved.is_relative_to(tempfile.gettempdir()):
        raise SystemExit(f"CODEX_HOME must not lie under /tmp: {resolved}")
    shutil.rmtree(home, ignore_errors=True)
    _ignore_all(home)
    (home / "config.toml").write_text(codex_config(base_url))


# --- the scripted model -----------------------------------------------------------------


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class BenchModel(ScriptedModel):
    """A stateless scripted model that both clients can talk to, run after run.

    It answers by what the request holds, so it needs no script: after a tool
    output, the final message; after a user message asking for the command,
    a call of whatever shell tool the client offers (Codex offers
    ``exec_command`` with a ``cmd`` string, codexcore ``shell`` with an argv);
    after any other user message, a short answer. It counts tool outputs that
    carry the command's output, to check the command really ran.
    """

    def __init__(self) -> None:
        super().__init__()
        self.outputs_seen = 0
        self.unexpected: collections.Counter[str] = collections.Counter()

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        reply = self._decide(body)
        with self._lock:
            del self.requests[:-2]  # keep the last requests only, for a look when in doubt
            self.requests.append(body)
        return reply

    def _decide(self, body: dict[str, Any]) -> ScriptedResponse:
        items = [item for item in body.get("input") or [] if isinstance(item, dict)]
        for item in reversed(items):
            if item.get("type") == "function_call_output":
                if "hello" in json.dumps(item.get("output")):
                    with self._lock:
                        self.outputs_seen += 1
                return text_response(FINAL)
            if item.get("role") == "user":
                if COMMAND_MARK in _text_of(item).lower():
                    return self._command(body)
                return text_response("Noted.")
        with self._lock:
            self.unexpected["no user message"] += 1
        return text_response("No user message?")

    def _command(self, body: dict[str, Any]) -> ScriptedResponse:
        tools = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
        if "exec_command" in tools:  # Codex's unified exec tool
            return function_call_response("exec_command", {"cmd": "echo hello"})
        if "shell" in tools:  # codexcore's (and older Codex's) shell tool
            return shell_call(["echo", "hello"])
        with self._lock:
            self.unexpected[f"no shell tool among {sorted(map(str, tools))}"] += 1
        return text_response("I have no shell tool.")


class TimedServer(ScriptedResponsesServer):
    """The scripted server, adding up the time it spends answering: the model's share.

    An answer's time runs from the request fully read to the last byte of the
    response written; ``spans`` keeps the last answers' (start, end). ``paths``
    counts every request by method and path, to show that a client asked for
    nothing but ``/responses``.
    """

    def __init__(self, model: ScriptedModel) -> None:
        super().__init__(model)
        self._began: dict[asyncio.Task[Any], float] = {}
        self._stats_lock = threading.Lock()
        self.busy = 0.0
        self.answered = 0
        self.in_flight = 0
        self.spans: collections.deque[tuple[float, float]] = collections.deque(maxlen=64)
        self.paths: collections.Counter[str] = collections.Counter()

    async def _reply(self, request: Any) -> ScriptedResponse:
        task = asyncio.current_task()
        if task is not None:
            self._began[task] = time.perf_counter()
        with self._stats_lock:
            self.paths[f"{request.method} {request.path}"] += 1
            self.answered += 1
            self.in_flight += 1
        return await super()._reply(request)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            return await super()._exchange(reader, writer)
        finally:
            task = asyncio.current_task()
            began = self._began.pop(task, None) if task is not None else None
            if began is not None:
                ended = time.perf_counter()
                with self._stats_lock:
                    self.busy += ended - began
                    self.in_flight -= 1
                    self.spans.append((began, ended))

    def spans_since(self, moment: float) -> list[tuple[float, float]]:
        """The (start, end) of the answers started since ``moment`` (call after ``snapshot``)."""
        with self._stats_lock:
            return [span for span in self.spans if span[0] >= moment]

    def snapshot(self) -> tuple[float, int]:
        """(seconds spent answering, requests answered or being answered) so far.

        First waits (a second at most) for answers under way to end: a client
        may have read the last byte before the server thread counts it.
        """
        deadline = time.perf_counter() + 1.0
        while True:
            with self._stats_lock:
                if self.in_flight == 0 or time.perf_counter() > deadline:
                    return self.busy, self.answered
            time.sleep(0.0002)


# --- processes --------------------------------------------------------------------------


@dataclass
class Outcome:
    """One whole process: wall time, peak memory, the model's share, and whether it worked."""

    wall: float
    model: float
    answers: int
    ok: bool
    detail: str = ""
    cpu: float = 0.0  # CPU seconds, user + system, of the process and its children
    memory: TreeMemory | None = None  # from run_sampled
    phases: tuple[float, float, float] | None = None  # see Runner._outcome

    @property
    def beyond(self) -> float:
        return self.wall - self.model


def _kill_later(proc: subprocess.Popen[bytes], seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, proc.kill)
    timer.daemon = True
    timer.start()
    return timer


def _reap(proc: subprocess.Popen[bytes], flags: int = 0) -> tuple[int, float] | None:
    """Wait for the process: (exit code, CPU seconds), or None while it runs (``WNOHANG``).

    The CPU time (user + system) counts the process and every descendant it
    waited for. (Not ``wait4``'s ``ru_maxrss`` for memory: the kernel counts
    into it the RSS the child had before its ``exec``: this benchmark's own.)
    """
    pid, status, usage = os.wait4(proc.pid, flags)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a live process and its waited-for children so far."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    ticks = sum(int(fields[index]) for index in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        with (
            contextlib.suppress(OSError, ValueError),
            open(f"/proc/{pid}/task/{tid}/children") as children,
        ):
            found += [int(child) for child in children.read().split()]
    return found


def _tree(root: int) -> list[tuple[int, int | None]]:
    """Every process of ``root``'s tree, each with its parent (None for the root)."""
    found: list[tuple[int, int | None]] = [(root, None)]
    index = 0
    while index < len(found):
        parent = found[index][0]
        found += [(child, parent) for child in _children(parent)]
        index += 1
    return found


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read()
    except OSError:
        return b""


class TreeMemory:
    """The peak memory of a process tree, from samples of ``/proc``.

    ``peak``: the largest sum, over the samples, of the proportional set size
    (Pss) of every process of the tree alive at the time. Pss divides each
    page among the processes mapping it, so the shared C library, say, does
    not count twice, as in a sum of resident sets. A child caught between its
    fork and its ``exec`` (still a copy-on-write image of its parent: the same
    command line) is left out, since reading its Pss and its parent's at two
    moments could count the shared pages one and a half times. ``largest``:
    the largest peak resident set (VmHWM) of any one process, what ``time -v``
    shows. VmHWM only grows, so it misses only what a process added in its
    last interval; Pss is a sample: a peak between two samples, or a child
    living less than an interval, may be missed.
    """

    def __init__(self) -> None:
        self.peak = 0
        self.largest = 0
        self.seen: set[int] = set()

    def sample(self, root: int) -> None:
        total = 0
        for pid, parent in _tree(root):
            if parent is not None and _cmdline(pid) == _cmdline(parent):
                continue  # forked, not yet exec'd: a copy-on-write image of its parent
            hwm, pss = _hwm(pid), _pss(pid)
            if hwm:
                self.seen.add(pid)
                self.largest = max(self.largest, hwm)
                total += pss
        self.peak = max(self.peak, total)


def _hwm(pid: int) -> int:
    """A process's peak resident set (VmHWM) in bytes, 0 if it is gone."""
    return _field(f"/proc/{pid}/status", "VmHWM:")


def _pss(pid: int) -> int:
    """A process's proportional set size now, in bytes, 0 if it is gone."""
    return _field(f"/proc/{pid}/smaps_rollup", "Pss:")


def _field(path: str, name: str) -> int:
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(name):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError):
        pass
    return 0


class Runner:
    """Runs the clients' processes against one scripted server and measures them."""

    def __init__(self, codex: Path, server: TimedServer, model: BenchModel, scratch: Path) -> None:
        self.codex = codex
        self.server = server
        self.model = model
        self.workdir = scratch / "work"
        self.codexcore_home = scratch / "codexcore-home"
        self.pycache = scratch / "pycache"  # the editable dev install's bytecode
        self.home = scratch / "home"
        for folder in (self.workdir, self.codexcore_home, self.pycache, self.home):
            folder.mkdir(parents=True, exist_ok=True)
        # Both sides get an empty HOME: a login shell (Codex runs one to snapshot the
        # shell, and commands in one by default) then reads no dotfiles of this machine.
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OPENAI_", "CODEX_", "CODEXCORE_", "RUST_LOG"))
        }
        user_home = base.get("HOME", "")
        base["HOME"] = str(self.home)
        self.codexcore_env = {
            **user_environment(base),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-bench-dummy",
            "CODEXCORE_HOME": str(self.codexcore_home),
        }
        # The editable dev install: its bytecode in a private cache the warm-up fills.
        self.dev_env = {**self.codexcore_env, "PYTHONPYCACHEPREFIX": str(self.pycache)}
        self.codex_env = {**base, "CODEX_HOME": str(CODEX_HOME), KEY_VARIABLE: "sk-bench-dummy"}
        self.codex_user_env = {**self.codex_env, "HOME": user_home}

    # the commands

    def codexcore_exec(self, codexcore: Path = CODEXCORE) -> list[str]:
        return [
            str(codexcore), "exec", "--json", "--ephemeral", "--model", MODEL,
            "--approval-policy", "never", "--sandbox", "danger-full-access",
            "--cd", str(self.workdir), PROMPT,
        ]  # fmt: skip

    def codex_exec(self, *extra: str) -> list[str]:
        return [
            str(self.codex), "exec", "--json", "--skip-git-repo-check", "--ephemeral",
            *extra, "-C", str(self.workdir), PROMPT,
        ]  # fmt: skip

    # running

    def run(self, argv: Sequence[str], env: dict[str, str], *, check_task: bool = True) -> Outcome:
        """Run ``argv`` to its end; wall time from spawn to reaped."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            busy0, answered0, seen0 = *self.server.snapshot(), self.model.outputs_seen
            began = time.perf_counter()
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=self.workdir
            )
            timer = _kill_later(proc, TIMEOUT)
            reaped = _reap(proc)
            ended = time.perf_counter()
            timer.cancel()
            assert reaped is not None  # a blocking wait returns the exit code
            return self._outcome(
                reaped, began, ended, out, err, busy0, answered0, seen0, check_task=check_task
            )

    def run_sampled(
        self, argv: Sequence[str], env: dict[str, str], *, check_task: bool = True
    ) -> Outcome:
        """Run ``argv`` with its process tree sampled every 2 ms for its peak memory.

        See :class:`TreeMemory`. Sampling costs CPU: these runs are not timed.
        """
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            busy0, answered0, seen0 = *self.server.snapshot(), self.model.outputs_seen
            began = time.perf_counter()
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=self.workdir
            )
            timer = _kill_later(proc, TIMEOUT)
            memory = TreeMemory()
            while (reaped := _reap(proc, os.WNOHANG)) is None:
                memory.sample(proc.pid)
                time.sleep(0.002)
            ended = time.perf_counter()
            timer.cancel()
            outcome = self._outcome(
                reaped, began, ended, out, err, busy0, answered0, seen0, check_task=check_task
            )
            outcome.memory = memory
            return outcome

    def _outcome(
        self,
        reaped: tuple[int, float],
        began: float,
        ended: float,
        out: IO[bytes],
        err: IO[bytes],
        busy0: float,
        answered0: int,
        seen0: int,
        *,
        check_task: bool = True,
    ) -> Outcome:
        """How the run went. With two model requests, its phases too: spawn to the
        first request, the first answer's end to the second request (the client
        handles the answer and runs the command), the last answer's end to exit.
        """
        busy, answered = self.server.snapshot()
        answers = answered - answered0
        code, cpu = reaped
        ok, detail = code == 0, f"exit {code}"
        if check_task:
            out.seek(0)
            printed = out.read().decode(errors="replace")
            ran = self.model.outputs_seen - seen0
            ok = ok and answers == 2 and ran == 1 and FINAL in printed
            detail += f", {answers} model requests, command output seen {ran}x"
            if not ok:
                err.seek(0)
                detail += "\nstdout: " + printed[-1500:]
                detail += "\nstderr: " + err.read().decode(errors="replace")[-1500:]
        outcome = Outcome(ended - began, busy - busy0, answers, ok, detail, cpu=cpu)
        spans = self.server.spans_since(began)
        if len(spans) == 2:
            (first, first_end), (second, second_end) = spans
            outcome.phases = (first - began, second - first_end, ended - second_end)
        return outcome


# --- the stdio sessions -----------------------------------------------------------------


@dataclass
class Turn:
    """One Turn of a stdio session, timed from the input sent to its last event read."""

    wall: float
    model: float  # the scripted server's time answering the Turn's requests
    command: bool  # whether the Turn ran a command (two model requests)
    to_first: float | None  # input sent to the first model request
    after_last: float | None  # the last answer's end to the Turn's last event
    cpu: float = 0.0  # CPU seconds the server process (and its children) spent on the Turn

    @property
    def beyond(self) -> float:
        return self.wall - self.model


@dataclass
class Session:
    """One long-lived server process driven over stdio for several Turns."""

    name: str
    startup: float = 0.0
    startup_cpu: float = 0.0
    """The server's CPU time (user + system, every thread) when it was ready."""
    turns: list[Turn] = field(default_factory=list)
    memory: TreeMemory = field(default_factory=TreeMemory)  # sampled between Turns
    exit_code: int | None = None
    failures: list[str] = field(default_factory=list)


def _prompt(turn: int) -> str:
    if turn % 5 == 0:
        return f"Turn {turn}: {COMMAND_MARK} in the shell, then tell me what it printed."
    return f"Turn {turn}: just acknowledge this."


class StdioPeer:
    """A child process speaking one JSON object per line on stdin/stdout."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path, err: IO[bytes]):
        self.began = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd
        )
        self.timer: threading.Timer | None = None
        self.memory = TreeMemory()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read_until(self, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Messages up to and including the first for which ``done`` is true."""
        assert self.proc.stdout is not None
        seen: list[dict[str, Any]] = []
        self.timer = _kill_later(self.proc, TIMEOUT)
        try:
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"the server closed its output after {seen[-3:]}")
                message = json.loads(line)
                seen.append(message)
                if done(message):
                    return seen
        finally:
            self.timer.cancel()

    def sample(self) -> None:
        """Note the peak memory of the process tree now (between Turns, off the clock)."""
        self.memory.sample(self.proc.pid)

    def close(self) -> int:
        """End of input, then wait for the process to exit: its exit code."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.sample()
        self.proc.stdin.close()
        timer = _kill_later(self.proc, TIMEOUT)
        self.proc.stdout.read()
        reaped = _reap(self.proc)
        timer.cancel()
        assert reaped is not None
        return reaped[0]


class SessionDriver:
    """Drives ``codexcore serve --stdio`` and ``codex app-server`` through Turns."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def _turn(
        self,
        session: Session,
        peer: StdioPeer,
        number: int,
        send: Callable[[], None],
        wait: Callable[[], bool],
    ) -> None:
        server = self.runner.server
        busy0, _ = server.snapshot()
        cpu0 = _cpu_seconds(peer.proc.pid)
        began = time.perf_counter()
        send()
        ok = wait()
        ended = time.perf_counter()
        busy, _ = server.snapshot()
        spans = server.spans_since(began)
        session.turns.append(
            Turn(
                ended - began,
                busy - busy0,
                number % 5 == 0,
                spans[0][0] - began if spans else None,
                ended - spans[-1][1] if spans else None,
                _cpu_seconds(peer.proc.pid) - cpu0,
            )
        )
        if not ok:
            session.failures.append(f"turn {number}")
        peer.sample()

    @staticmethod
    def _close(session: Session, peer: StdioPeer) -> None:
        session.exit_code = peer.close()
        session.memory = peer.memory
        if session.exit_code != 0:
            session.failures.append(f"exit code {session.exit_code}")

    def codexcore(self, turns: int) -> Session:
        runner, session = self.runner, Session("codexcore serve --stdio")
        argv = [str(CODEXCORE), "serve", "--stdio", "--cwd", str(runner.workdir)]
        with tempfile.TemporaryFile() as err:
            peer = StdioPeer(argv, runner.codexcore_env, runner.workdir, err)
            peer.send(
                {
                    "id": "configure",
                    "op": {
                        "type": "configure_session",
                        "model": MODEL,
                        "cwd": str(runner.workdir),
                        "approval_policy": "never",
                        "sandbox_policy": {
                            "type": "danger-full-access",
                            "writable_roots": [],
                            "network_access": False,
                        },
                    },
                }
            )
            peer.read_until(lambda event: event["msg"]["type"] == "session_configured")
            session.startup = time.perf_counter() - peer.began
            session.startup_cpu = _cpu_seconds(peer.proc.pid)
            for number in range(1, turns + 1):
                sub_id = f"turn-{number}"

                def send(number: int = number, sub_id: str = sub_id) -> None:
                    items = [{"type": "text", "text": _prompt(number)}]
                    peer.send({"id": sub_id, "op": {"type": "user_input", "items": items}})

                def wait(sub_id: str = sub_id) -> bool:
                    last = peer.read_until(
                        lambda event: (
                            event.get("id") == sub_id
                            and event["msg"]["type"] in ("task_complete", "turn_aborted", "error")
                        )
                    )[-1]
                    return bool(last["msg"]["type"] == "task_complete")

                self._turn(session, peer, number, send, wait)
            self._close(session, peer)
        return session

    def codexcore_jsonrpc_start(self) -> tuple[float, float]:
        """``serve --stdio`` spawned to a JSON-RPC ``initialize`` answered (seed 000), then
        closed: the start-up a JSON-RPC UI sees."""
        runner = self.runner
        argv = [str(CODEXCORE), "serve", "--stdio", "--cwd", str(runner.workdir)]
        with tempfile.TemporaryFile() as err:
            peer = StdioPeer(argv, runner.codexcore_env, runner.workdir, err)
            params = {"protocol_version": "0", "client": {"name": "bench", "version": "0"}}
            peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
            reply = peer.read_until(lambda m: m.get("id") == 1)[-1]
            ready = time.perf_counter() - peer.began
            cpu = _cpu_seconds(peer.proc.pid)
            if "result" not in reply:
                raise RuntimeError(f"codexcore initialize: {reply}")
            if peer.close() != 0:
                raise RuntimeError("codexcore serve --stdio (JSON-RPC) did not exit 0")
        return ready, cpu

    def floor_start(self, script: str) -> tuple[float, float]:
        """The benchmark venv's interpreter running ``script``, spawned to its answer to one
        line read back: the limit an interpreted server's start cannot go below."""
        runner = self.runner
        with tempfile.TemporaryFile() as err:
            argv = [str(VENV / "bin" / "python"), "-c", script]
            peer = StdioPeer(argv, runner.codexcore_env, runner.workdir, err)
            peer.send({"id": 1})
            peer.read_until(lambda m: m.get("id") == 1)
            ready = time.perf_counter() - peer.began
            cpu = _cpu_seconds(peer.proc.pid)
            if peer.close() != 0:
                raise RuntimeError(f"the floor script failed: {script}")
        return ready, cpu

    def codexcore_acp_start(self) -> tuple[float, float]:
        """``codexcore acp`` spawned to ``initialize`` and ``session/new`` answered (an
        editor's first prompt can go), then closed."""
        runner = self.runner
        with tempfile.TemporaryFile() as err:
            peer = StdioPeer([str(CODEXCORE), "acp"], runner.codexcore_env, runner.workdir, err)
            initialize = {"protocolVersion": 1, "clientCapabilities": {}}
            peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
            first = peer.read_until(lambda m: m.get("id") == 1 and "method" not in m)[-1]
            new = {"cwd": str(runner.workdir), "mcpServers": []}
            peer.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new})
            reply = peer.read_until(lambda m: m.get("id") == 2 and "method" not in m)[-1]
            ready = time.perf_counter() - peer.began
            cpu = _cpu_seconds(peer.proc.pid)
            for answer in (first, reply):
                if "result" not in answer:
                    raise RuntimeError(f"codexcore acp: {answer}")
            if peer.close() != 0:
                raise RuntimeError("codexcore acp did not exit 0")
        return ready, cpu

    def codex(self, turns: int) -> Session:
        runner, session = self.runner, Session("codex app-server")
        with tempfile.TemporaryFile() as err:
            peer = StdioPeer(
                [str(runner.codex), "app-server"], runner.codex_env, runner.workdir, err
            )
            ids = iter(range(1, 1_000_000))

            def request(method: str, params: dict[str, Any]) -> int:
                request_id = next(ids)
                peer.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
                return request_id

            def answer(request_id: int) -> dict[str, Any]:
                replies = peer.read_until(lambda m: m.get("id") == request_id and "method" not in m)
                reply = replies[-1]
                if "error" in reply:
                    raise RuntimeError(f"codex app-server: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result

            answer(request("initialize", {"clientInfo": {"name": "bench", "version": "0"}}))
            peer.send({"jsonrpc": "2.0", "method": "initialized"})
            started = answer(
                request(
                    "thread/start",
                    {
                        "model": MODEL,
                        "cwd": str(runner.workdir),
                        "approvalPolicy": "never",
                        "sandbox": "danger-full-access",
                    },
                )
            )
            thread_id = started["thread"]["id"]
            session.startup = time.perf_counter() - peer.began
            session.startup_cpu = _cpu_seconds(peer.proc.pid)
            for number in range(1, turns + 1):

                def send(number: int = number) -> None:
                    items = [{"type": "text", "text": _prompt(number)}]
                    request("turn/start", {"threadId": thread_id, "input": items})

                def wait() -> bool:
                    # The Turn ends, or the server asks us something (an approval?).
                    last = peer.read_until(
                        lambda m: (
                            m.get("method") == "turn/completed" or ("method" in m and "id" in m)
                        )
                    )[-1]
                    status = last.get("params", {}).get("turn", {}).get("status")
                    return last.get("method") == "turn/completed" and status == "completed"

                self._turn(session, peer, number, send, wait)
            self._close(session, peer)
        return session


# --- statistics and tables --------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _spread(values: Sequence[float]) -> str:
    return f"{fmt_ms(min(values))} - {fmt_ms(max(values))}"


def _mib(size: float) -> str:
    return f"{size / (1024 * 1024):,.1f} MiB"


def _bare_commands(runner: Runner) -> list[tuple[str, list[str], dict[str, str]]]:
    return [
        ("`python -c pass` (the install's interpreter)", [str(PYTHON), "-c", "pass"],
         runner.codexcore_env),
        ("`codexcore --help` (interpreter + CLI start-up)", [str(CODEXCORE), "--help"],
         runner.codexcore_env),
        ("`codex --version` (native binary start-up)", [str(runner.codex), "--version"],
         runner.codex_env),
    ]  # fmt: skip


def bare_limits(runner: Runner, runs: int) -> Table:
    """The fixed costs, alternating: interpreter start, CLI start, one model answer."""
    commands = _bare_commands(runner)
    walls: dict[str, list[float]] = {label: [] for label, _, _ in commands}
    for round_ in range(runs + 1):
        for label, argv, env in commands:
            outcome = runner.run(argv, env, check_task=False)
            if not outcome.ok:
                raise SystemExit(f"{label} failed: {outcome.detail}")
            if round_:  # the first round warms up
                walls[label].append(outcome.wall)
    table = Table("Fixed costs (the bare limits)", ["what", "median wall", "min - max"])
    for label, _, _ in commands:
        table.add(label, fmt_ms(_median(walls[label])), _spread(walls[label]))
    client, server = _curl_like(runner.server, runs * 3)
    table.add(
        "scripted server: one answer (new connection, POST, whole SSE body), client side",
        fmt_ms(_median(client)), _spread(client),
    )  # fmt: skip
    table.add("… of which the server's own time (the model's share)", fmt_ms(_median(server)),
              _spread(server))  # fmt: skip
    table.note(
        f"Each process row: the median of {runs} runs after a warm-up, the rows alternating; "
        f"the server rows: {runs * 3} requests from this process."
    )
    return table


def _curl_like(server: TimedServer, count: int) -> tuple[list[float], list[float]]:
    body = json.dumps(
        {"model": MODEL, "stream": True, "input": [{"role": "user", "content": "hi"}]}
    ).encode()
    client: list[float] = []
    own: list[float] = []
    for index in range(count + 1):
        busy0, _ = server.snapshot()
        began = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("POST", "/v1/responses", body, {"content-type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        connection.close()
        elapsed = time.perf_counter() - began
        if response.status != 200 or b"response.completed" not in data:
            raise SystemExit(f"the scripted server answered {response.status}: {data[:200]!r}")
        if index:
            client.append(elapsed)
            own.append(server.snapshot()[0] - busy0)
    return client, own


LABELS = {
    "codexcore": "`codexcore exec --json --ephemeral`",
    "codex": "`codex exec --json --skip-git-repo-check --ephemeral`",
    "dev": "`codexcore exec` from the dev venv's editable install (`.venv/bin/codexcore`)",
    "codex-user-home": "`codex exec`, with the user's own HOME (its login shells read ~/.bashrc)",
}


def _alternate(index: int) -> tuple[str, str]:
    return ("codexcore", "codex") if index % 2 == 0 else ("codex", "codexcore")


def exec_task(runner: Runner, runs: int) -> tuple[Table, dict[str, list[Outcome]], list[str]]:
    """The Task as whole processes, timed: a warm-up of each, then ``runs`` alternating."""
    commands = {
        "codexcore": (runner.codexcore_exec(), runner.codexcore_env),
        "codex": (runner.codex_exec(), runner.codex_env),
    }
    # The warm-up fills the page cache (and the dev install's bytecode cache), and
    # checks that Codex accepts every key of config.toml (--strict-config).
    for name, (argv, env) in (
        ("codexcore", commands["codexcore"]),
        ("codex", (runner.codex_exec("--strict-config"), runner.codex_env)),
        ("dev", (runner.codexcore_exec(DEV_CODEXCORE), runner.dev_env)),
    ):
        outcome = runner.run(argv, env)
        if not outcome.ok:
            raise SystemExit(f"{name} exec failed its warm-up run: {outcome.detail}")
    results: dict[str, list[Outcome]] = {
        "codexcore": [], "codex": [], "dev": [], "codex-user-home": []
    }  # fmt: skip
    for index in range(runs):
        for name in _alternate(index):
            results[name].append(runner.run(*commands[name]))
    for _ in range(max(2, runs // 3)):
        results["dev"].append(runner.run(runner.codexcore_exec(DEV_CODEXCORE), runner.dev_env))
        results["codex-user-home"].append(runner.run(runner.codex_exec(), runner.codex_user_env))
    problems = [
        f"{name} run {index}: {outcome.detail}"
        for name, outcomes in results.items()
        for index, outcome in enumerate(outcomes)
        if not outcome.ok
    ]
    table = Table(
        "One Task as a whole process: a command, then the final message",
        ["", "median wall", "min - max", "model's share", "beyond the model",
         "spawn to 1st request", "1st answer to 2nd request", "last answer to exit",
         "CPU time"],
    )  # fmt: skip
    for name, outcomes in results.items():
        walls = [o.wall for o in outcomes]
        phases = [o.phases for o in outcomes if o.phases is not None]
        table.add(
            LABELS[name], fmt_ms(_median(walls)), _spread(walls),
            fmt_ms(_median([o.model for o in outcomes])),
            fmt_ms(_median([o.beyond for o in outcomes])),
            *(fmt_ms(_median([p[i] for p in phases])) if phases else "" for i in range(3)),
            fmt_ms(_median([o.cpu for o in outcomes])),
        )  # fmt: skip
    ratio = _median([o.wall for o in results["codexcore"]]) / _median(
        [o.wall for o in results["codex"]]
    )
    best = min(o.wall for o in results["codexcore"]) / min(o.wall for o in results["codex"])
    table.note(
        f"{runs} runs of each after a warm-up of each, alternating (the last two rows: "
        f"{len(results['dev'])} runs each after them). Both sides run with an empty HOME "
        "but the last row. Model's share: the time the scripted server spent answering the "
        "run's two requests. The last three columns split the wall time beyond the model "
        "(medians of each, so they need not add up exactly). CPU time: user + system of the "
        "process and its children (median), less sensitive than wall time to a busy machine. "
        f"codexcore/codex median wall: **{ratio:.2f}** (best runs: {best:.2f}); "
        f"goals: ≤ 1.00 (the first comparison's): **{verdict(ratio <= 1.0)}**; "
        f"≤ 0.60 (issue 20's): **{verdict(ratio <= 0.6)}**."
    )
    return table, results, problems


def exec_memory(runner: Runner, runs: int) -> tuple[Table, list[str]]:
    """The same Task (and the bare start-ups) with the process tree sampled for memory."""
    rows: dict[str, list[Outcome]] = {"codexcore": [], "codex": []}
    bare = _bare_commands(runner)
    for label, _, _ in bare:
        rows[label] = []
    for index in range(runs):
        for name in _alternate(index):
            if name == "codexcore":
                rows[name].append(runner.run_sampled(runner.codexcore_exec(), runner.codexcore_env))
            else:
                rows[name].append(runner.run_sampled(runner.codex_exec(), runner.codex_env))
        for label, argv, env in bare:
            rows[label].append(runner.run_sampled(argv, env, check_task=False))
    problems = [
        f"{name} (sampled) run {index}: {outcome.detail}"
        for name, outcomes in rows.items()
        for index, outcome in enumerate(outcomes)
        if not outcome.ok
    ]
    table = Table(
        "Peak memory of the process tree",
        [
            "",
            "tree peak, Pss (median)",
            "min - max",
            "largest process, VmHWM (median)",
            "processes seen",
        ],
    )
    medians: dict[str, float] = {}
    largests: dict[str, float] = {}
    for name, outcomes in rows.items():
        memories = [o.memory for o in outcomes if o.memory is not None]
        peaks = [m.peak for m in memories]
        seen = [len(m.seen) for m in memories]
        medians[name] = _median(peaks)
        largests[name] = _median([m.largest for m in memories])
        table.add(
            LABELS.get(name, f"bare: {name}"), _mib(medians[name]),
            f"{_mib(min(peaks))} - {_mib(max(peaks))}",
            _mib(largests[name]), f"{min(seen)}-{max(seen)}",
        )  # fmt: skip
    share = medians["codexcore"] / medians["codex"]
    largest = largests["codexcore"] / largests["codex"]
    table.note(
        f"{runs} more runs of each, alternating, each process tree sampled from /proc every "
        "2 ms (these runs are not timed). Tree peak: the largest sum, over the samples, of "
        "the proportional set size (Pss: shared pages divided among their sharers) of every "
        "process of the tree alive at the time (a child between its fork and its exec left "
        "out). Largest process: its peak resident set. "
        f"codexcore/codex, tree peak: **{share:.2f}**, largest process: **{largest:.2f}**; "
        f"goals: < 0.40 (the first comparison's): "
        f"**{verdict(share < 0.40 and largest < 0.40)}**; tree peak ≤ 0.15 (issue 20's): "
        f"**{verdict(share <= 0.15)}**."
    )
    return table, problems


def sessions(runner: Runner, turns: int, count: int) -> tuple[Table, list[str]]:
    """The stdio sessions, alternating codexcore and Codex."""
    driver = SessionDriver(runner)
    driver.codexcore(2)  # warm-up: the serve path's modules into the bytecode cache
    driver.codex(2)
    done: dict[str, list[Session]] = {"codexcore": [], "codex": []}
    for index in range(count):
        for name in _alternate(index):
            run = driver.codexcore if name == "codexcore" else driver.codex
            done[name].append(run(turns))
    table = Table(
        f"A {turns}-Turn session over stdio: time per Turn beyond the model's",
        ["", "start-up", "Turn wall (median / p90)", "model's share (median)",
         "beyond the model (median / p90)", "… message-only Turns", "… Turns with a command",
         "input to 1st request", "last answer to Turn end", "CPU per Turn (mean)",
         "tree peak (Pss)"],
    )  # fmt: skip
    problems: list[str] = []
    for name, runs in done.items():
        turns_all = [turn for session in runs for turn in session.turns]
        walls = sorted(turn.wall for turn in turns_all)
        beyond = sorted(turn.beyond for turn in turns_all)
        to_first = [turn.to_first for turn in turns_all if turn.to_first is not None]
        after_last = [turn.after_last for turn in turns_all if turn.after_last is not None]
        table.add(
            f"`{runs[0].name}`",
            fmt_ms(_median([session.startup for session in runs])),
            f"{fmt_ms(_median(walls))} / {fmt_ms(percentile(walls, 90))}",
            fmt_ms(_median([turn.model for turn in turns_all])),
            f"{fmt_ms(_median(beyond))} / {fmt_ms(percentile(beyond, 90))}",
            fmt_ms(_median([turn.beyond for turn in turns_all if not turn.command])),
            fmt_ms(_median([turn.beyond for turn in turns_all if turn.command])),
            fmt_ms(_median(to_first)), fmt_ms(_median(after_last)),
            fmt_ms(statistics.fmean(turn.cpu for turn in turns_all)),
            _mib(_median([session.memory.peak for session in runs])),
        )  # fmt: skip
        problems += [f"{name}: {failure}" for session in runs for failure in session.failures]
    table.note(
        f"{count} session(s) of each after a 2-Turn warm-up session of each, alternating; "
        f"{turns} Turns per session, every fifth running `echo hello` first (a command "
        "and two model requests, the others one). Start-up: spawn to ready (codexcore: "
        "`configure_session` acknowledged; Codex: `initialize` and `thread/start` answered). "
        "A Turn: from the input sent to its last event read (`task_complete`; "
        "`turn/completed`). CPU per Turn: the server process's (and its children's) user + "
        "system time, read from /proc around each Turn (10 ms ticks, hence the mean). "
        "Tree peak: as above, sampled between Turns (off the clock)."
    )
    return table, problems


BARE_FLOOR = "import sys; sys.stdout.write(sys.stdin.readline()); sys.stdout.flush()"
"""The interpreter reading one line and writing it back: nothing imported."""

ASYNCIO_FLOOR = """\
import asyncio, sys

async def answer():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    line = await reader.readline()
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()

asyncio.run(answer())
"""
"""An asyncio event loop reading one line from a pipe and writing it back."""


def startup(runner: Runner, runs: int) -> tuple[Table, list[str]]:
    """Spawn to ready only, many times, alternating (``--startup-only``, or after the sessions)."""
    driver = SessionDriver(runner)

    def native() -> tuple[float, float]:
        session = driver.codexcore(0)
        return session.startup, session.startup_cpu

    def codex() -> tuple[float, float]:
        session = driver.codex(0)
        return session.startup, session.startup_cpu

    kinds: dict[str, Callable[[], tuple[float, float]]] = {
        "`codexcore serve --stdio`, native (`configure_session` acknowledged)": native,
        "`codexcore serve --stdio`, JSON-RPC (`initialize` answered)": (
            driver.codexcore_jsonrpc_start
        ),
        "`codexcore acp` (`initialize` and `session/new` answered)": driver.codexcore_acp_start,
        "floor: the interpreter answers a line (`python -c`, same venv)": (
            lambda: driver.floor_start(BARE_FLOOR)
        ),
        "floor: an asyncio server answers a line (interpreter + asyncio)": (
            lambda: driver.floor_start(ASYNCIO_FLOOR)
        ),
        "`codex app-server` (`initialize` and `thread/start` answered)": codex,
    }
    for start in kinds.values():  # warm-up
        start()
    walls: dict[str, list[float]] = collections.defaultdict(list)
    cpus: dict[str, list[float]] = collections.defaultdict(list)
    for index in range(runs):
        order = list(kinds.items())
        for name, start in order if index % 2 == 0 else reversed(order):
            wall, cpu = start()
            walls[name].append(wall)
            cpus[name].append(cpu)
    names = list(kinds)
    codex_wall, codex_best = _median(walls[names[-1]]), min(walls[names[-1]])
    codex_cpu = statistics.fmean(cpus[names[-1]])
    table = Table(
        "Start-up of a stdio server: spawn to ready for a Turn",
        ["", "median", "best", "min - max", "median / Codex's", "best / Codex's best",
         "CPU to ready (mean)", "CPU / Codex's"],
    )  # fmt: skip
    for name in names:
        wall, cpu = walls[name], statistics.fmean(cpus[name])
        table.add(
            name, fmt_ms(_median(wall)), fmt_ms(min(wall)), _spread(wall),
            f"{_median(wall) / codex_wall:.2f}", f"{min(wall) / codex_best:.2f}",
            fmt_ms(cpu), f"{cpu / codex_cpu:.2f}",
        )  # fmt: skip
    ratios = [_median(walls[name]) / codex_wall for name in names[:3]]
    table.note(
        f"{runs} starts of each after a warm-up of each, alternating (order reversed every "
        "other round); each server is closed (end of input) after it is ready. CPU to ready: "
        "the server's user + system time, every thread, read from /proc at ready (10 ms "
        "ticks, hence the mean). Goal: codexcore's median at most 1.0x Codex's: native "
        f"**{verdict(ratios[0] <= 1.0)}** ({ratios[0]:.2f}), JSON-RPC "
        f"**{verdict(ratios[1] <= 1.0)}** ({ratios[1]:.2f}), ACP "
        f"**{verdict(ratios[2] <= 1.0)}** ({ratios[2]:.2f}). The two floors are the same "
        "interpreter answering one line with no codexcore code: plainly, and from an asyncio "
        "event loop, which every codexcore server runs (asyncio imports ssl, socket, "
        "subprocess, inspect and logging with it)."
    )
    return table, []


# --- main -------------------------------------------------------------------------------


@contextlib.contextmanager
def scripted_server() -> Iterator[tuple[TimedServer, BenchModel]]:
    model = BenchModel()
    server = TimedServer(model)
    server.start_in_thread()
    try:
        yield server, model
    finally:
        server.stop()


def commands(runner: Runner) -> str:
    """The exact invocations and Codex's config, for the record."""

    def shown(argv: Sequence[str]) -> str:
        words = [shlex.quote(word) for word in argv]
        text = " ".join(words).replace(str(runner.workdir), "$WORK")
        return text.replace(str(REPO) + "/", "")

    config = (CODEX_HOME / "config.toml").read_text().rstrip()
    return (
        "### The commands\n\n"
        f"```sh\n{shown(runner.codexcore_exec())}\n{shown(runner.codex_exec())}\n"
        f"{shown([str(CODEXCORE), 'serve', '--stdio', '--cwd', str(runner.workdir)])}\n"
        f"{shown([str(runner.codex), 'app-server'])}\n```\n\n"
        f"codexcore: `OPENAI_BASE_URL` = the scripted server, `CODEXCORE_HOME` a temporary "
        f"folder. Codex: `CODEX_HOME={CODEX_HOME.relative_to(REPO)}`, `{KEY_VARIABLE}` a dummy "
        f"key, and `{CODEX_HOME.relative_to(REPO)}/config.toml`:\n\n```toml\n{config}\n```\n"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few runs, rough")
    parser.add_argument("--runs", type=int, help="timed runs of each side (default 20; quick 3)")
    parser.add_argument("--turns", type=int, default=20, help="Turns per stdio session (20)")
    parser.add_argument(
        "--sessions", type=int, help="stdio sessions of each side (default 3; quick 1)"
    )
    parser.add_argument(
        "--startup-only",
        action="store_true",
        help="only the stdio servers' start-up (spawn to ready), --runs starts of each",
    )
    parser.add_argument(
        "--codex-version", default=CODEX_VERSION, help=f"@openai/codex to use ({CODEX_VERSION})"
    )
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    runs = args.runs or (3 if args.quick else 20)
    count = args.sessions or (1 if args.quick else 3)
    memory_runs = 2 if args.quick else 5
    if sys.platform != "linux":
        raise SystemExit("this benchmark reads /proc: Linux only")
    codex = install_codex(CLI_DIR, args.codex_version)
    ensure_installed()  # codexcore as users install it, rebuilt if the sources changed
    _ignore_all(CODEX_HOME)
    codex_home = {**os.environ, "CODEX_HOME": str(CODEX_HOME)}  # or it makes ~/.codex
    version = subprocess.run(
        [str(codex), "--version"], capture_output=True, text=True, check=True, env=codex_home
    ).stdout.strip()
    print("## codexcore against the Codex CLI\n", flush=True)
    print(machine_info(), flush=True)
    print(f"{version} ({codex.relative_to(REPO)}); codexcore: a regular install of the "
          f"working tree in {VENV.relative_to(REPO)}/ (sources {source_digest()[:12]}); "
          f"load average {os.getloadavg()[0]:.2f} at start; "
          f"mode: {'quick' if args.quick else 'full'}\n", flush=True)  # fmt: skip
    problems: list[str] = []
    with (
        scripted_server() as (server, model),
        tempfile.TemporaryDirectory(prefix="codexcore-bench-") as scratch,
    ):
        write_codex_home(CODEX_HOME, server.base_url)
        runner = Runner(codex, server, model, Path(scratch))
        print(commands(runner), flush=True)
        if args.startup_only:
            startup(runner, runs)[0].print()
            print(f"\nload average {os.getloadavg()[0]:.2f} at the end.", flush=True)
            return 0
        bare_limits(runner, runs).print()
        time_table, _, failed = exec_task(runner, runs)
        time_table.print()
        problems += failed
        memory_table, failed = exec_memory(runner, memory_runs)
        memory_table.print()
        problems += failed
        session_table, failed = sessions(runner, args.turns, count)
        session_table.print()
        problems += failed
        startup(runner, runs)[0].print()
        paths = ", ".join(f"{path} x{n}" for path, n in sorted(server.paths.items()))
        print(f"Requests the scripted server got, all clients: {paths}.", flush=True)
        if model.unexpected:
            problems.append(f"the scripted model was surprised: {dict(model.unexpected)}")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end.", flush=True)
    if problems:
        print("\nPROBLEMS:\n" + "\n".join(problems), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
