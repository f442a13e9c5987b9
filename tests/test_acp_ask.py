"""The model asks the user over ACP, against ``codexcore acp`` processes: an editor that
advertises form elicitation gets ``request_user_input`` as ``elicitation/create`` and its
answer reaches the model; an editor that does not is never offered the tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    AcceptElicitationResponse,
    ClientCapabilities,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
)

from codexcore.testing import ScriptedModel, function_call_response, text_response

from .acp_helpers import RecordingClient, outputs_of, prompt_text, serving

pytestmark = pytest.mark.anyio

QUESTIONS = {
    "questions": [
        {
            "id": "db",
            "header": "Database",
            "question": "Which database should the service use?",
            "options": [
                {"label": "Postgres", "description": "the team's default"},
                {"label": "SQLite"},
            ],
            "isOther": False,
        },
        {"id": "name", "header": "Name", "question": "What is the service called?"},
    ]
}


class FormClient(RecordingClient):
    """An editor that takes form elicitations and answers each with ``reply``."""

    def __init__(self, reply: AcceptElicitationResponse | DeclineElicitationResponse) -> None:
        super().__init__()
        self.reply = reply
        self.forms: list[tuple[str, dict[str, Any]]] = []

    def capabilities(self) -> ClientCapabilities:
        form = ElicitationCapabilities(form=ElicitationFormCapabilities())
        return ClientCapabilities(fs=super().capabilities().fs, elicitation=form)

    async def create_elicitation(
        self, message: str, mode: Any, **kwargs: Any
    ) -> AcceptElicitationResponse | DeclineElicitationResponse:
        schema = mode.requested_schema.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.forms.append((message, schema))
        return self.reply


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool.get("name", tool.get("type")) for tool in request.get("tools", [])]


def asking_model() -> ScriptedModel:
    ask = function_call_response("request_user_input", QUESTIONS, call_id="call_ask")
    return ScriptedModel([ask, text_response("Noted.")])


async def test_an_editor_that_takes_forms_is_asked_and_its_answer_reaches_the_model(
    tmp_path: Path,
) -> None:
    reply = AcceptElicitationResponse(action="accept", content={"db": "Postgres", "name": "ledger"})
    client, model = FormClient(reply), asking_model()
    async with serving(model, client, tmp_path, unstable=True) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("plan"))
    assert response.stop_reason == "end_turn"
    assert "request_user_input" in tool_names(model.requests[0])
    ((message, schema),) = client.forms
    assert message == "The agent asks 2 questions: Database, Name."
    db = schema["properties"]["db"]
    assert (db["type"], db["title"]) == ("string", "Database")
    assert [choice["const"] for choice in db["oneOf"]] == ["Postgres", "SQLite"]
    assert schema["properties"]["name"] == {
        "type": "string",
        "title": "Name",
        "description": "What is the service called?",
    }
    output = json.loads(outputs_of(model.requests[1])["call_ask"])
    assert output == {"answers": {"db": {"answers": ["Postgres"]}, "name": {"answers": ["ledger"]}}}


async def test_a_declined_form_tells_the_model_the_user_cancelled(tmp_path: Path) -> None:
    client, model = FormClient(DeclineElicitationResponse(action="decline")), asking_model()
    async with serving(model, client, tmp_path, unstable=True) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("plan"))
    assert response.stop_reason == "end_turn"
    assert "cancelled" in outputs_of(model.requests[1])["call_ask"]


async def test_an_answer_outside_the_options_is_a_cancel_not_a_hang(tmp_path: Path) -> None:
    reply = AcceptElicitationResponse(action="accept", content={"db": "Oracle"})
    client, model = FormClient(reply), asking_model()
    async with serving(model, client, tmp_path, unstable=True) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("plan"))
    assert response.stop_reason == "end_turn"
    assert "cancelled" in outputs_of(model.requests[1])["call_ask"]


async def test_an_editor_without_forms_is_never_offered_the_tool(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello")])
    async with serving(model, RecordingClient(), tmp_path) as (conn, _checker):
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        response = await conn.prompt(session_id=session.session_id, prompt=prompt_text("hi"))
    assert response.stop_reason == "end_turn"
    names = tool_names(model.requests[0])
    assert names  # the model is offered tools, not this one
    assert "request_user_input" not in names
