"""A command that ran to its end is never told to the model as "never ran".

The Task can be cancelled (an interrupt, an editor's ``session/cancel``) in the
instant between a command's end and its ``exec_command_end`` reaching the queue:
the command ran, so what it did must travel with the cancellation
(``CommandInterrupted``), which the router turns into the end event and the
model's output (issue 27, item 2: a cancelled editor-terminal command was told
as not run when the cancel landed there).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codexcore.engine._tools import ShellCall, run_elsewhere
from codexcore.protocol import EventMsg, ExecCommandEnd
from codexcore.tools.exec import CommandInterrupted, ExecResult

pytestmark = pytest.mark.anyio

RESULT = ExecResult(
    exit_code=143,
    stdout="terminal says hi\n",
    stderr="",
    aggregated_output="terminal says hi\n",
    duration_ms=12,
    timed_out=False,
)


async def test_a_cancel_while_the_end_event_waits_carries_the_commands_result(
    tmp_path: Path,
) -> None:
    sent: list[EventMsg] = []

    async def runner(call_id: str, argv: tuple[str, ...], cwd: str, timeout_ms: int) -> ExecResult:
        return RESULT

    async def emit(msg: EventMsg) -> None:
        if isinstance(msg, ExecCommandEnd):
            # The Task's cancellation lands while the end event waits for room.
            raise asyncio.CancelledError
        sent.append(msg)

    call = ShellCall("c1", ("sleep", "30"), str(tmp_path), 1000, False, None)
    with pytest.raises(CommandInterrupted) as caught:
        await run_elsewhere(runner, call, emit)
    assert caught.value.result == RESULT
    assert [type(msg).__name__ for msg in sent] == ["ExecCommandBegin"]
