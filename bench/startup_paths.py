"""Each entry path's start-up, two source trees side by side: spawn to ready, and its imports.

For every entry path a user or a UI starts (``import codexcore``, ``codexcore
--help``, ``codexcore exec --help``, ``codexcore serve --stdio`` to the answer
of its native first frame or of a JSON-RPC ``initialize``, and one whole
``exec`` Task against a scripted model), this times spawn to ready (the answer
line read, or the exit) and reads ``python -X importtime``: the modules loaded
and their self time, summed by package.

Two trees are compared: ``--before`` (a git revision, default ``main``) and the
working tree, each exported to a temporary folder and run with the same
interpreter (``bench/.codexcore-venv``'s: codexcore's dependencies only, see
``_installed.py``) through ``PYTHONPATH``, so the only difference is the
source. Runs alternate between the trees; on a shared machine noise only adds
time, so the tables show the best run and the median. The importtime figures
are the least self time of each module over the runs (importtime's own
overhead inflates them: read them against each other).

Run ``.venv/bin/python bench/startup_paths.py`` (``--runs N``, ``--quick``).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import Table, fmt_ms, machine_info
from _installed import VENV, ensure_installed, user_environment

from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

REPO = Path(__file__).resolve().parent.parent
PYTHON = str(VENV / "bin" / "python")
MAIN = "import sys; from codexcore.cli import main; sys.exit(main())"
"""What the ``codexcore`` console script runs."""

READY_MARK = b"-- ready --\n"
MARKED_MAIN = f"""\
import os
_ready = os.environb[b"STARTUP_READY"]
_write = os.write
def _marked(fd, data):
    global _ready
    if _ready and fd != 2 and _ready in bytes(data):  # data may be a memoryview
        _ready = b""
        _write(2, {READY_MARK!r})
    return _write(fd, data)
os.write = _marked
{MAIN}
"""
""":data:`MAIN` for a server: before the write that holds its ready answer it writes
:data:`READY_MARK` to stderr, so ``-X importtime``'s lines (stderr is line-buffered)
split exactly into what was imported before the answer and after it. asyncio's pipe
transport writes through ``os.write``."""

NATIVE = (
    b'{"id":"configure","op":{"type":"configure_session","approval_policy":"never",'
    b'"sandbox_policy":{"type":"danger-full-access","writable_roots":[],"network_access":false}}}\n'
)
JSONRPC = (
    b'{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocol_version":"0",'
    b'"client":{"name":"bench","version":"0"}}}\n'
)

ACP = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientCapabilities":{}}}\n'
    b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'
)


@dataclass(frozen=True)
class Path_:
    name: str
    args: Sequence[str]
    """``codexcore ARGS``; empty: ``python -c 'import codexcore'``."""
    first: bytes = b""
    """A first frame: ready is its answer line (a line holding ``ready``)."""
    ready: bytes = b""
    model: bool = False


PATHS = [
    Path_("`import codexcore`", []),
    Path_("`codexcore --help`", ["--help"]),
    Path_("`codexcore exec --help`", ["exec", "--help"]),
    Path_("`serve --stdio` to `configure_session` answered", ["serve", "--stdio"], NATIVE,
          b"session_configured"),
    Path_("`serve --stdio` to JSON-RPC `initialize` answered", ["serve", "--stdio"], JSONRPC,
          b'"result"'),
    Path_("`acp` to `initialize` and `session/new` answered", ["acp"], ACP, b'"sessionId"'),
    Path_("`exec --ephemeral` of one message-only Task", ["exec", "--ephemeral", "say hi"],
          model=True),
]  # fmt: skip


def export(revision: str | None, into: Path) -> Path:
    """The package of ``revision`` (None: the working tree) as a plain folder to import."""
    into.mkdir(parents=True)
    if revision is None:
        shutil.copytree(REPO / "codexcore", into / "codexcore", symlinks=False)
    else:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", revision, "codexcore", "adapters"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
        (into / "codexcore" / "adapters").unlink()  # the symlink, made a folder as in a wheel
        shutil.move(str(into / "adapters"), str(into / "codexcore" / "adapters"))
    for cache in (into / "codexcore").rglob("__pycache__"):
        shutil.rmtree(cache)
    return into


def argv(path: Path_, importtime: bool) -> list[str]:
    flags = ["-X", "importtime"] if importtime else []
    if not path.args:
        return [PYTHON, *flags, "-c", "import codexcore"]
    return [PYTHON, *flags, "-c", MARKED_MAIN if path.first else MAIN, *path.args]


def run(path: Path_, env: dict[str, str], importtime: bool = False) -> tuple[float, str, str]:
    """(spawn to ready in seconds, stderr written before ready, stderr written after it).

    A server's stderr is split at :data:`READY_MARK`, so ``-X importtime``'s lines
    for what it imports once it has answered (deferred work) land in the last part.
    """
    if path.first:
        env = {**env, "STARTUP_READY": path.ready.decode()}
    began = time.perf_counter()
    proc = subprocess.Popen(
        argv(path, importtime),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=env["CODEXCORE_HOME"],
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    out = b""
    if path.first:
        proc.stdin.write(path.first)
        proc.stdin.flush()
        while path.ready not in (line := proc.stdout.readline()):
            if not line:
                raise SystemExit(f"{path.name}: no answer")
        ready = time.perf_counter() - began
        proc.stdin.close()
        proc.stdout.read()
        proc.wait(timeout=60)
    else:  # not communicate(): it would read stderr too, racing the reader thread
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait(timeout=60)
        ready = time.perf_counter() - began
    reader.join(timeout=60)
    split = lines.index(READY_MARK) if path.first else len(lines)
    before, after = b"".join(lines[:split]), b"".join(lines[split + 1 :])
    if proc.returncode != 0 or (path.model and b"Hi there." not in out):
        raise SystemExit(f"{path.name} exited {proc.returncode}: {out[-400:]!r} {before[-800:]!r}")
    return ready, before.decode(errors="replace"), after.decode(errors="replace")


_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)")


def self_times(stderr: str) -> dict[str, int]:
    return {m[3]: int(m[1]) for m in map(_LINE.match, stderr.splitlines()) if m}


def group(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "codexcore" else parts[0]


def by_package(least: dict[str, int]) -> collections.Counter[str]:
    groups: collections.Counter[str] = collections.Counter()
    for module, micros in least.items():
        groups[group(module)] += micros
    return groups


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--before", default="main", help="git revision to compare (main)")
    parser.add_argument("--runs", type=int, help="timed runs of each path and tree (15)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 15)
    ensure_installed(quiet=True)  # the interpreter and the dependencies
    model = ScriptedModel([text_response("Hi there.")] * 10_000)
    server = ScriptedResponsesServer(model).start_in_thread()
    with tempfile.TemporaryDirectory(prefix="codexcore-paths-") as scratch:
        root = Path(scratch)
        trees = {
            "before": export(args.before, root / "before"),
            "after": export(None, root / "after"),
        }
        homes = {name: root / f"home-{name}" for name in trees}
        envs = {}
        for name, tree in trees.items():
            homes[name].mkdir()
            home = str(homes[name])
            envs[name] = {**user_environment(os.environ), "PYTHONPATH": str(tree),
                          "CODEXCORE_HOME": home, "HOME": home, "OPENAI_API_KEY": "sk-bench",
                          "OPENAI_BASE_URL": server.base_url}  # fmt: skip
        print(f"## Start-up by entry path: `{args.before}` against the working tree\n", flush=True)
        print(f"{machine_info()}; load average {os.getloadavg()[0]:.2f} at start\n", flush=True)
        walls: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        least: dict[tuple[str, str], dict[str, int]] = {}
        deferred: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
        for round_ in range(runs + 1):
            for path in PATHS:
                for name in ("before", "after") if round_ % 2 else ("after", "before"):
                    wall, _, _ = run(path, envs[name])
                    if round_:  # round 0 compiles the bytecode and warms the page cache
                        walls[path.name, name].append(wall)
        for _ in range(max(3, runs // 3)):
            for path in PATHS:
                for name in trees:
                    _, err, late = run(path, envs[name], importtime=True)
                    if path.first:  # a server: what it imports once it has answered
                        deferred[path.name, name] |= set(self_times(late))
                    seen = self_times(err)
                    mine = least.setdefault((path.name, name), seen)
                    for module, micros in seen.items():
                        mine[module] = min(mine.get(module, micros), micros)
        server.stop()
        table = Table(
            "Spawn to ready, and the imports (`-X importtime`), before and after",
            ["entry path", "best: before / after", "median: before / after",
             "modules: before / after", "import self time: before / after",
             "loaded after the answer: before / after"],
        )  # fmt: skip
        for path in PATHS:
            b, a = walls[path.name, "before"], walls[path.name, "after"]
            lb, la = least[path.name, "before"], least[path.name, "after"]
            table.add(
                path.name,
                f"{fmt_ms(min(b))} / {fmt_ms(min(a))}",
                f"{fmt_ms(statistics.median(b))} / {fmt_ms(statistics.median(a))}",
                f"{len(lb)} / {len(la)}",
                f"{fmt_ms(sum(lb.values()) / 1e6)} / {fmt_ms(sum(la.values()) / 1e6)}",
                f"{len(deferred[path.name, 'before'])} / {len(deferred[path.name, 'after'])}"
                if path.first
                else "",
            )
        table.note(
            f"{runs} runs of each path and tree, alternating, after a warm-up round; ready: "
            "the answer line read (serve) or the exit. Modules and self time: under "
            "`-X importtime`, up to ready, the least of each module's self time over "
            f"{max(3, runs // 3)} runs (the interpreter's own start-up imports included). "
            "Loaded after the answer: modules a server imported once it had answered "
            "(stderr lines written after the ready answer)."
        )
        table.print()
        for path in PATHS:
            groups_b = by_package(least[path.name, "before"])
            groups_a = by_package(least[path.name, "after"])
            rows = Table(
                f"{path.name}: import self time by package",
                ["package", "before", "after"],
            )
            top = sorted(
                set(groups_b) | set(groups_a), key=lambda g: -max(groups_b[g], groups_a[g])
            )
            for name in top[:14]:
                rows.add(f"`{name}`", fmt_ms(groups_b[name] / 1e6), fmt_ms(groups_a[name] / 1e6))
            rows.print()
    print(f"load average {os.getloadavg()[0]:.2f} at the end.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
