"""codexcore's ``app-server`` against the real ``codex app-server`` (the pinned Codex CLI):
the same client, the same scripted model, the same machine, alternating runs.

One client (here) drives each server over stdio through a thread of ``--turns`` Turns
(every fifth runs ``echo hello`` first), exactly as Codex's protocol has it:
``initialize``, ``thread/start``, then ``turn/start`` and reading until
``turn/completed``. Measured per Turn: the wall from ``turn/start`` sent to
``turn/completed`` read, less the scripted model's own time (the time beyond the
model); the process tree's peak memory (Pss, sampled between Turns); and the
messages the server sent per second of Turn wall (events/s).

Run: ``python bench/bench_app_server.py [--quick] [--turns N] [--sessions N]``
(Linux; npm installs the Codex CLI into bench/.codex-cli on first use).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import Table, fmt_mib, fmt_ms, machine_info, median, percentile
from _installed import ensure_installed
from _vs_codex_cli import (
    CLI_DIR,
    CODEX_HOME,
    CODEX_VERSION,
    MODEL,
    ignore_all,
    install_codex,
    write_codex_home,
)
from _vs_codex_model import scripted_server
from _vs_codex_procs import CODEXCORE, Runner, alternate, cpu_seconds
from _vs_codex_sessions import Session, SessionDriver, StdioPeer, _prompt


@dataclass
class Counted:
    session: Session
    messages: int = 0  # messages the server sent during the Turns

    @property
    def rate(self) -> float:
        wall = sum(turn.wall for turn in self.session.turns)
        return self.messages / wall if wall else 0.0


class AppServerDriver(SessionDriver):
    """One client for both servers: the app-server protocol as Codex defines it."""

    def drive(self, name: str, argv: list[str], env: dict[str, str], turns: int) -> Counted:
        runner = self.runner
        counted = Counted(Session(name))
        session = counted.session
        with tempfile.TemporaryFile() as err:
            peer = StdioPeer(argv, env, runner.workdir, err)
            ids = iter(range(1, 1_000_000))

            def request(method: str, params: dict[str, Any]) -> int:
                request_id = next(ids)
                peer.send({"id": request_id, "method": method, "params": params})
                return request_id

            def answer(request_id: int) -> dict[str, Any]:
                reply = peer.read_until(lambda m: m.get("id") == request_id and "method" not in m)
                if "error" in reply[-1]:
                    raise RuntimeError(f"{name}: {reply[-1]['error']}")
                result: dict[str, Any] = reply[-1]["result"]
                return result

            answer(request("initialize", {"clientInfo": {"name": "bench", "version": "0"}}))
            peer.send({"method": "initialized"})
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
                    read = peer.read_until(
                        lambda m: (
                            m.get("method") == "turn/completed" or ("method" in m and "id" in m)
                        )
                    )
                    counted.messages += len(read)
                    status = read[-1].get("params", {}).get("turn", {}).get("status")
                    return read[-1].get("method") == "turn/completed" and status == "completed"

                self._turn(session, peer, number, send, wait)
            self._close(session, peer)
        return counted


def compare(runner: Runner, turns: int, count: int) -> tuple[Table, list[str]]:
    driver = AppServerDriver(runner)
    sides = {
        "codexcore": (
            "`codexcore app-server`",
            [str(CODEXCORE), "app-server"],
            runner.codexcore_env,
        ),
        "codex": ("`codex app-server`", [str(runner.codex), "app-server"], runner.codex_env),
    }
    for name, argv, env in sides.values():  # warm-up: bytecode caches, page cache
        driver.drive(name, argv, env, 2)
    done: dict[str, list[Counted]] = {"codexcore": [], "codex": []}
    for index in range(count):
        for side in alternate(index):
            done[side].append(driver.drive(*sides[side], turns))
    table = Table(
        f"The app-server protocol over stdio, a {turns}-Turn thread: the same client",
        ["", "start-up", "beyond the model per Turn (median / p90)", "CPU per Turn (mean)",
         "tree peak (Pss)", "messages per Turn", "messages/s"],
    )  # fmt: skip
    problems: list[str] = []
    for side, runs in done.items():
        turns_all = [turn for run in runs for turn in run.session.turns]
        beyond = sorted(turn.beyond for turn in turns_all)
        table.add(
            sides[side][0],
            fmt_ms(median([run.session.startup for run in runs])),
            f"{fmt_ms(median(beyond))} / {fmt_ms(percentile(beyond, 90))}",
            fmt_ms(statistics.fmean(turn.cpu for turn in turns_all)),
            fmt_mib(median([run.session.memory.peak for run in runs])),
            f"{sum(run.messages for run in runs) / max(1, len(turns_all)):.1f}",
            f"{median([run.rate for run in runs]):.0f}",
        )
        problems += [f"{side}: {f}" for run in runs for f in run.session.failures]
    table.note(
        f"{count} thread(s) of each after a 2-Turn warm-up of each, alternating. Beyond the "
        "model: `turn/start` sent to `turn/completed` read, less the scripted server's time "
        "answering the Turn's requests. Messages/s: every message the server sent during the "
        "Turns over the Turns' wall (the two servers send different numbers of messages per "
        "Turn: Codex more kinds of notification). Tree peak: sampled between Turns."
    )
    return table, problems


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: one thread each")
    parser.add_argument("--turns", type=int, default=20, help="Turns per thread (20)")
    parser.add_argument("--sessions", type=int, help="threads of each side (default 3; quick 1)")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    count = args.sessions or (1 if args.quick else 3)
    if sys.platform != "linux":
        raise SystemExit("this benchmark reads /proc: Linux only")
    codex = install_codex(CLI_DIR, CODEX_VERSION)
    ensure_installed()
    ignore_all(CODEX_HOME)
    env = {**os.environ, "CODEX_HOME": str(CODEX_HOME)}
    version = subprocess.run(
        [str(codex), "--version"], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    print("## codexcore app-server against codex app-server\n", flush=True)
    print(machine_info(), flush=True)
    print(f"{version}; load average {os.getloadavg()[0]:.2f} at start\n", flush=True)
    with (
        scripted_server() as (server, model),
        tempfile.TemporaryDirectory(prefix="codexcore-bench-") as scratch,
    ):
        write_codex_home(CODEX_HOME, server.base_url)
        runner = Runner(codex, server, model, Path(scratch))
        table, problems = compare(runner, args.turns, count)
        table.print()
        if model.unexpected:
            problems.append(f"the scripted model was surprised: {dict(model.unexpected)}")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end.", flush=True)
    if problems:
        print("\nPROBLEMS:\n" + "\n".join(problems), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
