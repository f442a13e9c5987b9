"""The cost of skills and images, beside the bare limit.

1. Skills discovery: 200 skills (150 in the project, some 12 folders deep, and
   50 of the user's), walked and their front matter read and checked, against a
   bare ``os.walk`` that reads every ``SKILL.md`` and checks nothing: what the
   checks, the hidden/symlink rules and the catalogue cost. Also a kept
   catalogue's lookup (every list after the first, and each new session's first
   request), and the catalogue message built for the model.
2. ``view_image`` of a 5 MiB PNG: the workspace check, the non-blocking open,
   the content sniff and the data URL, against a bare read and base64 encode.
"""

from __future__ import annotations

import base64
import os
import tempfile
import time
from pathlib import Path

from _common import Table, fmt_ms, fmt_ratio, fmt_us, header, median, parse_args

from codexcore.engine._images import load_image
from codexcore.engine._skills import SkillCatalogues, catalogue_item, discover, skill_roots


def make_skills(project: Path, home: Path) -> None:
    (project / ".git").mkdir(parents=True)
    for n in range(200):
        root = project / ".codexcore" / "skills" if n < 150 else home / "skills"
        depth = "/".join(f"d{k}" for k in range(n % 12))
        folder = root / depth / f"skill-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{n}\ndescription: |-\n  Does job {n} the careful way,\n"
            "  with the team's conventions.\nmetadata:\n  short-description: job\n---\n"
            + "Step.\n"
            * 200
        )


def bare_walk(roots: list[str]) -> int:
    found = 0
    for root in roots:
        for folder, _, files in os.walk(root):
            if "SKILL.md" in files:
                Path(folder, "SKILL.md").read_bytes()
                found += 1
    return found


def timed(step: object, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        step()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return median(times)


def interleaved(first: object, second: object, runs: int) -> tuple[float, float]:
    """Median times of two steps run by turns, so load on the machine hits both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for step, kept in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            step()  # type: ignore[operator]
            kept.append(time.perf_counter() - started)
    return median(times[0]), median(times[1])


def bench_skills(runs: int) -> None:
    table = Table(
        "Discover 200 skills (150 repo, 50 user), median wall time (run by turns)",
        ["how", "time", "vs bare"],
    )
    with tempfile.TemporaryDirectory() as directory:
        project, home = Path(directory, "project"), Path(directory, "home")
        make_skills(project, home)
        roots = skill_roots(str(project), str(home))
        assert bare_walk([r for r, _ in roots]) == 200
        assert len(discover(roots).skills) == 200
        bare, ours = interleaved(
            lambda: bare_walk([r for r, _ in roots]), lambda: discover(roots), runs
        )
        kept = SkillCatalogues()
        kept.get(str(project), str(home))
        hit = timed(lambda: kept.get(str(project), str(home)), runs * 20)
        catalogue = discover(roots)
        message = timed(lambda: catalogue_item(catalogue), runs * 20)
    table.add("`os.walk`, read each SKILL.md (the limit)", fmt_ms(bare), "1.00x")
    table.add(
        "`discover`: walk, parse and check front matter", fmt_ms(ours), fmt_ratio(ours / bare)
    )
    table.add("kept catalogue (`SkillCatalogues.get`, a hit)", fmt_us(hit), fmt_ratio(hit / bare))
    table.add("the catalogue message for the model", fmt_us(message), fmt_ratio(message / bare))
    table.print()


def bench_image(runs: int) -> None:
    table = Table(
        "Attach a 5 MiB PNG (`view_image`), median wall time (run by turns)",
        ["how", "time", "vs bare"],
    )
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "shot.png")
        path.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(5 * 1024 * 1024))

        def bare() -> None:
            "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")

        def ours() -> None:
            load_image("shot.png", directory, [directory])

        limit, loaded = interleaved(bare, ours, runs)
    table.add("read, base64, data URL text (the limit)", fmt_ms(limit), "1.00x")
    table.add(
        "`load_image`: check, open, sniff, data URL", fmt_ms(loaded), fmt_ratio(loaded / limit)
    )
    table.print()


def main() -> None:
    args = parse_args(__doc__ or "")
    header("bench_skills", args.quick)
    runs = 5 if args.quick else 30
    bench_skills(runs)
    bench_image(runs)


if __name__ == "__main__":
    main()
