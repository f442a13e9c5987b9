"""The Codex SDK's ``thread.run()`` wall for one Task: codexcore against ``codex exec``.

OpenAI's TypeScript SDK (``@openai/codex-sdk``, from ``.ci/codex-sdk/``, installed by
``.ci/install-codex-sdk``) runs the executable it is given as ``exec
--experimental-json`` and reads its thread events. Here one Node.js process holds
two SDK clients, one with ``codexPathOverride`` at codexcore (the regular install of
the working tree, ``bench/.codexcore-venv/``) and one at the Codex CLI's native
binary (``bench/.codex-cli/``, pinned as in ``bench_vs_codex.py``), and times
``thread.run(PROMPT)`` on a new thread, alternating sides and which goes first: a
warm-up run of each, then ``--runs`` of each. The Task is ``bench_vs_codex.py``'s:
the model asks for ``echo hello``, then answers; both sides talk to the same
scripted Responses server (``_vs_codex_model.py``), approvals off, no sandbox.

codexcore gets the server through the SDK's ``baseUrl`` (``--config
openai_base_url=...``); Codex through a ``model_provider`` in its ``CODEX_HOME``
(``_vs_codex_cli.py``), as the SDK's ``baseUrl`` would have it try a WebSocket first.

    python bench/bench_codex_sdk.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _installed import ensure_installed  # noqa: E402
from _vs_codex_cli import (  # noqa: E402
    CLI_DIR,
    CODEX_HOME,
    CODEX_VERSION,
    KEY_VARIABLE,
    MODEL,
    install_codex,
    write_codex_home,
)
from _vs_codex_model import FINAL, PROMPT, scripted_server  # noqa: E402

REPO = HERE.parent
SDK_DIR = REPO / ".ci" / "codex-sdk"
DRIVER = HERE / "_codex_sdk_run.mjs"


def sdk_version() -> str:
    manifest = SDK_DIR / "node_modules" / "@openai" / "codex-sdk" / "package.json"
    if not manifest.is_file():
        subprocess.run([str(REPO / ".ci" / "install-codex-sdk")], check=True)
    return str(json.loads(manifest.read_text())["version"])


def sides(base_url: str, workdir: Path, home: Path, codex: Path) -> list[dict[str, object]]:
    thread = {
        "workingDirectory": str(workdir),
        "skipGitRepoCheck": True,
        "sandboxMode": "danger-full-access",
        "approvalPolicy": "never",
        "model": MODEL,
    }
    path = os.environ.get("PATH", "/usr/bin:/bin")
    codexcore_home = home / "codexcore-home"
    return [
        {
            "name": "codexcore",
            "codexPath": str(ensure_installed() / "codexcore"),
            "baseUrl": base_url,
            "apiKey": "sk-bench-dummy",
            "env": {"PATH": path, "HOME": str(home), "CODEXCORE_HOME": str(codexcore_home)},
            "thread": thread,
        },
        {
            "name": "codex",
            "codexPath": str(codex),
            "env": {
                "PATH": path,
                "HOME": str(home),
                "CODEX_HOME": str(CODEX_HOME),
                KEY_VARIABLE: "sk-bench-dummy",
            },
            "thread": thread,
        },
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each side (20)")
    args = parser.parse_args()
    if shutil.which("node") is None:
        raise SystemExit("Node.js is needed (apt-get install nodejs npm)")
    version = sdk_version()
    codex = install_codex(CLI_DIR, CODEX_VERSION)
    with scripted_server() as (server, model), tempfile.TemporaryDirectory() as scratch:
        home, workdir = Path(scratch) / "home", Path(scratch) / "work"
        home.mkdir()
        workdir.mkdir()
        write_codex_home(CODEX_HOME, server.base_url)
        config = {
            "sdkDir": str(SDK_DIR),
            "prompt": PROMPT,
            "expect": FINAL,
            "runs": args.runs,
            "warmup": 1,
            "sides": sides(server.base_url, workdir, home, codex),
        }
        done = subprocess.run(
            ["node", str(DRIVER), json.dumps(config)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"the SDK driver failed:\n{done.stdout}\n{done.stderr}")
        walls = json.loads(done.stdout)
        ran = model.outputs_seen
    expected = 2 * (args.runs + 1)
    if ran != expected or model.unexpected:
        raise SystemExit(f"{ran} of {expected} commands ran; unexpected: {dict(model.unexpected)}")
    print(f"@openai/codex-sdk {version}, @openai/codex {CODEX_VERSION}, {args.runs} runs each\n")
    print("| SDK `thread.run()`, one Task | median | min - max | stdev |")
    print("|---|---|---|---|")
    for name, label in (("codexcore", "codexcore exec"), ("codex", "codex exec")):
        ms = walls[name]
        print(
            f"| {label} | {statistics.median(ms):.1f} ms | {min(ms):.1f} - {max(ms):.1f} ms "
            f"| {statistics.stdev(ms):.1f} ms |"
        )
    ratio = statistics.median(walls["codexcore"]) / statistics.median(walls["codex"])
    print(f"\ncodexcore / codex (medians): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
