"""What ``load_settings`` imports for a config.toml: a rarely used table's reader only with it.

Every command loads its configuration before its first answer (issue 20), and
most files hold only top-level settings, ``[provider]`` and profiles: those
load ``codexcore.config`` and ``codexcore._config_settings`` and nothing of
the engine. The readers of ``[models.NAME]`` (with the engine's model
catalogue), ``[mcp_servers.NAME]`` and ``[control]`` load only for a file that
has the table. Each case runs in a fresh interpreter, as a command starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

READERS = ("codexcore._config_models", "codexcore._config_mcp", "codexcore._config_control")

# Loads the settings of HOME (argv[1]) and prints the codexcore modules loaded, and
# the tables the settings ended up with (proof that each reader really ran).
_LOAD = """
import json, sys
from codexcore.config import load_settings
settings = load_settings(home=sys.argv[1], environ={"HOME": sys.argv[1]}).settings
print(json.dumps({
    "modules": sorted(m for m in sys.modules if m.startswith("codexcore")),
    "model": settings.model,
    "models": sorted(settings.models),
    "mcp_servers": sorted(settings.mcp_servers),
    "team": settings.control.team,
}))
"""

PLAIN = """\
model = "gpt-5"
profile = "local"

[provider]
max_attempts = 3

[profiles.local]
model = "qwen3"
provider.base_url = "http://127.0.0.1:8080/v1"
"""


def load_in_a_fresh_interpreter(home: Path, text: str) -> dict[str, object]:
    (home / "config.toml").write_text(text)
    done = subprocess.run(
        [sys.executable, "-c", _LOAD, str(home)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        cwd=home,
    )
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded


def test_a_file_of_settings_and_profiles_loads_no_table_reader_and_no_engine(
    tmp_path: Path,
) -> None:
    loaded = load_in_a_fresh_interpreter(tmp_path, PLAIN)
    assert loaded["model"] == "qwen3"
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert [m for m in modules if m in READERS or m.startswith("codexcore.engine")] == []
    assert "codexcore._config_settings" in modules  # the list is the real one


@pytest.mark.parametrize(
    ("table", "reader", "key", "value"),
    [
        (
            '[models."gpt-5"]\ncontext_window = 1000\n',
            "codexcore._config_models",
            "models",
            ["gpt-5"],
        ),
        (
            '[mcp_servers.docs]\ncommand = "docs-mcp"\n',
            "codexcore._config_mcp",
            "mcp_servers",
            ["docs"],
        ),
        ('[control]\nteam = "red"\n', "codexcore._config_control", "team", "red"),
    ],
)
def test_a_table_loads_its_reader_and_no_other(
    tmp_path: Path, table: str, reader: str, key: str, value: object
) -> None:
    loaded = load_in_a_fresh_interpreter(tmp_path, PLAIN + table)
    assert loaded[key] == value
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert [m for m in READERS if m in modules] == [reader]
