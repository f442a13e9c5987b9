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

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

import attrs

from ._config_control import ControlConfigError, ControlSettings, read_control
from .protocol import ApprovalPolicy, HistoryMode, ReasoningEffort, SandboxMode
from .protocol._value import Value

if TYPE_CHECKING:
    from .engine import EngineConfig

__all__ = [
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
    "config_path",
    "default_home",
    "load_settings",
]

CONFIG_FILE: Final = "config.toml"
DEFAULT_MODEL: Final = "gpt-5-codex"  # the engine's default (codexcore.engine._config)
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"  # the model client's default
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
_OPENAI_HOST: Final = "api.openai.com"  # and its regional hosts, e.g. eu.api.openai.com

LogLevel = Literal["debug", "info", "warning", "error"]
SourceKind = Literal["flag", "env", "profile", "file", "default"]

ENVIRONMENT_VARIABLES: Final = {
    "OPENAI_BASE_URL": "provider.base_url",
    "CODEXCORE_LOG": "log_level",
}
"""The environment variables that set a setting, and the setting (dotted key)."""

_APPROVAL_POLICIES: Final = ("untrusted", "on-failure", "on-request", "never")
_SANDBOX_MODES: Final = ("read-only", "workspace-write", "danger-full-access")
_HISTORY_MODES: Final = ("server", "client")
_REASONING_EFFORTS: Final = ("minimal", "low", "medium", "high")
_LOG_LEVELS: Final = ("debug", "info", "warning", "error")
_SECRET_KEYS: Final = frozenset({"api_key", "apikey", "api-key", "openai_api_key", "key"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_LOOKS_LIKE_A_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")
_SHOW_LIMIT = 80


class ConfigError(ValueError):
    """A configuration that cannot be used.

    The message names where the value was (the file, an environment variable,
    or the command line), the dotted key, and what is allowed, e.g.
    ``~/.codexcore/config.toml: approval_policy = "sometimes": expected one of
    untrusted, on-failure, on-request, never``. It never contains a secret.
    """


# --- the settings ------------------------------------------------------------------------


def _header_names(headers: Mapping[str, str]) -> str:
    return repr(sorted(headers))  # values may identify an account: never in a repr


@attrs.frozen(repr=False, eq=False)
class ProviderSettings(Value):
    """Where model requests go and how they are retried.

    ``api_key_env`` is the *name* of the environment variable holding the key.
    ``headers`` are added to every model request (their values are shown
    nowhere). ``max_attempts`` counts the first request; ``retry_base_delay``
    is the first backoff in seconds; ``stream_idle_timeout`` is how many
    seconds a stream may stay silent before the attempt fails.
    """

    base_url: str = DEFAULT_BASE_URL
    api_key_env: str = DEFAULT_API_KEY_ENV
    headers: Mapping[str, str] = attrs.field(factory=dict, hash=False, repr=_header_names)
    max_attempts: int = 5
    retry_base_delay: float = 0.2
    stream_idle_timeout: float = 300.0

    @property
    def needs_key(self) -> bool:
        """Whether requests are pointless without a key: OpenAI's own API refuses
        every request that has none. Any other ``base_url`` (a local server, a
        proxy) may work without one, and is sent no ``Authorization`` header."""
        host = urlsplit(self.base_url).hostname or ""
        return host == _OPENAI_HOST or host.endswith("." + _OPENAI_HOST)


@attrs.frozen(repr=False, eq=False)
class Settings(Value):
    """Everything ``config.toml`` can say, resolved, plus the key and the home.

    ``instructions=None`` means the engine's default instructions;
    ``reasoning_effort=None`` the model's default.
    ``model_supports_reasoning_summaries=None`` leaves to the model catalogue
    whether the model takes reasoning options. ``model_auto_compact_token_limit=None``
    compacts at 90% of the model's context window. ``profile`` is the profile
    that was applied, if any. ``home`` is ``CODEXCORE_HOME`` (None: the
    engine's default). ``api_key`` is the value of the variable named by
    ``provider.api_key_env`` (None when unset or empty); it is left out of the
    repr. ``models`` holds the ``[models.NAME]`` tables: per-model overrides of
    the model catalogue (context window, limits, prices, reasoning support).
    ``project_doc_max_bytes`` caps the AGENTS.md text sent to the model (0:
    none is read). ``control`` is the ``[control]`` table (seed 003's control
    messages; top level only, not per profile). ``mcp_servers`` are the
    ``[mcp_servers.NAME]`` tables, checked (see ``docs/mcp.md``): each server's
    ``McpServerConfig`` fields by name.
    """

    model: str = DEFAULT_MODEL
    instructions: str | None = None
    approval_policy: ApprovalPolicy = "on-request"
    sandbox_mode: SandboxMode = "workspace-write"
    writable_roots: tuple[str, ...] = ()
    network_access: bool = False
    history_mode: HistoryMode = "server"
    reasoning_effort: ReasoningEffort | None = None
    model_supports_reasoning_summaries: bool | None = None
    model_auto_compact_token_limit: int | None = None
    log_level: LogLevel = "warning"
    project_doc_max_bytes: int = 32 * 1024
    provider: ProviderSettings = attrs.field(factory=ProviderSettings)
    models: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, hash=False)
    profile: str | None = None
    home: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    control: ControlSettings = attrs.field(factory=ControlSettings)
    mcp_servers: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, hash=False, repr=False)

    def engine_config(self, cwd: str | None = None, **changes: Any) -> EngineConfig:
        """The :class:`~codexcore.EngineConfig` these settings describe.

        ``cwd`` is where Sessions start (default: the current directory).
        ``changes`` set other ``EngineConfig`` fields (``ephemeral=True`` …).
        ``base_url`` and ``api_key`` are always explicit (``""`` when no key is
        set), so the model client never falls back to ``OPENAI_BASE_URL`` or
        ``OPENAI_API_KEY`` behind the configuration's back: a profile for a
        local server does not send the OpenAI key there.
        """
        from .engine import EngineConfig, ModelCatalog, SessionConfig
        from .protocol import SandboxPolicy

        session_fields: dict[str, Any] = {
            "model": self.model,
            "approval_policy": self.approval_policy,
            "sandbox_policy": SandboxPolicy(
                type=self.sandbox_mode,
                writable_roots=self.writable_roots,
                network_access=self.network_access,
            ),
            "history_mode": self.history_mode,
            "reasoning_effort": self.reasoning_effort,
            "model_supports_reasoning_summaries": self.model_supports_reasoning_summaries,
            "base_url": self.provider.base_url,
        }
        if cwd is not None:
            session_fields["cwd"] = os.path.abspath(cwd)
        if self.instructions is not None:
            session_fields["instructions"] = self.instructions
        config = EngineConfig(
            session=SessionConfig(**session_fields),
            mcp_servers=_mcp_server_configs(self.mcp_servers),
            api_key=self.api_key or "",
            headers=dict(self.provider.headers),
            home=self.home,
            max_attempts=self.provider.max_attempts,
            retry_base_delay=self.provider.retry_base_delay,
            stream_idle_timeout=self.provider.stream_idle_timeout,
            models=ModelCatalog(self.models),
            project_doc_max_bytes=self.project_doc_max_bytes,
            model_auto_compact_token_limit=self.model_auto_compact_token_limit,
        )
        return attrs.evolve(config, **changes) if changes else config


@attrs.frozen(repr=False, eq=False)
class Source(Value):
    """Where a value came from.

    ``detail`` is the flag's setting name for ``flag``, the variable's name for
    ``env``, the profile's name for ``profile`` and the file's path for
    ``file``. ``str()`` gives a short label: ``flag``, ``env OPENAI_BASE_URL``,
    ``profile local``, ``config.toml``, ``default``.
    """

    kind: SourceKind
    detail: str | None = None

    def __str__(self) -> str:
        if self.kind == "file":
            return CONFIG_FILE
        if self.kind in ("env", "profile") and self.detail:
            return f"{self.kind} {self.detail}"
        return self.kind


_DEFAULT = Source("default")


@attrs.frozen(repr=False, eq=False)
class LoadedSettings(Value):
    """What :func:`load_settings` found.

    ``path`` is the ``config.toml`` looked at, ``display_path`` the same as
    messages show it (``~`` for the user's home), ``found`` whether it exists.
    ``warnings`` are messages for the user (unknown keys). ``sources`` maps
    every dotted key of :data:`SETTING_KEYS`, and ``profile``, ``home`` and
    ``api_key``, to where its value came from.
    """

    settings: Settings
    path: str
    found: bool
    display_path: str
    warnings: tuple[str, ...] = ()
    sources: Mapping[str, Source] = attrs.field(factory=dict, hash=False)

    def source(self, key: str) -> Source:
        """Where the value of ``key`` (dotted, e.g. ``provider.base_url``) came from."""
        return self.sources.get(key, _DEFAULT)

    def origin(self, key: str) -> str:
        """Where the value of ``key`` came from, in words for a message.

        ``$OPENAI_BASE_URL``, ``profile 'local' in ~/.codexcore/config.toml``,
        ``~/.codexcore/config.toml``, ``the command line`` or ``the default``.
        """
        source = self.source(key)
        if source.kind == "env":
            return f"${source.detail}"
        if source.kind == "profile":
            return f"profile {source.detail!r} in {self.display_path}"
        if source.kind == "file":
            return self.display_path
        return "the command line" if source.kind == "flag" else "the default"

    def missing_key(self) -> str | None:
        """Why no request can succeed for want of a key, or None when that is not so.

        A key is missing when the provider needs one
        (:attr:`ProviderSettings.needs_key`) and the variable named by
        ``provider.api_key_env`` is unset or empty. The message names the
        variable and where that name came from, and the URL and its origin.
        """
        settings = self.settings
        provider = settings.provider
        if settings.api_key or not provider.needs_key:
            return None
        variable = provider.api_key_env
        return (
            f"no API key: ${variable} is not set, and {provider.base_url} needs one "
            f"(provider.base_url from {self.origin('provider.base_url')}). The key is read "
            f"from the environment variable named by provider.api_key_env: {variable} "
            f"(from {self.origin('provider.api_key_env')}). Set it, or point "
            "provider.base_url at a server that needs no key."
        )


# --- validation --------------------------------------------------------------------------


class _Invalid(Exception):
    """A value is wrong; ``expected`` says what is allowed."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


@attrs.frozen(repr=False, eq=False)
class _Context(Value):
    """What validators need besides the value: the user's home, for ``~``."""

    user_home: str | None


_Check = Callable[[Any, _Context], Any]


def _choice(*allowed: str, fold_case: bool = False) -> _Check:
    def check(value: Any, ctx: _Context) -> Any:
        if isinstance(value, str):
            candidate = value.lower() if fold_case else value
            if candidate in allowed:
                return candidate
        raise _Invalid(f"one of {', '.join(allowed)}")

    return check


def _string(value: Any, ctx: _Context) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("a non-empty string")
    return value


def _text(value: Any, ctx: _Context) -> str:
    if not isinstance(value, str):
        raise _Invalid("a string")
    return value


def _bool(value: Any, ctx: _Context) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("true or false")
    return value


def _int_at_least(minimum: int) -> _Check:
    def check(value: Any, ctx: _Context) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _Invalid(f"an integer >= {minimum}")
        return value

    return check


def _number(*, positive: bool) -> _Check:
    expected = "a number > 0 (seconds)" if positive else "a number >= 0 (seconds)"

    def check(value: Any, ctx: _Context) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Invalid(expected)
        number = float(value)
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            raise _Invalid(expected)
        return number

    return check


def _url(value: Any, ctx: _Context) -> str:
    expected = 'an http:// or https:// URL such as "http://127.0.0.1:8080/v1"'
    if not isinstance(value, str):
        raise _Invalid(expected)
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        raise _Invalid(expected) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise _Invalid(expected)
    return value.strip().rstrip("/")


def _env_name(value: Any, ctx: _Context) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise _Invalid(
            "the NAME of an environment variable (letters, digits and _, "
            'e.g. "OPENAI_API_KEY"), never the key itself'
        )
    return value


def _headers(value: Any, ctx: _Context) -> dict[str, str]:
    expected = 'a table of header names to strings, e.g. { "OpenAI-Organization" = "org-…" }'
    if not isinstance(value, Mapping):
        raise _Invalid(expected)
    headers: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise _Invalid(f"{expected}; a header name is letters, digits and -")
        if name.lower() == "authorization":
            raise _Invalid(
                "no Authorization header: the key never goes in configuration; "
                "name the environment variable holding it with provider.api_key_env"
            )
        if not isinstance(text, str) or "\r" in text or "\n" in text:
            raise _Invalid(f"{expected}; the value of {name!r} is not a one-line string")
        if _LOOKS_LIKE_A_KEY.search(text):
            raise _Invalid(
                f"no key in header {name!r}: the key never goes in configuration; "
                "name the environment variable holding it with provider.api_key_env"
            )
        headers[name] = text
    return headers


def _roots(value: Any, ctx: _Context) -> tuple[str, ...]:
    expected = 'a list of absolute paths, e.g. ["/srv/data", "~/scratch"]'
    if not isinstance(value, list | tuple):
        raise _Invalid(expected)
    roots: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise _Invalid(expected)
        path = _expand_user(item, ctx.user_home)
        if not os.path.isabs(path):
            raise _Invalid(f"{expected} (not {item!r})")
        roots.append(os.path.normpath(path))
    return tuple(roots)


def _expand_user(path: str, user_home: str | None) -> str:
    if user_home and (path == "~" or path.startswith("~/")):
        return user_home + path[1:]
    return path


@attrs.frozen(repr=False, eq=False)
class _Key(Value):
    check: _Check
    kind: Literal["str", "bool", "int", "float", "list", "table"] = "str"
    secret: bool = False  # never echo the value in an error


_SPECS: Final[Mapping[str, _Key]] = {
    "model": _Key(_string),
    "instructions": _Key(_text),
    "approval_policy": _Key(_choice(*_APPROVAL_POLICIES)),
    "sandbox_mode": _Key(_choice(*_SANDBOX_MODES)),
    "writable_roots": _Key(_roots, "list"),
    "network_access": _Key(_bool, "bool"),
    "history_mode": _Key(_choice(*_HISTORY_MODES)),
    "reasoning_effort": _Key(_choice(*_REASONING_EFFORTS)),
    "model_supports_reasoning_summaries": _Key(_bool, "bool"),
    "model_auto_compact_token_limit": _Key(_int_at_least(1), "int"),
    "log_level": _Key(_choice(*_LOG_LEVELS, fold_case=True)),
    "project_doc_max_bytes": _Key(_int_at_least(0), "int"),
    "provider.base_url": _Key(_url),
    "provider.api_key_env": _Key(_env_name, secret=True),
    "provider.headers": _Key(_headers, "table", secret=True),
    "provider.max_attempts": _Key(_int_at_least(1), "int"),
    "provider.retry_base_delay": _Key(_number(positive=False), "float"),
    "provider.stream_idle_timeout": _Key(_number(positive=True), "float"),
}

SETTING_KEYS: Final = tuple(_SPECS)
"""Every setting, by dotted key: what config.toml, a profile or a flag may set."""

_TOP_KEYS: Final = tuple(k for k in SETTING_KEYS if "." not in k)
_PROVIDER_KEYS: Final = tuple(k.split(".", 1)[1] for k in SETTING_KEYS if k.startswith("provider."))


def _show(value: Any) -> str:
    """``value`` as it would look in TOML, shortened."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        if _LOOKS_LIKE_A_KEY.search(value):
            return "<a value that looks like an API key>"
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(_show(item) for item in value) + "]"
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k} = {_show(v)}" for k, v in value.items()) + "}"
    else:  # dates and times
        text = value.isoformat() if hasattr(value, "isoformat") else repr(value)
    return text if len(text) <= _SHOW_LIMIT else text[: _SHOW_LIMIT - 1] + "…"


def _validate(key: str, value: Any, *, where: str, shown: str, ctx: _Context) -> Any:
    """The checked value of setting ``key``; ``shown`` is how to name it in an error."""
    spec = _SPECS[key]
    try:
        return spec.check(value, ctx)
    except _Invalid as exc:
        assignment = shown if spec.secret else f"{shown} = {_show(value)}"
        raise ConfigError(f"{where}: {assignment}: expected {exc.expected}") from None


def _refuse_secret(where: str, shown: str) -> ConfigError:
    return ConfigError(
        f"{where}: {shown}: a key never goes in configuration; put it in an environment "
        f"variable and name that variable with provider.api_key_env "
        f'(default "{DEFAULT_API_KEY_ENV}")'
    )


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
                servers = _mcp_servers(value, self.where, self.ctx, self.warnings)
        control = None
        if "control" in document:
            try:
                control = read_control(document["control"], self.where, self.ctx.user_home)
            except ControlConfigError as exc:
                raise ConfigError(str(exc)) from None
        skip = ("profile", "profiles", "models", "control", "mcp_servers")
        settings = self._table(document, prefix="", skip=skip)
        models = self._models(document.get("models", {}))
        return _File(settings, profiles, default_profile, models, control, servers)

    def _models(self, value: Any) -> dict[str, dict[str, Any]]:
        """``[models.NAME]`` tables: overrides of the model catalogue, checked."""
        from .engine._models import OVERRIDABLE

        if not isinstance(value, Mapping):
            raise ConfigError(
                f'{self.where}: models = {_show(value)}: expected tables such as [models."gpt-5"]'
            )
        models: dict[str, dict[str, Any]] = {}
        for name, table in value.items():
            shown = f"models.{json.dumps(name)}"
            if not isinstance(table, Mapping):
                raise ConfigError(f"{self.where}: {shown} = {_show(table)}: expected a table")
            models[name] = {}
            for key, item in table.items():
                kind = OVERRIDABLE.get(key)
                if kind is None:
                    self._unknown(f"{shown}.{key}", key, here=tuple(OVERRIDABLE), elsewhere=None)
                    continue
                models[name][key] = _model_value(kind, item, f"{self.where}: {shown}.{key}")
        return models

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


def _model_value(kind: str, value: Any, shown: str) -> Any:
    """A ``[models.NAME]`` value of ``kind`` (``int``: a token count >= 1; ``float``: a
    price >= 0; ``bool``; ``str``), or a ConfigError naming it."""
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "float" and number and math.isfinite(value) and value >= 0:
        return float(value)
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "str" and isinstance(value, str):
        return value
    expected = {
        "int": "an integer >= 1 (tokens)",
        "float": "a number >= 0 (US dollars per million tokens)",
        "bool": "true or false",
        "str": "a string",
    }[kind]
    raise ConfigError(f"{shown} = {_show(value)}: expected {expected}")


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


def _read_file(path: str, where: str, ctx: _Context) -> tuple[_File | None, list[str]]:
    """The validated file and its warnings; ``(None, [])`` when it does not exist."""
    try:
        with open(path, "rb") as stream:
            raw = stream.read()
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


# --- [mcp_servers.NAME] --------------------------------------------------------------------

_MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")
_MCP_STDIO_KEYS: Final = ("command", "args", "env", "cwd")
_MCP_HTTP_KEYS: Final = ("url", "bearer_token_env_var", "http_headers")
_MCP_COMMON_KEYS: Final = (
    "enabled",
    "startup_timeout_sec",
    "tool_timeout_sec",
    "enabled_tools",
    "disabled_tools",
)


def _strings(value: Any, ctx: _Context) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise _Invalid("a list of strings")
    return tuple(value)


def _string_table(value: Any, ctx: _Context) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _Invalid('a table of names to strings, e.g. { "LOG_LEVEL" = "info" }')
    return dict(value)


def _mcp_headers(value: Any, ctx: _Context) -> dict[str, str]:
    headers = _string_table(value, ctx)
    for name, text in headers.items():
        if not _HEADER_NAME.fullmatch(name) or "\r" in text or "\n" in text:
            raise _Invalid(f"header names and one-line values (not {name!r})")
        if name.lower() == "authorization" or _LOOKS_LIKE_A_KEY.search(text):
            raise _Invalid(
                "no credentials in configuration: name the environment variable holding "
                "the bearer token with bearer_token_env_var"
            )
    return headers


def _mcp_cwd(value: Any, ctx: _Context) -> str:
    path = _expand_user(_string(value, ctx), ctx.user_home)
    if not os.path.isabs(path):
        raise _Invalid(f"an absolute path (not {value!r})")
    return os.path.normpath(path)


_MCP_CHECKS: Final[Mapping[str, _Check]] = {
    "command": _string,
    "args": _strings,
    "env": _string_table,
    "cwd": _mcp_cwd,
    "url": _url,
    "bearer_token_env_var": _env_name,
    "http_headers": _mcp_headers,
    "enabled": _bool,
    "startup_timeout_sec": _number(positive=True),
    "tool_timeout_sec": _number(positive=True),
    "enabled_tools": _strings,
    "disabled_tools": _strings,
}
_MCP_SECRET: Final = frozenset({"env", "http_headers"})


def _mcp_servers(
    value: Any, where: str, ctx: _Context, warnings: list[str]
) -> dict[str, dict[str, Any]]:
    """The ``[mcp_servers.NAME]`` tables, checked: each server's fields by name."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: mcp_servers: expected tables such as [mcp_servers.docs]")
    servers: dict[str, dict[str, Any]] = {}
    for name, table in value.items():
        shown = f"mcp_servers.{name}"
        if not _MCP_SERVER_NAME.fullmatch(name):
            raise ConfigError(
                f"{where}: [{shown}]: a server's name is letters, digits, _ and - "
                "(it becomes part of its tools' names)"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: {shown} = {_show(table)}: expected a table ([{shown}])")
        servers[name] = _mcp_server(table, f"{where}: {shown}", ctx, warnings)
    return servers


def _mcp_server(
    table: Mapping[str, Any], where: str, ctx: _Context, warnings: list[str]
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in table.items():
        check = _MCP_CHECKS.get(key)
        if check is None:
            warnings.append(f"unknown key {key!r} in {where}")
            continue
        try:
            fields[key] = check(value, ctx)
        except _Invalid as exc:
            shown = key if key in _MCP_SECRET else f"{key} = {_show(value)}"
            raise ConfigError(f"{where}.{shown}: expected {exc.expected}") from None
    stdio = "command" in fields
    if stdio == ("url" in fields):
        raise ConfigError(
            f"{where}: expected either command (a stdio server) or url (a streamable-HTTP "
            "server), and not both"
        )
    wrong = [k for k in (_MCP_HTTP_KEYS if stdio else _MCP_STDIO_KEYS) if k in fields]
    if wrong:
        kind = "a stdio server (command)" if stdio else "an HTTP server (url)"
        raise ConfigError(f"{where}: {', '.join(wrong)} does not apply to {kind}")
    for key in ("args", "enabled_tools", "disabled_tools"):
        if key in fields:
            fields[key] = tuple(fields[key])
    return fields


def _mcp_server_configs(servers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The engine's ``McpServerConfig`` of each checked table (imported only when some exist)."""
    if not servers:
        return {}
    from .engine._mcp import McpServerConfig

    return {name: McpServerConfig(**fields) for name, fields in servers.items()}
