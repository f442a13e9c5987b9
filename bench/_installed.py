"""A regular install of the working tree, as users get it, for the start-up benchmarks.

The dev venv (``.venv``) holds codexcore as an *editable* install. Its
``__editable__`` finder, loaded from a ``.pth`` file by every interpreter that
venv starts, costs about 17 ms at each start-up; and that venv also holds the
test and docs extras, some of which (``click``, ``pygments``) httpx imports
when it finds them. A user installs a wheel into an environment holding
codexcore's dependencies only. So the benchmarks that time whole processes
(``bench_vs_codex.py``, ``startup_vs_codex.py``) run codexcore from
``bench/.codexcore-venv/``: a venv of the same interpreter holding nothing
but a regular ``pip install`` of the working tree and its dependencies
(pinned to the versions of the dev venv; no pip, no setuptools), bytecode
compiled by pip at install time as for any wheel.

It is made on first use and reinstalled whenever the package's sources
change: a digest of ``pyproject.toml``, ``README.md`` and every file of the
``codexcore`` package is kept in the venv. The sources are copied to a
temporary folder first, so the build leaves nothing (``build/``,
``*.egg-info``) in the working tree. The folder holds a ``.gitignore`` of
``*`` and is listed in the repository's ``.gitignore``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = HERE / ".codexcore-venv"
_DIGEST = VENV / "codexcore-source.sha256"
_TOP_FILES = ("pyproject.toml", "README.md")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")


_EXTRAS = ("acp",)
"""Optional extras installed too: ``codexcore acp``'s start is benchmarked."""


def _package_files() -> list[Path]:
    """Every file of the package (through the ``adapters`` symlink), sorted."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(REPO / "codexcore", followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found += [Path(folder) / name for name in files if not name.endswith((".pyc", ".pyo"))]
    return sorted(found)


def source_digest() -> str:
    """A digest of what ``pip install`` of the working tree would install."""
    digest = hashlib.sha256()
    for path in [REPO / name for name in _TOP_FILES] + _package_files():
        digest.update(str(path.relative_to(REPO)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    digest.update(f"{sys.version}\0{_EXTRAS}\0".encode())
    return digest.hexdigest()


def _pip(python: Path, *args: str) -> None:
    """The dev venv's pip, working on the benchmark venv (which has no pip of its own)."""
    env = {key: value for key, value in os.environ.items() if key != "PIP_NO_COMPILE"}
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
         "--quiet", *args],
        check=True,
        env=env,
    )  # fmt: skip


def _constraints(folder: Path) -> Path:
    """The dev venv's distributions, pinned: the benchmark runs the same dependencies."""
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pins = [line for line in frozen.splitlines() if "==" in line and " @ " not in line]
    path = folder / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def _dependencies() -> list[str]:
    with (REPO / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    extras = [str(r) for name in _EXTRAS for r in project["optional-dependencies"][name]]
    return [str(requirement) for requirement in project["dependencies"]] + extras


_DEV_ONLY = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH")
"""Settings of this dev environment that a user's install does not run under."""


def user_environment(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` as a user's shell would have it: the install reads the bytecode pip
    compiled next to its sources (and the interpreter's own for the standard library)."""
    return {key: value for key, value in base.items() if key not in _DEV_ONLY}


def ensure_installed(*, quiet: bool = False) -> Path:
    """The venv's ``bin`` folder, with the working tree installed in it (reinstalled if stale)."""
    VENV.mkdir(parents=True, exist_ok=True)
    (VENV / ".gitignore").write_text("# made by bench/_installed.py\n*\n")
    python = VENV / "bin" / "python"
    if not python.exists():
        # No pip or setuptools in it (setuptools' distutils .pth would cost every start).
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", "--without-pip", str(VENV)], check=True
        )
        (VENV / ".gitignore").write_text("# made by bench/_installed.py\n*\n")
    wanted = source_digest()
    installed = _DIGEST.read_text().strip() if _DIGEST.exists() else None
    if installed == wanted and (VENV / "bin" / "codexcore").exists():
        return VENV / "bin"
    if not quiet:
        print(
            f"installing the working tree into {VENV.relative_to(REPO)} (pip install, "
            "not editable) …",
            file=sys.stderr,
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="codexcore-src-") as scratch:
        source = Path(scratch) / "src"
        source.mkdir()
        for name in _TOP_FILES:
            shutil.copy2(REPO / name, source / name)
        # symlinks=False: the adapters symlink becomes a real folder, as in a wheel.
        shutil.copytree(REPO / "codexcore", source / "codexcore", symlinks=False, ignore=_SKIP)
        constraints = _constraints(Path(scratch))
        # The dependencies, pinned to the dev venv's versions (nothing to do once they
        # are there), then the package itself afresh; --compile: bytecode written at
        # install time, as pip does by default.
        _pip(python, "install", "--compile", "--constraint", str(constraints), *_dependencies())
        _pip(python, "install", "--compile", "--no-deps", "--force-reinstall", str(source))
    _DIGEST.write_text(wanted + "\n")
    return VENV / "bin"


if __name__ == "__main__":
    print(ensure_installed())
