"""Shared helpers for the benchmarks: arguments, timing, statistics and tables.

Every benchmark measures codexcore beside the bare limit in the same run (same
objects, same process, same machine), so read the ratio, not the absolute
figure: on a noisy two-core machine the absolute numbers move by tens of
percent from run to run, the ratio much less. Timings are repeated after a
warm-up and the best (or the median) is kept, as each table says.

Tables print as Markdown so they can be pasted into ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import platform
import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = [
    "Table",
    "fmt_bytes",
    "fmt_mib",
    "fmt_ms",
    "fmt_rate",
    "fmt_ratio",
    "fmt_spread",
    "fmt_us",
    "header",
    "machine_info",
    "median",
    "paired_ratio",
    "paired_rounds",
    "parse_args",
    "percentile",
    "rss_bytes",
    "verdict",
]

T = TypeVar("T")


def parse_args(
    description: str, argv: Sequence[str] | None = None, sections: Sequence[str] = ()
) -> argparse.Namespace:
    """The common command line: ``--quick`` for a smoke run of a few seconds; with
    ``sections``, ``--only SECTION`` (repeatable) runs just those (``args.only``: a set)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few-second smoke run (smaller N, fewer repeats; figures are rougher)",
    )
    if sections:
        parser.add_argument(
            "--only",
            action="append",
            choices=sections,
            metavar="SECTION",
            help=f"run only this section (repeatable): {', '.join(sections)}",
        )
    args = parser.parse_args(argv)
    if sections:
        args.only = set(args.only or sections)
    return args


def machine_info() -> str:
    """One line naming the machine and the versions that matter to the figures."""
    versions = []
    for dist in ("orjson", "janus", "httpx", "attrs", "msgspec"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
    return (
        f"nproc {os.cpu_count()}, Python {platform.python_version()} "
        f"({platform.python_implementation()}), {platform.system()} {platform.machine()}; "
        + ", ".join(versions)
    )


def paired_rounds(
    variants: Sequence[tuple[str, Callable[[], T]]], rounds: int
) -> dict[str, list[T]]:
    """What every variant returns (a rate, or a run), ``rounds`` times, the order rotated
    each round.

    One warm-up call each first. The i-th results of two variants were measured
    moments apart, so the ratio of their rates is little exposed to the slow
    drifts of a shared machine: see :func:`paired_ratio`.
    """
    for _, run in variants:
        run()
    results: dict[str, list[T]] = {name: [] for name, _ in variants}
    for i in range(rounds):
        shift = i % len(variants)
        for name, run in [*variants[shift:], *variants[:shift]]:
            results[name].append(run())
    return results


def paired_ratio(rates: Sequence[float], limit: Sequence[float]) -> float:
    """The median of the round-by-round ratios ``rates[i] / limit[i]``."""
    return statistics.median(r / b for r, b in zip(rates, limit, strict=True))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of already sorted values, nearest rank."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values)) - 1))
    return sorted_values[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def rss_bytes() -> int:
    """This process's resident set size now (Linux), in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --- formatting -------------------------------------------------------------------


def fmt_rate(per_second: float) -> str:
    return f"{per_second:,.0f}/s"


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def fmt_bytes(size: float) -> str:
    if abs(size) >= 1024 * 1024:
        return f"{size / (1024 * 1024):,.1f} MiB"
    if abs(size) >= 1024:
        return f"{size / 1024:,.1f} KiB"
    return f"{size:,.0f} B"


def fmt_mib(size: float) -> str:
    return f"{size / (1024 * 1024):,.1f} MiB"


def fmt_spread(seconds: Sequence[float]) -> str:
    """The least and the greatest of some times, in milliseconds: ``min - max``."""
    return f"{fmt_ms(min(seconds))} - {fmt_ms(max(seconds))}"


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.2f}"


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


class Table:
    """A Markdown table printed at once, with a title and optional notes under it."""

    def __init__(self, title: str, columns: Sequence[str]) -> None:
        self.title = title
        self.columns = list(columns)
        self.rows: list[list[str]] = []
        self.notes: list[str] = []

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(cell) for cell in cells])

    def note(self, text: str) -> None:
        self.notes.append(text)

    def render(self) -> str:
        widths = [
            max(len(column), *(len(row[i]) for row in self.rows))
            for i, column in enumerate(self.columns)
        ]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        out = [f"### {self.title}", "", line(self.columns)]
        out.append("| " + " | ".join("-" * w for w in widths) + " |")
        out += [line(row) for row in self.rows]
        if self.notes:
            out.append("")
            out += self.notes
        return "\n".join(out) + "\n"

    def print(self) -> None:
        print(self.render(), flush=True)


def header(name: str, quick: bool, detail: str = "") -> None:
    """The first lines of a benchmark's output: what ran, where, how."""
    mode = "quick (smoke run: rough figures)" if quick else "full"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"## {name}\n", flush=True)
    print(f"{machine_info()}", flush=True)
    print(f"mode: {mode}{'; ' + detail if detail else ''}", flush=True)
    print(
        f"load average at the start: {load} (above ~1, other processes compete for the "
        "two cores and the two-thread figures suffer most)\n",
        flush=True,
    )
