"""The whole-process sections of ``bench_vs_codex.py``: the fixed costs, one Task as a
whole process (timed), and the same with the process tree sampled for its peak memory."""

from __future__ import annotations

import http.client
import json
import time

from _common import Table, fmt_mib, fmt_ms, fmt_spread, median, verdict
from _vs_codex_cli import MODEL
from _vs_codex_model import TimedServer
from _vs_codex_procs import CODEXCORE, DEV_CODEXCORE, PYTHON, Outcome, Runner, alternate


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
        table.add(label, fmt_ms(median(walls[label])), fmt_spread(walls[label]))
    client, server = _curl_like(runner.server, runs * 3)
    table.add(
        "scripted server: one answer (new connection, POST, whole SSE body), client side",
        fmt_ms(median(client)), fmt_spread(client),
    )  # fmt: skip
    table.add("… of which the server's own time (the model's share)", fmt_ms(median(server)),
              fmt_spread(server))  # fmt: skip
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


def failures(runs: dict[str, list[Outcome]], what: str) -> list[str]:
    """A line for each run that did not work: its side, ``what`` it was, its number, why."""
    return [
        f"{name} {what} {index}: {outcome.detail}"
        for name, outcomes in runs.items()
        for index, outcome in enumerate(outcomes)
        if not outcome.ok
    ]


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
        for name in alternate(index):
            results[name].append(runner.run(*commands[name]))
    for _ in range(max(2, runs // 3)):
        results["dev"].append(runner.run(runner.codexcore_exec(DEV_CODEXCORE), runner.dev_env))
        results["codex-user-home"].append(runner.run(runner.codex_exec(), runner.codex_user_env))
    problems = failures(results, "run")
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
            LABELS[name], fmt_ms(median(walls)), fmt_spread(walls),
            fmt_ms(median([o.model for o in outcomes])),
            fmt_ms(median([o.beyond for o in outcomes])),
            *(fmt_ms(median([p[i] for p in phases])) if phases else "" for i in range(3)),
            fmt_ms(median([o.cpu for o in outcomes])),
        )  # fmt: skip
    ratio = median([o.wall for o in results["codexcore"]]) / median(
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
        for name in alternate(index):
            if name == "codexcore":
                rows[name].append(runner.run_sampled(runner.codexcore_exec(), runner.codexcore_env))
            else:
                rows[name].append(runner.run_sampled(runner.codex_exec(), runner.codex_env))
        for label, argv, env in bare:
            rows[label].append(runner.run_sampled(argv, env, check_task=False))
    problems = failures(rows, "(sampled) run")
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
        medians[name] = median(peaks)
        largests[name] = median([m.largest for m in memories])
        table.add(
            LABELS.get(name, f"bare: {name}"), fmt_mib(medians[name]),
            f"{fmt_mib(min(peaks))} - {fmt_mib(max(peaks))}",
            fmt_mib(largests[name]), f"{min(seen)}-{max(seen)}",
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
