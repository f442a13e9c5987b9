"""``codexcore serve``: the queue pair over stdio, TCP or a Unix socket.

--stdio serves one session to the UI that spawned this process: Submissions
as NDJSON on stdin, Events on stdout (and nothing else on stdout: logs go to
stderr). End of input shuts the session down and exits 0.

Every transport also speaks JSON-RPC 2.0 (docs/jsonrpc.md): a connection whose
first line is a JSON-RPC object gets that dialect (--protocol forces one). Over
TCP a JSON-RPC client opens with initialize carrying the token in
params.auth.token.

--tcp, --ws and --unix serve many sessions, which clients create, attach
to, watch and resume; any of them may be given at once (one set of sessions).
--ws serves WebSocket clients such as browser UIs, one line per message: on
loopback without a token; beyond it the token is required, sent as
Authorization: Bearer on the upgrade; browser origins other than localhost
pages are refused unless given with --allow-origin. With
--session-sockets every session also gets a control socket of its own,
DIR/<session>.sock (default $CODEXCORE_HOME/sockets), speaking JSON-RPC to
that session alone (the Ralph-style session sockets' get_status, stop, subscribe, ...);
with --stdio too, so a monitor follows the session the UI drives. A TCP
client must present the token: from --token-file, else $CODEXCORE_TOKEN,
else one is generated and printed on stderr. The wire is described in
docs/adapters.md.

Sessions start from the configuration, as ``exec`` does: flags, then the
environment, the --profile, config.toml and the defaults; a client's
configure_session changes its own session from there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import SUMMARIES, plain
from ._control_names import add_name_arguments
from ._io_threads import EXIT_GRACE, release_io_threads, use_io_threads

if TYPE_CHECKING:
    from ..adapters.host._host import HostConfig
    from ..adapters.servers._dialect import Dialects
    from ..adapters.servers._listener import Stoppable
    from ..adapters.session_sockets import SessionSockets


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help=SUMMARIES["serve"],
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  codexcore serve --stdio\n"
        "  CODEXCORE_TOKEN=... codexcore serve --tcp 127.0.0.1:8765\n"
        "  codexcore serve --unix                 # $XDG_RUNTIME_DIR/codexcore/codexcore.sock\n"
        "  codexcore serve --unix --session-sockets  # + $CODEXCORE_HOME/sockets/ID.sock\n"
        "  codexcore serve --tcp :8765 --tls-cert cert.pem --tls-key key.pem\n"
        "  codexcore serve --ws 127.0.0.1:8766 --allow-origin https://ui.example.com\n"
        "  codexcore serve --redis redis://127.0.0.1:6379/0 --role gateway --tcp :8765\n"
        "  codexcore serve --redis redis://127.0.0.1:6379/0 --role worker",
    )
    where = parser.add_argument_group("where to serve")
    where.add_argument("--stdio", action="store_true", help="one session over stdin/stdout")
    where.add_argument(
        "--tcp", metavar="HOST:PORT", help="listen on TCP (host 127.0.0.1 if omitted)"
    )
    where.add_argument(
        "--ws",
        metavar="HOST:PORT",
        help="listen for WebSocket clients, e.g. browser UIs (host 127.0.0.1 if omitted; "
        "beyond loopback a token is required, as Authorization: Bearer)",
    )
    where.add_argument(
        "--unix",
        metavar="PATH",
        nargs="?",
        const="",
        help="listen on a Unix socket (default $XDG_RUNTIME_DIR/codexcore/codexcore.sock)",
    )
    where.add_argument(
        "--session-sockets",
        metavar="DIR",
        nargs="?",
        const="",
        help="give every session a control socket DIR/<session>.sock, JSON-RPC bound to "
        "that session (default DIR $CODEXCORE_HOME/sockets; with --stdio, --tcp or --unix)",
    )
    security = parser.add_argument_group("security")
    security.add_argument("--tls-cert", metavar="FILE", help="serve TLS on --tcp with this chain")
    security.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert")
    security.add_argument(
        "--token-file",
        metavar="FILE",
        help="read the token clients must present from FILE (else $CODEXCORE_TOKEN, else a "
        "generated one is printed on stderr; a Unix-only server without either relies on "
        "the peer's uid)",
    )
    security.add_argument(
        "--allow-origin",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="a browser origin allowed on --ws besides localhost pages, e.g. "
        "https://ui.example.com (repeatable)",
    )
    dialect = parser.add_argument_group("dialect")
    dialect.add_argument(
        "--protocol",
        choices=("auto", "native", "jsonrpc"),
        default="auto",
        help="the wire: auto (each connection's first line chooses: a JSON-RPC 2.0 object "
        "selects JSON-RPC, anything else native), or one forced (docs/jsonrpc.md)",
    )
    dialect.add_argument(
        "--diagnostics",
        action="store_true",
        help="send the Codelia runtime protocol's run.diagnostics to the UI that started a "
        "run: per model request latency, usage and cache, and a summary per run (also "
        "CODEXCORE_DIAGNOSTICS=1 or CODELIA_DIAGNOSTICS=1; docs/jsonrpc.md)",
    )
    sessions = parser.add_argument_group("sessions")
    sessions.add_argument("--profile", help="a profile from config.toml")
    sessions.add_argument(
        "--approval-mode",
        choices=tuple(APPROVAL_MODES),
        help="the Codelia TUI's approval modes (it appends this flag when the user gives "
        "it): minimal = approval policy untrusted; trusted = on-request; full-access = "
        "never ask, no sandbox (docs/jsonrpc.md)",
    )
    sessions.add_argument("-m", "--model", help="the model sessions start with")
    sessions.add_argument("--cwd", metavar="DIR", help="sessions' default working directory")
    sessions.add_argument(
        "--ephemeral", action="store_true", help="record no session (nothing is written)"
    )
    add_name_arguments(sessions, "with --stdio, its session")
    from ._serve_redis import add_arguments as add_redis_arguments

    add_redis_arguments(parser)
    limits = parser.add_argument_group("limits")
    _number(limits, "--max-line-bytes", int, 1024 * 1024, "longest line read")
    _number(limits, "--max-sessions", int, 10_000, "sessions at once")
    _number(limits, "--max-connections", int, 2_048, "connections at once")
    _number(limits, "--max-connections-per-session", int, 32, "clients watching one session")
    _number(limits, "--replay-events", int, 4_096, "events each session keeps for replay")
    _number(limits, "--replay-bytes", int, 2 * 1024 * 1024, "bytes each session keeps for replay")
    _number(limits, "--send-buffer-bytes", int, 512 * 1024, "each connection's send queue")
    _number(limits, "--stuck-timeout", float, 30.0, "seconds before a non-reading client is cut")
    _number(limits, "--idle-timeout", float, 600.0, "seconds an unattached, quiet session lives")
    _number(limits, "--handshake-timeout", float, 10.0, "seconds a client has to say hello")
    _number(limits, "--max-pending-requests", int, 100, "JSON-RPC calls in flight per connection")
    parser.set_defaults(run=run)


APPROVAL_MODES: dict[str, dict[str, str]] = {
    "minimal": {"approval_policy": "untrusted"},
    "trusted": {"approval_policy": "on-request"},
    "full-access": {"approval_policy": "never", "sandbox_mode": "danger-full-access"},
}
"""Codelia's ``--approval-mode`` values (``packages/shared-types/src/approval.ts``) as settings."""


def _number(group: Any, flag: str, kind: type, default: float, what: str) -> None:
    group.add_argument(flag, type=kind, default=default, metavar="N", help=f"{what} ({default})")


def _say(message: str) -> None:
    print(f"codexcore: {message}", file=sys.stderr, flush=True)


def _import_serving_code() -> None:
    """Load what serving needs before its first answer, so start-up's objects can be
    frozen at once (what a Task needs waits: :func:`_load_first_turn`)."""
    import codexcore.adapters.host._host  # noqa: F401


def _load_first_turn() -> None:
    """What a Task needs and a first answer does not, loaded once that answer is out:
    the model client with httpx (about a fifth of the imports), the Task machinery
    and the tool stack. The UI gets its answer sooner, and its first Turn finds them
    loaded."""
    import codexcore.engine._task_lifecycle
    import codexcore.engine._tools
    import codexcore.model._client  # noqa: F401


def run(args: argparse.Namespace) -> int:
    from . import imports_done

    _import_serving_code()
    imports_done()  # a server runs for long: the collector must run too
    if (args.agent_id or args.session_alias) and (not args.stdio or args.redis):
        _say(
            "--agent-id and --session-alias name the one session of --stdio; on sockets a "
            "client names its own session (control.register, docs/control.md)"
        )
        return 2
    if args.redis:
        from ._serve_redis import run_redis

        return run_redis(args)
    if args.stdio:
        if args.tcp or args.ws or args.unix is not None:
            _say("--stdio serves alone: drop --tcp, --ws and --unix")
            return 2
        # First thing: nothing may reach the protocol stream but protocol lines.
        from ..adapters.stdio import claim_stdio

        try:
            config = _config(args, None)
            sockets = _sockets_directory(args)
        except (OSError, ValueError) as exc:
            _say(str(exc))
            return 2
        in_fd, out_fd = claim_stdio()
        return asyncio.run(_serve_stdio(config, _dialects(args), in_fd, out_fd, sockets))
    if not args.tcp and not args.ws and args.unix is None:
        _say("say where to serve: --stdio, --tcp HOST:PORT, --ws HOST:PORT or --unix [PATH]")
        return 2
    if bool(args.tls_cert) != bool(args.tls_key) or (args.tls_cert and not args.tcp):
        _say("--tls-cert and --tls-key go together, with --tcp")
        return 2
    try:
        token = _token(args)
        config = _config(args, token)
    except (OSError, ValueError) as exc:  # a configuration error names file, key and values
        _say(str(exc))
        return 2
    _raise_fd_limit()
    return asyncio.run(_serve_sockets(args, config))


def _config(args: argparse.Namespace, token: str | None) -> HostConfig:
    from ..adapters.host._host import ENGINE_EVENT_QUEUE, HostConfig
    from ..config import load_settings
    from ._control import host_control_config
    from ._control_names import session_names
    from ._options import settings_overrides

    overrides: dict[str, str] = {"model": args.model} if args.model else {}
    overrides.update(APPROVAL_MODES.get(args.approval_mode or "", {}))
    loaded = load_settings(profile=args.profile, overrides=settings_overrides(args, overrides))
    for warning in loaded.warnings:
        _say(f"warning: {warning}")
    engine = loaded.settings.engine_config(
        cwd=args.cwd or os.getcwd(),
        event_queue_size=ENGINE_EVENT_QUEUE,
        ephemeral=args.ephemeral,
    )
    return HostConfig(
        engine=engine,
        token=token,
        max_sessions=args.max_sessions,
        max_connections=args.max_connections,
        max_connections_per_session=args.max_connections_per_session,
        replay_events=args.replay_events,
        replay_bytes=args.replay_bytes,
        send_buffer_bytes=args.send_buffer_bytes,
        stuck_timeout=args.stuck_timeout,
        idle_timeout=args.idle_timeout,
        handshake_timeout=args.handshake_timeout,
        max_line_bytes=args.max_line_bytes,
        control=host_control_config(loaded.settings.control, os.environ),
        chat_prompts=loaded.settings.chat_prompts,
        tui_theme=loaded.settings.tui_theme,
        config_file=loaded.path,
        session_names=session_names(args),
    )


MAX_TOKEN_FILE_BYTES = 4096


def read_token_file(path: str, say: Callable[[str], None] = _say) -> str:
    """The token in ``path`` (whitespace stripped); a warning when others may read it."""
    from ..tools._safe_read import read_regular

    info = os.stat(path)
    if stat.S_IMODE(info.st_mode) & 0o077:
        say(f"warning: {path} is readable by other users")
    # Not a regular file of at most 4 KiB (a FIFO, /dev/zero): refused, never waited on.
    token = read_regular(path, MAX_TOKEN_FILE_BYTES).decode("utf-8").strip()
    if not token:
        raise ValueError(f"{path} holds no token")
    return token


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        return read_token_file(args.token_file)
    token = os.environ.get("CODEXCORE_TOKEN", "").strip()
    if token:
        return token
    if not args.tcp:
        # Unix: the socket's mode and the peer's uid guard the door; WebSocket without
        # a token: loopback only (its listener refuses any other address).
        return None
    import secrets  # every command builds this parser: keep its imports light

    token = secrets.token_urlsafe(32)
    _say(f"token: {token}")
    return token


def _raise_fd_limit() -> None:
    """Every connection is a descriptor: allow as many as the hard limit does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _dialects(args: argparse.Namespace) -> Dialects:
    from ..adapters.jsonrpc._options import RpcOptions
    from ..adapters.servers._dialect import Dialects

    # Codelia's own name for the gate, beside ours: a UI that sets it gets what it asks.
    gates = ("CODEXCORE_DIAGNOSTICS", "CODELIA_DIAGNOSTICS")
    diagnostics = args.diagnostics or any(os.environ.get(g, "").strip() == "1" for g in gates)
    options = RpcOptions(max_pending=args.max_pending_requests, diagnostics=diagnostics)
    return Dialects(args.protocol, options)


async def _serve_stdio(
    config: HostConfig, dialects: Dialects, in_fd: int, out_fd: int, sockets: Path | None
) -> int:
    from ..adapters.stdio import serve_stdio

    executor = use_io_threads()
    code = await serve_stdio(
        in_fd,
        out_fd,
        config,
        dialects=dialects,
        after_first_answer=_load_first_turn,
        session_sockets=sockets,
    )
    return await release_io_threads(executor, code, EXIT_GRACE)


async def _serve_sockets(args: argparse.Namespace, config: HostConfig) -> int:
    from ..adapters.host._host import SessionHost
    from ..adapters.servers._listener import shutdown
    from ..adapters.tcp import TcpServer, parse_address, tls_context
    from ..adapters.unix import UnixServer

    executor = use_io_threads()
    host = SessionHost(config)
    await host.start()
    dialects = _dialects(args)
    listeners: list[Stoppable] = []
    try:
        if args.tcp:
            address, port = parse_address(args.tcp)
            ssl = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
            tcp = TcpServer(host, address, port, ssl=ssl, dialects=dialects)
            listeners.append(tcp)
            bound = await tcp.start()
            scheme = "tls" if ssl else "tcp"
            _say(f"listening on {scheme} {bound[0]}:{bound[1]}")
            if ssl is None and not _loopback(address):
                _say("warning: plain TCP beyond this machine: the token travels in clear text")
        if args.ws:
            listeners.append(await _serve_websocket(args, host, dialects))
        if args.unix is not None:
            unix = UnixServer(host, args.unix or None, dialects=dialects)
            listeners.append(unix)
            _say(f"listening on unix {await unix.start()}")
        sockets = _session_sockets(args, host, dialects)
    except (OSError, ValueError) as exc:
        _say(f"cannot serve: {exc}")
        await shutdown(host, listeners, grace=1.0)
        return await release_io_threads(executor, 1, EXIT_GRACE)
    await until_signalled()
    await shutdown(host, listeners, grace=config.stuck_timeout)
    if sockets is not None:
        await sockets.aclose()
    return await release_io_threads(executor, 0, EXIT_GRACE)


async def _serve_websocket(args: argparse.Namespace, host: Any, dialects: Dialects) -> Any:
    from ..adapters.tcp import parse_address
    from ..adapters.websocket import WebSocketServer

    address, port = parse_address(args.ws)
    server = WebSocketServer(
        host, address, port, origins=tuple(args.allow_origin), dialects=dialects
    )
    _say(f"listening on {await server.start()}")
    if not _loopback(address):
        _say("warning: plain WebSocket beyond this machine: the token travels in clear text")
    return server


def _session_sockets(
    args: argparse.Namespace, host: Any, dialects: Dialects
) -> SessionSockets | None:
    """With --session-sockets: every new session's control socket (the directory is
    checked now, so a bad one stops the server before any session is made)."""
    directory = _sockets_directory(args)
    if directory is None:
        return None
    from ..adapters.session_sockets import SessionSockets

    sockets = SessionSockets(host, directory, dialects.jsonrpc)
    sockets.serve_all()
    _say(f"session sockets in {directory}")
    return sockets


def _sockets_directory(args: argparse.Namespace) -> Path | None:
    """--session-sockets' directory, made private (0700) now: a bad one stops the
    server before any session exists (raises OSError or ValueError)."""
    if args.session_sockets is None:
        return None
    from ..adapters.session_sockets import default_directory
    from ..adapters.unix import prepare_directory
    from ..config import default_home

    directory = Path(args.session_sockets or default_directory(default_home()))
    prepare_directory(directory)
    return directory


def _loopback(address: str) -> bool:
    return address in ("localhost", "::1") or address.startswith("127.")


async def until_signalled() -> None:
    """Wait for SIGTERM or SIGINT: how a server is asked to shut down."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    _say("shutting down")
