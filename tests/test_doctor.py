"""``codexcore doctor``, run as a real process against a real local server."""

from __future__ import annotations

import asyncio
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from codexcore.cli._doctor import _reach_provider
from codexcore.config import ProviderSettings, Settings
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    http_error,
    idle,
    text_response,
)

SECRET = "sk-proj-doctor-never-prints-this-0123456789"
ROOT = Path(__file__).resolve().parents[1]


def doctor(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # conftest has already removed OPENAI_* and CODEXCORE_* from os.environ.
    environ = {**os.environ, "CODEXCORE_HOME": str(home), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "codexcore", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environ,
    )


def lines(result: subprocess.CompletedProcess[str], status: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.split()[0] == status]


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel([text_response("pong")])


@pytest.fixture
def server(model: ScriptedModel) -> Iterator[ScriptedResponsesServer]:
    with ScriptedResponsesServer(model) as running:
        yield running


def test_reaches_a_local_server(
    tmp_path: Path, server: ScriptedResponsesServer, model: ScriptedModel
) -> None:
    write_config(tmp_path, f'model = "local-model"\n[provider]\nbase_url = "{server.base_url}"\n')
    result = doctor(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result, "fail") == []
    out = result.stdout
    assert f"ok    config: {tmp_path / 'config.toml'} is valid; home from env CODEXCORE_HOME" in out
    assert "ok    model: local-model (config.toml)" in out
    assert f"ok    provider.base_url: {server.base_url} (config.toml)" in out
    assert "ok    approval_policy: on-request (default)" in out
    assert f"ok    provider: POST {server.base_url}/responses answered in " in out
    assert "(model local-model)" in out
    # One real request, as configured.
    assert model.requests == [
        {"model": "local-model", "input": "ping", "store": False, "stream": True}
    ]
    # Every line is one check.
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in out.splitlines())


def test_a_closed_port_is_one_clear_fail_line(tmp_path: Path) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    write_config(tmp_path, f'[provider]\nbase_url = "{base_url}"\n')
    result = doctor(tmp_path, "--timeout", "5")
    assert result.returncode == 1
    [fail] = lines(result, "fail")
    assert fail.startswith(f"fail  provider: POST {base_url}/responses: could not connect")
    assert "Traceback" not in result.stderr


def test_the_server_saying_no_is_reported_with_its_words(tmp_path: Path) -> None:
    model = ScriptedModel([http_error(401, "Incorrect API key provided")])
    with ScriptedResponsesServer(model) as server:
        url = f"{server.base_url}/responses"
        write_config(tmp_path, f'[provider]\nbase_url = "{server.base_url}"\n')
        result = doctor(tmp_path, env={"OPENAI_API_KEY": SECRET})
    assert result.returncode == 1
    [fail] = lines(result, "fail")
    assert fail == (
        f"fail  provider: POST {url}: HTTP 401: Incorrect API key provided "
        "(the key comes from $OPENAI_API_KEY, which is set)"
    )
    assert SECRET not in result.stdout + result.stderr


def test_a_profile_names_its_key_variable_and_the_key_is_never_printed(
    tmp_path: Path, server: ScriptedResponsesServer
) -> None:
    write_config(
        tmp_path,
        'model = "remote"\n'
        '[provider]\nheaders = { "OpenAI-Organization" = "org-hidden" }\n'
        '[profiles.local]\nmodel = "local"\n'
        f'[profiles.local.provider]\nbase_url = "{server.base_url}"\napi_key_env = "LOCAL_KEY"\n',
    )
    result = doctor(tmp_path, "--profile", "local", env={"LOCAL_KEY": SECRET})
    assert result.returncode == 0, result.stdout
    out = result.stdout
    assert "profile 'local' (flag)" in out
    assert "ok    model: local (profile local)" in out
    assert "ok    api key: set in $LOCAL_KEY (named by profile local)" in out
    assert "extra headers: OpenAI-Organization" in out
    assert SECRET not in out + result.stderr
    assert "org-hidden" not in out + result.stderr


def test_no_key_and_no_sandbox_are_warnings(
    tmp_path: Path, server: ScriptedResponsesServer
) -> None:
    write_config(tmp_path, f'modle = "x"\n[provider]\nbase_url = "{server.base_url}"\n')
    result = doctor(tmp_path, env={"CODEXCORE_SANDBOX": "none"})
    assert result.returncode == 0, result.stdout
    warnings = lines(result, "warn")
    assert warnings == [
        f"warn  config: unknown key 'modle' in {tmp_path / 'config.toml'} (did you mean 'model'?)",
        "warn  api key: $OPENAI_API_KEY is not set; requests carry no Authorization header "
        "(fine for a local server that needs no key)",
        "warn  sandbox: none (disabled by CODEXCORE_SANDBOX=none); "
        "commands not known to be safe will need approval",
    ]


def test_the_environment_wins_over_the_file(
    tmp_path: Path, server: ScriptedResponsesServer
) -> None:
    write_config(tmp_path, '[provider]\nbase_url = "http://127.0.0.1:1/v1"\n')
    result = doctor(tmp_path, env={"OPENAI_BASE_URL": server.base_url})
    assert result.returncode == 0, result.stdout
    assert f"ok    provider.base_url: {server.base_url} (env OPENAI_BASE_URL)" in result.stdout


def test_no_file_means_defaults(tmp_path: Path) -> None:
    # No network in tests: the defaults' provider is replaced by a closed port.
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    result = doctor(tmp_path / "absent", env={"OPENAI_BASE_URL": base_url})
    assert f"ok    config: no {tmp_path / 'absent' / 'config.toml'}; the defaults apply" in (
        result.stdout
    )
    assert "ok    model: gpt-5-codex (default)" in result.stdout


def test_a_configuration_error_is_one_fail_line(tmp_path: Path) -> None:
    write_config(tmp_path, 'sandbox_mode = "workspace"\n')
    result = doctor(tmp_path)
    assert result.returncode == 1
    assert lines(result, "fail") == [
        f'fail  config: {tmp_path / "config.toml"}: sandbox_mode = "workspace": '
        "expected one of read-only, workspace-write, danger-full-access"
    ]
    assert "provider" not in result.stdout
    assert "sandbox: " in result.stdout


def test_an_unknown_profile_fails(tmp_path: Path) -> None:
    write_config(tmp_path, '[profiles.local]\nmodel = "x"\n')
    result = doctor(tmp_path, "--profile", "lcoal")
    assert result.returncode == 1
    [fail] = lines(result, "fail")
    assert fail.endswith("profile 'lcoal' (selected by --profile) is not defined; profiles: local")


def test_help_shows_examples(tmp_path: Path) -> None:
    result = doctor(tmp_path, "--help")
    assert result.returncode == 0
    assert "codexcore doctor --profile local" in result.stdout
    assert "--timeout SECONDS" in result.stdout


def test_a_silent_server_times_out() -> None:
    model = ScriptedModel([idle(text_response("pong"), keep=1)])
    with ScriptedResponsesServer(model) as server:
        url = f"{server.base_url}/responses"
        settings = Settings(provider=ProviderSettings(base_url=server.base_url))
        status, text = asyncio.run(_reach_provider(settings, 0.5))
    assert status == "fail"
    assert text.startswith(f"provider: POST {url}: ")
    assert "0.5 s" in text


def test_the_first_line_is_the_version(tmp_path: Path, server: ScriptedResponsesServer) -> None:
    result = doctor(tmp_path, env={"OPENAI_BASE_URL": server.base_url})
    first = result.stdout.splitlines()[0]
    assert first == (
        f"ok    version: codexcore {metadata.version('codexcore')}, "
        f"Python {platform.python_version()}"
    )


def test_no_key_for_openai_is_a_fail_line(tmp_path: Path) -> None:
    # The default provider, reached through a proxy that refuses: no network in tests.
    closed = f"http://127.0.0.1:{closed_port()}"
    proxy = {"HTTPS_PROXY": closed, "https_proxy": closed, "NO_PROXY": "", "no_proxy": ""}
    result = doctor(tmp_path, "--timeout", "5", env=proxy)
    assert result.returncode == 1
    assert (
        "fail  api key: no API key: $OPENAI_API_KEY is not set, and https://api.openai.com/v1 "
        "needs one (provider.base_url from the default)."
    ) in result.stdout


def documented(page: str, marker: str) -> tuple[str, list[str]]:
    """The ```sh block of ``page`` that contains ``marker``, and the output block after it."""
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)
    for number, (language, body) in enumerate(blocks):
        if language == "sh" and marker in body and "cat >>" in body:
            return body, blocks[number + 1][1].splitlines()
    raise AssertionError(f"no sh block with {marker!r} that writes a config in {page}")


def test_the_documented_profile_commands_work_on_a_fresh_machine(tmp_path: Path) -> None:
    commands, expected = documented("configuration.md", "codexcore doctor --profile local")
    home = tmp_path / "home"
    home.mkdir()
    environ = {k: v for k, v in os.environ.items() if k != "CODEXCORE_HOME"}  # ~/.codexcore
    environ.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}:{environ['PATH']}")
    try:  # the documented server: port 8080
        server = ScriptedResponsesServer(ScriptedModel([text_response("pong")]), port=8080)
        server.start_in_thread()
    except OSError as exc:
        pytest.skip(f"port 8080, which the documented profile uses, is taken: {exc}")
    try:
        result = subprocess.run(
            ["bash", "-c", commands],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=environ,
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    got = result.stdout.splitlines()
    assert len(got) == len(expected), result.stdout
    for line, shown in zip(got, expected, strict=True):
        check = shown[6:].split(":")[0]  # after the status column
        assert line[6:].split(":")[0] == check, (line, shown)
        if check in ("version", "sandbox"):
            continue  # this machine's versions, and its sandbox (bubblewrap or not)
        if check == "provider":
            assert line.split(" answered in ")[0] == shown.split(" answered in ")[0]
            assert line.endswith("(model qwen3-coder)"), line
        else:
            assert line == shown
    assert (home / ".codexcore" / "config.toml").is_file()
