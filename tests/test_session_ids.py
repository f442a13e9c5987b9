"""One session, one id: ``welcome``, ``session_configured``, ``get_history`` and the
recorded session agree, over a real ``codexcore serve --tcp`` process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codexcore.testing import ScriptedModel, text_response

from .server_helpers import Client, ServerProcess, say, sub
from .test_serve_sockets import new_session, serving, welcome_of

pytestmark = pytest.mark.anyio


async def history_of(client: Client, session_id: str | None, sub_id: str) -> dict[str, Any]:
    fields = {} if session_id is None else {"session_id": session_id}
    await client.send(sub(sub_id, "get_history", **fields))
    answer = await client.until("session_history", id=sub_id)
    assert "error" not in client.types(id=sub_id), client.summary()
    msg: dict[str, Any] = answer["msg"]
    return msg


def types_in(history: dict[str, Any]) -> list[str]:
    return [event["msg"]["type"] for event in history["events"]]


async def attach(server: ServerProcess, session_id: str, **fields: Any) -> Client:
    client = await server.client()
    welcome = await client.greet(session_id=session_id, **fields)
    assert welcome["type"] == "welcome", welcome
    return client


async def test_welcome_session_configured_and_get_history_share_one_id(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("one", response_id="r1")])
    async with serving(model, tmp_path) as server:
        ui = await new_session(server)
        session_id = welcome_of(ui)["session_id"]
        # Before the engine has a Session, the announced id already names it.
        assert (await history_of(ui, session_id, "h0"))["total"] == 0
        await ui.send(sub("c1", "configure_session", approval_policy="never"))
        configured = await ui.until("session_configured", id="c1")
        assert configured["msg"]["session_id"] == session_id
        # Nothing recorded on disk yet, but the history is there under that id.
        early = await history_of(ui, session_id, "h1")
        assert early["session_id"] == session_id
        assert "session_configured" in types_in(early)
        await ui.send(say("t1", "hello"))
        await ui.until("task_complete", id="t1")
        later = await history_of(ui, session_id, "h2")
        assert "task_complete" in types_in(later)

        # Reattached, the session is known by the same id.
        again = await attach(server, session_id, last_seq=0)
        assert welcome_of(again)["session_id"] == session_id
        assert (await history_of(again, None, "h3"))["session_id"] == session_id
        await again.send(sub("bye", "shutdown"))
        await again.until("shutdown_complete", id="bye")


async def test_resuming_a_recorded_session_renames_the_hosted_one(tmp_path: Path) -> None:
    model = ScriptedModel(
        [text_response("one", response_id="r1"), text_response("two", response_id="r2")]
    )
    async with serving(model, tmp_path) as server:
        first = await new_session(server)
        recorded = welcome_of(first)["session_id"]
        await first.send(say("t1", "remember this"))
        await first.until("task_complete", id="t1")
        await first.send(sub("bye", "shutdown"))
        await first.until("shutdown_complete", id="bye")

        ui = await new_session(server)
        announced = welcome_of(ui)["session_id"]
        assert announced != recorded
        await ui.send(sub("res", "resume_session", session_id=recorded))
        resumed = await ui.until("session_configured", id="res")
        assert resumed["msg"]["session_id"] == recorded
        await ui.send(say("t2", "and now?"))
        await ui.until("task_complete", id="t2")
        assert [i["content"][0]["text"] for i in model.requests[1]["input"]] == ["and now?"]
        assert model.requests[1]["previous_response_id"] == "r1"

        # The recorded id now names the live session: attach, and read its history.
        by_recorded = await attach(server, recorded, last_seq=0)
        assert welcome_of(by_recorded)["session_id"] == recorded
        history = await history_of(by_recorded, recorded, "h1")
        assert types_in(history).count("task_complete") == 2
        # A client that kept the id welcome first gave still finds it, under its one id.
        by_announced = await attach(server, announced, last_seq=0)
        assert welcome_of(by_announced)["session_id"] == recorded
        await by_announced.send(sub("bye2", "shutdown"))
        await by_announced.until("shutdown_complete", id="bye2")
