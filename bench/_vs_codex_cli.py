"""The Codex CLI for ``bench_vs_codex.py``: installed into ``bench/.codex-cli/`` (pinned,
through npm) and found as its native binary, and its ``CODEX_HOME`` with a config for the
local scripted Responses server."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLI_DIR = HERE / ".codex-cli"
CODEX_HOME = HERE / ".codex-home"

CODEX_VERSION = "0.169.0"
"""The ``@openai/codex`` version installed when none is there (the one measured)."""

MODEL = "gpt-5.5"
"""A slug in Codex's bundled catalogue, so Codex runs with real model metadata."""

KEY_VARIABLE = "CODEX_BENCH_API_KEY"
PROVIDER = "codexcore-bench"

# Codex's launcher (bin/codex.js) picks the native binary this way.
_TARGETS = {
    ("Linux", "x86_64"): ("x86_64-unknown-linux-musl", "@openai/codex-linux-x64"),
    ("Linux", "aarch64"): ("aarch64-unknown-linux-musl", "@openai/codex-linux-arm64"),
    ("Darwin", "x86_64"): ("x86_64-apple-darwin", "@openai/codex-darwin-x64"),
    ("Darwin", "arm64"): ("aarch64-apple-darwin", "@openai/codex-darwin-arm64"),
}


# --- the Codex CLI ----------------------------------------------------------------------


def ignore_all(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("# made by bench/bench_vs_codex.py\n*\n")


def find_codex(cli_dir: Path) -> Path | None:
    """The native ``codex`` binary inside the installed package, or None."""
    target, package = _TARGETS.get((platform.system(), platform.machine()), ("", ""))
    if not target:
        raise SystemExit(f"no Codex binary for {platform.system()} {platform.machine()}")
    modules = cli_dir / "node_modules"
    for candidate in (
        modules / package / "vendor" / target / "bin" / "codex",
        modules / "@openai" / "codex" / "vendor" / target / "bin" / "codex",  # older layout
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            with candidate.open("rb") as binary:
                if binary.read(2) != b"#!":  # a native executable, not a script shim
                    return candidate
    return None


def install_codex(cli_dir: Path, version: str) -> Path:
    """``npm install --prefix cli_dir @openai/codex@version`` unless it is there; the binary."""
    ignore_all(cli_dir)
    found = find_codex(cli_dir)
    installed = _installed_version(cli_dir)
    if found is not None and installed == version:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to install @openai/codex (apt-get install npm)")
    print(f"installing @openai/codex@{version} into {cli_dir} …", file=sys.stderr, flush=True)
    subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(cli_dir),
            "--no-audit",
            "--no-fund",
            f"@openai/codex@{version}",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found = find_codex(cli_dir)
    if found is None:
        raise SystemExit(f"@openai/codex@{version} installed, but no native binary was found")
    return found


def _installed_version(cli_dir: Path) -> str | None:
    manifest = cli_dir / "node_modules" / "@openai" / "codex" / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return str(version)


def codex_config(base_url: str) -> str:
    """``$CODEX_HOME/config.toml``: the scripted provider, no approvals, no network features."""
    return f"""\
# Written by bench/bench_vs_codex.py: Codex against the local scripted Responses server.
model = "{MODEL}"
model_provider = "{PROVIDER}"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.{PROVIDER}]
name = "codexcore benchmark (scripted)"
base_url = "{base_url}"
wire_api = "responses"
env_key = "{KEY_VARIABLE}"

[features]
plugins = false
remote_plugin = false

[analytics]
enabled = false
"""


def write_codex_home(home: Path, base_url: str) -> None:
    """A fresh ``CODEX_HOME`` holding only ``config.toml`` (and a ``.gitignore``)."""
    resolved = home.resolve()
    if resolved.is_relative_to("/tmp") or resolved.is_relative_to(tempfile.gettempdir()):
        raise SystemExit(f"CODEX_HOME must not lie under /tmp: {resolved}")
    shutil.rmtree(home, ignore_errors=True)
    ignore_all(home)
    (home / "config.toml").write_text(codex_config(base_url))


if __name__ == "__main__":
    # `python bench/_vs_codex_cli.py`: install the pinned CLI (.ci/run does, for the
    # app-server tests' schema) and print where its binary is.
    print(install_codex(CLI_DIR, CODEX_VERSION))
