"""A real redis-server for the worker-pool tests, and the pool's processes.

Each test starts its own ``redis-server`` on a free port in a temporary
directory (no persistence unless asked), and skips, saying why, when it
cannot start one.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel, ScriptedResponsesServer

from .server_helpers import TOKEN, Client, ServerProcess, server_env

REDIS_SERVER = shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``redis-server`` in a subprocess; ``restart()`` keeps its port and directory."""

    def __init__(self, directory: Path, *, persistent: bool = False) -> None:
        self.directory = directory
        self.persistent = persistent
        self.port = _free_port()
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _argv(self) -> list[str]:
        assert REDIS_SERVER is not None
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--dir", str(self.directory), "--daemonize", "no", "--save", ""]
        if self.persistent:
            argv += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            argv += ["--appendonly", "no"]
        return argv

    async def start(self) -> None:
        argv = [*self._argv(), "--logfile", str(self.directory / "redis.log")]
        self.process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            async with asyncio.timeout(10):
                while not await self._answers():
                    if self.process.returncode is not None:
                        raise RuntimeError(self._log_tail())
                    await asyncio.sleep(0.02)
        except (TimeoutError, RuntimeError) as exc:
            await self.stop()
            pytest.skip(f"redis-server did not start: {exc}")

    async def _answers(self) -> bool:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        writer.write(b"PING\r\n")
        line = await reader.readline()
        writer.close()
        return line.startswith(b"+PONG")

    def _log_tail(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)"

    async def stop(self) -> None:
        """SIGTERM: Redis writes what it must (with persistence) and exits."""
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            async with asyncio.timeout(10):
                await self.process.wait()
        self.process = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url)


@asynccontextmanager
async def redis_server(*, persistent: bool = False) -> AsyncIterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    directory = Path(tempfile.mkdtemp(prefix="cx-redis-"))
    server = RedisServer(directory, persistent=persistent)
    try:
        await server.start()
        yield server
    finally:
        await server.stop()
        shutil.rmtree(directory, ignore_errors=True)


class Pool:
    """Gateways and workers of one pool, as separate processes."""

    def __init__(self, redis: RedisServer, http: ScriptedResponsesServer, cwd: Path) -> None:
        self.redis, self.http, self.cwd = redis, http, cwd
        self.gateways: list[ServerProcess] = []
        self.workers: dict[str, ServerProcess] = {}

    def _env(self) -> dict[str, str]:
        return server_env(self.http.base_url, CODEXCORE_TOKEN=TOKEN, CODEXCORE_LOG="info")

    async def gateway(self, *args: str) -> ServerProcess:
        server = await ServerProcess.start(
            None, self.cwd, "--redis", self.redis.url, "--role", "gateway", *args, env=self._env()
        )
        self.gateways.append(server)
        return server

    async def worker(self, name: str, *args: str) -> ServerProcess:
        server = await ServerProcess.start(
            None,
            self.cwd,
            "--redis",
            self.redis.url,
            "--role",
            "worker",
            "--worker-name",
            name,
            *args,
            tcp=False,
            env=self._env(),
        )
        await server.wait_stderr(rf"worker {name} serving")
        self.workers[name] = server
        return server

    async def owner(self, session_id: str, within: float = 15.0) -> str:
        """The worker that took ``session_id`` last: the highest fencing number in
        the workers' logs."""
        pattern = re.compile(rf"session taken session='{re.escape(session_id)}' fence=(\d+)")
        deadline = asyncio.get_running_loop().time() + within
        while True:
            found = [
                (int(match[1]), name)
                for name, worker in self.workers.items()
                for line in worker.stderr
                if (match := pattern.search(line))
            ]
            if found:
                return max(found)[1]
            if asyncio.get_running_loop().time() > deadline:
                logs = {name: w.stderr[-10:] for name, w in self.workers.items()}
                raise AssertionError(f"no worker took {session_id}: {logs}")
            await asyncio.sleep(0.05)

    async def aclose(self) -> None:
        for server in [*self.gateways, *self.workers.values()]:
            await server.kill()


@asynccontextmanager
async def pool(model: ScriptedModel, cwd: Path, *, persistent: bool = False) -> AsyncIterator[Pool]:
    async with redis_server(persistent=persistent) as redis, ScriptedResponsesServer(model) as http:
        running = Pool(redis, http, cwd)
        try:
            yield running
        finally:
            await running.aclose()


async def open_session(gateway: ServerProcess, **fields: Any) -> tuple[Client, str]:
    client = await gateway.client()
    welcome = await client.greet(**fields)
    assert welcome["type"] == "welcome", welcome
    return client, str(welcome["session_id"])
