"""Configuration: ``CODEXCORE_HOME/config.toml``, profiles, the environment and flags.

:func:`load_settings` reads ``config.toml`` (the only I/O it does), overlays the
selected profile, the environment and the command line's flags, validates
every value and returns a :class:`LoadedSettings`: the effective
:class:`Settings`, the warnings (unknown keys) and where each value came from.
:meth:`Settings.engine_config` turns the settings into an
:class:`~codexcore.EngineConfig`.

Precedence, highest first::

    flags > environment > selected profile > config.toml > defaults

The environment is read from the ``environ`` argument only: ``OPENAI_BASE_URL``
(``provider.base_url``), ``CODEXCORE_LOG`` (``log_level``), ``CODEXCORE_HOME``
(where ``config.toml`` is), ``CODEXCORE_PROFILE`` (which profile) and the
variable named by ``provider.api_key_env`` (default ``OPENAI_API_KEY``), which
holds the key. The key never comes from the file. A wrong value is a
:class:`ConfigError` naming the file (or the environment variable, or the
command line), the key and what is allowed; an unknown key is a warning.

The format is documented in ``docs/configuration.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

# The settings' types and checks: loaded with this module, which exports their public
# names. The readers of [models.NAME], [mcp_servers.NAME] and [control] are loaded by
# _Reader.read only for a file that has the table (_config_models, _config_mcp,
# _config_control).
from ._api_key import DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL
from ._config_settings import (
    _DEFAULT,
    _PROVIDER_KEYS,
    _SECRET_KEYS,
    _SPECS,
    _TOP_KEYS,
    CONFIG_FILE,
    DEFAULT_MODEL,
    SETTING_KEYS,
    ConfigError,
    ControlSettings,
    LoadedSettings,
    LogLevel,
    ProviderSettings,
    Settings,
    Source,
    SourceKind,
    _Context,
    _expand_user,
    _refuse_secret,
    _show,
    _validate,
)
from .protocol._value import Value
from .tools._safe_read import read_regular

__all__ = [
    "CODEX_ALIASES",
    "CONFIG_FILE",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "ENVIRONMENT_VARIABLES",
    "SETTING_KEYS",
    "ConfigError",
    "LoadedSettings",
    "LogLevel",
    "ProviderSettings",
    "Settings",
    "Source",
    "SourceKind",
    "command_line_settings",
    "config_path",
    "default_home",
    "load_settings",
]

ENVIRONMENT_VARIABLES: Final = {
    "OPENAI_BASE_URL": "provider.base_url",
    "CODEXCORE_LOG": "log_level",
    "CODEXCORE_CHAT_PROMPTS": "chat_prompts",
}
"""The environment variables that set a setting, and the setting (dotted key)."""


# --- reading config.toml -----------------------------------------------------------------


@attrs.frozen(repr=False, eq=False)
class _File(Value):
    """config.toml, validated: the top-level settings, the profiles, the default profile."""

    settings: dict[str, Any]
    profiles: dict[str, dict[str, Any]]
    profile: str | None
    models: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    control: ControlSettings | None = None
    mcp_servers: dict[str, dict[str, Any]] = attrs.field(factory=dict)


class _Reader:
    """Walks the parsed TOML: validates known keys, refuses secrets, warns on the rest."""

    def __init__(self, where: str, ctx: _Context) -> None:
        self.where = where
        self.ctx = ctx
        self.warnings: list[str] = []

    def read(self, document: Mapping[str, Any]) -> _File:
        default_profile: str | None = None
        profiles: dict[str, dict[str, Any]] = {}
        servers: dict[str, dict[str, Any]] = {}
        for key, value in document.items():
            if key == "profile":
                if not isinstance(value, str) or not value:
                    raise ConfigError(
                        f"{self.where}: profile = {_show(value)}: expected the name of a "
                        "[profiles.NAME] table"
                    )
                default_profile = value
            elif key == "profiles":
                profiles = self._profiles(value)
            elif key == "mcp_servers":
                from ._config_mcp import read_mcp_servers

                servers = read_mcp_servers(value, self.where, self.ctx, self.warnings)
        control = None
        if "control" in document:
            from ._config_control import ControlConfigError, read_control

            try:
                control = read_control(document["control"], self.where, self.ctx.user_home)
            except ControlConfigError as exc:
                raise ConfigError(str(exc)) from None
        skip = ("profile", "profiles", "models", "control", "mcp_servers")
        settings = self._table(document, prefix="", skip=skip)
        models: dict[str, dict[str, Any]] = {}
        if "models" in document:
            from ._config_models import read_models

            models = read_models(document["models"], self.where, self._unknown)
        return _File(settings, profiles, default_profile, models, control, servers)

    def _profiles(self, value: Any) -> dict[str, dict[str, Any]]:
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{self.where}: profiles = {_show(value)}: expected tables such as [profiles.local]"
            )
        profiles: dict[str, dict[str, Any]] = {}
        for name, table in value.items():
            if not isinstance(table, Mapping):
                raise ConfigError(
                    f"{self.where}: profiles.{name} = {_show(table)}: expected a table "
                    f"([profiles.{name}]) of settings"
                )
            profiles[name] = self._table(table, prefix=f"profiles.{name}.", skip=())
        return profiles

    def _table(
        self, table: Mapping[str, Any], *, prefix: str, skip: tuple[str, ...]
    ) -> dict[str, Any]:
        """The settings in a top-level or profile table, as dotted keys."""
        values: dict[str, Any] = {}
        for key, value in table.items():
            shown = prefix + key
            if key in skip:
                continue
            if key in _SECRET_KEYS:
                raise _refuse_secret(self.where, shown)
            if key == "provider":
                if not isinstance(value, Mapping):
                    raise ConfigError(
                        f"{self.where}: {shown} = {_show(value)}: expected a table ([{shown}])"
                    )
                values.update(self._provider(value, prefix=shown + "."))
            elif key in _TOP_KEYS:
                values[key] = _validate(key, value, where=self.where, shown=shown, ctx=self.ctx)
            else:
                self._unknown(
                    shown, key, here=(*_TOP_KEYS, "provider", *skip), elsewhere="provider"
                )
        return values

    def _provider(self, table: Mapping[str, Any], *, prefix: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key, value in table.items():
            shown = prefix + key
            if key in _SECRET_KEYS:
                raise _refuse_secret(self.where, shown)
            if key in _PROVIDER_KEYS:
                dotted = "provider." + key
                values[dotted] = _validate(
                    dotted, value, where=self.where, shown=shown, ctx=self.ctx
                )
            else:
                self._unknown(shown, key, here=_PROVIDER_KEYS, elsewhere=None)
        return values

    def _unknown(
        self, shown: str, key: str, *, here: tuple[str, ...], elsewhere: str | None
    ) -> None:
        message = f"unknown key {shown!r} in {self.where}"
        suggestion = _suggest(key, shown.removesuffix(key), here, elsewhere)
        if suggestion:
            message += f" (did you mean {suggestion!r}?)"
        self.warnings.append(message)


def _suggest(key: str, prefix: str, here: tuple[str, ...], elsewhere: str | None) -> str | None:
    """The dotted key ``prefix + key`` was probably meant to be: a close key in the same
    table, else in ``[provider]`` (from the top level) or the top level (from ``[provider]``)."""
    import difflib  # only for a file with a typo: start-up skips it

    close = difflib.get_close_matches(key, here, n=1, cutoff=0.6)
    if close:
        return prefix + close[0]
    if elsewhere == "provider":
        close = difflib.get_close_matches(key, _PROVIDER_KEYS, n=1, cutoff=0.6)
        if close:
            return f"{prefix}provider.{close[0]}"
    else:
        close = difflib.get_close_matches(key, _TOP_KEYS, n=1, cutoff=0.6)
        if close:
            return prefix.removesuffix("provider.") + close[0]
    return None


MAX_CONFIG_BYTES: Final = 1 << 20
"""The largest ``config.toml`` read; a larger one (or one that is not a regular file)
is a :class:`ConfigError`."""


def _read_file(path: str, where: str, ctx: _Context) -> tuple[_File | None, list[str]]:
    """The validated file and its warnings; ``(None, [])`` when it does not exist."""
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)  # a FIFO or a device is refused at once
    except FileNotFoundError:
        return None, []
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror or exc}") from None
    import tomllib  # only when there is a file: every command's start-up skips it otherwise

    try:
        document = tomllib.loads(raw.decode())
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML: not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML: {exc}") from None
    reader = _Reader(where, ctx)
    return reader.read(document), reader.warnings


# --- the layers --------------------------------------------------------------------------


def default_home(environ: Mapping[str, str] = os.environ) -> str:
    """``$CODEXCORE_HOME``, else ``~/.codexcore``."""
    home = environ.get("CODEXCORE_HOME")
    if home:
        return _expand_user(home, _user_home(environ))
    return os.path.join(_user_home(environ) or os.curdir, ".codexcore")


def config_path(home: str) -> str:
    """The ``config.toml`` of a codexcore home."""
    return os.path.join(home, CONFIG_FILE)


def _user_home(environ: Mapping[str, str]) -> str | None:
    """``$HOME`` from ``environ``, else the password database's (never ``os.environ``)."""
    home = environ.get("HOME")
    if home:
        return home
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir or None
    except (ImportError, KeyError, AttributeError):  # not POSIX, or no entry for this user
        return None


def display_path(path: str) -> str:
    """``path`` as messages show it: the user's home as ``~`` (as ``$HOME`` names it)."""
    return _display(path, _user_home(os.environ))


def _display(path: str, user_home: str | None) -> str:
    """``path`` with the user's home shown as ``~``."""
    if user_home:
        base = user_home.rstrip(os.sep)
        if base and path.startswith(base + os.sep):
            return "~" + path[len(base) :]
    return path


def _flags(overrides: Mapping[str, Any], ctx: _Context) -> dict[str, Any]:
    """The settings flags set: None means "not given"; strings are parsed for other types."""
    values: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in SETTING_KEYS:
            if key.rsplit(".", 1)[-1] in _SECRET_KEYS:
                raise _refuse_secret("command line", key)
            known = ", ".join(SETTING_KEYS)
            raise ConfigError(f"command line: unknown setting {key!r}; settings are {known}")
        values[key] = _validate(
            key,
            _parse_flag(_SPECS[key].kind, value),
            where="command line",
            shown=key,
            ctx=ctx,
        )
    return values


CODEX_ALIASES: Final = {
    "sandbox_workspace_write.network_access": "network_access",
    "sandbox_workspace_write.writable_roots": "writable_roots",
    "model_reasoning_effort": "reasoning_effort",
    "openai_base_url": "provider.base_url",
}
"""The Codex CLI's ``-c`` keys that mean one of ours exactly, and which."""

CODEX_FIXED: Final = {"web_search": "disabled"}
"""The Codex CLI's ``-c`` keys for what codexcore does not have, and the one value it
honours by not having it (the Codex SDK passes ``web_search="disabled"``)."""


def command_line_settings(
    pairs: Sequence[tuple[str, Any]], environ: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    """The settings ``-c KEY=VALUE`` options set (later ones win), by dotted key.

    A key is a setting's dotted key (``model``, ``provider.base_url`` …), or one of
    :data:`CODEX_ALIASES`; a value is checked as config.toml's would be. Raises
    :class:`ConfigError` for an unknown key (with the closest known one), a key, or
    a wrong value.
    """
    ctx = _Context(_user_home(environ))
    values: dict[str, Any] = {}
    for given, value in pairs:
        key = CODEX_ALIASES.get(given, given)
        shown = f"-c {given}"
        if key in CODEX_FIXED:
            if value != CODEX_FIXED[key]:
                raise ConfigError(
                    f"command line: {shown}={value!r} cannot be honoured: codexcore has no "
                    f"{key.replace('_', ' ')} tool (only {CODEX_FIXED[key]!r} is accepted)"
                )
            continue
        if key.rsplit(".", 1)[-1] in _SECRET_KEYS:
            raise _refuse_secret("command line", shown)
        if key not in SETTING_KEYS:
            raise ConfigError(_unknown_override(given))
        _validate(
            key, _parse_flag(_SPECS[key].kind, value), where="command line", shown=shown, ctx=ctx
        )
        values[key] = value
    return values


def _unknown_override(key: str) -> str:
    import difflib  # only for a typo

    message = f"command line: -c {key}: no such setting"
    if key.startswith("model_providers.") and key.count(".") == 2:
        # Codex names providers; codexcore has one, [provider].
        key = "provider." + key.rsplit(".", 1)[1]
    close = difflib.get_close_matches(key, (*SETTING_KEYS, *CODEX_ALIASES), n=1, cutoff=0.6)
    if close:
        return message + f" (did you mean {close[0]!r}?)"
    return message + f"; settings are {', '.join(SETTING_KEYS)}"


def _parse_flag(kind: str, value: Any) -> Any:
    """A flag's string as the type the setting takes, when it parses; else unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if kind == "bool":
        truth = {"true": True, "1": True, "yes": True, "on": True}
        falsity = {"false": False, "0": False, "no": False, "off": False}
        return {**truth, **falsity}.get(text.lower(), value)
    if kind in ("int", "float"):
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            return value
    if kind == "list":
        return (value,)
    return value


def _environment(environ: Mapping[str, str], ctx: _Context) -> dict[str, tuple[Any, str]]:
    """The settings the environment sets, with the variable that set each."""
    values: dict[str, tuple[Any, str]] = {}
    for name, key in ENVIRONMENT_VARIABLES.items():
        text = environ.get(name, "")
        if text.strip():
            values[key] = (_validate(key, text, where="environment", shown=name, ctx=ctx), name)
    return values


def _select_profile(
    profile: str | None, environ: Mapping[str, str], file: _File | None, path: str
) -> tuple[str | None, Source, str]:
    """The profile to apply, where the choice came from, and how to say so."""
    if profile is not None:
        return profile, Source("flag", "profile"), "--profile"
    chosen = environ.get("CODEXCORE_PROFILE", "").strip()
    if chosen:
        return chosen, Source("env", "CODEXCORE_PROFILE"), "CODEXCORE_PROFILE"
    if file is not None and file.profile is not None:
        return file.profile, Source("file", path), "the profile key"
    return None, _DEFAULT, ""


def load_settings(
    *,
    home: str | None = None,
    profile: str | None = None,
    overrides: Mapping[str, Any] = {},
    environ: Mapping[str, str] = os.environ,
) -> LoadedSettings:
    """Read ``HOME/config.toml`` and resolve the settings.

    ``home`` (a flag) wins over ``$CODEXCORE_HOME``, then ``~/.codexcore``.
    ``profile`` (the ``--profile`` flag) wins over ``$CODEXCORE_PROFILE``, then
    the file's ``profile`` key. ``overrides`` are what command-line flags set,
    by dotted key (``model``, ``approval_policy``, ``provider.base_url`` …; see
    :data:`SETTING_KEYS`); a None value means the flag was not given, and a
    string is parsed for a numeric or boolean setting. ``environ`` is the only
    environment read.

    Raises :class:`ConfigError` for invalid TOML, a wrong value (in the file,
    the environment or the flags), a key written in the file, or a selected
    profile that does not exist. A missing file is no error: the defaults apply.
    """
    user_home = _user_home(environ)
    ctx = _Context(user_home)
    sources: dict[str, Source] = {}
    if home is not None:
        home_dir = os.path.abspath(_expand_user(home, user_home))
        sources["home"] = Source("flag", "home")
    elif environ.get("CODEXCORE_HOME"):
        home_dir, sources["home"] = default_home(environ), Source("env", "CODEXCORE_HOME")
    else:
        home_dir, sources["home"] = default_home(environ), _DEFAULT
    path = config_path(home_dir)
    where = _display(path, user_home)
    file, warnings = _read_file(path, where, ctx)

    name, sources["profile"], chooser = _select_profile(profile, environ, file, path)
    profile_values: dict[str, Any] = {}
    if name is not None:
        defined = file.profiles if file is not None else {}
        if name not in defined:
            raise ConfigError(_unknown_profile(where, name, chooser, file))
        profile_values = defined[name]

    values: dict[str, Any] = _defaults()
    sources.update(dict.fromkeys(SETTING_KEYS, _DEFAULT))
    layers: list[tuple[Source, Mapping[str, Any]]] = [
        (Source("file", path), file.settings if file is not None else {}),
        (Source("profile", name), profile_values),
    ]
    for source, layer in layers:
        for key, value in layer.items():
            values[key], sources[key] = value, source
    for key, (value, variable) in _environment(environ, ctx).items():
        values[key], sources[key] = value, Source("env", variable)
    for key, value in _flags(overrides, ctx).items():
        values[key], sources[key] = value, Source("flag", key)

    key_env = values["provider.api_key_env"]
    api_key = environ.get(key_env) or None
    sources["api_key"] = Source("env", key_env) if api_key else _DEFAULT
    settings = _build(values, profile=name, home=home_dir, api_key=api_key)
    if file is not None and file.models:
        settings = attrs.evolve(settings, models=file.models)
        sources["models"] = Source("file", path)
    if file is not None and file.control is not None:
        settings = attrs.evolve(settings, control=file.control)
    if file is not None and file.mcp_servers:
        settings = attrs.evolve(settings, mcp_servers=file.mcp_servers)
    return LoadedSettings(settings, path, file is not None, where, tuple(warnings), sources)


def _unknown_profile(where: str, name: str, chooser: str, file: _File | None) -> str:
    message = f"{where}: profile {name!r} (selected by {chooser}) is not defined"
    if file is None:
        return message + "; the file does not exist"
    if not file.profiles:
        return message + "; the file defines no [profiles.NAME] tables"
    return message + f"; profiles: {', '.join(sorted(file.profiles))}"


def _defaults() -> dict[str, Any]:
    settings = Settings()
    values: dict[str, Any] = {}
    for key in SETTING_KEYS:
        if key.startswith("provider."):
            values[key] = getattr(settings.provider, key.split(".", 1)[1])
        else:
            values[key] = getattr(settings, key)
    return values


def _build(
    values: Mapping[str, Any], *, profile: str | None, home: str, api_key: str | None
) -> Settings:
    provider = ProviderSettings(
        **{key.split(".", 1)[1]: v for key, v in values.items() if key.startswith("provider.")}
    )
    top = {key: v for key, v in values.items() if "." not in key}
    return Settings(**top, provider=provider, profile=profile, home=home, api_key=api_key)
