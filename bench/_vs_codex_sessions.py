"""The stdio sessions of ``bench_vs_codex.py``: ``codexcore serve --stdio`` and ``codex
app-server`` each driven through many Turns, and the table of their time per Turn."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from _common import Table, fmt_mib, fmt_ms, median, percentile
from _vs_codex_cli import MODEL
from _vs_codex_model import COMMAND_MARK
from _vs_codex_procs import (
    CODEXCORE,
    TIMEOUT,
    Runner,
    TreeMemory,
    alternate,
    cpu_seconds,
    kill_later,
    reap,
)

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
        self.timer = kill_later(self.proc, TIMEOUT)
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
        timer = kill_later(self.proc, TIMEOUT)
        self.proc.stdout.read()
        reaped = reap(self.proc)
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
        cpu0 = cpu_seconds(peer.proc.pid)
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
                cpu_seconds(peer.proc.pid) - cpu0,
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
            session.startup_cpu = cpu_seconds(peer.proc.pid)
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
            session.startup_cpu = cpu_seconds(peer.proc.pid)
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


def sessions(runner: Runner, turns: int, count: int) -> tuple[Table, list[str]]:
    """The stdio sessions, alternating codexcore and Codex."""
    driver = SessionDriver(runner)
    driver.codexcore(2)  # warm-up: the serve path's modules into the bytecode cache
    driver.codex(2)
    done: dict[str, list[Session]] = {"codexcore": [], "codex": []}
    for index in range(count):
        for name in alternate(index):
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
            fmt_ms(median([session.startup for session in runs])),
            f"{fmt_ms(median(walls))} / {fmt_ms(percentile(walls, 90))}",
            fmt_ms(median([turn.model for turn in turns_all])),
            f"{fmt_ms(median(beyond))} / {fmt_ms(percentile(beyond, 90))}",
            fmt_ms(median([turn.beyond for turn in turns_all if not turn.command])),
            fmt_ms(median([turn.beyond for turn in turns_all if turn.command])),
            fmt_ms(median(to_first)), fmt_ms(median(after_last)),
            fmt_ms(statistics.fmean(turn.cpu for turn in turns_all)),
            fmt_mib(median([session.memory.peak for session in runs])),
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
