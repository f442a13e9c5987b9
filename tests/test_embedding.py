"""The embedding faces as their users reach for them: the openai SDK's client options,
a missing key, one Task with ``run``, and the thread face taking what ``Codex`` takes."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from codexcore import Codex, EngineConfig, MissingApiKey, SessionConfig, TaskResult
from codexcore.adapters.threads import CodexThread
from codexcore.config import load_settings
from codexcore.protocol import ExecApprovalRequest, ReviewDecision
from codexcore.testing import (
    Hang,
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    http_error,
    idle,
    shell_call,
    text_response,
)

from .engine_helpers import engine_config

pytestmark = pytest.mark.anyio

PY = sys.executable


class Seen:
    """The headers and URLs of the requests a client sent (an httpx event hook)."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    async def hook(self, request: httpx.Request) -> None:
        self.requests.append(request)


@asynccontextmanager
async def server_and_client(
    model: ScriptedModel,
) -> AsyncIterator[tuple[str, Seen, httpx.AsyncClient]]:
    seen = Seen()
    async with (
        ScriptedResponsesServer(model) as server,
        httpx.AsyncClient(event_hooks={"request": [seen.hook]}) as client,
    ):
        yield server.base_url, seen, client


def _session(tmp_path: Path) -> EngineConfig:
    return EngineConfig(session=SessionConfig(cwd=str(tmp_path)), ephemeral=True)


# --- item 14: the openai SDK's names --------------------------------------------------------


async def test_the_openai_sdk_options_reach_the_model_requests(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("hello")])
    async with server_and_client(model) as (base_url, seen, client):
        codex = Codex(
            _session(tmp_path),
            api_key="sk-embedded",
            base_url=base_url,
            default_headers={"X-Plugin": "ide"},
            http_client=client,
        )
        async with codex:
            result = await codex.run("hi")
    assert result.final_message == "hello"
    (request,) = seen.requests
    assert str(request.url) == f"{base_url}/responses"
    assert request.headers["authorization"] == "Bearer sk-embedded"
    assert request.headers["x-plugin"] == "ide"


async def test_max_retries_counts_the_retries_after_the_first_request(tmp_path: Path) -> None:
    model = ScriptedModel([http_error(500, "down"), http_error(500, "down"), text_response("up")])
    async with ScriptedResponsesServer(model) as server:
        config = engine_config(tmp_path)
        async with Codex(config, api_key="", base_url=server.base_url, max_retries=0) as codex:
            failed = await codex.run("once")
        async with Codex(config, api_key="", base_url=server.base_url, max_retries=2) as codex:
            # The previous engine took one reply; this one retries twice: 500, then "up".
            recovered = await codex.run("again")
    assert failed.terminal.msg.TYPE == "error"
    assert recovered.final_message == "up"
    assert len(model.requests) == 3


@pytest.mark.parametrize("limit", [0.3, httpx.Timeout(30.0, read=0.3)], ids=["float", "httpx"])
async def test_timeout_bounds_a_silent_stream(tmp_path: Path, limit: float | httpx.Timeout) -> None:
    model = ScriptedModel([idle(text_response("never finished"))])
    async with ScriptedResponsesServer(model) as server:
        codex = Codex(
            engine_config(tmp_path),
            api_key="",
            base_url=server.base_url,
            max_retries=0,
            timeout=limit,
        )
        async with codex:
            result = await asyncio.wait_for(codex.run("wait"), 10)
    assert result.terminal.msg.TYPE == "error"
    assert "no data for 0.3 s" in str(result.terminal.msg)


def test_bad_client_options_are_named() -> None:
    with pytest.raises(ValueError, match="max_retries must be a whole number >= 0, not -1"):
        Codex(api_key="", max_retries=-1)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        Codex(api_key="", timeout=httpx.Timeout(None))


# --- item 14: no key, the CLI's error at once -------------------------------------------------


def test_no_key_fails_at_once_with_the_clis_message(tmp_path: Path) -> None:
    cli = load_settings(home=str(tmp_path), environ={}).missing_key()
    assert cli is not None
    for make in (lambda: Codex(EngineConfig()), lambda: CodexThread(EngineConfig())):
        with pytest.raises(MissingApiKey) as raised:
            make()
        message = str(raised.value)
        assert message.startswith(
            "no API key: $OPENAI_API_KEY is not set, and https://api.openai.com/v1 needs one ("
        )
        assert message.partition("(")[0] == cli.partition("(")[0]  # one message, one place
        assert "api_key=" in message


def test_a_key_or_a_keyless_server_is_not_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Codex(EngineConfig(api_key=""))  # "send none", on purpose
    Codex(base_url="http://127.0.0.1:9/v1")  # a local server needs none
    gateway = httpx.AsyncClient(headers={"Authorization": "Bearer gateway"})
    Codex(http_client=gateway)  # the caller's client carries its own credentials
    asyncio.run(gateway.aclose())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    Codex()
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://eu.api.openai.com/v1")
    with pytest.raises(MissingApiKey, match=r"eu\.api\.openai\.com/v1 needs one \(base_url from"):
        Codex()


# --- item 15: one Task, start to end ----------------------------------------------------------


def _approving_model() -> ScriptedModel:
    return ScriptedModel(
        [shell_call([PY, "-c", "print('ran')"], call_id="c1"), text_response("done")]
    )


async def test_run_returns_the_tasks_result_and_answers_its_approvals(tmp_path: Path) -> None:
    asked: list[ExecApprovalRequest] = []

    def approve(request: object) -> ReviewDecision:
        assert isinstance(request, ExecApprovalRequest)
        asked.append(request)
        return "approved"

    model = _approving_model()
    config = engine_config(tmp_path, approval_policy="untrusted")
    async with Codex(config, transport=model.mock_transport()) as codex:
        result = await codex.run("go", approve=approve)
        assert isinstance(result, TaskResult)
        later = await codex.run("again")  # the stream goes on after a Task: run another
    assert result.completed
    assert result.final_message == "done"
    assert result.terminal.msg.TYPE == "task_complete"
    assert result.terminal.id == result.id
    types = [event.msg.TYPE for event in result.events]
    assert types[-1] == "task_complete"
    assert "exec_command_end" in types
    assert [request.call_id for request in asked] == ["c1"]
    assert later.terminal.msg.TYPE == "error"  # the script is used up: a 500, named


async def test_run_denies_what_nobody_approves(tmp_path: Path) -> None:
    model = _approving_model()
    config = engine_config(tmp_path, approval_policy="untrusted")
    async with Codex(config, transport=model.mock_transport()) as codex:
        result = await codex.run("go")
    types = [event.msg.TYPE for event in result.events]
    assert "exec_approval_request" in types
    assert "exec_command_begin" not in types
    assert result.final_message == "done"
    assert "denied" in str(model.requests[1]["input"])


def test_the_thread_face_runs_one_task(tmp_path: Path) -> None:
    model = _approving_model()
    config = engine_config(tmp_path, approval_policy="untrusted")
    with CodexThread(config, transport=model.mock_transport()) as codex:
        result = codex.run("go", approve=lambda request: "approved", timeout=30)
    assert result.final_message == "done"
    assert "exec_command_end" in [event.msg.TYPE for event in result.events]


def test_thread_run_times_out_and_refuses_a_callback_face(tmp_path: Path) -> None:
    model = ScriptedModel([ScriptedResponse(steps=(Hang(),))])
    with (
        CodexThread(engine_config(tmp_path), transport=model.mock_transport()) as codex,
        pytest.raises(TimeoutError, match=r"did not end within 0\.2 s"),
    ):
        codex.run("hang", timeout=0.2)
    with (
        CodexThread(engine_config(tmp_path), api_key="", on_event=lambda event: None) as codex,
        pytest.raises(RuntimeError, match="on_event"),
    ):
        codex.run("go")


# --- item 13: the thread face takes what the asyncio face takes -------------------------------


def test_the_thread_face_takes_every_option_of_codex() -> None:
    codex = set(inspect.signature(Codex).parameters) - {"threadsafe"}
    thread = set(inspect.signature(CodexThread).parameters)
    assert codex <= thread, codex - thread


def test_the_thread_face_sends_through_the_callers_client(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("through your client")])
    seen = Seen()
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(model.handler), event_hooks={"request": [seen.hook]}
    )
    with CodexThread(_session(tmp_path), http_client=client, api_key="sk-ide") as codex:
        result = codex.run("hi", timeout=30)
    asyncio.run(client.aclose())
    assert result.final_message == "through your client"
    assert [r.headers["authorization"] for r in seen.requests] == ["Bearer sk-ide"]
