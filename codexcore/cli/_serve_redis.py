"""``codexcore serve --redis URL``: a gateway, a worker, or both, of a worker pool.

Gateways take the same flags as a single server (--tcp, --unix, the token,
the limits) and serve every dialect; workers need only the Redis URL and the
session settings (--model, --cwd, --profile ...). See docs/deployment.md.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..adapters.redis_pool import RedisPool
    from ..adapters.servers._listener import Listener


def add_arguments(parser: Any) -> None:
    pool = parser.add_argument_group("worker pool (docs/deployment.md; needs codexcore[redis])")
    pool.add_argument(
        "--redis",
        metavar="URL",
        help="serve sessions on a worker pool behind Redis Streams (redis://HOST:PORT/DB)",
    )
    pool.add_argument(
        "--role",
        choices=("gateway", "worker", "all"),
        default="all",
        help="with --redis: accept UI connections (gateway), run sessions (worker), or "
        "both in one process (all, the default)",
    )
    pool.add_argument(
        "--lease",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="with --redis: a worker that stops renewing its lease this long loses its "
        "sessions to the others (5)",
    )
    pool.add_argument("--worker-name", metavar="NAME", help="default HOSTNAME-PID")
    pool.add_argument(
        "--redis-prefix", default="codexcore", metavar="P", help="key prefix (codexcore)"
    )


def shown(url: str) -> str:
    """``url`` fit for a log: its password (``redis://user:secret@host``) masked."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _say(message: str) -> None:
    from ._serve import _say as say

    say(message)


def run_redis(args: argparse.Namespace) -> int:
    from ._serve import _config, _raise_fd_limit, _token

    if args.stdio:
        _say("--redis does not serve --stdio: a gateway listens with --tcp or --unix")
        return 2
    gateway = args.role in ("gateway", "all")
    if gateway and not args.tcp and args.unix is None:
        _say("a gateway listens somewhere: add --tcp HOST:PORT or --unix [PATH]")
        return 2
    if args.lease <= 0:
        _say("--lease must be more than 0 seconds")
        return 2
    try:
        from ..adapters.redis_pool import RedisPool  # noqa: F401
    except ImportError:
        _say("--redis needs the redis package: pip install 'codexcore[redis]'")
        return 2
    try:
        config = _config(args, _token(args) if gateway else None)
    except (OSError, ValueError) as exc:
        _say(str(exc))
        return 2
    _raise_fd_limit()
    return asyncio.run(_serve(args, config))


async def _serve(args: argparse.Namespace, config: Any) -> int:
    from redis.exceptions import RedisError

    from ..adapters.redis_pool import Keys, PoolConfig, RedisPool

    pool_config = PoolConfig(
        keys=Keys(args.redis_prefix),
        lease=args.lease,
        replay_events=args.replay_events,
        duplicate_ttl=config.engine.duplicate_ttl,
        ended_ttl=args.idle_timeout,
        max_sessions=args.max_sessions,
    )
    pool = RedisPool(args.redis, pool_config)
    try:
        await pool.__aenter__()
    except (RedisError, OSError) as exc:
        _say(f"cannot reach redis at {shown(args.redis)}: {exc}")
        await pool.aclose()
        return 1
    try:
        return await _serve_roles(args, config, pool)
    finally:
        await pool.aclose()


async def _serve_roles(args: argparse.Namespace, config: Any, pool: RedisPool) -> int:
    from ..adapters.servers._listener import shutdown
    from ._serve import until_signalled

    if args.role in ("worker", "all"):
        worker = pool.worker(config.engine, name=args.worker_name)
        _say(f"worker {worker.name} serving sessions from {shown(args.redis)}")
    host = None
    listeners: list[Listener] = []
    if args.role in ("gateway", "all"):
        host = pool.host(config)
        await host.start()
        try:
            listeners = await _listen(args, host)
        except (OSError, ValueError) as exc:
            _say(f"cannot serve: {exc}")
            await shutdown(host, listeners, grace=1.0)
            return 1
    await until_signalled()
    if host is not None:
        await shutdown(host, listeners, grace=config.stuck_timeout)
    return 0


async def _listen(args: argparse.Namespace, host: Any) -> list[Listener]:
    from ..adapters.tcp import TcpServer, parse_address, tls_context
    from ..adapters.unix import UnixServer
    from ._serve import _dialects

    dialects = _dialects(args)
    listeners: list[Listener] = []
    if args.tcp:
        address, port = parse_address(args.tcp)
        ssl = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
        tcp = TcpServer(host, address, port, ssl=ssl, dialects=dialects)
        listeners.append(tcp)
        bound = await tcp.start()
        _say(f"listening on {'tls' if ssl else 'tcp'} {bound[0]}:{bound[1]}")
    if args.unix is not None:
        unix = UnixServer(host, args.unix or None, dialects=dialects)
        listeners.append(unix)
        _say(f"listening on unix {await unix.start()}")
    return listeners
