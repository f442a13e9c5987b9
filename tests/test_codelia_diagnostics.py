"""Seed 000's opt-in ``run.diagnostics`` over a real ``codexcore serve --stdio``.

Two model requests in one run (a command, then the answer): one ``llm_call``
per request with the scripted usage and the request's real latency, one
``run_summary`` just before the terminal status; nothing without the flag;
and nothing of it ever reaches the model.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore import EngineConfig
from codexcore.model import Usage
from codexcore.testing import (
    Pause,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from .engine_helpers import typed_input
from .server_helpers import StdioServer
from .test_codelia import SEED_000_INITIALIZE, Ui, check_run, finish, req
from .test_openrpc import as_object, cli_document, validates

pytestmark = pytest.mark.anyio

FIRST = Usage(input_tokens=1000, cached_input_tokens=0, output_tokens=40, total_tokens=1040)
SECOND = Usage(input_tokens=1200, cached_input_tokens=1024, output_tokens=60, total_tokens=1260)
PAUSE = 0.4  # inside the first response's stream: its latency_ms must show it


def _paused(response: ScriptedResponse) -> ScriptedResponse:
    return attrs.evolve(response, steps=(response.steps[0], Pause(PAUSE), *response.steps[1:]))


def _model() -> ScriptedModel:
    command = function_call_response(
        "shell", {"command": ["echo", "hi"]}, call_id="c1", usage=FIRST
    )
    return ScriptedModel([_paused(command), text_response("It said hi.", usage=SECOND)])


async def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[Ui, Any]:
    """Serve, run one prompt to its end; the UI, the run's id and the model's requests."""
    tmp_path.mkdir(exist_ok=True)  # noqa: ASYNC240 (before the server starts: nothing waits)
    async with ScriptedResponsesServer(_model()) as http:
        server = await StdioServer.start(
            http.base_url, tmp_path, "--approval-mode", "full-access", *args, env=env
        )
        try:
            ui = Ui(server)
            await server.send(
                SEED_000_INITIALIZE,
                req("2", "run.start", input={"type": "text", "text": "say hi"}),
            )
            run_id = (await ui.answer("2"))["result"]["run_id"]
            assert await ui.run_to_end(run_id) == "completed"
            check_run(ui, run_id)
            await finish(ui)
        finally:
            await server.kill()
        assert len(http.model.requests) == 2, http.model.requests
        return ui, (run_id, http.model.requests)


def _diagnostics(ui: Ui, run_id: str) -> list[dict[str, Any]]:
    return [m["params"] for m in ui.of_run(run_id) if m["method"] == "run.diagnostics"]


def _check_call(call: dict[str, Any], seq: int, usage: Usage) -> None:
    assert call["seq"] == seq
    assert (call["provider"], call["stop_reason"]) == ("openai", "completed")
    assert call["usage"] == {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "input_cached_tokens": usage.cached_input_tokens,
        "input_cache_creation_tokens": None,
        "input_image_tokens": None,
    }
    sent = datetime.fromisoformat(call["request_ts"])
    got = datetime.fromisoformat(call["response_ts"])
    assert call["request_ts"].endswith("Z"), call
    assert call["response_ts"].endswith("Z"), call
    assert round((got - sent).total_seconds() * 1000) == call["latency_ms"]


def _cost(model: str, usage: Usage) -> float:
    """At the list prices model.list publishes (per million tokens)."""
    details = EngineConfig().models.details(model)
    assert details.cost_per_1m_input_tokens_usd is not None
    assert details.cost_per_1m_output_tokens_usd is not None
    cached_price = details.cost_per_1m_cached_input_tokens_usd
    assert cached_price is not None
    uncached = usage.input_tokens - usage.cached_input_tokens
    return (
        uncached * details.cost_per_1m_input_tokens_usd
        + usage.cached_input_tokens * cached_price
        + usage.output_tokens * details.cost_per_1m_output_tokens_usd
    ) / 1e6


@pytest.mark.parametrize("how", ["flag", "CODEXCORE_DIAGNOSTICS", "CODELIA_DIAGNOSTICS"])
async def test_one_llm_call_per_request_then_a_run_summary(tmp_path: Path, how: str) -> None:
    if how == "flag":
        ui, (run_id, requests) = await _run(tmp_path, "--diagnostics")
    else:
        ui, (run_id, requests) = await _run(tmp_path, env={how: "1"})
    sent = _diagnostics(ui, run_id)
    assert [d["kind"] for d in sent] == ["llm_call", "llm_call", "run_summary"], sent
    document = cli_document()
    declared = next(n for n in document["x-notifications"] if n["name"] == "run.diagnostics")
    for params in sent:  # as `codexcore schema --openrpc` declares them
        validates(as_object(declared["params"]), params, document)
    first, second = (d["call"] for d in sent[:2])
    model = requests[0]["model"]
    assert first["model"] == second["model"] == model
    _check_call(first, 1, FIRST)
    _check_call(second, 2, SECOND)
    assert first["latency_ms"] >= PAUSE * 1000, first  # the scripted pause, measured
    assert first["cache"] == {
        "hit_state": "miss",
        "cache_read_tokens": 0,
        "cache_creation_tokens": 0,
        "cache_read_ratio": 0.0,
    }
    assert second["cache"]["hit_state"] == "hit"
    assert second["cache"]["cache_read_tokens"] == 1024
    assert second["cache"]["cache_read_ratio"] == pytest.approx(1024 / 1200)
    summary = sent[2]["summary"]
    assert summary["total_calls"] == 2
    assert summary["total_tokens"] == 1040 + 1260
    assert summary["total_input_tokens"] == 2200
    assert summary["total_output_tokens"] == 100
    assert summary["total_cached_input_tokens"] == 1024
    assert summary["by_model"][model]["calls"] == 2
    assert summary["by_model"][model]["cached_input_tokens"] == 1024
    costs = (_cost(model, FIRST), _cost(model, SECOND))
    assert (first["cost_usd"], second["cost_usd"]) == pytest.approx(costs)
    assert summary["total_cost_usd"] == pytest.approx(sum(costs))
    assert summary["by_model"][model]["cost_usd"] == pytest.approx(sum(costs))
    assert summary["total_cost_usd"] > 0
    # The summary goes just before the run's terminal status, as in Codelia.
    order = [m["method"] for m in ui.of_run(run_id)]
    assert order[-2:] == ["run.diagnostics", "run.status"]
    for body in requests:  # nothing of it reaches the model (the cwd, named after the
        # test, does: in the environment context)
        text = json.dumps({**body, "input": typed_input(body)})
        for word in ("llm_call", "run_summary", "latency"):
            assert word not in text


def _shape(body: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [(item.get("type"), item.get("role")) for item in body["input"]]


async def test_nothing_is_sent_without_the_flag_and_the_model_sees_no_difference(
    tmp_path: Path,
) -> None:
    ui, (run_id, plain) = await _run(tmp_path / "plain")
    assert _diagnostics(ui, run_id) == []
    assert all(m.get("method") != "run.diagnostics" for m in ui.server.seen)
    _, (_, diagnosed) = await _run(tmp_path / "diagnosed", "--diagnostics")
    # The next request carries the same history whether diagnostics were sent or not.
    assert _shape(diagnosed[1]) == _shape(plain[1])
    assert [i.get("output") for i in diagnosed[1]["input"] if "output" in i] == [
        i.get("output") for i in plain[1]["input"] if "output" in i
    ]
