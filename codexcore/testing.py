"""A scripted OpenAI Responses API, for testing code that talks to a model.

Build replies with the helpers (``text_response``, ``function_call_response``,
``shell_call``, ``failed_response``, ``incomplete_response``, ``http_error``,
and the modifiers ``truncated`` and ``idle``), hand them to a ``ScriptedModel``
in the order the requests will come, and serve the model in one of three ways::

    model = ScriptedModel([shell_call(["ls"]), text_response("Done.")])

    # 1. in-process, no sockets
    client = ModelClient(transport=model.mock_transport())

    # 2. with respx, in its mode that patches the client (not httpcore)
    with respx.mock(using="httpx") as router:
        router.post(url__regex=r"/responses$").mock(side_effect=model.handler)

    # 3. a real HTTP server, in this event loop or in a background thread
    async with ScriptedResponsesServer(model) as server:
        client = ModelClient(base_url=server.base_url)

One reply alone is ``httpx_response(reply)``, an ``httpx.Response`` for respx's
``return_value=`` or an ``httpx.MockTransport`` handler (``sse_body(reply)``: its
body as bytes).

Streams are realistic: every event is ``event: <type>\\ndata: <json>\\n\\n`` with a
``sequence_number``, item ids and ``output_index`` as the real API sends them,
one event per chunk, and ``Pause``/``Hang`` steps really pause the stream.
``model.requests`` keeps every request body, decoded, for assertions.
"""

from __future__ import annotations

from ._testing_model import (
    DEMO_MODEL,
    Responder,
    ScriptedModel,
    demo_catalog,
    httpx_response,
    sse_body,
)
from ._testing_script import (
    Hang,
    Pause,
    ScriptedResponse,
    Step,
    failed_response,
    function_call_response,
    http_error,
    idle,
    incomplete_response,
    shell_call,
    sse_event,
    text_response,
    truncated,
)
from ._testing_server import ScriptedResponsesServer

__all__ = [
    "DEMO_MODEL",
    "Hang",
    "Pause",
    "Responder",
    "ScriptedModel",
    "ScriptedResponse",
    "ScriptedResponsesServer",
    "Step",
    "demo_catalog",
    "failed_response",
    "function_call_response",
    "http_error",
    "httpx_response",
    "idle",
    "incomplete_response",
    "shell_call",
    "sse_body",
    "sse_event",
    "text_response",
    "truncated",
]
