"""Run every benchmark, one after the other, each in a fresh interpreter.

``.venv/bin/python bench/run_all.py`` (``--quick`` for a smoke run of all of
them). The output is Markdown: the tables of ``docs/performance.md``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _common import parse_args

BENCHMARKS = (
    "bench_engine.py",
    "bench_sse.py",
    "bench_import.py",
    "bench_memory.py",
    "bench_protocol.py",
    "bench_tools.py",
    "bench_adapters.py",
    "bench_jsonrpc.py",
    "bench_codelia.py",
    "bench_control.py",
    "bench_instructions.py",
    "bench_compaction.py",
    "bench_skills.py",
    "bench_mcp.py",
    "bench_function_tools.py",
    "bench_acp.py",
    "bench_redis.py",
)
"""Every benchmark of this project's own figures (``bench_vs_codex.py`` and
``startup_vs_codex.py`` install the Codex CLI, so they run on their own)."""


def main() -> int:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    here = Path(__file__).resolve().parent
    failed = []
    for name in BENCHMARKS:
        t0 = time.perf_counter()
        command = [sys.executable, str(here / name), *(["--quick"] if args.quick else [])]
        result = subprocess.run(command, check=False)
        print(f"<!-- {name}: {time.perf_counter() - t0:.1f} s -->\n", flush=True)
        if result.returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
