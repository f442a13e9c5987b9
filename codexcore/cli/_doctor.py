"""``codexcore doctor``: check the configuration and reach the model provider.

Prints one line per check, each starting with ok, warn or fail: the versions
of codexcore and Python, the configuration file (found and valid, or absent:
the defaults apply), unknown keys, the effective model, provider and policies
with where each came from, whether a key is set (never the key: the
variable's name), the sandbox, the recorded sessions (each file that cannot be
read, named), and a real streaming request to POST {base_url}/responses with
the input "ping".
Exits 0 when nothing failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from typing import TYPE_CHECKING, Any, Literal

from . import SUMMARIES, plain, version

if TYPE_CHECKING:
    from ..config import LoadedSettings, Settings
    from ..model import ModelError

Status = Literal["ok", "warn", "fail"]

DEFAULT_TIMEOUT = 10.0
_EXHAUSTED = re.compile(r"^model request failed after \d+ attempts?: ")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help=SUMMARIES["doctor"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  codexcore doctor                  # config.toml in $CODEXCORE_HOME (~/.codexcore)\n"
        "  codexcore doctor --profile local  # with the [profiles.local] settings\n"
        "  CODEXCORE_HOME=/tmp/cx OPENAI_BASE_URL=http://127.0.0.1:8080/v1 codexcore doctor\n"
        "\nconfiguration: docs/configuration.md",
    )
    parser.add_argument("--profile", metavar="NAME", help="apply [profiles.NAME] of config.toml")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long the provider may take to answer (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="also check a worker pool (serve --redis): Redis answers, workers are alive, "
        "and each sees the workspace (--cwd, default the current directory) as this machine does",
    )
    parser.add_argument(
        "--cwd", metavar="DIR", help="the sessions' shared workspace (with --redis)"
    )
    parser.set_defaults(run=run)


class _Report:
    """Prints each check's line as it is made; remembers whether any failed."""

    def __init__(self) -> None:
        self.failed = False

    def line(self, status: Status, text: str) -> None:
        self.failed = self.failed or status == "fail"
        print(f"{status:<4}  {_one_line(text)}", flush=True)


def run(args: argparse.Namespace) -> int:
    import platform  # every command builds this module's parser: import on use

    from ..config import ConfigError, load_settings
    from ._options import settings_overrides

    report = _Report()
    report.line("ok", f"version: codexcore {version()}, Python {platform.python_version()}")
    try:
        loaded = load_settings(profile=args.profile, overrides=settings_overrides(args))
    except ConfigError as exc:
        report.line("fail", f"config: {exc}")
        _check_sandbox(report, None)
        return 1
    _report_config(report, loaded)
    _check_sandbox(report, loaded.settings)
    _check_sessions(report, loaded.settings)
    status, text = asyncio.run(_reach_provider(loaded.settings, args.timeout))
    report.line(status, text)
    if args.redis:
        from ._doctor_pool import check_pool

        for status, text in check_pool(args.redis, args.cwd, args.timeout):
            report.line(status, text)
    return 1 if report.failed else 0


def _report_config(report: _Report, loaded: LoadedSettings) -> None:
    from ..config import DEFAULT_API_KEY_ENV

    settings, provider = loaded.settings, loaded.settings.provider
    if loaded.found:
        text = f"config: {loaded.display_path} is valid"
    else:
        text = f"config: no {loaded.display_path}; the defaults apply"
    if loaded.source("home").kind != "default":
        text += f"; home from {loaded.source('home')}"
    if settings.profile is not None:
        text += f"; profile {settings.profile!r} ({loaded.source('profile')})"
    report.line("ok", text)
    for warning in loaded.warnings:
        report.line("warn", f"config: {warning}")

    def value(key: str, shown: object) -> str:
        return f"{key}: {shown} ({loaded.source(key)})"

    report.line("ok", value("model", settings.model))
    base = value("provider.base_url", provider.base_url)
    if provider.headers:
        base += f"; extra headers: {', '.join(sorted(provider.headers))}"
    report.line("ok", base)
    report.line("ok", value("approval_policy", settings.approval_policy))
    sandbox = value("sandbox_mode", settings.sandbox_mode)
    if settings.sandbox_mode == "workspace-write":
        network = "on" if settings.network_access else "off"
        sandbox += f"; network {network} ({loaded.source('network_access')})"
        if settings.writable_roots:
            roots = ", ".join(settings.writable_roots)
            sandbox += f"; writable roots {roots} ({loaded.source('writable_roots')})"
    report.line("ok", sandbox)
    report.line("ok", value("history_mode", settings.history_mode))

    variable = provider.api_key_env
    named = (
        ""
        if variable == DEFAULT_API_KEY_ENV
        else f" (named by {loaded.source('provider.api_key_env')})"
    )
    missing = loaded.missing_key()
    if settings.api_key:
        report.line("ok", f"api key: set in ${variable}{named}")
    elif missing:  # the provider refuses every request without one
        report.line("fail", f"api key: {missing}")
    else:
        report.line(
            "warn",
            f"api key: ${variable}{named} is not set; requests carry no Authorization header "
            "(fine for a local server that needs no key)",
        )


def _check_sandbox(report: _Report, settings: Settings | None) -> None:
    from ..tools.sandbox import probe_sandbox

    if settings is not None and settings.sandbox_mode == "danger-full-access":
        report.line("ok", "sandbox: not used (sandbox_mode is danger-full-access)")
        return
    status = probe_sandbox()
    if status.kind == "bwrap":
        report.line("ok", f"sandbox: bubblewrap works ({status.executable})")
    else:
        report.line(
            "warn",
            f"sandbox: none ({status.reason}); commands not known to be safe will need approval",
        )


def _check_sessions(report: _Report, settings: Settings) -> None:
    """Read every recorded session as ``sessions list`` would; name each bad file."""
    from pathlib import Path

    from ..config import display_path
    from ..engine import default_home, list_sessions

    home = Path(settings.home) if settings.home else default_home()
    bad: list[Exception] = []
    good = list_sessions(home, limit=None, on_bad=bad.append)
    for exc in bad:
        report.line("warn", f"sessions: skipped (cannot be read): {exc}")
    where = display_path(str(home / "sessions"))
    report.line("ok", f"sessions: {len(good)} recorded under {where}")


async def _reach_provider(settings: Settings, seconds: float) -> tuple[Status, str]:
    """One real streaming request; what to print about it."""
    from contextlib import aclosing

    from ..model import (
        Completed,
        FunctionCallArgumentsDelta,
        ModelClient,
        ModelError,
        OutputItemAdded,
        OutputItemDone,
        OutputTextDelta,
        ReasoningSummaryDelta,
        RetryPolicy,
    )

    answered = (
        Completed,
        FunctionCallArgumentsDelta,
        OutputItemAdded,
        OutputItemDone,
        OutputTextDelta,
        ReasoningSummaryDelta,
    )
    provider = settings.provider
    url = f"{provider.base_url}/responses"
    request = {"model": settings.model, "input": "ping", "store": False}
    started = time.monotonic()
    try:
        async with (
            ModelClient(
                base_url=provider.base_url,
                api_key=settings.api_key or "",  # "": never OPENAI_API_KEY behind our back
                retry=RetryPolicy(max_attempts=1),
                stream_idle_timeout=seconds,
                headers=provider.headers,
            ) as client,
            asyncio.timeout(seconds),
            aclosing(client.stream(request)) as events,
        ):
            async for event in events:
                if isinstance(event, answered):  # the model is producing: enough
                    break
    except TimeoutError:
        return "fail", f"provider: POST {url}: no answer within {seconds:g} s"
    except ModelError as exc:
        return (
            "fail",
            f"provider: POST {url}: {_said(exc.message, url)}{_hint(exc, settings)}",
        )
    except Exception as exc:  # doctor reports; it never ends in a traceback
        return "fail", f"provider: POST {url}: {type(exc).__name__}: {exc}"
    elapsed = time.monotonic() - started
    return "ok", f"provider: POST {url} answered in {elapsed:.2f} s (model {settings.model})"


def _said(message: str, url: str) -> str:
    """The error without what this line already says: the attempts, the URL."""
    return _EXHAUSTED.sub("", message).replace(f" (POST {url})", "")


def _hint(exc: ModelError, settings: Settings) -> str:
    variable = settings.provider.api_key_env
    if exc.status in (401, 403):
        state = "set" if settings.api_key else "not set"
        return f" (the key comes from ${variable}, which is {state})"
    if exc.status == 404:
        return f" (is provider.base_url right, and does the server know model {settings.model!r}?)"
    return ""


def _one_line(text: str) -> str:
    return " ".join(text.split())
