"""``config.toml``'s ``[control]`` table: seed 003's control messages (``docs/control.md``).

Read by :func:`codexcore.config.load_settings` into :class:`ControlSettings`;
the command line turns that into the plain object the session host takes
(adapters never read the configuration). A sender's token is never written in
the file: ``token_env`` names the environment variable that holds it.

This is the table's reader, loaded only for a file that has a ``[control]``
table; :class:`ControlSettings` itself is in ``_config_settings`` with the other
settings, since every :class:`~codexcore.config.Settings` holds one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from ._config_settings import _ENV_NAME, ControlSenderSettings, ControlSettings


class ControlConfigError(ValueError):
    """A wrong value in ``[control]``; the message names the key and what is allowed."""


_STRINGS = ("team", "sender", "share_dir", "audit_file")
_INTS = ("soft_limit_bytes", "hard_limit_bytes", "retries", "max_pending")
_SECONDS = ("dedupe_ttl", "max_age", "max_skew", "ack_timeout")
_KEYS = (*_STRINGS, *_INTS, *_SECONDS, "senders", "allowed_content_dirs", "verbose_messages")


def read_control(table: Any, where: str, user_home: str | None) -> ControlSettings:
    """``[control]`` as :class:`ControlSettings`; raises :class:`ControlConfigError`."""
    if not isinstance(table, Mapping):
        raise ControlConfigError(f"{where}: control: expected a table ([control])")
    values: dict[str, Any] = {}
    for key, value in table.items():
        shown = f"control.{key}"
        if key not in _KEYS:
            raise ControlConfigError(f"{where}: unknown key {shown!r}; known: {', '.join(_KEYS)}")
        values[key] = _value(key, value, f"{where}: {shown}", user_home)
    settings = ControlSettings(**values)
    if settings.soft_limit_bytes > settings.hard_limit_bytes:
        raise ControlConfigError(f"{where}: control.soft_limit_bytes is over hard_limit_bytes")
    return settings


def _value(key: str, value: Any, shown: str, user_home: str | None) -> Any:
    if key == "audit_file" and value == "":
        return ""  # the file turned off (the log still has every record)
    if key in _STRINGS:
        if not isinstance(value, str) or not value:
            raise ControlConfigError(f"{shown} = {value!r}: expected a non-empty string")
        return _path(value, user_home) if key in ("share_dir", "audit_file") else value
    if key in _INTS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ControlConfigError(f"{shown} = {value!r}: expected a whole number >= 0")
        return value
    if key in _SECONDS:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ControlConfigError(f"{shown} = {value!r}: expected seconds > 0")
        if not math.isfinite(value):
            raise ControlConfigError(f"{shown} = {value!r}: expected a finite number")
        return float(value)
    if key == "verbose_messages":
        if not isinstance(value, bool):
            raise ControlConfigError(f"{shown} = {value!r}: expected true or false")
        return value
    if key == "allowed_content_dirs":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ControlConfigError(f"{shown}: expected a list of directories")
        paths = tuple(_path(v, user_home) for v in value)
        for path in paths:
            if not os.path.isabs(path):
                raise ControlConfigError(f"{shown}: {path!r} is not an absolute path")
        return paths
    return _senders(value, shown)


def _path(value: str, user_home: str | None) -> str:
    if value.startswith("~") and user_home:
        value = user_home + value[1:]
    return os.path.normpath(value)


def _senders(value: Any, shown: str) -> tuple[ControlSenderSettings, ...]:
    if not isinstance(value, list):
        raise ControlConfigError(f"{shown}: expected [[control.senders]] tables")
    senders = []
    for index, entry in enumerate(value):
        where = f"{shown}[{index}]"
        if not isinstance(entry, Mapping):
            raise ControlConfigError(f"{where}: expected a table")
        unknown = set(entry) - {"name", "team", "uid", "token_env"}
        if unknown:
            raise ControlConfigError(
                f"{where}: unknown keys {sorted(unknown)}; a token is "
                "never written here: token_env names its variable"
            )
        name, team = entry.get("name"), entry.get("team")
        if not (isinstance(name, str) and name and isinstance(team, str) and team):
            raise ControlConfigError(f"{where}: name and team are required strings")
        uid, token_env = entry.get("uid"), entry.get("token_env")
        if uid is not None and (isinstance(uid, bool) or not isinstance(uid, int) or uid < 0):
            raise ControlConfigError(f"{where}.uid = {uid!r}: expected a user id")
        if token_env is not None and not (
            isinstance(token_env, str) and _ENV_NAME.fullmatch(token_env)
        ):
            raise ControlConfigError(f"{where}.token_env = {token_env!r}: expected a variable name")
        if uid is None and token_env is None:
            raise ControlConfigError(f"{where}: give uid (stdio, Unix) or token_env (TCP)")
        senders.append(ControlSenderSettings(name, team, uid, token_env))
    return tuple(senders)
