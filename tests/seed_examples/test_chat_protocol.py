"""Every example message of the Copilot-CLI-style chat protocol's document, as written.

Each request is sent to a real ``codexcore serve --stdio`` as the document writes
it (pretty-printed there, one line here); the model is scripted to say what the
document's example says, and the answer is compared field by field with the
document's example answer. Only what cannot be sent as written is changed: the
``spec`` placeholder (``/* NormalizedSpec object */``, a comment, not JSON) is a
small spec object. The differences that remain are the rows of the chat section
of ``docs/seed-conformance.md``; each is asserted here as it is, so a change to
one fails until the table is updated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codexcore import __version__
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from ..server_helpers import PY, StdioServer

pytestmark = pytest.mark.anyio

SPEC: dict[str, Any] = {"title": "Users API", "endpoints": [{"method": "GET", "path": "/users"}]}
"""Stands for the document's ``/* NormalizedSpec object */``."""

# --- the document's examples, as written --------------------------------------------------------

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "clientName": "experience-ui",
        "clientVersion": "1.0.0",
        "capabilities": {"streaming": True, "specFormats": ["openapi3", "swagger2", "graphql"]},
    },
}
INITIALIZE_ANSWER: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "serverName": "copilot-cli",
        "serverVersion": "1.2.0",
        "capabilities": {"codeGeneration": True, "customization": True, "streaming": True},
    },
}
GENERATE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "generate",
    "params": {
        "spec": SPEC,
        "format": "react",
        "theme": "light",
        "options": {"layout": "default", "includeAuth": True, "pagination": True},
    },
}
GENERATE_ANSWER: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 2,
    "result": {
        "code": "/* full React/JSX code */",
        "componentCount": 12,
        "description": "Generated interface with 8 endpoints, data tables, and detail views",
    },
}
CUSTOMIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "customize",
    "params": {
        "currentCode": "/* current generated code */",
        "prompt": "Add a search bar to filter results by name",
        "spec": SPEC,
        "history": [
            {"role": "user", "content": "Generate an interface for this API"},
            {"role": "assistant", "content": "Generated interface with 8 endpoints"},
        ],
    },
}
CUSTOMIZE_ANSWER: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 3,
    "result": {
        "code": "/* updated React/JSX code */",
        "description": (
            "Added a search bar component that filters the results table by the 'name' field"
        ),
        "assumptions": ["Filtering is client-side on the currently loaded data"],
        "clarificationNeeded": False,
    },
}
CLARIFY_ANSWER: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 3,
    "result": {
        "code": None,
        "clarificationNeeded": True,
        "question": (
            "I found two tables in the interface. Which one should I add the search bar to: "
            "the 'Users' table or the 'Orders' table?"
        ),
        "options": ["Users table", "Orders table", "Both tables"],
    },
}
CHAT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 4,
    "method": "chat",
    "params": {
        "message": "What formats do you support?",
        "context": {"tabId": "tab-1", "hasActiveSpec": True, "hasActiveInterface": True},
    },
}
CHAT_ANSWER: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 4,
    "result": {
        "message": (
            "I support OpenAPI 3.x, Swagger 2.0, and GraphQL schemas. You can provide them via "
            "file upload, URL, or direct paste."
        ),
        "suggestions": ["Upload a spec file", "Paste a URL", "Paste spec content"],
    },
}
EXIT: dict[str, Any] = {"jsonrpc": "2.0", "method": "exit"}

# --- what the scripted model says ------------------------------------------------------------


def structured(result: dict[str, Any], **more: Any) -> ScriptedResponse:
    """The model's structured answer holding ``result``'s fields (and ``more``)."""
    return text_response(json.dumps({**result, **more}), chunks=8)


CUSTOMIZED = structured(CUSTOMIZE_ANSWER["result"], question=None, options=None)
CLARIFY = CLARIFY_ANSWER["result"]
ASKS = structured(
    {**CLARIFY, "description": "", "assumptions": []}, clarificationNeeded=True, code=None
)
ASK_TOOL = function_call_response(
    "request_user_input",
    {
        "questions": [
            {
                "id": "table",
                "header": "Table",
                "question": CLARIFY["question"],
                "options": [{"label": label, "description": ""} for label in CLARIFY["options"]],
            }
        ]
    },
)


@asynccontextmanager
async def serve(
    tmp_path: Path, responses: list[ScriptedResponse]
) -> AsyncIterator[tuple[StdioServer, ScriptedModel]]:
    model = ScriptedModel(responses)
    async with ScriptedResponsesServer(model) as http:
        argv = [PY, "-m", "codexcore", "serve", "--stdio"]
        server = await StdioServer.start(http.base_url, tmp_path, argv=argv)
        try:
            yield server, model
        finally:
            await server.kill()


async def answer(ui: StdioServer) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The chunks before the next response, and the response."""
    chunks: list[dict[str, Any]] = []
    while True:
        message = await ui.recv()
        assert message is not None, ui.context()
        if "id" in message:
            return chunks, message
        assert message["method"] == "stream/chunk", message
        chunks.append(message)


def chunks_are_as_written(chunks: list[dict[str, Any]], rid: int) -> str:
    """Every chunk has the document's shape (``CLIStreamChunk``); their text, joined."""
    for n, chunk in enumerate(chunks):
        assert chunk["jsonrpc"] == "2.0"
        assert set(chunk) == {"jsonrpc", "method", "params"}
        assert set(chunk["params"]) == {"requestId", "chunk", "done", "index"}
        assert chunk["params"]["requestId"] == rid
        assert chunk["params"]["index"] == n
        assert chunk["params"]["done"] is (n == len(chunks) - 1)
    return "".join(c["params"]["chunk"] for c in chunks)


# --- the examples -------------------------------------------------------------------------------


async def test_the_lifecycle_as_the_document_draws_it(tmp_path: Path) -> None:
    """initialize, generate (chunks, done, result), customize, chat, exit: the diagram."""
    responses = [
        structured(GENERATE_ANSWER["result"]),
        CUSTOMIZED,
        text_response(CHAT_ANSWER["result"]["message"]),
    ]
    async with serve(tmp_path, responses) as (ui, _):
        await ui.send(INITIALIZE)
        _, init = await answer(ui)
        expected = INITIALIZE_ANSWER["result"]
        assert init["result"]["capabilities"] == expected["capabilities"]
        # Difference (table): codexcore names itself, with its own version.
        assert (init["result"]["serverName"], init["result"]["serverVersion"]) == (
            "codexcore",
            __version__,
        )
        assert {**init, "result": {**init["result"], **expected}} == INITIALIZE_ANSWER

        await ui.send(GENERATE)
        chunks, generated = await answer(ui)
        assert generated == GENERATE_ANSWER
        assert len(chunks) >= 2  # partial chunks, then the done one
        assert chunks_are_as_written(chunks, 2) == GENERATE_ANSWER["result"]["code"]

        await ui.send(CUSTOMIZE)
        chunks, customized = await answer(ui)
        assert customized == CUSTOMIZE_ANSWER
        assert chunks_are_as_written(chunks, 3) == CUSTOMIZE_ANSWER["result"]["code"]

        await ui.send(CHAT)
        chunks, chatted = await answer(ui)
        assert chatted["result"]["message"] == CHAT_ANSWER["result"]["message"]
        assert chunks_are_as_written(chunks, 4) == CHAT_ANSWER["result"]["message"]
        # Difference (table): no suggestions; the engine's model writes none.
        assert chatted == {**CHAT_ANSWER, "result": {**CHAT_ANSWER["result"], "suggestions": []}}

        await ui.send(EXIT)
        assert await ui.recv() is None
        assert await ui.wait_exit() == 0, ui.context()


@pytest.mark.parametrize("asks", [ASKS, ASK_TOOL], ids=["in-its-answer", "with-the-ask-tool"])
async def test_clarify_is_customizes_answer_when_the_request_is_ambiguous(
    tmp_path: Path, asks: ScriptedResponse
) -> None:
    async with serve(tmp_path, [asks]) as (ui, _):
        await ui.send(INITIALIZE, CUSTOMIZE)
        await answer(ui)
        chunks, clarified = await answer(ui)
        assert clarified == CLARIFY_ANSWER
        assert chunks_are_as_written(chunks, 3) == ""


async def test_clarify_sent_as_a_method_is_unknown(tmp_path: Path) -> None:
    """The document lists ``clarify`` under Methods, but as a response ("instead of
    result") to ``customize``'s id 3: the CLI's answer, never a request of the app."""
    async with serve(tmp_path, []) as (ui, _):
        await ui.send({"jsonrpc": "2.0", "id": 5, "method": "clarify", "params": {}})
        _, unknown = await answer(ui)
        assert unknown["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "method": "chat"', -32700),  # Parse Error
        (b'{"id": 1, "method": "chat"}', -32600),  # Invalid Request: no jsonrpc
        (b'{"jsonrpc": "2.0", "id": 1, "method": "translate"}', -32601),  # Method Not Found
        (b'{"jsonrpc": "2.0", "id": 1, "method": "chat", "params": {}}', -32602),  # Invalid
        (b'{"jsonrpc": "2.0", "id": 1, "method": "generate", "params": {"spec": {}}}', -32002),
    ],
)
async def test_the_error_codes_mean_what_the_table_says(
    tmp_path: Path, line: bytes, code: int
) -> None:
    """-32000, -32001, -32003 (a failed Task, the input too large) and -32004 (the
    100-request bound) need a model or a queue: tests/test_chat_generate.py and
    tests/test_seed001.py send those."""
    async with serve(tmp_path, []) as (ui, _):
        await ui.send(INITIALIZE)  # the first line picks the dialect
        await answer(ui)
        await ui.send(line + b"\n")
        _, error = await answer(ui)
        assert error["error"]["code"] == code, error
