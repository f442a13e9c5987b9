"""``codexcore doctor --redis URL``: the worker pool's checks (docs/deployment.md)."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Literal

Status = Literal["ok", "warn", "fail"]


def check_pool(url: str, cwd: str | None, seconds: float) -> list[tuple[Status, str]]:
    """Redis answers; each live worker sees the shared workspace as this machine does."""
    try:
        from ..adapters.redis_pool._workspace import workspace_id
    except ImportError:
        return [("fail", "pool: --redis needs the redis package: pip install 'codexcore[redis]'")]
    directory = os.path.abspath(cwd or os.getcwd())
    try:
        mine = workspace_id(directory)
    except OSError as exc:
        return [("fail", f"pool: workspace {directory} cannot be marked here: {exc}")]
    return asyncio.run(_check(url, directory, mine, seconds))


async def _check(url: str, directory: str, mine: str, seconds: float) -> list[tuple[Status, str]]:
    from redis.asyncio import Redis

    from ..adapters.redis_pool import Keys
    from ._serve_redis import shown

    client: Any = Redis.from_url(url, socket_timeout=seconds, socket_connect_timeout=seconds)
    try:
        async with asyncio.timeout(seconds):
            await client.ping()
            workers = await _workers(client, Keys())
    except Exception as exc:  # doctor reports; it never ends in a traceback
        return [("fail", f"pool: redis at {shown(url)}: {type(exc).__name__}: {exc}")]
    finally:
        await client.aclose()
    lines: list[tuple[Status, str]] = [("ok", f"pool: redis at {shown(url)} answers")]
    if not workers:
        lines.append(("warn", "pool: no live worker (none has renewed its heartbeat lately)"))
    for name, info in sorted(workers.items()):
        lines.append(_compare(name, info, directory, mine))
    return lines


async def _workers(client: Any, keys: Any) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    async for key in client.scan_iter(match=keys.workers_pattern, count=100):
        raw = await client.hgetall(key)
        name = key.decode().rsplit(":", 1)[-1]
        found[name] = {k.decode(): v.decode(errors="replace") for k, v in raw.items()}
    return found


def _compare(name: str, info: dict[str, str], directory: str, mine: str) -> tuple[Status, str]:
    where = f"worker {name} on {info.get('host', '?')}"
    theirs, their_cwd = info.get("workspace", ""), info.get("cwd", "?")
    if their_cwd != directory:
        return "warn", f"pool: {where} runs sessions in {their_cwd}, not {directory}"
    if theirs.startswith("unreachable"):
        return "fail", f"pool: {where} cannot reach {directory}: {theirs}"
    if theirs != mine:
        return (
            "fail",
            f"pool: {where} sees a different {directory} (not one shared volume): "
            "sessions that move to it would not find their files",
        )
    return "ok", f"pool: {where} shares the workspace {directory}"
