"""``codexcore app-server``: Codex's app-server protocol (JSON-RPC, one message a line),
the command line of ``codex app-server``, so a client written for Codex (the VS Code
extension, the app-server client libraries) runs on codexcore by changing only the
command it starts.

stdio by default (``--listen stdio://``); ``--listen ws://IP:PORT`` serves WebSocket
clients, one message a frame: loopback without a token, any other address only with
``--ws-auth capability-token --ws-token-file PATH`` (the token comes as
``Authorization: Bearer TOKEN``); browser origins other than localhost pages are
refused unless given with ``--allow-origin``. Threads are sessions recorded in
``$CODEXCORE_HOME`` as any other; they start from the configuration, as ``exec``
does: flags, then the environment, the --profile, config.toml and the defaults.
stdout carries only the protocol; logs go to stderr. At end of input the requests
already sent are answered, every thread is shut down (its commands killed) and the
process exits 0; SIGTERM and SIGINT do the same. See docs/app-server.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from . import SUMMARIES, plain

if TYPE_CHECKING:
    from ..adapters.host import HostConfig

EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "app-server",
        help=SUMMARIES["app-server"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--listen",
        default="stdio://",
        metavar="URL",
        help="the transport: stdio:// (the default) or ws://IP:PORT",
    )
    parser.add_argument(
        "--ws-auth",
        choices=("capability-token", "signed-bearer-token"),
        help="how WebSocket clients authenticate: capability-token (with --ws-token-file); "
        "signed-bearer-token is Codex's and not supported here",
    )
    parser.add_argument(
        "--ws-token-file",
        metavar="PATH",
        help="the capability token's file: clients send Authorization: Bearer TOKEN",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed on ws:// besides localhost pages (repeatable)",
    )
    parser.add_argument(
        "--stdio", action="store_true", help="serve on stdio (the same as --listen stdio://)"
    )
    parser.add_argument(
        "--session-sockets",
        metavar="DIR",
        nargs="?",
        const="",
        help="give every thread a control socket DIR/<thread>.sock (default DIR "
        "$CODEXCORE_HOME/sockets): watch it, stop it, as any session",
    )
    parser.add_argument("--profile", help="a profile from config.toml")
    parser.add_argument("-m", "--model", help="the model threads start with")
    parser.add_argument(
        "--ephemeral", action="store_true", help="record no thread (nothing is written)"
    )
    parser.set_defaults(run=run)


def _say(message: str) -> None:
    print(f"codexcore app-server: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    listen = "stdio://" if args.stdio else args.listen
    try:
        config = _config(args)
        door = _door(args) if listen.startswith("ws://") else None
    except (ValueError, OSError) as exc:
        _say(str(exc))
        return EXIT_USAGE
    if door is not None:
        return asyncio.run(_serve_websocket(config, listen, door, args.session_sockets))
    if listen != "stdio://":
        _say(f"--listen {listen}: not a transport codexcore serves (stdio://, ws://IP:PORT)")
        return EXIT_USAGE
    # First thing after the configuration: nothing may reach the protocol stream but
    # protocol lines.
    from ..adapters.transports._stdio_claim import claim_stdio
    from . import imports_done

    in_fd, out_fd = claim_stdio()
    imports_done()
    return asyncio.run(_serve(config, in_fd, out_fd, args.session_sockets))


def _door(args: argparse.Namespace) -> Any:
    """Who may open the WebSocket, from Codex's flags (a bad combination is a ValueError)."""
    from ..adapters.transports import WebSocketDoor
    from ._serve import read_token_file

    if args.ws_auth == "signed-bearer-token":
        raise ValueError("--ws-auth signed-bearer-token: not supported; use capability-token")
    if args.ws_auth == "capability-token" and not args.ws_token_file:
        raise ValueError("--ws-auth capability-token needs --ws-token-file PATH")
    if args.ws_token_file and args.ws_auth != "capability-token":
        raise ValueError("--ws-token-file goes with --ws-auth capability-token")
    token = read_token_file(args.ws_token_file, _say) if args.ws_token_file else None
    return WebSocketDoor(token, tuple(args.allow_origin))


def _config(args: argparse.Namespace) -> HostConfig:
    from ..adapters.host._host import ENGINE_EVENT_QUEUE, HostConfig
    from ..config import load_settings
    from ._options import settings_overrides

    overrides = {"model": args.model} if args.model else {}
    loaded = load_settings(profile=args.profile, overrides=settings_overrides(args, overrides))
    for warning in loaded.warnings:
        _say(f"warning: {warning}")
    missing = loaded.missing_key()
    if missing:
        raise ValueError(missing)
    engine = loaded.settings.engine_config(
        cwd=os.getcwd(), event_queue_size=ENGINE_EVENT_QUEUE, ephemeral=args.ephemeral
    )
    return HostConfig(engine=engine, token=None)


async def _serve(config: HostConfig, in_fd: int, out_fd: int, sockets_dir: str | None) -> int:
    from ..adapters.app_server import serve_app_server
    from ..adapters.app_server._warm import warm_up
    from ..adapters.host import SessionHost
    from ..adapters.stdio import FdConduit

    loop = asyncio.get_running_loop()
    sockets = None
    async with SessionHost(config) as host:
        if sockets_dir is not None:
            try:
                sockets = _session_sockets(host, sockets_dir)
            except OSError as exc:
                _say(f"--session-sockets: {exc}")
                return EXIT_USAGE
        conduit = await FdConduit.open(in_fd, out_fd)
        warming = loop.run_in_executor(None, warm_up)
        serving = asyncio.create_task(serve_app_server(conduit, host))
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, serving.cancel)
        try:
            await serving
        except asyncio.CancelledError:
            pass
        finally:
            conduit.abort()
            await warming
    if sockets is not None:
        await sockets.aclose()
    return 0


async def _serve_websocket(
    config: HostConfig, listen: str, door: Any, sockets_dir: str | None
) -> int:
    """Every WebSocket client a connection of its own on one host, until SIGTERM/SIGINT.
    A client's threads outlive its connection (another may ``thread/resume`` them)
    until the host's idle timeout, as the sessions of ``serve --tcp`` do."""
    from ..adapters.app_server import serve_app_server
    from ..adapters.app_server._warm import warm_up
    from ..adapters.host import SessionHost
    from ..adapters.transports import serve_websocket
    from ._serve import until_signalled

    warming = asyncio.get_running_loop().run_in_executor(None, warm_up)
    async with SessionHost(config) as host:
        try:
            sockets = _session_sockets(host, sockets_dir) if sockets_dir is not None else None
        except OSError as exc:
            _say(f"--session-sockets: {exc}")
            return EXIT_USAGE
        try:
            await serve_websocket(
                lambda conduit: serve_app_server(conduit, host, end_threads=False),
                listen,
                door,
                until=until_signalled(),
                on_listening=lambda listener: _say(f"listening on {listener.url}"),
            )
        except (ValueError, OSError) as exc:
            _say(f"--listen {listen}: {exc}")
            return EXIT_USAGE
        finally:
            if sockets is not None:
                await sockets.aclose()
            await warming
    return 0


def _session_sockets(host: Any, directory: str) -> Any:
    """Every thread's control socket, as ``serve --session-sockets`` gives every session."""
    from pathlib import Path

    from ..adapters.session_sockets import SessionSockets, default_directory
    from ..adapters.unix import prepare_directory
    from ..config import default_home

    path = Path(directory or default_directory(default_home()))
    prepare_directory(path)
    sockets = SessionSockets(host, path)
    sockets.serve_all()
    return sockets
