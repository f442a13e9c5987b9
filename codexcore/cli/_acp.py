"""``codexcore acp``: an Agent Client Protocol agent on stdin/stdout, for editors.

Zed, JetBrains IDEs, Neovim (CodeCompanion) and Emacs (agent-shell) start
this command and drive codexcore through ACP: sessions in the editor's
project, prompts with the files you attach, commands and edits shown as tool
calls, approvals as permission prompts, modes for the approval presets.
stdout carries only the protocol; logs go to stderr (never blocking: lines a
client does not read are dropped and counted). End of input: the requests
already sent are answered (a prompt runs to its end), then every session is
shut down and the agent exits 0; SIGTERM cancels the prompts, kills their
commands and exits 0.

Sessions start from the configuration, as ``exec`` does: flags, then the
environment, the --profile, config.toml and the defaults. Needs the ``acp``
extra: ``pip install 'codexcore[acp]'``. See docs/editors.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from . import SUMMARIES, plain

EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "acp",
        help=SUMMARIES["acp"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example (Zed settings.json):\n"
        '  "agent_servers": {"codexcore": {"command": "codexcore", "args": ["acp"]}}',
    )
    parser.add_argument("--profile", help="a profile from config.toml")
    parser.add_argument("-m", "--model", help="the model sessions start with")
    parser.add_argument(
        "--ephemeral", action="store_true", help="record no session (nothing is written)"
    )
    parser.set_defaults(run=run)


def _say(message: str) -> None:
    print(f"codexcore acp: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    # First thing: nothing may reach the protocol stream but protocol lines.
    from ..adapters.acp._sdk import load_acp_sdk
    from ..adapters.transports._stdio_claim import claim_stdio
    from . import imports_done

    try:
        load_acp_sdk()  # the optional extra: say so plainly when it is missing
    except ImportError:
        _say("needs the agent-client-protocol package: pip install 'codexcore[acp]'")
        return EXIT_USAGE
    from ..adapters.acp import NotAPipe, serve_acp
    from ..config import load_settings
    from ._options import settings_overrides

    try:
        overrides = {"model": args.model} if args.model else {}
        loaded = load_settings(profile=args.profile, overrides=settings_overrides(args, overrides))
    except ValueError as exc:
        _say(str(exc))
        return EXIT_USAGE
    for warning in loaded.warnings:
        _say(f"warning: {warning}")
    missing = loaded.missing_key()
    if missing:
        _say(missing)
        return EXIT_USAGE
    config = loaded.settings.engine_config(ephemeral=args.ephemeral)
    in_fd, out_fd = claim_stdio()
    imports_done()
    try:
        return asyncio.run(serve_acp(config, in_fd, out_fd))
    except NotAPipe as exc:
        _say(str(exc))
        return EXIT_USAGE
