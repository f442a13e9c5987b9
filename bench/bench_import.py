"""Import time: ``import codexcore`` and what the first use of the engine loads.

Each figure is the wall time of a fresh ``python -c SNIPPET`` minus that of
``python -c "pass"`` (the interpreter's own start-up), the median of several
runs, the snippets interleaved. Children run with the bytecode cache on (in a
private ``PYTHONPYCACHEPREFIX`` so nothing is written into the tree, even
where the environment sets ``PYTHONDONTWRITEBYTECODE``), as an installed
package runs. (Compiling from source turned out to cost little here: the time
goes into executing module bodies, attrs class creation above all.)

Then ``python -X importtime`` names the top import costs of the first use.

Run ``.venv/bin/python bench/bench_import.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

from _common import Table, fmt_ms, header, median, parse_args, verdict

SNIPPETS: list[tuple[str, str, str]] = [
    ("`import codexcore`", "import codexcore", "< 100 ms"),
    ("`import codexcore.protocol` (the wire types)", "import codexcore.protocol", ""),
    (
        "first use of `codexcore.Codex` (the engine and its imports)",
        "import codexcore; codexcore.Codex",
        "",
    ),
    (
        "… and its first model client (`ModelClientPool().get(None)`: httpx, httpcore, TLS)",
        "import codexcore; codexcore.ModelClientPool().get(None)",
        "",
    ),
    (
        "bare: the engine's dependencies, `import asyncio, attrs, httpx, janus, orjson, structlog`",
        "import asyncio, attrs, httpx, janus, orjson, structlog",
        "",
    ),
    ("bare: `import asyncio`", "import asyncio", ""),
]


def child_env(cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def wall(code: str, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - t0


def import_times(env: dict[str, str], runs: int) -> dict[str, float]:
    """Median wall time of each snippet minus the median of ``pass``."""
    codes = ["pass", *(code for _, code, _ in SNIPPETS)]
    for code in codes:  # warm-up: fills the bytecode cache and the OS page cache
        wall(code, env)
    samples: dict[str, list[float]] = {code: [] for code in codes}
    for _ in range(runs):
        for code in codes:
            samples[code].append(wall(code, env))
    base = median(samples["pass"])
    result = {code: median(values) - base for code, values in samples.items()}
    result["pass"] = base
    return result


def time_table(title: str, times: dict[str, float], runs: int) -> None:
    table = Table(title, ["what", "ms over `pass`", "goal"])
    for name, code, goal in SNIPPETS:
        figure = times[code]
        met = f"{goal}: {verdict(figure < 0.100)}" if goal else ""
        table.add(name, fmt_ms(figure), met)
    table.note(f"`python -c pass` itself: {fmt_ms(times['pass'])} (median of {runs}).")
    table.print()


_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")


def importtime(code: str, env: dict[str, str]) -> list[tuple[str, int, int, int]]:
    """(module, self µs, cumulative µs, depth) for each import ``code`` makes."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        match = _LINE.match(line)
        if match:
            own, cumulative, indent, name = match.groups()
            rows.append((name, int(own), int(cumulative), len(indent) // 2))
    return rows


def top_costs(env: dict[str, str]) -> None:
    code = "import codexcore; codexcore.Codex"
    # The start-up imports (site, encodings …) come first; skip what `pass` imports.
    startup = {name for name, *_ in importtime("pass", env)}
    rows = [row for row in importtime(code, env) if row[0] not in startup]
    by_name = {name: cumulative for name, _, cumulative, _ in rows}
    total = sum(cumulative for _, _, cumulative, depth in rows if depth == 0)

    groups = Table(
        f"4b. What the first use of `codexcore.Codex` imports (`-X importtime`, "
        f"cumulative; {total / 1000:.1f} ms in all under importtime)",
        ["package", "cumulative ms", "share"],
    )
    packages = [
        "codexcore",
        "codexcore.engine._codex",
        "codexcore.protocol",
        "codexcore.protocol._events",
        "asyncio",
        "httpx",
        "structlog",
        "codexcore.model",
        "codexcore.tools.apply_patch",
        "codexcore.tools.safety",
        "codexcore.tools.sandbox",
        "codexcore.tools.exec",
        "attrs",
        "orjson",
        "janus",
    ]
    for name in packages:
        if name in by_name:
            groups.add(f"`{name}`", f"{by_name[name] / 1000:.1f}", f"{by_name[name] / total:.0%}")
    groups.note(
        "Nested figures are included in their parents' (`codexcore.protocol` is inside "
        "`codexcore.engine._codex`); a package imported first by another shows under that one."
    )
    groups.print()

    own = Table(
        "4c. Top import costs by self time (`-X importtime`, first use of `codexcore.Codex`)",
        ["module", "self ms", "cumulative ms"],
    )
    for name, self_us, cumulative, _ in sorted(rows, key=lambda r: -r[1])[:12]:
        own.add(f"`{name}`", f"{self_us / 1000:.1f}", f"{cumulative / 1000:.1f}")
    own.print()


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    runs = 2 if args.quick else 11
    header("bench_import", args.quick, f"median of {runs} runs per snippet")
    with tempfile.TemporaryDirectory(prefix="codexcore-bench-pyc-") as cache:
        cached = child_env(cache)
        times = import_times(cached, runs)
        time_table(f"4. Import time, bytecode cached (wall, median of {runs})", times, runs)
        rows = importtime("import codexcore", cached)
        own = next(c for name, _, c, depth in rows if name == "codexcore" and depth == 0)
        print(
            f"`python -X importtime -c 'import codexcore'`: `codexcore` {own / 1000:.1f} ms "
            f"cumulative, {len(rows)} modules imported in all (start-up ones included).\n",
            flush=True,
        )
        top_costs(cached)


if __name__ == "__main__":
    main()
