"""``codexcore sessions``: list, show and prune recorded sessions.

``list`` and ``show`` go through the engine's own Ops (``list_sessions``,
``get_history``) on an ephemeral engine, exactly as a UI would. A session
file that cannot be read is named on stderr and the others are listed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from . import SUMMARIES, plain


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sessions",
        help=SUMMARIES["sessions"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""examples:
  codexcore sessions list                 # newest first
  codexcore sessions list --here -n 5     # started in this directory
  codexcore sessions show 0b6f…           # replay a session's events
  codexcore sessions prune --older-than 30""",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="recorded sessions, newest first")
    listing.add_argument("--here", action="store_true", help="only those started in this dir")
    listing.add_argument("-n", "--limit", type=int, default=20)
    listing.add_argument("--json", action="store_true", help="one JSON object per session")
    show = actions.add_parser("show", help="replay a session's events")
    show.add_argument("session_id", help="the session's id, or a prefix only it has")
    show.add_argument("--json", action="store_true", help="print the events as JSON lines")
    prune = actions.add_parser("prune", help="delete sessions not used for N days")
    prune.add_argument("--older-than", type=float, required=True, metavar="DAYS")
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_settings
    from ._options import settings_overrides

    try:  # the same errors in -c that every command reports
        home = load_settings(overrides=settings_overrides(args)).settings.home
    except ConfigError as exc:
        print(f"codexcore: {exc}", file=sys.stderr)
        return 2
    if args.action == "prune":
        return _prune(args)
    if args.action == "show":
        from ._session_ids import resolve_session_id

        try:
            args.session_id = resolve_session_id(home, args.session_id)
        except ValueError as exc:
            print(f"codexcore sessions show: {exc}", file=sys.stderr)
            return 2
    return asyncio.run(_ask_engine(args))


async def _ask_engine(args: argparse.Namespace) -> int:
    import os

    from .. import Codex, EngineConfig
    from ..config import load_settings
    from ..protocol import (
        ErrorEvent,
        GetHistory,
        ListSessions,
        SessionHistory,
        SessionList,
        WarningEvent,
    )

    settings = load_settings().settings
    # api_key="": listing and reading recorded sessions sends no model request.
    config = EngineConfig(home=settings.home, ephemeral=True, api_key="")
    op: Any = (
        ListSessions(cwd=os.getcwd() if args.here else None, limit=args.limit)
        if args.action == "list"
        else GetHistory(args.session_id, limit=1_000_000)
    )
    async with Codex(config) as codex:
        sub_id = await codex.submit(op)
        async for event in codex.events():
            if event.id != sub_id:
                continue
            if isinstance(event.msg, WarningEvent):
                print(f"codexcore: warning: {event.msg.message}", file=sys.stderr)
            if isinstance(event.msg, SessionList):
                _print_list(event.msg, as_json=args.json)
                return 0
            if isinstance(event.msg, SessionHistory):
                _print_history(event.msg, as_json=args.json)
                return 0
            if isinstance(event.msg, ErrorEvent):
                print(f"codexcore: {event.msg.message}", file=sys.stderr)
                return 1
    return 1


def _print_list(listing: Any, *, as_json: bool) -> None:
    from ..protocol import to_wire

    if as_json:
        import json

        for summary in listing.sessions:
            print(json.dumps(to_wire(summary)))
        return
    if not listing.sessions:
        print("no recorded sessions")
    for s in listing.sessions:
        first = (s.first_user_message or "").splitlines()[0][:60] if s.first_user_message else ""
        print(f"{s.session_id}  {s.updated_at[:19]}  {s.message_count:3} msgs  {s.cwd}")
        if s.agent_id:
            print(f"    agent {s.agent_id}")
        if first:
            print(f"    {first}")


def _print_history(history: Any, *, as_json: bool) -> None:
    from ..protocol import UserMessage, encode_event
    from ._render import TerminalRenderer

    renderer = TerminalRenderer()
    for event in history.events:
        if as_json:
            sys.stdout.buffer.write(encode_event(event) + b"\n")
        elif event.msg.TYPE == "task_started":
            renderer.show(event.msg)
            print(f"--- task {event.id}")
        elif isinstance(event.msg, UserMessage):
            # A live renderer shows no user_message (the prompt is the user's own
            # words, on their screen already); a replay has only the record.
            print(f"> {event.msg.message}")
        else:
            renderer.show(event.msg)
    sys.stdout.flush()


def _prune(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..config import load_settings
    from ..engine import default_home, prune_sessions

    home = load_settings().settings.home
    root = Path(home) if home else default_home()
    removed = prune_sessions(root, args.older_than, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    for path in removed:
        print(f"{verb} {path}")
    print(f"{verb} {len(removed)} session(s) older than {args.older_than:g} days")
    return 0
