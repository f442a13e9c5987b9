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

The parts: ``_vs_codex_cli.py`` (installing and configuring Codex),
``_vs_codex_model.py`` (the scripted model and its timed server),
``_vs_codex_procs.py`` (running whole processes, their CPU and memory),
``_vs_codex_exec.py`` (sections 1 and 2), ``_vs_codex_sessions.py`` (section 3)
and ``_vs_codex_startup.py`` (the stdio servers' start-up: ``--startup-only``;
``startup_vs_codex.py`` splits ``codexcore exec``'s).

Run ``.venv/bin/python bench/bench_vs_codex.py`` (``--quick`` for a smoke
run, ``--runs N`` for more runs). The output is Markdown.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import machine_info
from _installed import VENV, ensure_installed, source_digest
from _vs_codex_cli import (
    CLI_DIR,
    CODEX_HOME,
    CODEX_VERSION,
    KEY_VARIABLE,
    REPO,
    ignore_all,
    install_codex,
    write_codex_home,
)
from _vs_codex_exec import bare_limits, exec_memory, exec_task
from _vs_codex_model import scripted_server
from _vs_codex_procs import CODEXCORE, Runner
from _vs_codex_sessions import sessions
from _vs_codex_startup import startup


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
    ignore_all(CODEX_HOME)
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
