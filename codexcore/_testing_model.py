"""The scripted model of :mod:`codexcore.testing`, served in process: ``ScriptedModel``
(an httpx handler, a respx side effect) and a reply as bytes or an ``httpx.Response``."""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

import httpx
import orjson

from ._testing_script import JSON_HEADERS, Hang, Pause, ScriptedResponse, Step

if TYPE_CHECKING:
    from codexcore.engine import ModelCatalog

DEMO_MODEL = "demo-model"
"""The name ``codexcore demo`` and the examples give their scripted model."""


def demo_catalog() -> ModelCatalog:
    """The model catalogue with :data:`DEMO_MODEL` described, so a demo run against a
    scripted model is not warned (as an operator would be) that its model is unknown."""
    from codexcore.engine import ModelCatalog

    return ModelCatalog({DEMO_MODEL: {"context_window": 128_000, "max_output_tokens": 16_384}})


# --- the scripted model ----------------------------------------------------------------


Responder: TypeAlias = ScriptedResponse | Callable[[dict[str, Any]], ScriptedResponse]
"""A scripted reply, or a function from the decoded request body to one."""


class ScriptedModel:
    """Answers each ``POST .../responses`` with the next scripted reply, in order.

    A callable in the script receives the decoded request body (to echo a tool
    output, say). ``requests`` records every request body. Once the script is
    used up, requests get HTTP 500 with the error "scripted model has no
    response left". Safe to share with a server running in another thread.
    """

    def __init__(self, responses: Iterable[Responder] = ()) -> None:
        self._script = collections.deque(responses)
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []

    @property
    def remaining(self) -> int:
        """How many scripted replies are still unused."""
        return len(self._script)

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        """Record ``body`` and return the reply to it."""
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            responder = self._script.popleft() if self._script else None
        if responder is None:
            return error_response(500, f"scripted model has no response left (request #{number})")
        return responder if isinstance(responder, ScriptedResponse) else responder(body)

    async def handler(self, request: httpx.Request) -> httpx.Response:
        """Serve ``request``; a handler for ``httpx.MockTransport`` and a respx side effect."""
        reply = await self._reply(request)
        headers = [(k, v) for k, v in reply.headers if k.lower() not in FRAMING_HEADERS]
        return httpx.Response(reply.status, headers=headers, content=_play(reply.steps))

    def mock_transport(self) -> httpx.MockTransport:
        """A transport serving this model in-process: ``ModelClient(transport=...)``."""
        return httpx.MockTransport(self.handler)

    async def _reply(self, request: httpx.Request) -> ScriptedResponse:
        if request.method != "POST" or not is_responses_path(request.url.path):
            return error_response(404, f"no route for {request.method} {request.url.path}")
        body = decode_body(await request.aread())
        if body is None:
            return error_response(400, "request body is not a JSON object")
        return self.respond(body)


FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


def is_responses_path(path: str) -> bool:
    return path.endswith("/responses")


def decode_body(raw: bytes) -> dict[str, Any] | None:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def error_response(status: int, message: str) -> ScriptedResponse:
    error = {"message": message, "type": "scripted_model_error", "code": None}
    return ScriptedResponse(status, JSON_HEADERS, (orjson.dumps({"error": error}),))


def sse_body(reply: ScriptedResponse) -> bytes:
    """The whole body of ``reply`` (``text_response(...)``, ``http_error(...)`` …) as bytes:
    its chunks joined, ``Pause`` steps left out. A ``Hang`` has no whole body: for a
    stream that stops, serve the reply with a ``ScriptedModel``."""
    if any(isinstance(step, Hang) for step in reply.steps):
        raise ValueError("a reply with a Hang step never ends: serve it with a ScriptedModel")
    return b"".join(step for step in reply.steps if isinstance(step, bytes))


def httpx_response(reply: ScriptedResponse) -> httpx.Response:
    """``reply`` as an ``httpx.Response``: its status, headers and whole body (``sse_body``).

    For respx, ``route.mock(return_value=httpx_response(text_response("Hi")))``;
    in an ``httpx.MockTransport`` handler, ``return httpx_response(...)``.
    """
    headers = [(k, v) for k, v in reply.headers if k.lower() not in FRAMING_HEADERS]
    return httpx.Response(reply.status, headers=headers, content=sse_body(reply))


async def _play(steps: Iterable[Step]) -> AsyncIterator[bytes]:
    """The body for httpx: chunks as they come; a ``Hang`` lasts until the reader cancels."""
    for step in steps:
        if isinstance(step, bytes):
            yield step
        elif isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
        else:
            await asyncio.get_running_loop().create_future()
