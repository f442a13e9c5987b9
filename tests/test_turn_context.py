"""Per-turn settings, the model catalogue, token counts, and the initial context
(AGENTS.md and the environment) as the model is sent them."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexcore import Codex, Rejected
from codexcore import protocol as p
from codexcore.engine import ModelCatalog, default_home, parse_submission
from codexcore.engine._instructions import read_project_docs
from codexcore.model import Usage
from codexcore.protocol import (
    ExecApproval,
    OverrideTurnContext,
    ResumeSession,
    SandboxPolicy,
    TextInput,
    UserInput,
    UserTurn,
)
from codexcore.testing import ScriptedModel, shell_call, text_response

from .engine_helpers import Recorder, contextual_input, engine_config, typed_input

pytestmark = pytest.mark.anyio


def say(text: str) -> UserInput:
    return UserInput((TextInput(text),))


def engine(tmp_path: Path, model: ScriptedModel, **changes: Any) -> Codex:
    session = changes.pop("session", {})
    config = attrs.evolve(engine_config(tmp_path, **session), **changes)
    return Codex(config, transport=model.mock_transport())


def environment_blocks(request: dict[str, Any]) -> list[str]:
    return [t for t in contextual_input(request) if t.startswith("<environment_context>")]


# --- override_turn_context ------------------------------------------------------------------


async def test_an_override_applies_from_the_running_tasks_next_request(tmp_path: Path) -> None:
    """The Task is waiting for an approval when the model changes: it goes on (no abort)
    and its next request names the new model, effort and summary."""
    command = [sys.executable, "-c", "print(1)"]
    model = ScriptedModel([shell_call(command, call_id="c1"), text_response("done")])
    async with engine(tmp_path, model, session={"approval_policy": "untrusted"}) as codex:
        ui = Recorder(codex)
        await ui.submit(say("go"), id="t1")
        await ui.until(p.ExecApprovalRequest, id="t1")
        change = OverrideTurnContext(model="gpt-5-mini", effort="high", summary="concise")
        await ui.submit(change, id="o1")
        await ui.submit(ExecApproval("c1", "approved"))
        done = await ui.until(p.TaskComplete, id="t1")
        ui.check_invariants()
    assert done.msg.last_agent_message == "done"
    assert [r["model"] for r in model.requests] == ["gpt-5-codex", "gpt-5-mini"]
    assert model.requests[0]["reasoning"] == {"summary": "auto"}
    assert model.requests[1]["reasoning"] == {"summary": "concise", "effort": "high"}
    assert ui.types(id="o1") == []  # success says nothing, as in Codex
    assert [m.model for m in ui.of(p.TurnComplete)] == ["gpt-5-codex", "gpt-5-mini"]


async def test_a_summary_of_none_asks_for_no_summary(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with engine(tmp_path, model) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(OverrideTurnContext(summary="none", effort="low"))
        await ui.submit(say("two"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert model.requests[1]["reasoning"] == {"effort": "low"}


BAD_OVERRIDES = [
    ({"cwd": "no/such/dir"}, "bad_turn_context", "cwd: "),
    ({"model": "   "}, "bad_turn_context", "model: must not be blank"),
    (
        {"sandbox_policy": {"type": "workspace-write", "writable_roots": ["rel"]}},
        "bad_turn_context",
        "sandbox_policy.writable_roots: 'rel' is not an absolute path",
    ),
    ({"approval_policy": "sometimes"}, "bad_submission", "op.approval_policy: 'sometimes'"),
    ({"sandbox_policy": {"type": "open"}}, "bad_submission", "op.sandbox_policy.type"),
    ({"effort": "extreme"}, "bad_submission", "op.effort: 'extreme'"),
    ({"summary": "short"}, "bad_submission", "op.summary: 'short'"),
    ({"model": 5}, "bad_submission", "op.model"),
]


@pytest.mark.parametrize(("fields", "code", "names"), BAD_OVERRIDES, ids=lambda v: str(v)[:40])
@pytest.mark.parametrize("kind", ["override_turn_context", "user_turn"])
async def test_a_bad_value_is_an_error_naming_the_field_and_nothing_changes(
    tmp_path: Path, fields: dict[str, Any], code: str, names: str, kind: str
) -> None:
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with engine(tmp_path, model) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        op: dict[str, Any] = {"type": kind, "model": "gpt-5-mini", **fields}
        if kind == "user_turn":
            op["items"] = [{"type": "text", "text": "never sent"}]
        await codex.enqueue(codex_submission("bad", op))
        error = await ui.until(p.ErrorEvent, id="bad")
        await ui.submit(say("two"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
        ui.check_invariants()
    assert error.msg.code == code
    assert names in error.msg.message
    assert ui.types(id="bad") == ["error"]  # no Task started
    # Nothing changed: not the model (set beside the bad field), not the environment.
    assert [r["model"] for r in model.requests] == ["gpt-5-codex", "gpt-5-codex"]
    assert environment_blocks(model.requests[1]) == []
    assert len(model.requests) == 2


def codex_submission(sub_id: str, op: dict[str, Any]) -> p.Submission | Rejected:
    """``op`` as a UI's line would bring it: decoded, or rejected naming the bad field."""
    return parse_submission({"id": sub_id, "op": op})


async def test_user_turn_starts_a_task_under_its_settings_and_keeps_them(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with engine(tmp_path, model) as codex:
        ui = Recorder(codex)
        turn = UserTurn((TextInput("here"),), cwd="sub", approval_policy="never", model="o3")
        await ui.submit(turn, id="u1")
        configured = await ui.until(p.SessionConfigured, id="u1")  # no session yet: made
        started = await ui.until(p.TaskStarted, id="u1")
        await ui.until(p.TaskComplete, id="u1")
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert (configured.msg.cwd, configured.msg.model) == (str(tmp_path / "sub"), "o3")
    assert started.msg.model_context_window == 200_000
    assert [r["model"] for r in model.requests] == ["o3", "o3"]
    (first,) = environment_blocks(model.requests[0])
    assert f"<cwd>{tmp_path / 'sub'}</cwd>" in first
    assert "<approval_policy>never</approval_policy>" in first


async def test_an_override_before_any_session_creates_one_under_its_settings(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_response("a")])
    async with engine(tmp_path, model) as codex:
        ui = Recorder(codex)
        await ui.submit(OverrideTurnContext(model="o4-mini", approval_policy="never"), id="o")
        configured = await ui.until(p.SessionConfigured, id="o")
        await ui.submit(say("one"), id="t1")
        started = await ui.until(p.TaskStarted, id="t1")
        await ui.until(p.TaskComplete, id="t1")
    assert (configured.msg.model, configured.msg.approval_policy) == ("o4-mini", "never")
    assert started.msg.model_context_window == 200_000
    assert model.requests[0]["model"] == "o4-mini"


async def test_a_user_turn_replaces_a_running_task_as_user_input_does(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print(1)"]
    model = ScriptedModel([shell_call(command, call_id="c1"), text_response("b")])
    async with engine(tmp_path, model, session={"approval_policy": "untrusted"}) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        await ui.until(p.ExecApprovalRequest, id="t1")
        await ui.submit(UserTurn((TextInput("instead"),), model="gpt-5-nano"), id="t2")
        aborted = await ui.until(p.TurnAborted, id="t1")
        await ui.until(p.TaskComplete, id="t2")
        ui.check_invariants()
    assert aborted.msg.reason == "replaced"
    assert [r["model"] for r in model.requests] == ["gpt-5-codex", "gpt-5-nano"]
    assert typed_input(model.requests[1])[-1]["content"][0]["text"] == "instead"


# --- the catalogue, task_started and token_count ------------------------------------------------


async def test_task_started_and_token_count_carry_the_context_window_and_totals(
    tmp_path: Path,
) -> None:
    usages = [Usage(100, 20, 30, 5, 130), Usage(300, 100, 50, 0, 350)]
    model = ScriptedModel(
        [text_response("a", usage=usages[0]), text_response("b", usage=usages[1])]
    )
    catalog = ModelCatalog({"gpt-5-codex": {"context_window": 50_000}})
    async with engine(tmp_path, model, models=catalog) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        started = await ui.until(p.TaskStarted, id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(say("two"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert started.msg.model_context_window == 50_000  # the config's override, not 400 000
    counts = ui.of(p.TokenCount)
    assert [c.input_tokens for c in counts] == [100, 300]  # flat: the response's own
    infos = [c.info for c in counts]
    assert all(i is not None and i.model_context_window == 50_000 for i in infos)
    assert infos[0] is not None
    assert infos[1] is not None
    assert infos[0].last_token_usage == p.TokenUsage(100, 20, 30, 5, 130)
    assert infos[1].last_token_usage == p.TokenUsage(300, 100, 50, 0, 350)
    assert infos[1].total_token_usage == p.TokenUsage(400, 120, 80, 5, 480)


async def test_an_unknown_model_works_with_a_default_and_one_warning(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with engine(tmp_path, model, session={"model": "llama3:8b"}) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        started = await ui.until(p.TaskStarted, id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(OverrideTurnContext(model="llama3:8b"), id="o1")
        await ui.submit(say("two"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    warnings = [w.message for w in ui.of(p.WarningEvent) if "catalogue" in w.message]
    assert len(warnings) == 1
    assert "'llama3:8b'" in warnings[0]
    assert "128000-token context window" in warnings[0]
    assert started.msg.model_context_window == 128_000
    assert all("reasoning" not in r for r in model.requests)  # not a reasoning family
    assert [r["model"] for r in model.requests] == ["llama3:8b", "llama3:8b"]


async def test_a_model_described_in_the_config_is_not_unknown(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("a")])
    catalog = ModelCatalog(
        {"local": {"context_window": 8192, "supports_reasoning_summaries": True}}
    )
    async with engine(tmp_path, model, models=catalog, session={"model": "local"}) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        started = await ui.until(p.TaskStarted, id="t1")
        await ui.until(p.TaskComplete, id="t1")
    assert not [w for w in ui.of(p.WarningEvent) if "catalogue" in w.message]
    assert started.msg.model_context_window == 8192
    assert model.requests[0]["reasoning"] == {"summary": "auto"}


# --- AGENTS.md ------------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_agents_md_goes_global_then_root_first_down_to_the_cwd(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(home / "AGENTS.md", "global rules")
    write(tmp_path / "AGENTS.md", "above the repo: never read")
    write(repo / "AGENTS.md", "repo rules")
    write(repo / "a" / "AGENTS.md", "a rules")
    write(repo / "a" / "b" / "c" / "AGENTS.md", "c rules")
    write(repo / "a" / "sibling" / "AGENTS.md", "not on the way")
    cwd = repo / "a" / "b" / "c"
    docs = read_project_docs(str(cwd), str(home), 32 * 1024)
    assert docs.root == str(repo)
    assert docs.text == "global rules\n\nrepo rules\n\na rules\n\nc rules"
    assert [(d.scope, Path(d.path).parent) for d in docs.files] == [
        ("global", home),
        ("project", repo),
        ("project", repo / "a"),
        ("project", cwd),
    ]
    assert docs.warnings == ()
    assert not docs.truncated


def test_without_a_git_root_only_the_cwd_is_looked_at(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "parent rules")
    write(tmp_path / "w" / "AGENTS.md", "cwd rules")
    docs = read_project_docs(str(tmp_path / "w"), None, 1000)
    assert docs.text == "cwd rules"
    # A .git *file* (a worktree, a submodule) marks the root as well.
    write(tmp_path / ".git", "gitdir: elsewhere\n")
    assert read_project_docs(str(tmp_path / "w"), None, 1000).text == "parent rules\n\ncwd rules"


def test_the_cap_cuts_with_a_warning_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / "AGENTS.md", "r" * 60)
    inner = write(tmp_path / "x" / "AGENTS.md", "é" * 40)  # 80 bytes, 2 a character
    dropped = write(tmp_path / "x" / "y" / "AGENTS.md", "never reached")
    docs = read_project_docs(str(dropped.parent), None, 100)
    assert docs.text == "r" * 60 + "\n\n" + "é" * 20  # cut on a character boundary
    assert len(docs.text.encode()) <= 100 + 2
    assert docs.truncated
    (warning,) = docs.warnings
    assert f"cut in {inner}" in warning
    assert "100 bytes" in warning
    assert str(dropped) in warning  # the file left out entirely is named too
    assert read_project_docs(str(dropped.parent), None, 0).text == ""  # 0: none read


async def test_an_agents_md_leading_outside_the_project_is_never_sent(tmp_path: Path) -> None:
    """A checked-out repository's AGENTS.md symlinked to a private file: left out, with a
    warning, and nothing of the file reaches the provider."""
    secret = write(tmp_path / "private" / "id_rsa", "-----BEGIN KEY----- s3cret")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").symlink_to(secret)
    write(repo / "pkg" / "AGENTS.md", "pkg rules")
    (repo / "inner.md").write_text("inner rules")
    (repo / "pkg" / "sub").mkdir()
    (repo / "pkg" / "sub" / "AGENTS.md").symlink_to(repo / "inner.md")  # inside: fine
    model = ScriptedModel([text_response("a")])
    async with engine(repo / "pkg" / "sub", model) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
    sent = str(model.requests[0])
    assert "s3cret" not in sent
    assert contextual_input(model.requests[0])[0] == (
        "<user_instructions>\n\npkg rules\n\ninner rules\n\n</user_instructions>"
    )
    (warning,) = [w.message for w in ui.of(p.WarningEvent) if "outside the project" in w.message]
    assert str(repo / "AGENTS.md") in warning


def test_bad_utf8_is_replaced_not_taken_for_a_cut(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"caf\xe9 rules\n")
    docs = read_project_docs(str(tmp_path), None, 1000)
    assert docs.text == "caf\ufffd rules\n"
    assert not docs.truncated
    assert docs.warnings == ()


async def test_the_initial_context_is_sent_once_root_first_with_the_environment(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    write(default_home() / "AGENTS.md", "global")
    write(tmp_path / "AGENTS.md", "root")
    cwd = tmp_path / "pkg"
    write(cwd / "AGENTS.md", "x" * 50)
    model = ScriptedModel([text_response("a"), text_response("b")])
    async with engine(cwd, model, project_doc_max_bytes=20) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(say("two"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    first, second = model.requests
    instructions, environment = contextual_input(first)
    # 20 bytes: "global" and "root" whole, then 10 of the 50 of pkg's.
    assert (
        instructions
        == f"<user_instructions>\n\nglobal\n\nroot\n\n{'x' * 10}\n\n</user_instructions>"
    )
    assert environment.startswith("<environment_context>\n  <cwd>")
    for tag in ("approval_policy", "sandbox_mode", "network_access", "shell", "current_date"):
        assert f"<{tag}>" in environment
    assert "<timezone>" in environment
    assert first["input"][-1]["content"] == [{"type": "input_text", "text": "one"}]
    assert contextual_input(second) == []  # server mode: sent once, chained by the server
    cut = [w.message for w in ui.of(p.WarningEvent) if "project_doc_max_bytes" in w.message]
    assert len(cut) == 1
    assert str(cwd / "AGENTS.md") in cut[0]


# --- updates, resume and fork ------------------------------------------------------------------


async def test_a_cwd_or_policy_change_is_sent_as_a_short_update(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path / "AGENTS.md", "rules")
    model = ScriptedModel([text_response(x) for x in "abcd"])
    async with engine(tmp_path, model, session={"history_mode": "client"}) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(OverrideTurnContext(cwd="sub", approval_policy="never"))
        await ui.submit(say("two"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
        await ui.submit(say("three"), id="t3")
        await ui.until(p.TaskComplete, id="t3")
        readonly = SandboxPolicy("read-only")
        await ui.submit(OverrideTurnContext(sandbox_policy=readonly, model="gpt-5-mini"))
        await ui.submit(say("four"), id="t4")
        await ui.until(p.TaskComplete, id="t4")
    update = environment_blocks(model.requests[1])[-1]
    assert update == (
        "<environment_context>\n"
        f"  <cwd>{tmp_path / 'sub'}</cwd>\n"
        "  <approval_policy>never</approval_policy>\n"
        "</environment_context>"
    )
    # Client mode resends the history: the initial context once, then each update once.
    assert [len(contextual_input(r)) for r in model.requests] == [2, 3, 3, 4]
    assert sum("<user_instructions>" in t for t in contextual_input(model.requests[3])) == 1
    assert environment_blocks(model.requests[3])[-1] == (
        "<environment_context>\n  <sandbox_mode>read-only</sandbox_mode>\n</environment_context>"
    )
    # The update goes just before the new user message.
    assert typed_input(model.requests[1])[-1]["content"][0]["text"] == "two"


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_resume_and_fork_do_not_send_the_context_twice(tmp_path: Path, mode: str) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path / "AGENTS.md", "rules")
    model = ScriptedModel(
        [text_response("a", response_id="r1"), text_response("b", response_id="r2")]
    )
    async with engine(tmp_path, model, session={"history_mode": mode}) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(OverrideTurnContext(cwd="sub", model="gpt-5-mini"))
        await ui.submit(say("two"), id="t2")
        configured = await ui.until(p.TaskComplete, id="t2")
        session_id = ui.of(p.SessionConfigured)[0].session_id
    assert configured.msg.response_id == "r2"
    rollout = next((default_home() / "sessions").glob(f"*/*/*/rollout-*-{session_id}.jsonl"))
    assert '"reasoning_summary"' in rollout.read_text()  # the settings are recorded

    # Resumed: the settings come back, and nothing is told twice.
    resumed = ScriptedModel([text_response("c", response_id="r3")])
    async with engine(tmp_path, resumed, session={"history_mode": mode}) as codex:
        ui = Recorder(codex)
        await ui.submit(ResumeSession(session_id), id="res")
        again = await ui.until(p.SessionConfigured, id="res")
        await ui.submit(say("three"), id="t3")
        await ui.until(p.TaskComplete, id="t3")
    assert (again.msg.cwd, again.msg.model) == (str(tmp_path / "sub"), "gpt-5-mini")
    # The token count goes on from the recorded one (150 a response, three so far).
    info = ui.of(p.TokenCount)[-1].info
    assert info is not None
    assert info.total_token_usage.total_tokens == 450
    (request,) = resumed.requests
    expected = 0 if mode == "server" else 3  # client: the recorded ones, resent as history
    assert len(contextual_input(request)) == expected
    assert request["model"] == "gpt-5-mini"

    # Forked at r1 (before the cwd change): the fork's model was told the old cwd, so it
    # gets the update to the session's cwd, and no initial context again.
    forked = ScriptedModel([text_response("d", response_id="r4")])
    async with engine(tmp_path, forked, session={"history_mode": mode}) as codex:
        ui = Recorder(codex)
        await ui.submit(p.ForkSession(session_id, "r1"), id="fork")
        await ui.until(p.SessionConfigured, id="fork")
        await ui.submit(say("four"), id="t4")
        await ui.until(p.TaskComplete, id="t4")
    (request,) = forked.requests
    told = contextual_input(request)
    assert sum("<user_instructions>" in t for t in told) == (0 if mode == "server" else 1)
    assert told[-1] == (
        f"<environment_context>\n  <cwd>{tmp_path / 'sub'}</cwd>\n</environment_context>"
    )


async def test_a_bookmark_fork_in_the_session_follows_what_that_branch_was_told(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    model = ScriptedModel([text_response(x, response_id=f"r{i}") for i, x in enumerate("abc")])
    async with engine(tmp_path, model, session={"history_mode": "client"}) as codex:
        ui = Recorder(codex)
        await ui.submit(say("one"), id="t0")
        await ui.until(p.TaskComplete, id="t0")
        await ui.submit(OverrideTurnContext(cwd="sub"))
        await ui.submit(say("two"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(p.OverrideTurnContext(cwd=str(tmp_path)))
        # Back to r0's branch, which was never told of "sub": the cwd is what it was told.
        await ui.submit(UserInput((TextInput("three"),), last_response_id="r0"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    assert environment_blocks(model.requests[2]) == environment_blocks(model.requests[0])


def test_environment_blocks_round_trip_through_the_history() -> None:
    from codexcore.engine._instructions import Environment, environment_text, parse_environment

    env = Environment("/w <&> x", "never", "workspace-write", False, ("/a", "/b"))
    assert parse_environment(environment_text(env)) == env
    empty = Environment("/w", "never", "read-only", True, ())
    assert parse_environment(environment_text(empty)) == empty
    assert os.sep == "/"


# --- the documented configuration ---------------------------------------------------------------


def test_the_documented_configuration_loads_and_shapes_the_catalogue(tmp_path: Path) -> None:
    import re

    from codexcore.config import load_settings

    doc = (Path(__file__).parent.parent / "docs" / "instructions.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.DOTALL)
    assert example is not None
    (tmp_path / "config.toml").write_text(example.group(1))
    loaded = load_settings(home=str(tmp_path), environ={"HOME": str(tmp_path)})
    assert loaded.warnings == ()
    config = loaded.settings.engine_config(cwd=str(tmp_path))
    assert config.project_doc_max_bytes == 16384
    assert config.models.details("gpt-5-codex").context_window == 272000
    assert config.models.details("gpt-5-codex").max_output_tokens == 128_000  # the rest kept
    local = config.models.lookup("qwen3-coder")
    assert local is not None
    assert (local.context_window, local.supports_reasoning_summaries) == (262144, False)
    assert local.cost_per_1m_cached_input_tokens_usd == 0.0
    assert list(config.models.models())[-1] == "qwen3-coder"
