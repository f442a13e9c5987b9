"""A finished model request lets its body go at once: a long Task in ``client`` mode
resends the whole conversation with every request, and httpx's response and stream
hold each other, so without care every body waited for a full garbage collection."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator

import pytest

from codexcore.model import ModelClient
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

pytestmark = pytest.mark.anyio

BODY_TEXT = "x" * (1024 * 1024)  # a resent conversation of about a megabyte


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


async def test_request_bodies_are_freed_without_the_cyclic_collector(no_cyclic_gc: None) -> None:
    rounds = 8
    model = ScriptedModel([text_response("ok") for _ in range(rounds + 1)])
    async with (
        ScriptedResponsesServer(model) as server,
        ModelClient(base_url=server.base_url) as client,
    ):
        body = {"model": "m", "input": [{"role": "user", "content": BODY_TEXT}]}
        async for _ in client.stream(body):  # warm up: pools, caches
            pass
        model.requests.clear()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(rounds):
                async for _ in client.stream(body):
                    pass
                model.requests.clear()  # the scripted model's own copy of the body
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    # Kept bodies would be rounds x 1 MiB; what stays is small change.
    assert grown < 2 * 1024 * 1024, f"{grown} bytes still held after {rounds} requests"
