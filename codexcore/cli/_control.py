"""``codexcore control``: give a live session input, or interrupt it, as an operator.

Sends ATM-style control messages (docs/control.md) to a codexcore server:
``stdin`` gives the session TEXT (``-``: read it from stdin; a running Task
gets it injected, an idle session starts one; --interrupt ends the running
Task first), ``interrupt`` interrupts its running Task. The ack is printed
as JSON; the exit code says the result: 0 ok, 2 rejected, 3 not_found,
4 not_live, 5 busy, 6 timeout, 7 internal_error, 1 no ack at all.

The server is the Unix socket (--unix; default
$XDG_RUNTIME_DIR/codexcore/codexcore.sock) or --tcp HOST:PORT. The token is
read from the variable --token-env names (default CODEXCORE_CONTROL_TOKEN),
else $CODEXCORE_TOKEN: over TCP it must be the sender's own (it names the
sender); over a Unix socket the peer's uid names the sender and a token only
admits the connection to a server that has one. The sender and team come from
config.toml's [control] (sender, team) unless given. The agent id, when not
given, is read from the session's recording under CODEXCORE_HOME.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import SUMMARIES, plain

if TYPE_CHECKING:
    from .._config_settings import ControlSettings
    from ..adapters.control._sender import SenderOptions
    from ..adapters.host._control_config import ControlConfig

EXIT_CODES = {
    "ok": 0,
    "rejected": 2,
    "not_found": 3,
    "not_live": 4,
    "busy": 5,
    "timeout": 6,
    "internal_error": 7,
}
NO_ACK = 1
TOKEN_ENV = "CODEXCORE_CONTROL_TOKEN"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "control",
        help=SUMMARIES["control"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  codexcore control stdin --session 0b6f... 'also run the linter'\n"
        "  git diff | codexcore control stdin --session 0b6f... -\n"
        "  codexcore control stdin --session 0b6f... --interrupt 'stop; do this instead'\n"
        "  codexcore control interrupt --session 0b6f... --tcp 127.0.0.1:8765",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    stdin = actions.add_parser("stdin", help="give the session TEXT (- reads stdin)")
    stdin.add_argument("text", metavar="TEXT|-")
    stdin.add_argument("--interrupt", action="store_true", help="end the running Task first")
    interrupt = actions.add_parser("interrupt", help="interrupt the session's running Task")
    for action in (stdin, interrupt):
        _target_arguments(action)
    parser.set_defaults(run=run)


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session", required=True, metavar="ID", help="the session id, or a prefix only it has"
    )
    parser.add_argument("--agent", metavar="ID", help="its agent id (default: as recorded)")
    parser.add_argument("--thread", metavar="ID", help="a thread id for the audit")
    parser.add_argument("--sender", help="send as NAME (default: [control] sender)")
    parser.add_argument("--team", help="the team (default: [control] team)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--unix", metavar="PATH", help="the server's Unix socket")
    where.add_argument("--tcp", metavar="HOST:PORT", help="the server's TCP address")
    parser.add_argument(
        "--token-env",
        default=TOKEN_ENV,
        metavar="VAR",
        help=f"the variable holding this sender's token (default {TOKEN_ENV})",
    )
    parser.add_argument("--timeout", type=float, help="seconds to wait for each ack")
    parser.add_argument("--retries", type=int, help="retries of the same request")


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_settings
    from ._options import settings_overrides
    from ._session_ids import resolve_session_id

    try:
        settings = load_settings(overrides=settings_overrides(args)).settings
    except ConfigError as exc:
        print(f"codexcore: {exc}", file=sys.stderr)
        return 2
    try:
        # A session recorded elsewhere is the server's to find, given its agent.
        args.session = resolve_session_id(
            settings.home, args.session, unrecorded_ok=args.agent is not None
        )
        options = _sender_options(args, settings.control)
        agent = args.agent or _recorded_agent(settings.home, args.session)
        text = _text(args) if args.action == "stdin" else None
    except ValueError as exc:
        print(f"codexcore: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_send(args, options, agent, text))


def _sender_options(args: argparse.Namespace, control: ControlSettings) -> SenderOptions:
    from ..adapters.control._sender import SenderOptions

    sender, team = args.sender or control.sender, args.team or control.team
    if not sender or not team:
        raise ValueError("say who sends: --sender and --team, or [control] sender and team")
    retries = control.retries if args.retries is None else args.retries
    return SenderOptions(
        team=team,
        sender=sender,
        share_dir=control.share_dir,
        soft_limit_bytes=control.soft_limit_bytes,
        hard_limit_bytes=control.hard_limit_bytes,
        retries=max(retries, 0),
        ack_timeout=args.timeout or control.ack_timeout,
        ui_source="codexcore-cli",
        audit_file=control.audit_file,
        verbose_messages=control.verbose_messages,
    )


def _recorded_agent(home: str | None, session_id: str) -> str:
    from pathlib import Path

    from ..engine import default_home, recorded_agent_id

    agent = recorded_agent_id(Path(home) if home else default_home(), session_id)
    if agent is None:
        raise ValueError(
            f"session {session_id} is not recorded here: give --agent "
            "(codexcore sessions list shows agent ids)"
        )
    return agent


def _text(args: argparse.Namespace) -> str:
    if args.text != "-":
        return str(args.text)
    return sys.stdin.read()


async def _send(
    args: argparse.Namespace, options: SenderOptions, agent: str, text: str | None
) -> int:
    from ..adapters.control._rpc_sender import RpcControlLink
    from ..adapters.control._sender import (
        ControlError,
        interrupt_envelope,
        send_control,
        stdin_envelope,
    )

    # Over a Unix socket the peer's uid is the credential; a token only admits the
    # connection to a server that has one, so the server's own will do there.
    token = os.environ.get(args.token_env) or os.environ.get("CODEXCORE_TOKEN") or None
    try:
        async with await RpcControlLink.open(args.unix, args.tcp, token) as link:
            if text is not None:
                capabilities = link.capabilities
                envelope = stdin_envelope(
                    options,
                    args.session,
                    agent,
                    text,
                    interrupt=args.interrupt,
                    thread_id=args.thread,
                    capabilities=capabilities,
                )
            else:
                envelope = interrupt_envelope(options, args.session, agent, thread_id=args.thread)
            answer = await send_control(link.send, envelope, options)
    except (ControlError, OSError) as exc:
        print(f"codexcore: {exc}", file=sys.stderr)
        return NO_ACK
    print(json.dumps(answer))
    return EXIT_CODES.get(str(answer.get("result")), NO_ACK)


def host_control_config(control: ControlSettings, environ: Mapping[str, str]) -> ControlConfig:
    """The session host's :class:`~codexcore.adapters.host._control_config.ControlConfig` from
    ``[control]``: each sender's token read from the variable its ``token_env`` names
    (a sender whose variable is unset or empty has no token: it cannot send over TCP)."""
    from ..adapters.host._control_config import ControlConfig, ControlSender

    senders = tuple(
        ControlSender(
            entry.name,
            entry.team,
            uid=entry.uid,
            token=(environ.get(entry.token_env) or None) if entry.token_env else None,
        )
        for entry in control.senders
    )
    return ControlConfig(
        team=control.team,
        senders=senders,
        allowed_content_dirs=control.allowed_content_dirs,
        soft_limit_bytes=control.soft_limit_bytes,
        hard_limit_bytes=control.hard_limit_bytes,
        dedupe_ttl=control.dedupe_ttl,
        max_age=control.max_age,
        max_skew=control.max_skew,
        ack_timeout=control.ack_timeout,
        max_pending=control.max_pending,
        audit_file=control.audit_file,
        verbose_messages=control.verbose_messages,
    )
