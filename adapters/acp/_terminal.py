"""The model's unconfined commands in the editor's terminals (ACP ``terminal/*``).

When the client offers terminals, the ACP agent gives its engines a
``command_runner`` (see :class:`~codexcore.EngineConfig`): a command the
policy lets run outside the sandbox (full access, or an approved escalation)
then runs in a terminal the editor creates, so the user watches it there;
its tool call embeds the terminal. Confined commands still run under
bubblewrap in codexcore: an editor's terminal could not confine them.

Lifecycle per command: ``terminal/create`` -> the tool call shows the terminal ->
``terminal/wait_for_exit`` (bounded by the call's timeout, then
``terminal/kill``) -> ``terminal/output`` -> ``terminal/release``. Cancelled
(``session/cancel``, the Task interrupted), the terminal is killed, its output
so far read (the model is told what the command did before it was stopped)
and the terminal released before the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn

from acp import RequestError

from codexcore._logging import get_logger
from codexcore.engine import CommandInterrupted, ExecResult
from codexcore.tools.exec import INTERRUPTED_NOTE

if TYPE_CHECKING:
    from ._session import AcpSession

log = get_logger(__name__)

OUTPUT_LIMIT = 1024 * 1024
"""The most output (bytes) the editor is asked to keep of one command; the model is
sent the engine's own bounded share of it."""
CLEANUP_TIMEOUT = 5.0
"""How long killing and releasing a terminal may take before the agent gives up on it."""
TIMED_OUT = 124


class ClientTerminals:
    """A session's command runner: each command in an editor terminal."""

    def __init__(self, session: AcpSession) -> None:
        self.session = session

    async def run(
        self, call_id: str, argv: tuple[str, ...], cwd: str, timeout_ms: int
    ) -> ExecResult:
        """Run ``argv`` in a new editor terminal and return how it ended."""
        session = self.session
        conn = session.agent.conn
        started = time.monotonic()
        created, cancelled = await self._create(argv, cwd)
        ids = {"session_id": session.id, "terminal_id": created.terminal_id}
        if cancelled:
            try:
                await _interrupted(conn, ids, started)
            finally:
                await _cleanup(conn.release_terminal, ids)
        try:
            await session.show_terminal(call_id, created.terminal_id)
            timed_out = await self._wait(conn, ids, timeout_ms)
            output = await conn.terminal_output(**ids)
        except asyncio.CancelledError:
            await _interrupted(conn, ids, started)
        finally:
            await _cleanup(conn.release_terminal, ids)
        return _result(output, timed_out, started)

    async def _create(self, argv: tuple[str, ...], cwd: str) -> tuple[Any, bool]:
        """The editor's new terminal, and whether the Task was cancelled meanwhile (the
        editor may have started the command before its answer came back: it is then
        stopped, and told, like any interrupted command)."""
        creating = asyncio.ensure_future(
            self.session.agent.conn.create_terminal(
                session_id=self.session.id,
                command=argv[0],
                args=list(argv[1:]),
                cwd=cwd,
                output_byte_limit=OUTPUT_LIMIT,
            )
        )
        try:
            return await asyncio.shield(creating), False
        except asyncio.CancelledError:
            created = await _answer_of(creating)
            if created is None:
                raise
            return created, True

    @staticmethod
    async def _wait(conn: Any, ids: dict[str, str], timeout_ms: int) -> bool:
        """Wait for the command's exit; True when it ran out of time (and was killed)."""
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await conn.wait_for_terminal_exit(**ids)
        except TimeoutError:
            await conn.kill_terminal(**ids)
            return True
        return False


async def _answer_of(request: asyncio.Future[Any]) -> Any:
    """The editor's answer to ``request`` after all (bounded), None when it gives none."""
    try:
        return await asyncio.wait_for(asyncio.shield(request), CLEANUP_TIMEOUT)
    except (TimeoutError, RequestError, ConnectionError, asyncio.CancelledError) as exc:
        request.cancel()
        log.warning("no answer to a terminal request after a cancel", error=str(exc))
        return None


async def _interrupted(conn: Any, ids: dict[str, str], started: float) -> NoReturn:
    """Kill the terminal and raise what its command did (``CommandInterrupted``), or the
    bare cancellation when the editor does not say."""
    await _cleanup(conn.kill_terminal, ids)
    said = await _output_after_kill(conn, ids)
    if said is None:
        raise asyncio.CancelledError
    result = _result(said, False, started, note=f"\ncodexcore: {INTERRUPTED_NOTE}\n")
    raise CommandInterrupted(result) from None


async def _cleanup(step: Callable[..., Awaitable[Any]], ids: dict[str, str]) -> None:
    """Kill or release a terminal even while cancelled; a client that does not answer
    (or has gone) is logged, not waited for."""
    try:
        await asyncio.shield(asyncio.wait_for(step(**ids), CLEANUP_TIMEOUT))
    except (TimeoutError, RequestError, ConnectionError) as exc:
        log.warning("editor terminal not cleaned up", terminal=ids["terminal_id"], error=str(exc))
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(step(**ids), CLEANUP_TIMEOUT)
        raise


async def _output_after_kill(conn: Any, ids: dict[str, str]) -> Any:
    """What a killed terminal printed (and how it ended), None when the editor does
    not say in time: the model is then told only that the call was interrupted."""
    try:
        return await asyncio.shield(asyncio.wait_for(conn.terminal_output(**ids), CLEANUP_TIMEOUT))
    except (TimeoutError, RequestError, ConnectionError, asyncio.CancelledError) as exc:
        log.warning("no output from a killed terminal", terminal=ids["terminal_id"], error=str(exc))
        return None


def _result(output: Any, timed_out: bool, started: float, note: str = "") -> ExecResult:
    status = output.exit_status
    if timed_out:
        code = TIMED_OUT
    elif status is None:
        code = -1
    elif status.signal:
        code = 128 + _signal_number(status.signal)
    else:
        code = status.exit_code if status.exit_code is not None else -1
    text = output.output + ("\n[output truncated by the editor]" if output.truncated else "")
    text += note
    return ExecResult(
        exit_code=code,
        stdout=text,
        stderr="",
        aggregated_output=text,
        duration_ms=int((time.monotonic() - started) * 1000),
        timed_out=timed_out,
    )


def _signal_number(name: str) -> int:
    try:
        return int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
    except KeyError:
        return int(signal.SIGKILL)
