"""The Codelia runtime protocol's ``auth.logout`` (section 5.13) and the TUI's ``theme.set``.

``auth.logout {clear_session?}`` asks the UI to confirm (as Codelia's runtime
does), then makes the server forget the credential of its one provider: the
API key it read from the environment at start. Every later model request, of
every session of this server, goes without a key. codexcore keeps no
credential on disk, so nothing there changes, and a restarted server reads the
key again. The conversation is not cleared (``session_cleared: false``): the
engine has no op that empties a live session's history; a new session is a
new connection away.

``theme.set {name}`` writes ``tui_theme = "NAME"`` into ``config.toml`` (the
one the server read) and answers ``{name, scope: "global", path}``; later
``initialize`` answers carry it as ``tui.theme``, as Codelia's runtime does.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from typing import TYPE_CHECKING, Any

import attrs

from codexcore._logging import get_logger
from codexcore.adapters.jsonrpc._errors import RUNTIME_BUSY, SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.adapters.jsonrpc._methods import MethodTable

from ._runs import state_of

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext

log = get_logger(__name__)

THEMES = (
    *("codelia", "ocean", "forest", "rose", "sakura"),
    *("mauve", "plum", "iris", "crimson", "wine"),
)
"""The Codelia TUI's themes (config.toml's ``tui_theme`` takes the same)."""

CONFIRM = {
    "title": "Confirm logout",
    "message": "This makes the runtime forget its API key: later model requests go without "
    "one until it restarts. Continue?",
    "confirm_label": "Yes",
    "cancel_label": "No",
    "danger_level": "danger",
    "allow_remember": False,
    "allow_reason": False,
}


@attrs.frozen
class AuthLogout:
    clear_session: bool | None = None


@attrs.frozen
class ThemeSet:
    name: str = attrs.field(metadata={"schema": {"enum": list(THEMES)}})


def _busy(ctx: RpcContext) -> None:
    active = state_of(ctx).active
    if active is not None:
        raise RpcError(RUNTIME_BUSY, f"runtime busy: run {active.id} is still running")


async def auth_logout(ctx: RpcContext, params: AuthLogout) -> dict[str, Any]:
    from codexcore.adapters.jsonrpc._outbox import ConnectionClosed

    _busy(ctx)
    if ctx.client_capabilities.get("supports_confirm") is False:
        raise RpcError(
            SERVER_ERROR, "UI confirmation is required for logout (the UI cannot confirm)"
        )
    try:
        answer = await ctx.request("ui.confirm.request", CONFIRM)
    except RpcError as exc:  # -32003 (user cancelled) or any other: not confirmed
        log.info("logout not confirmed", code=exc.code)
        answer = None
    except ConnectionClosed:
        raise RpcError(SERVER_ERROR, "the UI left before confirming") from None
    if not (isinstance(answer, dict) and answer.get("ok") is True):
        return {"ok": False, "auth_cleared": False, "session_cleared": False, "cancelled": True}
    held = ctx.host.forget_api_key()
    log.info("logged out", key_was_held=held)
    return {"ok": True, "auth_cleared": held, "session_cleared": False}


async def theme_set(ctx: RpcContext, params: ThemeSet) -> dict[str, Any]:
    name = params.name.strip().lower()
    if name not in THEMES:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: params.name: unsupported theme {params.name!r} "
            f"(one of {', '.join(THEMES)})",
        )
    path = ctx.host.config.config_file
    if path is None:
        raise RpcError(SERVER_ERROR, "this runtime was started without a config.toml to write")
    try:
        await asyncio.to_thread(write_theme, path, name)
    except OSError as exc:
        raise RpcError(SERVER_ERROR, f"theme.set: cannot write {path}: {exc.strerror}") from None
    ctx.host.tui_theme = name
    log.info("theme set", theme=name, path=path)
    return {"name": name, "scope": "global", "path": path}


_KEY = re.compile(r"\s*tui_theme\s*=")


def write_theme(path: str, name: str) -> None:
    """Set the top-level ``tui_theme`` of the TOML file at ``path``, keeping every other
    line as it is (a new file, or one without the key, gets it as its first line);
    written whole to a temporary file and renamed over, so a crash leaves the old one."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines(keepends=True)
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        lines, mode = [], 0o600
    setting = f'tui_theme = "{name}"\n'
    for n, line in enumerate(lines):
        if line.lstrip().startswith("["):
            lines.insert(0, setting)  # top-level keys end at the first table
            break
        if _KEY.match(line):
            lines[n] = setting
            break
    else:
        lines.insert(0, setting)
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".config.toml.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write("".join(lines))
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


_BOOL = {"type": "boolean"}
LOGOUT_RESULT = {
    "type": "object",
    "properties": dict.fromkeys(("ok", "auth_cleared", "session_cleared", "cancelled"), _BOOL),
    "required": ["ok", "auth_cleared", "session_cleared"],
}
THEME_RESULT = {
    "type": "object",
    "properties": {
        "name": {"enum": list(THEMES)},
        "scope": {"const": "global"},
        "path": {"type": "string"},
    },
    "required": ["name", "scope", "path"],
}


def add_account_methods(table: MethodTable) -> None:
    table.add(
        "auth.logout",
        auth_logout,
        AuthLogout,
        summary="Forget the provider's API key (after the UI confirms)",
        result=LOGOUT_RESULT,
        errors=(RUNTIME_BUSY, SERVER_ERROR),
    )
    table.add(
        "theme.set",
        theme_set,
        ThemeSet,
        summary="Choose the TUI's theme: written to config.toml, told at initialize",
        result=THEME_RESULT,
        errors=(SERVER_ERROR,),
    )
