"""The settings: what :func:`codexcore.config.load_settings` returns, and what each key takes.

The value types (:class:`Settings` with its :class:`ProviderSettings` and
:class:`ControlSettings`, :class:`Source`, :class:`LoadedSettings`) and their
defaults, :class:`ConfigError`, and the check behind every dotted key of
:data:`SETTING_KEYS`, which the file, the environment and the flags share.
:mod:`codexcore.config` exports the public names. Every command loads this
module; the readers of the rarely used tables (``[models.NAME]``,
``[mcp_servers.NAME]``, ``[control]``) are modules of their own, loaded only
for a file that has them.
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

from ._api_key import DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, missing_key_message, needs_key
from .protocol import ApprovalPolicy, HistoryMode, ReasoningEffort, SandboxMode
from .protocol._value import Value

if TYPE_CHECKING:
    from .engine import EngineConfig

CONFIG_FILE: Final = "config.toml"
DEFAULT_MODEL: Final = "gpt-5-codex"  # the engine's default (codexcore.engine._config)

LogLevel = Literal["debug", "info", "warning", "error"]
SourceKind = Literal["flag", "env", "profile", "file", "default"]

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
KiB = 1024


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
    is the first backoff in seconds; ``response_header_timeout`` is how many
    seconds a request may wait for its response's headers, and
    ``stream_idle_timeout`` how many a stream may then stay silent, before
    the attempt fails.
    """

    base_url: str = DEFAULT_BASE_URL
    api_key_env: str = DEFAULT_API_KEY_ENV
    headers: Mapping[str, str] = attrs.field(factory=dict, hash=False, repr=_header_names)
    max_attempts: int = 5
    retry_base_delay: float = 0.2
    stream_idle_timeout: float = 300.0
    response_header_timeout: float = 60.0

    @property
    def needs_key(self) -> bool:
        """Whether requests are pointless without a key: OpenAI's own API refuses
        every request that has none. Any other ``base_url`` (a local server, a
        proxy) may work without one, and is sent no ``Authorization`` header."""
        return needs_key(self.base_url)


@attrs.frozen(repr=False, eq=False)
class ControlSenderSettings(Value):
    """One ``[[control.senders]]`` entry: who may send, by uid (stdio, Unix) or token (TCP)."""

    name: str
    team: str
    uid: int | None = None
    token_env: str | None = None


@attrs.frozen(repr=False, eq=False)
class ControlSettings(Value):
    """The ``[control]`` table, with the defaults of ATM-style control messages for every limit.

    ``team``: this host's team (None: control messages are refused).
    ``sender``: the name ``codexcore control`` sends as. ``share_dir``: where
    ``codexcore control`` writes oversize input for ``content_ref``.
    """

    team: str | None = None
    sender: str | None = None
    senders: tuple[ControlSenderSettings, ...] = ()
    allowed_content_dirs: tuple[str, ...] = ()
    share_dir: str | None = None
    soft_limit_bytes: int = 64 * KiB
    hard_limit_bytes: int = 1024 * KiB
    dedupe_ttl: float = 600.0
    max_age: float = 300.0
    max_skew: float = 30.0
    ack_timeout: float = 2.0
    retries: int = 1
    max_pending: int = 16
    audit_file: str | None = None
    verbose_messages: bool = False


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
    none is read). ``control`` is the ``[control]`` table (ATM-style control
    messages; top level only, not per profile). ``mcp_servers`` are the
    ``[mcp_servers.NAME]`` tables, checked (see ``docs/mcp.md``): each server's
    ``McpServerConfig`` fields by name. ``tui_theme`` is the theme a Codelia UI
    is told to draw with (``initialize``'s ``tui.theme``; its ``theme.set`` writes it).
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
    chat_prompts: str | None = None
    """The prompt file of the Copilot-CLI-style chat protocol's ``generate`` and
    ``customize`` (None: the one shipped in the package; ``docs/jsonrpc.md``)."""
    tui_theme: str | None = None

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
            response_header_timeout=self.provider.response_header_timeout,
            models=ModelCatalog(self.models),
            project_doc_max_bytes=self.project_doc_max_bytes,
            model_auto_compact_token_limit=self.model_auto_compact_token_limit,
        )
        return attrs.evolve(config, **changes) if changes else config


def _mcp_server_configs(servers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The engine's ``McpServerConfig`` of each checked table (imported only when some exist)."""
    if not servers:
        return {}
    from .engine._mcp import McpServerConfig

    return {name: McpServerConfig(**fields) for name, fields in servers.items()}


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
        return missing_key_message(
            variable,
            provider.base_url,
            url_from=f"provider.base_url from {self.origin('provider.base_url')}",
            fix=(
                "The key is read from the environment variable named by "
                f"provider.api_key_env: {variable} (from {self.origin('provider.api_key_env')}). "
                "Set it, or point provider.base_url at a server that needs no key."
            ),
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


def _path(value: Any, ctx: _Context) -> str:
    expected = 'an absolute path, e.g. "~/.codexcore/chat-prompts.toml"'
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(expected)
    path = _expand_user(value.strip(), ctx.user_home)
    if not os.path.isabs(path):
        raise _Invalid(f"{expected} (not {value!r})")
    return os.path.normpath(path)


def _expand_user(path: str, user_home: str | None) -> str:
    if user_home and (path == "~" or path.startswith("~/")):
        return user_home + path[1:]
    return path


TUI_THEMES: Final = (
    *("codelia", "ocean", "forest", "rose", "sakura"),
    *("mauve", "plum", "iris", "crimson", "wine"),
)
"""The Codelia TUI's themes (what its ``theme.set`` takes)."""


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
    "chat_prompts": _Key(_path),
    "tui_theme": _Key(_choice(*TUI_THEMES)),
    "provider.base_url": _Key(_url),
    "provider.api_key_env": _Key(_env_name, secret=True),
    "provider.headers": _Key(_headers, "table", secret=True),
    "provider.max_attempts": _Key(_int_at_least(1), "int"),
    "provider.retry_base_delay": _Key(_number(positive=False), "float"),
    "provider.stream_idle_timeout": _Key(_number(positive=True), "float"),
    "provider.response_header_timeout": _Key(_number(positive=True), "float"),
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
