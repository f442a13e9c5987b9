"""An ACP prompt's ``resource_link`` to a FIFO or a device (issue 26, item 7).

A client without ``fs`` makes the agent read the linked file from disk: a FIFO
(or a link to /dev/zero) is refused at once, named in the prompt, and the
prompt is answered; the session goes on.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from acp.schema import ResourceContentBlock

from codexcore.testing import ScriptedModel, text_response

from .acp_helpers import RecordingClient, serving
from .test_acp import prompt_text

pytestmark = pytest.mark.anyio


async def test_a_resource_link_to_a_fifo_or_dev_zero_is_named_and_answered(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")
    model = ScriptedModel([text_response("seen"), text_response("still here")])
    async with serving(model, RecordingClient(fs=False), tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        links = [
            ResourceContentBlock(type="resource_link", uri=path.as_uri(), name=path.name)
            for path in (fifo, zero)
        ]
        prompt = conn.prompt(session_id=session.session_id, prompt=[*prompt_text("look"), *links])
        response = await asyncio.wait_for(prompt, 20)
        assert response.stop_reason == "end_turn"
        again = conn.prompt(session_id=session.session_id, prompt=prompt_text("and now"))
        assert (await asyncio.wait_for(again, 20)).stop_reason == "end_turn"
    sent = str(model.requests[0]["input"])
    assert "(could not be read: is a FIFO (named pipe), not a regular file)" in sent
    assert "(could not be read: is a character device, not a regular file)" in sent
