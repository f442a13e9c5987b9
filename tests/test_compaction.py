"""Compaction: the ``compact`` op, auto-compaction, "context length exceeded", and the
compacted History in the rollout (resume, fork) and in both history modes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore import Codex
from codexcore import protocol as p
from codexcore.engine._compact import (
    LOSES_DETAIL,
    SUMMARIZATION_PROMPT,
    SUMMARY_PREFIX,
    build_compacted_history,
    collect_user_messages,
    initial_context,
)
from codexcore.engine._instructions import is_contextual
from codexcore.model import Usage
from codexcore.protocol import Compact, SandboxPolicy, TextInput, UserInput
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    failed_response,
    function_call_response,
    http_error,
    text_response,
)

from .engine_helpers import Recorder, engine_config

pytestmark = pytest.mark.anyio

LIMIT = 1000
FULL = Usage(input_tokens=1100, cached_input_tokens=0, output_tokens=50, total_tokens=1150)
LIGHT = Usage(input_tokens=100, cached_input_tokens=0, output_tokens=20, total_tokens=120)
UNCONFINED = SandboxPolicy("danger-full-access")


def say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


def echo(text: str, *, usage: Usage = LIGHT, response_id: str | None = None) -> ScriptedResponse:
    return function_call_response(
        "shell", {"command": ["echo", text]}, usage=usage, response_id=response_id
    )


def too_long_http() -> ScriptedResponse:
    return http_error(
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )


def too_long_stream() -> ScriptedResponse:
    return failed_response("context_length_exceeded", "Your input exceeds the context window.")


@asynccontextmanager
async def engine(
    model: ScriptedModel, cwd: Path, *, home: Path | None = None, **session: Any
) -> AsyncIterator[Recorder]:
    config = engine_config(cwd, approval_policy="never", sandbox_policy=UNCONFINED, **session)
    config = attrs.evolve(
        config,
        model_auto_compact_token_limit=LIMIT,
        home=str(home) if home else None,
        ephemeral=home is None,
    )
    async with Codex(config, transport=model.mock_transport()) as codex:
        recorder = Recorder(codex)
        yield recorder
        recorder.check_invariants()


def texts(items: list[dict[str, Any]], *, context: bool = False) -> list[str]:
    """(role: text) of each message item of a request's input, other items by type;
    the engine's contextual messages (environment, AGENTS.md) left out unless
    ``context``."""
    out = []
    for item in items:
        if is_contextual(item) and not context:
            continue
        if item.get("type") != "message":
            out.append(item["type"])
            continue
        parts = item["content"]
        text = "".join(part.get("text", "") for part in parts if isinstance(part, dict))
        out.append(f"{item['role']}: {text}")
    return out


def task_types(ui: Recorder, sub: str) -> list[str]:
    """The event types of the Task ``sub`` (a session_configured before it left out)."""
    kinds = ui.types(id=sub)
    return kinds[kinds.index("task_started") :]


def summary_of(text: str) -> str:
    return f"user: {SUMMARY_PREFIX}\n{text}"


def is_compaction_request(body: dict[str, Any]) -> bool:
    last = body["input"][-1]
    return bool(last.get("role") == "user" and last["content"][0]["text"] == SUMMARIZATION_PROMPT)


# --- the compact op ---------------------------------------------------------------------------


async def test_compact_op_replaces_the_history_by_user_messages_and_summary(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            text_response("I looked at it."),
            text_response("The user wants the bug fixed; nothing done yet."),
            text_response("On it."),
        ]
    )
    async with engine(model, tmp_path, history_mode="client") as ui:
        first = await ui.submit(say("fix the bug"))
        await ui.until(p.TaskComplete, id=first)
        compact = await ui.submit(Compact())
        done = await ui.until(p.TaskComplete, id=compact)
        assert done.msg == p.TaskComplete(None, None)
        assert ui.types(id=compact) == [
            "task_started",
            "context_compaction_started",
            "context_compacted",
            "warning",
            "task_complete",
        ]
        assert ui.of(p.ContextCompactionStarted) == [p.ContextCompactionStarted("manual")]
        assert ui.of(p.WarningEvent)[-1].message == LOSES_DETAIL
        # The summary is for the next model: never shown as an agent message.
        assert [m.message for m in ui.of(p.AgentMessage)] == ["I looked at it."]
        third = await ui.submit(say("go on"))
        await ui.until(p.TaskComplete, id=third)
    summarise, after = model.requests[1], model.requests[2]
    assert is_compaction_request(summarise)
    assert summarise["tools"] == []
    assert texts(summarise["input"])[:2] == ["user: fix the bug", "assistant: I looked at it."]
    assert texts(after["input"]) == [
        "user: fix the bug",
        summary_of("The user wants the bug fixed; nothing done yet."),
        "user: go on",
    ]


async def test_compact_op_before_any_session_makes_one_with_defaults(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("Nothing to summarise yet.")])
    async with engine(model, tmp_path) as ui:
        sub = await ui.submit(Compact())
        await ui.until(p.TaskComplete, id=sub)
    assert ui.types()[:2] == ["session_configured", "task_started"]
    assert "context_compacted" in ui.types()


async def test_compact_replaces_a_running_task(tmp_path: Path) -> None:
    from codexcore.testing import idle

    model = ScriptedModel([idle(text_response("never finishes")), text_response("summary")])
    async with engine(model, tmp_path) as ui:
        first = await ui.submit(say("start"))
        await ui.until(p.AgentMessageDelta, id=first)
        compact = await ui.submit(Compact())
        await ui.until(p.TaskComplete, id=compact)
    assert ui.of(p.TurnAborted) == [p.TurnAborted("replaced")]


async def test_an_interrupted_compaction_leaves_the_history_as_it_was(tmp_path: Path) -> None:
    from codexcore.testing import Hang

    model = ScriptedModel(
        [
            text_response("first answer"),
            ScriptedResponse(steps=(Hang(),)),
            text_response("second answer"),
        ]
    )
    async with engine(model, tmp_path, history_mode="client") as ui:
        first = await ui.submit(say("one"))
        await ui.until(p.TaskComplete, id=first)
        compact = await ui.submit(Compact())
        await ui.until(p.ContextCompactionStarted, id=compact)
        await ui.submit(p.Interrupt())
        assert (await ui.until(p.TurnAborted, id=compact)).msg.reason == "interrupted"
        second = await ui.submit(say("two"))
        await ui.until(p.TaskComplete, id=second)
    assert "context_compacted" not in ui.types()
    assert texts(model.requests[2]["input"]) == [
        "user: one",
        "assistant: first answer",
        "user: two",
    ]


# --- automatic compaction ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["client", "server"])
async def test_auto_compaction_between_two_turns_then_the_task_goes_on(
    tmp_path: Path, mode: str
) -> None:
    model = ScriptedModel(
        [
            echo("one", usage=FULL, response_id="r1"),
            text_response("ran echo one", response_id="r-sum"),
            echo("two", response_id="r2"),
            text_response("all done", response_id="r3"),
        ]
    )
    async with engine(model, tmp_path, history_mode=mode) as ui:
        sub = await ui.submit(say("echo twice"))
        done = await ui.until(p.TaskComplete, id=sub)
    assert done.msg.last_agent_message == "all done"
    assert task_types(ui, sub) == [
        "task_started",
        "user_message",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
        "context_compaction_started",
        "context_compacted",
        "warning",
        "exec_command_begin",
        "exec_command_end",
        "turn_complete",
        "agent_message",
        "turn_complete",
        "task_complete",
    ]
    assert ui.of(p.ContextCompactionStarted) == [p.ContextCompactionStarted("auto")]
    summarise, resumed, last = model.requests[1], model.requests[2], model.requests[3]
    assert is_compaction_request(summarise)
    assert texts(resumed["input"]) == ["user: echo twice", summary_of("ran echo one")]
    if mode == "server":
        # The compaction request chains on the old conversation; after it, a new chain.
        assert summarise["previous_response_id"] == "r1"
        assert texts(summarise["input"]) == [
            "function_call_output",
            "user: " + SUMMARIZATION_PROMPT,
        ]
        assert "previous_response_id" not in resumed
        assert last["previous_response_id"] == "r2"
    else:
        assert texts(last["input"])[:2] == ["user: echo twice", summary_of("ran echo one")]


async def test_auto_compaction_crosses_the_limit_twice_in_one_task(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            echo("1", usage=FULL),
            text_response("summary one"),
            echo("2"),
            echo("3", usage=FULL),
            text_response("summary two"),
            text_response("finished"),
        ]
    )
    async with engine(model, tmp_path, history_mode="client") as ui:
        sub = await ui.submit(say("count"))
        done = await ui.until(p.TaskComplete, id=sub)
    assert done.msg.last_agent_message == "finished"
    assert ui.types().count("context_compacted") == 2
    # The second summary replaces the first: summaries are not kept as user messages.
    assert texts(model.requests[5]["input"]) == ["user: count", summary_of("summary two")]


async def test_still_above_the_limit_after_compacting_ends_the_task_with_one_error(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([echo("1", usage=FULL), text_response("summary"), echo("2", usage=FULL)])
    async with engine(model, tmp_path) as ui:
        sub = await ui.submit(say("big"))
        error = await ui.until(p.ErrorEvent, id=sub)
    assert error.msg.codex_error_info == "context_window_exceeded"
    assert "still above the auto-compact limit" in error.msg.message
    assert ui.types(id=sub).count("error") == 1


async def test_a_task_that_ended_above_the_limit_is_compacted_before_the_next_one(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            text_response("big answer", usage=FULL),
            text_response("the summary"),
            text_response("small answer"),
        ]
    )
    async with engine(model, tmp_path, history_mode="client") as ui:
        first = await ui.submit(say("one"))
        await ui.until(p.TaskComplete, id=first)
        assert "context_compaction_started" not in ui.types(id=first)  # no Turn follows
        second = await ui.submit(say("two"))
        await ui.until(p.TaskComplete, id=second)
    assert ui.types(id=second)[:3] == [
        "task_started",
        "context_compaction_started",
        "context_compacted",
    ]
    assert texts(model.requests[2]["input"]) == [
        "user: one",
        summary_of("the summary"),
        "user: two",
    ]


# --- the model says the context is exceeded ----------------------------------------------


@pytest.mark.parametrize("too_long", [too_long_http, too_long_stream], ids=["http", "stream"])
async def test_context_length_exceeded_compacts_once_and_retries(
    tmp_path: Path, too_long: Any
) -> None:
    model = ScriptedModel(
        [
            text_response("an earlier answer"),
            too_long(),
            text_response("summary of the earlier work"),
            text_response("answered after compacting"),
        ]
    )
    async with engine(model, tmp_path, history_mode="client") as ui:
        first = await ui.submit(say("earlier question"))
        await ui.until(p.TaskComplete, id=first)
        second = await ui.submit(say("a question that does not fit"))
        done = await ui.until(p.TaskComplete, id=second)
    assert done.msg.last_agent_message == "answered after compacting"
    assert ui.of(p.ContextCompactionStarted) == [
        p.ContextCompactionStarted("context_window_exceeded")
    ]
    assert "error" not in ui.types()
    summarise, retry = model.requests[2], model.requests[3]
    # The input that did not fit is summarised with the rest and kept as a user message.
    assert texts(summarise["input"])[-2] == "user: a question that does not fit"
    assert texts(retry["input"]) == [
        "user: earlier question",
        "user: a question that does not fit",
        summary_of("summary of the earlier work"),
    ]


@pytest.mark.parametrize("where", ["retry", "summary"])
async def test_a_second_context_length_exceeded_ends_the_task_with_one_error(
    tmp_path: Path, where: str
) -> None:
    script = [too_long_http(), text_response("summary"), too_long_stream()]
    if where == "summary":
        script = [too_long_http(), too_long_http()]
    model = ScriptedModel(script)
    async with engine(model, tmp_path) as ui:
        sub = await ui.submit(say("huge"))
        error = await ui.until(p.ErrorEvent, id=sub)
        after = await ui.submit(p.ListSessions())
        await ui.until(p.SessionList, id=after)  # the engine goes on
    assert error.msg.code == "context_window_exceeded"
    assert error.msg.codex_error_info == "context_window_exceeded"
    task_events = ui.types(id=sub)
    assert [t for t in task_events if t in p.TERMINAL_EVENT_TYPES] == ["error"]
    assert ("context_compacted" in task_events) == (where == "retry")
    assert model.remaining == 0


async def test_other_model_errors_are_not_compacted(tmp_path: Path) -> None:
    model = ScriptedModel([failed_response("server_is_sad", "no")])
    async with engine(model, tmp_path) as ui:
        sub = await ui.submit(say("hi"))
        error = await ui.until(p.ErrorEvent, id=sub)
    assert error.msg.codex_error_info is None
    assert "context_compaction_started" not in ui.types()


# --- the compacted history itself ---------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_the_compacted_history_keeps_initial_context_and_recent_messages_in_budget() -> None:
    env = user("<environment_context>\n<cwd>/w</cwd>\n</environment_context>")
    agents = user("<user_instructions>\nbe brief\n</user_instructions>")
    moved = user("<environment_context>\n<cwd>/w/sub</cwd>\n</environment_context>")
    conversation = [
        agents,
        env,
        moved,
        env,
        user("old " * 100),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]},
        user(f"{SUMMARY_PREFIX}\nan older summary"),
        user("<user_shell_command>\nls\n</user_shell_command>"),
        user("middle " * 10),
        user("newest"),
    ]
    messages = collect_user_messages(conversation)
    assert messages == ["old " * 100, "middle " * 10, "newest"]
    history = build_compacted_history(initial_context(conversation), messages, "S", budget=30)
    got = texts(history, context=True)
    # The initial context and its later update, in order (a short update alone would
    # not say everything the model was told); an exact repeat once.
    assert got[:3] == texts([agents, env, moved], context=True)
    # Newest first within 30 tokens: "newest" (2), "middle …" (18), then "old …" cut.
    assert got[4:6] == ["user: " + "middle " * 10, "user: newest"]
    assert got[3].startswith("user: old old")
    assert "tokens truncated" in got[3]
    assert got[-1] == summary_of("S")


def test_an_empty_summary_says_so() -> None:
    assert texts(build_compacted_history([], [], "  "))[-1] == summary_of("(no summary available)")


# --- rollouts: resume and fork rebuild the compacted history -------------------------------


async def _compacted_session(tmp_path: Path, mode: str) -> tuple[str, ScriptedModel, Path]:
    home = tmp_path / "home"
    model = ScriptedModel(
        [
            text_response("before", response_id="r1"),
            text_response("the summary", response_id="r-sum"),
            text_response("after", response_id="r2"),
        ]
    )
    async with engine(model, tmp_path, home=home, history_mode=mode) as ui:
        first = await ui.submit(say("one"))
        await ui.until(p.TaskComplete, id=first)
        compact = await ui.submit(Compact())
        await ui.until(p.TaskComplete, id=compact)
        second = await ui.submit(say("two"))
        await ui.until(p.TaskComplete, id=second)
        session_id = ui.of(p.SessionConfigured)[0].session_id
    return session_id, model, home


@pytest.mark.parametrize("mode", ["client", "server"])
async def test_resume_rebuilds_exactly_the_compacted_history(tmp_path: Path, mode: str) -> None:
    session_id, _, home = await _compacted_session(tmp_path, mode)
    (path,) = home.glob("sessions/*/*/*/rollout-*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    compacted = [r for r in records if r["type"] == "compacted"]
    assert len(compacted) == 1
    assert texts(compacted[0]["items"]) == ["user: one", summary_of("the summary")]
    model = ScriptedModel([text_response("three", response_id="r3")])
    async with engine(model, tmp_path, home=home, history_mode=mode) as ui:
        await ui.submit(p.ResumeSession(session_id))
        await ui.until(p.SessionConfigured)
        sub = await ui.submit(say("three?"))
        await ui.until(p.TaskComplete, id=sub)
    (request,) = model.requests
    if mode == "client":
        assert texts(request["input"]) == [
            "user: one",
            summary_of("the summary"),
            "user: two",
            "assistant: after",
            "user: three?",
        ]
    else:
        assert request["previous_response_id"] == "r2"
        assert texts(request["input"]) == ["user: three?"]


async def test_resume_right_after_a_compaction_starts_a_new_server_chain(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = ScriptedModel([text_response("before", response_id="r1"), text_response("sum")])
    async with engine(model, tmp_path, home=home, history_mode="server") as ui:
        first = await ui.submit(say("one"))
        await ui.until(p.TaskComplete, id=first)
        compact = await ui.submit(Compact())
        await ui.until(p.TaskComplete, id=compact)
        session_id = ui.of(p.SessionConfigured)[0].session_id
    model = ScriptedModel([text_response("fresh chain")])
    async with engine(model, tmp_path, home=home, history_mode="server") as ui:
        await ui.submit(p.ResumeSession(session_id))
        sub = await ui.submit(say("two"))
        await ui.until(p.TaskComplete, id=sub)
    (request,) = model.requests
    assert "previous_response_id" not in request
    assert texts(request["input"]) == ["user: one", summary_of("sum"), "user: two"]


async def test_fork_after_and_before_a_compaction(tmp_path: Path) -> None:
    session_id, _, home = await _compacted_session(tmp_path, "client")
    model = ScriptedModel([text_response("forked after"), text_response("forked before")])
    async with engine(model, tmp_path, home=home, history_mode="client") as ui:
        await ui.submit(p.ForkSession(session_id, "r2"))
        await ui.until(p.SessionConfigured)
        sub = await ui.submit(say("from r2"))
        await ui.until(p.TaskComplete, id=sub)
        await ui.submit(p.ForkSession(session_id, "r1"))
        sub = await ui.submit(say("from r1"))
        await ui.until(p.TaskComplete, id=sub)
    after, before = model.requests
    assert texts(after["input"]) == [
        "user: one",
        summary_of("the summary"),
        "user: two",
        "assistant: after",
        "user: from r2",
    ]
    # The rollout keeps what came before the compaction: a fork from there has it whole.
    assert texts(before["input"]) == ["user: one", "assistant: before", "user: from r1"]
    # A fork of a compacted session records the compacted branch in its own file.
    forks = [
        json.loads(line)
        for path in home.glob("sessions/*/*/*/rollout-*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert sum(1 for r in forks if r["type"] == "compacted") == 2  # original + the r2 fork


async def test_a_live_session_forgets_bookmarks_from_before_its_compaction(
    tmp_path: Path,
) -> None:
    """What keeps a long session's memory bounded: in client mode an id from before the
    compaction is refused like any unknown one."""
    model = ScriptedModel([text_response("before", response_id="r1"), text_response("sum")])
    async with engine(model, tmp_path, history_mode="client") as ui:
        first = await ui.submit(say("one"))
        await ui.until(p.TaskComplete, id=first)
        compact = await ui.submit(Compact())
        await ui.until(p.TaskComplete, id=compact)
        bad = await ui.submit(UserInput((TextInput("again"),), last_response_id="r1"))
        error = await ui.until(p.ErrorEvent, id=bad)
    assert error.msg.code == "unknown_response_id"


@pytest.mark.parametrize("mode", ["client", "server"])
async def test_a_summary_request_that_does_not_fit_leaves_the_oldest_items_out(
    tmp_path: Path, mode: str
) -> None:
    model = ScriptedModel(
        [
            echo("1", response_id="r1"),
            echo("2", response_id="r2"),
            text_response("two echoes done", response_id="r3"),
            too_long_http(),  # the next Turn
            too_long_stream(),  # its summary, whole
            text_response("short summary"),  # its summary, the oldest quarter left out
            text_response("fits now"),
        ]
    )
    async with engine(model, tmp_path, history_mode=mode) as ui:
        first = await ui.submit(say("echo two"))
        await ui.until(p.TaskComplete, id=first)
        second = await ui.submit(say("and now?"))
        done = await ui.until(p.TaskComplete, id=second)
    assert done.msg.last_agent_message == "fits now"
    whole, trimmed = model.requests[4], model.requests[5]
    assert "previous_response_id" not in trimmed
    assert trimmed["store"] is (mode == "server")
    # History: user, call, output, call, output, answer: its oldest quarter (one item)
    # went.
    assert texts(trimmed["input"]) == [
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "assistant: two echoes done",
        "user: and now?",
        "user: " + SUMMARIZATION_PROMPT,
    ]
    assert all("id" not in item for item in trimmed["input"])
    warnings = [w.message for w in ui.of(p.WarningEvent)]
    assert any("left the 1 oldest conversation item(s) out" in w for w in warnings)
    # The user messages kept come from the whole conversation all the same.
    assert texts(model.requests[6]["input"]) == [
        "user: echo two",
        "user: and now?",
        summary_of("short summary"),
    ]
    if mode == "server":
        assert whole["previous_response_id"] == "r3"


def test_trimming_never_leaves_an_output_without_its_call() -> None:
    from codexcore.engine._compact import trim_oldest

    call = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    items = [call, output, user("a"), user("b")]
    assert trim_oldest(items) == ([user("a"), user("b")], 2)
    assert trim_oldest([]) == ([], 0)


async def test_input_injected_during_a_compaction_goes_on_from_the_summary(
    tmp_path: Path,
) -> None:
    from codexcore.testing import Pause

    summary = text_response("the summary")
    slow = attrs.evolve(summary, steps=(Pause(0.3), *summary.steps))
    model = ScriptedModel([text_response("first"), slow, text_response("answered")])
    async with engine(model, tmp_path, history_mode="client") as ui:
        first = await ui.submit(say("one"))
        await ui.until(p.TaskComplete, id=first)
        compact = await ui.submit(Compact())
        await ui.until(p.ContextCompactionStarted, id=compact)
        await ui.submit(p.InjectInput((TextInput("and then?"),)))
        done = await ui.until(p.TaskComplete, id=compact)
    assert done.msg.last_agent_message == "answered"
    assert texts(model.requests[2]["input"]) == [
        "user: one",
        summary_of("the summary"),
        "user: and then?",
    ]


async def test_a_retried_turn_still_above_the_limit_ends_the_task(tmp_path: Path) -> None:
    """Compacting for "context length exceeded" counts as the compaction: a retried Turn
    that leaves the conversation above the limit cannot be helped by another."""
    model = ScriptedModel([too_long_http(), text_response("summary"), echo("1", usage=FULL)])
    async with engine(model, tmp_path) as ui:
        sub = await ui.submit(say("big"))
        error = await ui.until(p.ErrorEvent, id=sub)
    assert error.msg.codex_error_info == "context_window_exceeded"
    assert ui.types(id=sub).count("context_compaction_started") == 1
    assert model.remaining == 0


def test_a_malformed_compacted_record_makes_the_file_bad(tmp_path: Path) -> None:
    from codexcore.engine._rollout import BadRollout
    from codexcore.engine._rollout_reader import read_records

    path = tmp_path / "rollout.jsonl"
    path.write_text(
        '{"type": "session_meta", "session_id": "s", "created_at": "t", "cwd": "/"}\n'
        '{"type": "compacted", "items": {"not": "a list"}, "response_id": null}\n'
    )
    with pytest.raises(BadRollout, match="line 2 is a compacted record whose 'items'"):
        list(read_records(path))
