"""codexcore.config: config.toml, profiles, environment and flags, and their precedence."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore.config import (
    CONFIG_FILE,
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    SETTING_KEYS,
    ConfigError,
    LoadedSettings,
    ProviderSettings,
    Settings,
    Source,
    config_path,
    default_home,
    load_settings,
)

ROOT = Path(__file__).parent.parent
SECRET = "sk-proj-DO-NOT-ECHO-1234567890"


# --- helpers -----------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
        )
    raise TypeError(value)


def toml_table(header: str, values: Mapping[str, Any]) -> str:
    """``values`` (dotted keys: ``provider.x`` goes to ``[header.provider]``) as TOML."""
    top = {k: v for k, v in values.items() if not k.startswith("provider.")}
    provider = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("provider.")}
    lines = [f"[{header}]"] if header else []
    lines += [f"{k} = {toml_value(v)}" for k, v in top.items()]
    if provider:
        lines.append(f"[{header + '.' if header else ''}provider]")
        lines += [f"{k} = {toml_value(v)}" for k, v in provider.items()]
    return "\n".join(lines) + "\n"


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / CONFIG_FILE
    path.write_text(text)
    return path


def load(home: Path, text: str | None = None, **kwargs: Any) -> LoadedSettings:
    if text is not None:
        write_config(home, text)
    kwargs.setdefault("environ", {})
    return load_settings(home=str(home), **kwargs)


def error(home: Path, text: str | None, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        load(home, text, **kwargs)
    return str(caught.value)


def setting(settings: Settings, key: str) -> Any:
    if key.startswith("provider."):
        return getattr(settings.provider, key.split(".", 1)[1])
    return getattr(settings, key)


# --- defaults and the file ---------------------------------------------------------------


def test_no_file_means_defaults(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    assert not loaded.found
    assert loaded.path == str(tmp_path / "config.toml")
    assert loaded.warnings == ()
    assert loaded.settings == Settings(home=str(tmp_path))
    assert all(loaded.source(key) == Source("default") for key in SETTING_KEYS)
    assert loaded.source("api_key") == Source("default")


def test_defaults_are_the_engines() -> None:
    from codexcore import EngineConfig, SessionConfig
    from codexcore.model._client import DEFAULT_BASE_URL as CLIENT_BASE_URL

    engine, session, settings = EngineConfig(), SessionConfig(cwd="/"), Settings()
    assert DEFAULT_MODEL == session.model == settings.model
    assert DEFAULT_BASE_URL == CLIENT_BASE_URL == settings.provider.base_url
    assert settings.approval_policy == session.approval_policy
    assert settings.sandbox_mode == session.sandbox_policy.type
    assert settings.writable_roots == session.sandbox_policy.writable_roots
    assert settings.network_access == session.sandbox_policy.network_access
    assert settings.history_mode == session.history_mode
    assert settings.reasoning_effort == session.reasoning_effort
    assert settings.provider.max_attempts == engine.max_attempts
    assert settings.provider.retry_base_delay == engine.retry_base_delay
    assert settings.provider.stream_idle_timeout == engine.stream_idle_timeout
    assert settings.provider.response_header_timeout == engine.response_header_timeout


FULL = """
model = "gpt-5-codex"
approval_policy = "untrusted"
sandbox_mode = "workspace-write"
writable_roots = ["/srv/data", "~/scratch/"]
network_access = true
history_mode = "client"
reasoning_effort = "high"
model_supports_reasoning_summaries = false
model_auto_compact_token_limit = 200000
instructions = "Be brief."
log_level = "INFO"
project_doc_max_bytes = 4096
chat_prompts = "~/prompts/chat.toml"
tui_theme = "iris"

[provider]
base_url = "https://example.test/v1/"
api_key_env = "EXAMPLE_KEY"
headers = { "OpenAI-Organization" = "org-123" }
max_attempts = 3
retry_base_delay = 0.5
stream_idle_timeout = 60
response_header_timeout = 30
"""


def test_every_key_of_the_file(tmp_path: Path) -> None:
    loaded = load(tmp_path, FULL, environ={"HOME": "/home/u", "EXAMPLE_KEY": SECRET})
    assert loaded.found
    assert loaded.warnings == ()
    assert loaded.settings == Settings(
        model="gpt-5-codex",
        instructions="Be brief.",
        approval_policy="untrusted",
        sandbox_mode="workspace-write",
        writable_roots=("/srv/data", "/home/u/scratch"),
        network_access=True,
        history_mode="client",
        reasoning_effort="high",
        model_supports_reasoning_summaries=False,
        model_auto_compact_token_limit=200_000,
        log_level="info",
        project_doc_max_bytes=4096,
        chat_prompts="/home/u/prompts/chat.toml",
        tui_theme="iris",
        provider=ProviderSettings(
            base_url="https://example.test/v1",
            api_key_env="EXAMPLE_KEY",
            headers={"OpenAI-Organization": "org-123"},
            max_attempts=3,
            retry_base_delay=0.5,
            stream_idle_timeout=60.0,
            response_header_timeout=30.0,
        ),
        home=str(tmp_path),
        api_key=SECRET,
    )
    path = str(tmp_path / "config.toml")
    assert all(loaded.source(key) == Source("file", path) for key in SETTING_KEYS)
    assert loaded.source("api_key") == Source("env", "EXAMPLE_KEY")


def test_engine_config(tmp_path: Path) -> None:
    settings = load(tmp_path, FULL, environ={"HOME": "/home/u", "EXAMPLE_KEY": SECRET}).settings
    config = settings.engine_config(cwd=str(tmp_path / "work"), ephemeral=True)
    session = config.session
    assert session.model == "gpt-5-codex"
    assert session.instructions == "Be brief."
    assert session.cwd == str(tmp_path / "work")
    assert session.approval_policy == "untrusted"
    assert session.sandbox_policy.type == "workspace-write"
    assert session.sandbox_policy.writable_roots == ("/srv/data", "/home/u/scratch")
    assert session.sandbox_policy.network_access is True
    assert session.history_mode == "client"
    assert session.reasoning_effort == "high"
    assert session.model_supports_reasoning_summaries is False
    assert session.base_url == "https://example.test/v1"
    assert config.api_key == SECRET
    assert config.headers == {"OpenAI-Organization": "org-123"}
    assert config.home == str(tmp_path)
    assert config.ephemeral is True
    assert config.model_auto_compact_token_limit == 200_000
    assert (config.max_attempts, config.retry_base_delay, config.stream_idle_timeout) == (
        3,
        0.5,
        60.0,
    )
    assert config.response_header_timeout == 30.0


def test_engine_config_never_falls_back_to_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever the process has, the engine gets what the settings say: no key
    # means "" (no Authorization header), not a fallback to OPENAI_API_KEY.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere.test/v1")
    config = load(tmp_path).settings.engine_config()
    assert config.api_key == ""
    assert config.session.base_url == DEFAULT_BASE_URL
    assert config.session.cwd == os.getcwd()
    from codexcore.engine._config import DEFAULT_INSTRUCTIONS

    assert config.session.instructions == DEFAULT_INSTRUCTIONS


def test_the_process_environment_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere.test/v1")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("CODEXCORE_LOG", "debug")
    settings = load(tmp_path).settings
    assert settings.provider.base_url == DEFAULT_BASE_URL
    assert settings.api_key is None
    assert settings.log_level == "warning"


# --- precedence: flags > environment > profile > file > defaults -------------------------

LAYERS = ("file", "profile", "env", "flag")

# For each setting, a distinct value per layer that can set it (env: only the settings
# of ENV_VARS have an environment variable).


VALUES: dict[str, dict[str, Any]] = {
    "model": {"file": "m-file", "profile": "m-profile", "flag": "m-flag"},
    "approval_policy": {"file": "untrusted", "profile": "on-failure", "flag": "never"},
    "sandbox_mode": {
        "file": "read-only",
        "profile": "danger-full-access",
        "flag": "workspace-write",
    },
    "network_access": {"file": True, "profile": False, "flag": True},
    "history_mode": {"file": "client", "profile": "server", "flag": "client"},
    "reasoning_effort": {"file": "low", "profile": "medium", "flag": "high"},
    "model_supports_reasoning_summaries": {"file": True, "profile": False, "flag": True},
    "model_auto_compact_token_limit": {"file": 1000, "profile": 2000, "flag": 3000},
    "writable_roots": {"file": ["/f"], "profile": ["/p"], "flag": ["/c"]},
    "instructions": {"file": "i-file", "profile": "i-profile", "flag": "i-flag"},
    "log_level": {"file": "debug", "profile": "info", "env": "error", "flag": "warning"},
    "project_doc_max_bytes": {"file": 100, "profile": 0, "flag": 4096},
    "chat_prompts": {"file": "/f.toml", "profile": "/p.toml", "env": "/e.toml", "flag": "/c.toml"},
    "tui_theme": {"file": "ocean", "profile": "forest", "flag": "rose"},
    "provider.base_url": {
        "file": "http://file.test/v1",
        "profile": "http://profile.test/v1",
        "env": "http://env.test/v1",
        "flag": "http://flag.test/v1",
    },
    "provider.api_key_env": {"file": "FILE_KEY", "profile": "PROFILE_KEY", "flag": "FLAG_KEY"},
    "provider.headers": {"file": {"X-A": "file"}, "profile": {"X-B": "p"}, "flag": {"X-C": "c"}},
    "provider.max_attempts": {"file": 2, "profile": 3, "flag": 4},
    "provider.retry_base_delay": {"file": 0.1, "profile": 0.3, "flag": 0.7},
    "provider.stream_idle_timeout": {"file": 10, "profile": 20, "flag": 30},
    "provider.response_header_timeout": {"file": 5, "profile": 15, "flag": 25},
}
ENV_VARS = {
    "log_level": "CODEXCORE_LOG",
    "provider.base_url": "OPENAI_BASE_URL",
    "chat_prompts": "CODEXCORE_CHAT_PROMPTS",
}


def expected(key: str, value: Any) -> Any:
    if key == "writable_roots":
        return tuple(value)
    if key in (
        "provider.retry_base_delay",
        "provider.stream_idle_timeout",
        "provider.response_header_timeout",
    ):
        return float(value)
    return value


def precedence_cases() -> list[tuple[str, str]]:
    return [(key, top) for key, layers in VALUES.items() for top in ("default", *layers)]


def test_every_setting_is_in_the_matrix() -> None:
    assert set(VALUES) == set(SETTING_KEYS)


@pytest.mark.parametrize(("key", "top"), precedence_cases())
def test_precedence(tmp_path: Path, key: str, top: str) -> None:
    """Every layer up to ``top`` sets ``key``; the value of ``top`` wins."""
    layers = VALUES[key]
    present = (
        [n for n in LAYERS[: LAYERS.index(top) + 1] if n in layers] if top != "default" else []
    )
    file_values = {key: layers["file"]} if "file" in present else {}
    profile_values = {key: layers["profile"]} if "profile" in present else {}
    text = (
        'profile = "p"\n' + toml_table("", file_values) + toml_table("profiles.p", profile_values)
    )
    environ = {ENV_VARS[key]: layers["env"]} if "env" in present else {}
    overrides = {key: layers["flag"]} if "flag" in present else {}

    loaded = load(tmp_path, text, environ=environ, overrides=overrides)

    path = str(tmp_path / "config.toml")
    sources = {
        "default": Source("default"),
        "file": Source("file", path),
        "profile": Source("profile", "p"),
        "env": Source("env", ENV_VARS.get(key)),
        "flag": Source("flag", key),
    }
    if top == "default":
        assert setting(loaded.settings, key) == setting(Settings(), key)
    else:
        assert setting(loaded.settings, key) == expected(key, layers[top])
    assert loaded.source(key) == sources[top]
    assert loaded.warnings == ()


@pytest.mark.parametrize(
    ("flag", "env", "file_key", "chosen", "source"),
    [
        (None, None, None, None, Source("default")),
        (None, None, "a", "a", Source("file")),
        (None, "b", "a", "b", Source("env", "CODEXCORE_PROFILE")),
        ("c", "b", "a", "c", Source("flag", "profile")),
        ("c", None, None, "c", Source("flag", "profile")),
    ],
)
def test_profile_selection(
    tmp_path: Path,
    flag: str | None,
    env: str | None,
    file_key: str | None,
    chosen: str | None,
    source: Source,
) -> None:
    text = (f'profile = "{file_key}"\n' if file_key else "") + "".join(
        toml_table(f"profiles.{name}", {"model": f"model-{name}"}) for name in "abc"
    )
    environ = {"CODEXCORE_PROFILE": env} if env else {}
    loaded = load(tmp_path, text, profile=flag, environ=environ)
    assert loaded.settings.profile == chosen
    assert loaded.settings.model == (f"model-{chosen}" if chosen else DEFAULT_MODEL)
    if source.kind == "file":
        source = Source("file", str(tmp_path / "config.toml"))
    assert loaded.source("profile") == source


def test_a_profile_replaces_provider_keys_one_by_one(tmp_path: Path) -> None:
    text = """
profile = "local"
[provider]
base_url = "https://api.openai.com/v1"
max_attempts = 7
headers = { "OpenAI-Organization" = "org-1" }
[profiles.local.provider]
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_KEY"
headers = {}
"""
    environ = {"OPENAI_API_KEY": SECRET, "LOCAL_KEY": "local-secret"}
    loaded = load(tmp_path, text, environ=environ)
    provider = loaded.settings.provider
    assert provider.base_url == "http://127.0.0.1:8080/v1"
    assert provider.max_attempts == 7  # from [provider]: not set by the profile
    assert provider.headers == {}  # a table is replaced whole, not merged
    # The key follows api_key_env: the OpenAI key never goes to the local server.
    assert loaded.settings.api_key == "local-secret"
    assert loaded.source("api_key") == Source("env", "LOCAL_KEY")
    del environ["LOCAL_KEY"]
    settings = load(tmp_path, environ=environ).settings
    assert settings.api_key is None
    assert settings.engine_config().api_key == ""


@pytest.mark.parametrize(
    ("flag", "env", "where"),
    [
        (None, None, "default"),
        (None, "env-home", "env"),
        ("flag-home", "env-home", "flag"),
    ],
)
def test_home(tmp_path: Path, flag: str | None, env: str | None, where: str) -> None:
    environ = {"HOME": str(tmp_path)}
    if env:
        environ["CODEXCORE_HOME"] = str(tmp_path / env)
    for name in ("env-home", "flag-home", ".codexcore"):
        write_config(tmp_path / name, f'model = "{name}"\n')
    home = str(tmp_path / flag) if flag else None
    loaded = load_settings(home=home, environ=environ)
    expected_home = {"default": ".codexcore", "env": "env-home", "flag": "flag-home"}[where]
    assert loaded.settings.home == str(tmp_path / expected_home)
    assert loaded.settings.model == expected_home
    assert loaded.source("home").kind == where
    assert loaded.path == config_path(str(tmp_path / expected_home))


def test_default_home() -> None:
    assert default_home({"HOME": "/home/u"}) == "/home/u/.codexcore"
    assert default_home({"HOME": "/home/u", "CODEXCORE_HOME": "~/cx"}) == "/home/u/cx"
    assert default_home({"CODEXCORE_HOME": "/srv/cx"}) == "/srv/cx"


def test_flags_given_as_strings_are_parsed(tmp_path: Path) -> None:
    overrides = {
        "provider.max_attempts": "3",
        "provider.stream_idle_timeout": "2.5",
        "network_access": "true",
        "writable_roots": "/data",
        "model": None,  # not given
    }
    settings = load(tmp_path, 'model = "from-file"\n', overrides=overrides).settings
    assert settings.provider.max_attempts == 3
    assert settings.provider.stream_idle_timeout == 2.5
    assert settings.network_access is True
    assert settings.writable_roots == ("/data",)
    assert settings.model == "from-file"


def test_environment_values_are_checked_like_the_files(tmp_path: Path) -> None:
    settings = load(
        tmp_path, environ={"CODEXCORE_LOG": "DEBUG", "OPENAI_BASE_URL": "http://h:1/v1/"}
    ).settings
    assert settings.log_level == "debug"
    assert settings.provider.base_url == "http://h:1/v1"
    # Empty variables count as unset.
    environ = {"CODEXCORE_LOG": "", "OPENAI_BASE_URL": " ", "OPENAI_API_KEY": ""}
    loaded = load(tmp_path, environ=environ)
    assert loaded.settings == Settings(home=str(tmp_path))
    assert loaded.source("api_key") == Source("default")


# --- errors ------------------------------------------------------------------------------

ERRORS = [
    (
        'approval_policy = "sometimes"',
        'approval_policy = "sometimes": expected one of untrusted, on-failure, on-request, never',
    ),
    (
        'sandbox_mode = "yolo"',
        'sandbox_mode = "yolo": expected one of read-only, workspace-write, danger-full-access',
    ),
    ("history_mode = 1", "history_mode = 1: expected one of server, client"),
    (
        'reasoning_effort = "max"',
        'reasoning_effort = "max": expected one of minimal, low, medium, high',
    ),
    ('log_level = "loud"', 'log_level = "loud": expected one of debug, info, warning, error'),
    ('model = ""', 'model = "": expected a non-empty string'),
    ("model = 5", "model = 5: expected a non-empty string"),
    ("instructions = false", "instructions = false: expected a string"),
    ('network_access = "yes"', 'network_access = "yes": expected true or false'),
    ('writable_roots = "/srv"', 'writable_roots = "/srv": expected a list of absolute paths'),
    ('writable_roots = ["rel/dir"]', "expected a list of absolute paths"),
    ('provider = "openai"', 'provider = "openai": expected a table ([provider])'),
    ("profiles = 1", "profiles = 1: expected tables such as [profiles.local]"),
    ("profile = 3", "profile = 3: expected the name of a [profiles.NAME] table"),
    (
        '[provider]\nbase_url = "ftp://example.test"',
        'provider.base_url = "ftp://example.test": expected an http:// or https:// URL',
    ),
    ('[provider]\nbase_url = "localhost:8080"', "expected an http:// or https:// URL"),
    ("[provider]\nmax_attempts = 0", "provider.max_attempts = 0: expected an integer >= 1"),
    ("[provider]\nmax_attempts = true", "provider.max_attempts = true: expected an integer >= 1"),
    ("[provider]\nmax_attempts = 1.5", "provider.max_attempts = 1.5: expected an integer >= 1"),
    (
        "[provider]\nretry_base_delay = -1",
        "provider.retry_base_delay = -1: expected a number >= 0 (seconds)",
    ),
    (
        "[provider]\nstream_idle_timeout = 0",
        "provider.stream_idle_timeout = 0: expected a number > 0 (seconds)",
    ),
    ('[provider]\nheaders = "X-A: 1"', "provider.headers: expected a table of header names"),
    ('[provider]\nheaders = { "Bad Header" = "x" }', "provider.headers: expected a table"),
    ('[provider]\nheaders = { "X-A" = 1 }', "the value of 'X-A' is not a one-line string"),
    (
        '[profiles.local]\napproval_policy = "sometimes"',
        'profiles.local.approval_policy = "sometimes": expected one of untrusted, on-failure, '
        "on-request, never",
    ),
    (
        "[profiles.local.provider]\nmax_attempts = -2",
        "profiles.local.provider.max_attempts = -2: expected an integer >= 1",
    ),
    ('[profiles]\nlocal = "x"', 'profiles.local = "x": expected a table ([profiles.local])'),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_errors_name_the_file_the_key_and_what_is_allowed(
    tmp_path: Path, text: str, message: str
) -> None:
    text = error(tmp_path, text + "\n")
    assert text.startswith(f"{tmp_path / 'config.toml'}: ")
    assert message in text


def test_the_file_is_shown_under_the_users_home(tmp_path: Path) -> None:
    write_config(tmp_path / ".codexcore", 'approval_policy = "sometimes"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"HOME": str(tmp_path)})
    assert str(caught.value) == (
        '~/.codexcore/config.toml: approval_policy = "sometimes": '
        "expected one of untrusted, on-failure, on-request, never"
    )


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


def test_invalid_toml_names_the_file_line_and_column(tmp_path: Path) -> None:
    message = error(tmp_path, 'model = "gpt-5-codex"\napproval_policy = "never\n')
    assert message.startswith(f"{tmp_path / 'config.toml'}: invalid TOML: ")
    assert re.search(r"at line 2, column \d+", message)


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    write_config(tmp_path, "")
    (tmp_path / "config.toml").write_bytes(b'model = "\xff"\n')
    message = error(tmp_path, None)
    assert "invalid TOML: not UTF-8" in message


def test_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    assert error(tmp_path, None).startswith(f"{tmp_path / 'config.toml'}: cannot read")


def test_errors_in_the_environment_name_the_variable(tmp_path: Path) -> None:
    message = error(tmp_path, "", environ={"OPENAI_BASE_URL": "not a url"})
    assert message.startswith('environment: OPENAI_BASE_URL = "not a url": expected an http')
    message = error(tmp_path, "", environ={"CODEXCORE_LOG": "loud"})
    assert message == (
        'environment: CODEXCORE_LOG = "loud": expected one of debug, info, warning, error'
    )


def test_errors_in_flags_name_the_command_line(tmp_path: Path) -> None:
    message = error(tmp_path, "", overrides={"approval_policy": "sometimes"})
    assert message == (
        'command line: approval_policy = "sometimes": '
        "expected one of untrusted, on-failure, on-request, never"
    )
    message = error(tmp_path, "", overrides={"provider.max_attempts": "many"})
    assert message == 'command line: provider.max_attempts = "many": expected an integer >= 1'
    message = error(tmp_path, "", overrides={"modle": "x"})
    assert message.startswith("command line: unknown setting 'modle'; settings are model, ")


@pytest.mark.parametrize(
    ("flag", "env", "file_key", "chooser"),
    [
        ("nope", None, "a", "--profile"),
        (None, "nope", "a", "CODEXCORE_PROFILE"),
        (None, None, "nope", "the profile key"),
    ],
)
def test_an_unknown_profile_lists_the_profiles(
    tmp_path: Path, flag: str | None, env: str | None, file_key: str, chooser: str
) -> None:
    text = f'profile = "{file_key}"\n[profiles.b]\nmodel = "x"\n[profiles.a]\nmodel = "y"\n'
    environ = {"CODEXCORE_PROFILE": env} if env else {}
    message = error(tmp_path, text, profile=flag, environ=environ)
    assert message == (
        f"{tmp_path / 'config.toml'}: profile 'nope' (selected by {chooser}) is not defined; "
        "profiles: a, b"
    )


def test_an_unknown_profile_without_profiles(tmp_path: Path) -> None:
    message = error(tmp_path, 'model = "x"\n', profile="local")
    assert message.endswith(
        "profile 'local' (selected by --profile) is not defined; "
        "the file defines no [profiles.NAME] tables"
    )
    (tmp_path / "config.toml").unlink()
    with pytest.raises(ConfigError, match="the file does not exist"):
        load(tmp_path, profile="local")


# --- secrets -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (f'api_key = "{SECRET}"', "api_key"),
        (f'[provider]\napi_key = "{SECRET}"', "provider.api_key"),
        (f'[profiles.local]\nopenai_api_key = "{SECRET}"', "profiles.local.openai_api_key"),
        (f'[profiles.local.provider]\napi_key = "{SECRET}"', "profiles.local.provider.api_key"),
    ],
)
def test_a_key_in_the_file_is_refused_without_echo(tmp_path: Path, text: str, key: str) -> None:
    message = error(tmp_path, text + "\n")
    assert message.startswith(f"{tmp_path / 'config.toml'}: {key}: a key never goes in ")
    assert "provider.api_key_env" in message
    assert SECRET not in message
    assert SECRET[:12] not in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (f'[provider]\napi_key_env = "{SECRET}"', "provider.api_key_env"),
        (f'[provider]\nheaders = {{ "Authorization" = "Bearer {SECRET}" }}', "provider.headers"),
        (f'[provider]\nheaders = {{ "X-Key" = 1, "Y" = "{SECRET}" }}', "provider.headers"),
        (f'[provider]\nheaders = {{ "X-Api-Key" = "{SECRET}" }}', "provider.headers"),
    ],
)
def test_secret_looking_values_are_never_echoed(tmp_path: Path, text: str, key: str) -> None:
    message = error(tmp_path, text + "\n")
    assert message.startswith(f"{tmp_path / 'config.toml'}: {key}: expected ")
    assert SECRET[:12] not in message


def test_a_key_where_another_value_belongs_is_not_echoed(tmp_path: Path) -> None:
    message = error(tmp_path, f'approval_policy = "{SECRET}"\n')
    assert message == (
        f"{tmp_path / 'config.toml'}: approval_policy = <a value that looks like an API key>: "
        "expected one of untrusted, on-failure, on-request, never"
    )


def test_a_key_as_a_flag_is_refused_without_echo(tmp_path: Path) -> None:
    message = error(tmp_path, "", overrides={"api_key": SECRET})
    assert message.startswith("command line: api_key: a key never goes in configuration")
    assert SECRET not in message


def test_reprs_show_no_key_and_no_header_value(tmp_path: Path) -> None:
    loaded = load(tmp_path, FULL, environ={"EXAMPLE_KEY": SECRET})
    text = repr(loaded) + repr(loaded.settings.engine_config())
    assert SECRET not in text
    assert "org-123" not in text
    assert "OpenAI-Organization" in text


# --- warnings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ('modle = "x"', "unknown key 'modle' in {path} (did you mean 'model'?)"),
        ('base_url = "x"', "unknown key 'base_url' in {path} (did you mean 'provider.base_url'?)"),
        ("colour = 1", "unknown key 'colour' in {path}"),
        (
            "[provider]\nmax_attemps = 2",
            "unknown key 'provider.max_attemps' in {path} (did you mean 'provider.max_attempts'?)",
        ),
        (
            '[provider]\nmodel = "x"',
            "unknown key 'provider.model' in {path} (did you mean 'model'?)",
        ),
        ('[providr]\nbase_url = "x"', "unknown key 'providr' in {path} (did you mean 'provider'?)"),
        (
            '[profiles.local]\naproval_policy = "never"',
            "unknown key 'profiles.local.aproval_policy' "
            "in {path} (did you mean 'profiles.local.approval_policy'?)",
        ),
        (
            '[profiles.local.provider]\nbaseurl = "x"',
            "unknown key 'profiles.local.provider.baseurl' "
            "in {path} (did you mean 'profiles.local.provider.base_url'?)",
        ),
    ],
)
def test_unknown_keys_are_warnings_with_a_suggestion(
    tmp_path: Path, text: str, warning: str
) -> None:
    loaded = load(tmp_path, text + "\n")
    assert loaded.warnings == (warning.format(path=tmp_path / "config.toml"),)
    assert loaded.settings == Settings(home=str(tmp_path))


def test_warnings_do_not_hide_the_known_keys(tmp_path: Path) -> None:
    loaded = load(tmp_path, 'modle = "x"\nmodel = "y"\ncolour = 1\n')
    assert loaded.settings.model == "y"
    assert len(loaded.warnings) == 2


# --- the documented example --------------------------------------------------------------


def test_the_documented_example_loads_cleanly(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.DOTALL)
    assert example is not None
    environ = {"HOME": str(tmp_path), "LOCAL_KEY": "x"}
    loaded = load(tmp_path, example.group(1), environ=environ)
    assert loaded.warnings == ()
    assert attrs.asdict(loaded.settings)  # every value built
    for name in re.findall(r"^\[profiles\.([\w-]+)\]$", example.group(1), re.MULTILINE):
        assert load(tmp_path, profile=name, environ=environ).settings.profile == name


def test_a_relative_home_flag_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path / "cx", 'model = "here"\n')
    loaded = load_settings(home="cx", environ={})
    assert loaded.settings.home == str(tmp_path / "cx")
    assert loaded.settings.model == "here"


@pytest.mark.parametrize(
    ("base_url", "needs"),
    [
        ("https://api.openai.com/v1", True),
        ("https://eu.api.openai.com/v1", True),
        ("http://127.0.0.1:8080/v1", False),
        ("http://localhost:11434/v1", False),
        ("https://api.openai.com.example.net/v1", False),
        ("https://notapi.openai.com/v1", False),
    ],
)
def test_only_openai_s_own_api_needs_a_key(base_url: str, needs: bool) -> None:
    loaded = load_settings(environ={"HOME": "/nonexistent", "OPENAI_BASE_URL": base_url})
    assert loaded.settings.provider.needs_key is needs
    missing = loaded.missing_key()
    assert (missing is not None) is needs
    if missing is not None:
        assert f"{base_url} needs one (provider.base_url from $OPENAI_BASE_URL)" in missing


def test_a_set_key_is_never_missing() -> None:
    loaded = load_settings(environ={"HOME": "/nonexistent", "OPENAI_API_KEY": "sk-x"})
    assert loaded.missing_key() is None
