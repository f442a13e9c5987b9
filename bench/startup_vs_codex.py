"""Where ``codexcore exec``'s fixed cost goes: the evidence behind bench_vs_codex.py's gap.

``codex exec`` is a native binary; ``codexcore exec`` pays for an interpreter,
its imports, a model client and the interpreter's exit before and after any
work. This splits that cost, each step a fresh ``python -c`` of the
interpreter of ``bench/.codexcore-venv/`` (a regular install of the working
tree, as users get it, with the bytecode pip compiled: see ``_installed.py``),
the steps interleaved, the best of ``--runs`` (noise only adds time):

1. the cumulative steps of the start-up path, each step's wall time, the
   part spent inside the snippet, and the exit after it (the interpreter's
   finalization: the snippet's last moment to the parent seeing it exit),
   with the model client's transport alone as one row;
2. the same full path with the garbage collector off during the imports,
   and with ``gc.freeze()`` or ``os._exit`` at the end, to size the
   collector's share;
3. ``python -X importtime`` of the full path, self time summed by package.

The stdio servers' start-up, spawn to ready for a Turn beside ``codex
app-server``, is ``bench_vs_codex.py --startup-only`` (``_vs_codex_startup.py``).

Run ``.venv/bin/python bench/startup_vs_codex.py`` (``--quick`` for fewer runs).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

from _common import Table, fmt_ms, machine_info
from _installed import VENV, ensure_installed, user_environment

CLI = "import codexcore.cli; codexcore.cli.build_parser()"
EXEC = (
    "import codexcore.config, codexcore.engine, codexcore.protocol, codexcore.model, "
    "codexcore.cli._render, codexcore.model._client"
)
# What exec's engine makes for a plain-http base URL: an httpx client on httpx's own
# transport (httpcore, anyio and h11 when the client is made), and anyio's asyncio
# backend, which the first request loads.
CLIENT = (
    "codexcore.model.ModelClient(base_url='http://127.0.0.1:9/v1', api_key='k'); "
    "import anyio._backends._asyncio"
)
DEPS = "import asyncio, attrs, httpx, janus, orjson, structlog"
TRANSPORT = "import httpcore, anyio._backends._asyncio"

STEPS: list[tuple[str, str]] = [
    ("interpreter alone (`pass`)", "pass"),
    ("+ `import codexcore.cli`, build the parser (every command pays this)", CLI),
    ("+ the exec path's modules (config, engine, protocol, model, renderer, httpx)",
     f"{CLI}; {EXEC}"),
    ("+ the model client exec makes (`ModelClient`: httpx's own transport, httpcore, anyio)",
     f"{CLI}; {EXEC}; c = {CLIENT}"),
    ("bare: the dependencies alone (`import asyncio, attrs, httpx, janus, orjson, structlog`)",
     DEPS),
    ("bare: the dependencies and httpx's transport (`httpcore`, anyio's asyncio backend)",
     f"{DEPS}; {TRANSPORT}"),
    ("bare: `import ssl; ssl.create_default_context()`",
     "import ssl; ssl.create_default_context()"),
]  # fmt: skip
FULL = f"{CLI}; {EXEC}; c = {CLIENT}"
VARIANTS: list[tuple[str, str, str]] = [
    ("as it runs", "", ""),
    ("collector off during the imports", "import gc; gc.disable()\n", "gc.enable()\n"),
    ("`gc.freeze()` at the end", "", "import gc; gc.freeze()\n"),
    (
        "collector off during the imports, `gc.freeze()` at the end",
        "import gc; gc.disable()\n",
        "gc.freeze(); gc.enable()\n",
    ),
    ("`os._exit(0)` at the end (no finalization)", "", "EXIT"),
]

TIMED = """\
import time as _t
_t0 = _t.perf_counter()
{before}{body}
{after}_t1 = _t.perf_counter()
print(_t1 - _t0, _t.time(), flush=True)
"""


PYTHON = str(VENV / "bin" / "python")
"""The regular install's interpreter (main() makes or refreshes the install first)."""


def run(code: str, env: dict[str, str]) -> tuple[float, float, float]:
    """(wall, inside the snippet, after its end to the exit seen), in seconds."""
    began = time.perf_counter()
    done = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True)
    seen = time.time()
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"snippet failed: {done.stderr[-800:]}")
    inside, ended = (float(field) for field in done.stdout.split()[-2:])
    return wall, inside, seen - ended


def snippet(body: str, before: str = "", after: str = "") -> str:
    if after == "EXIT":
        after = "import os as _os\n"
        code = TIMED.format(before=before, body=body, after=after)
        return code + "_os._exit(0)\n"
    return TIMED.format(before=before, body=body, after=after)


def best(samples: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """The least of each column: on a shared machine noise only ever adds time."""
    wall, inside, after = zip(*samples, strict=True)
    return min(wall), min(inside), min(after)


def importtime(env: dict[str, str]) -> Table:
    done = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", FULL], env=env, capture_output=True, text=True
    )
    by_group: collections.Counter[str] = collections.Counter()
    modules = 0
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)", line)
        if not match:
            continue
        modules += 1
        name = match[3]
        parts = name.split(".")
        group = ".".join(parts[:2]) if parts[0] == "codexcore" else parts[0]
        by_group[group] += int(match[1])
    total = sum(by_group.values())
    table = Table(
        f"`python -X importtime` of the full path: self time by package ({modules} modules)",
        ["package", "self time", "share"],
    )
    for group, micros in by_group.most_common(14):
        table.add(f"`{group}`", fmt_ms(micros / 1e6), f"{micros / total:.0%}")
    table.add("all", fmt_ms(total / 1e6), "100%")
    table.note("importtime's own overhead inflates these: read the shares, not the times.")
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 15)
    ensure_installed()
    with tempfile.TemporaryDirectory(prefix="codexcore-startup-") as home:
        env = {**user_environment(os.environ), "CODEXCORE_HOME": home}
        print("## Where codexcore's start-up goes\n", flush=True)
        print(f"{machine_info()}; load average {os.getloadavg()[0]:.2f}\n", flush=True)
        codes = [snippet(body) for _, body in STEPS]
        codes += [snippet(FULL, before, after) for _, before, after in VARIANTS]
        samples: list[list[tuple[float, float, float]]] = [[] for _ in codes]
        for round_ in range(runs + 1):
            for index, code in enumerate(codes):
                result = run(code, env)
                if round_:  # the first round warms the page cache
                    samples[index].append(result)
        steps = Table(
            "The start-up path, step by step (cumulative)",
            ["step", "wall", "inside the snippet", "exit after it"],
        )
        for (label, _), sample in zip(STEPS, samples, strict=False):
            wall, inside, after = best(sample)
            steps.add(label, fmt_ms(wall), fmt_ms(inside), fmt_ms(after))
        steps.note(
            f"The best of {runs} runs each (each column on its own), interleaved, after a "
            "warm-up round: on a shared machine noise only adds time. Wall: spawn to "
            "exit seen; inside: the snippet's own time (imports, calls); exit after it: from "
            "its end to the parent seeing the process gone (the interpreter's finalization)."
        )
        steps.print()
        variants = Table(
            "The full path (the last cumulative step) and the garbage collector",
            ["variant", "wall", "inside the snippet", "exit after it"],
        )
        for (label, _, _), sample in zip(VARIANTS, samples[len(STEPS) :], strict=True):
            wall, inside, after = best(sample)
            variants.add(label, fmt_ms(wall), fmt_ms(inside), fmt_ms(after))
        variants.print()
        importtime(env).print()
    print(f"load average {os.getloadavg()[0]:.2f} at the end.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
