"""The house rule: no Python module of the project over 600 lines (split it by job).

Counted over ``codexcore/``, ``adapters/`` and ``bench/``, each file once:
``codexcore/adapters`` is a link to ``adapters/`` and is not followed, and
folders whose names start with a dot (the benchmarks' installs of Codex and
of codexcore, with their third-party code) and ``__pycache__`` are not ours.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 600
TREES = ("codexcore", "adapters", "bench")


def python_files(root: Path, trees: tuple[str, ...] = TREES) -> list[Path]:
    """Every ``.py`` file of ``trees`` under ``root``, each once, links to folders not
    followed, dot-folders and ``__pycache__`` left out."""
    found: list[Path] = []
    for tree in trees:
        for top, subfolders, files in os.walk(root / tree):  # links to folders not followed
            subfolders[:] = sorted(
                name for name in subfolders if not name.startswith(".") and name != "__pycache__"
            )
            found += [Path(top) / name for name in sorted(files) if name.endswith(".py")]
    return found


def oversized(root: Path, trees: tuple[str, ...] = TREES) -> dict[str, int]:
    """``{path relative to root: line count}`` of the files over ``LIMIT`` lines."""
    counts = {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in python_files(root, trees)
    }
    return {path: count for path, count in counts.items() if count > LIMIT}


def listing(files: dict[str, int]) -> str:
    return "\n".join(f"  {path}: {count} lines" for path, count in sorted(files.items()))


def test_no_module_over_the_limit() -> None:
    over = oversized(ROOT)
    assert not over, f"modules over {LIMIT} lines (split each by job):\n{listing(over)}"


def test_each_file_is_counted_once_and_links_are_not_followed() -> None:
    files = python_files(ROOT)
    relative = [path.relative_to(ROOT).as_posix() for path in files]
    assert len(relative) == len(set(relative))
    assert (ROOT / "codexcore" / "adapters").is_symlink()
    assert not any(path.startswith("codexcore/adapters/") for path in relative)
    assert "adapters/__init__.py" in relative
    assert "bench/_common.py" in relative
    assert not any("/." in path or "__pycache__" in path for path in relative)


@pytest.mark.parametrize("lines", [LIMIT, LIMIT + 1])
def test_the_limit_is_600_lines_inclusive(tmp_path: Path, lines: int) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "big.py").write_text("x = 1\n" * lines)
    (tmp_path / "bench" / ".hidden").mkdir()
    (tmp_path / "bench" / ".hidden" / "vendored.py").write_text("x = 1\n" * 5000)
    found = oversized(tmp_path, ("bench",))
    assert found == ({} if lines == LIMIT else {"bench/big.py": LIMIT + 1})
