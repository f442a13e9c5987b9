"""Skills: discovery, list_skills, the catalogue sent once per session, the skill input
item, and seed 000's skills.list / context.inspect / $mentions over a real stdio server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from codexcore import protocol as p
from codexcore.engine._frontmatter import FrontMatterError, parse_front_matter
from codexcore.engine._instructions import ENVIRONMENT_CONTEXT_OPEN, USER_INSTRUCTIONS_OPEN
from codexcore.engine._skills import (
    MAX_CATALOGUE_CHARS,
    MAX_SKILL_BYTES,
    catalogue_text,
    discover,
    project_root,
    skill_roots,
)
from codexcore.testing import (
    ScriptedModel,
    ScriptedResponsesServer,
    function_call_response,
    text_response,
)

from .engine_helpers import running_engine
from .server_helpers import StdioServer, sub
from .test_codelia import finish, req, serving, tui_initialize

pytestmark = pytest.mark.anyio


def home() -> Path:
    return Path(os.environ["CODEXCORE_HOME"])  # a fresh one per test (conftest)


def write_skill(root: Path, folder: str, name: str, description: str, body: str = "") -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")
    return path


def repo_skills(project: Path) -> Path:
    return project / ".codexcore" / "skills"


def user_skills() -> Path:
    return home() / "skills"


def say(text: str) -> p.UserInput:
    return p.UserInput((p.TextInput(text),))


def user_texts(request: dict[str, Any]) -> list[str]:
    """The user messages' texts, the skills catalogue's included; the environment
    context and AGENTS.md left out (issue 16's other contextual messages)."""
    return [
        part["text"]
        for item in request["input"]
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item["content"]
        if part.get("type") == "input_text"
        and not part["text"].startswith((ENVIRONMENT_CONTEXT_OPEN, USER_INSTRUCTIONS_OPEN))
    ]


# --- the front matter ---------------------------------------------------------------------


def test_front_matter_forms_skills_use() -> None:
    text = (
        "---\n"
        "name: pdf-tools\n"
        "description: |-\n  Fill forms\n  and merge PDFs\n"
        "metadata:\n  short-description: PDFs\n"
        "license: 'Apache ''2.0'''\n"
        'title: "tab\\there" # a comment\n'
        "summary: plain words\n  go on # cut\n"
        "---\n# Body\n"
    )
    fields = parse_front_matter(text)
    assert fields["name"] == "pdf-tools"
    assert fields["description"] == "Fill forms\nand merge PDFs"
    assert fields["license"] == "Apache '2.0'"
    assert fields["title"] == "tab\there"
    assert fields["summary"] == "plain words go on"
    assert fields["metadata"] == "  short-description: PDFs"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no front matter\n", "missing YAML front matter delimited by ---"),
        ("---\nname: x\n", "no closing ---"),
        ("---\n---\n", "empty"),
        ("---\nname: a\nname: b\n---\n", "line 3: `name` is given twice"),
        ("---\njust words\n---\n", "line 2: expected `key: value`"),
        ("---\nname: 'open\n---\n", "unterminated"),
        ("---\nname: [a, b]\n---\n", "unsupported YAML value"),
        ("---\n  name: x\n---\n", "unexpected indentation"),
    ],
)
def test_front_matter_mistakes_are_named(text: str, problem: str) -> None:
    with pytest.raises(FrontMatterError, match=problem.replace("[", r"\[")):
        parse_front_matter(text)


# --- discovery ----------------------------------------------------------------------------


def test_repo_and_user_skills_with_errors_listed_not_fatal(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    cwd = project / "src" / "deep"
    cwd.mkdir(parents=True)
    repo = repo_skills(project)
    write_skill(repo, "review", "review", "Review a change")
    write_skill(repo, "nested/deeper/release", "release", "Cut a  release\n ")
    write_skill(user_skills(), "review", "review", "The user's own review (hidden by the repo's)")
    write_skill(user_skills(), "notes", "notes", "Take notes")
    write_skill(repo, ".hidden", "hidden", "never listed")
    (repo / "linked").symlink_to(user_skills() / "notes")  # symlinks are not followed
    write_skill(repo, "bad-name", "x" * 65, "too long a name")
    (repo / "no-front").mkdir()
    (repo / "no-front" / "SKILL.md").write_text("# just a body\n")
    (repo / "binary").mkdir()
    (repo / "binary" / "SKILL.md").write_bytes(b"---\nname: \xff\n---\n")
    write_skill(user_skills(), "no-desc", "no-desc", "")
    (user_skills() / "huge").mkdir()
    (user_skills() / "huge" / "SKILL.md").write_text("x" * (MAX_SKILL_BYTES + 1))

    assert project_root(str(cwd)) == str(project)
    catalogue = discover(skill_roots(str(cwd), str(home())))
    found = [(s.name, s.scope, s.description) for s in catalogue.skills]
    assert found == [
        ("notes", "user", "Take notes"),
        ("release", "repo", "Cut a release"),
        ("review", "repo", "Review a change"),
    ]
    assert catalogue.skills[1].path == str(repo / "nested/deeper/release/SKILL.md")
    errors = {Path(e.path).parent.name: e.message for e in catalogue.errors}
    assert errors == {
        "bad-name": "invalid name: exceeds maximum length of 64 characters",
        "no-front": "missing YAML front matter delimited by ---",
        "binary": "not UTF-8 text (invalid start byte at byte 10)",
        "no-desc": "missing field `description` in the front matter",
        "huge": f"larger than {MAX_SKILL_BYTES} bytes",
    }


def test_without_a_git_root_the_cwd_is_the_project(tmp_path: Path) -> None:
    write_skill(repo_skills(tmp_path), "a", "a", "A")
    assert project_root(str(tmp_path)) == str(tmp_path)
    assert [s.name for s in discover(skill_roots(str(tmp_path), str(home()))).skills] == ["a"]


# --- the engine -----------------------------------------------------------------------------


async def test_list_skills_is_cached_until_force_reload(tmp_path: Path) -> None:
    write_skill(repo_skills(tmp_path), "one", "one", "First")
    (user_skills() / "broken").mkdir(parents=True)
    (user_skills() / "broken" / "SKILL.md").write_text("---\nname: broken\n---\n")
    async with running_engine(ScriptedModel([]), tmp_path) as ui:
        await ui.submit(p.ListSkills(), id="l1")  # before any session: the default cwd
        first = (await ui.until(p.ListSkillsResponse, id="l1")).msg
        write_skill(repo_skills(tmp_path), "two", "two", "Second")
        await ui.submit(p.ListSkills(), id="l2")
        kept = (await ui.until(p.ListSkillsResponse, id="l2")).msg
        await ui.submit(p.ListSkills(force_reload=True), id="l3")
        fresh = (await ui.until(p.ListSkillsResponse, id="l3")).msg
    skill_one = p.SkillMetadata("one", "First", str(repo_skills(tmp_path) / "one/SKILL.md"), "repo")
    assert first.skills == kept.skills == (skill_one,)
    assert [s.name for s in fresh.skills] == ["one", "two"]
    assert first.errors == (
        p.SkillErrorInfo(
            str(user_skills() / "broken/SKILL.md"),
            "missing field `description` in the front matter",
        ),
    )


async def test_list_skills_for_other_cwds(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_skill(repo_skills(tmp_path / name), name, name, name.upper())
    async with running_engine(ScriptedModel([]), tmp_path) as ui:
        await ui.submit(p.ListSkills(("a", str(tmp_path / "b"))), id="l1")
        response = (await ui.until(p.ListSkillsResponse, id="l1")).msg
    assert [s.name for s in response.skills] == ["a", "b"]


@pytest.mark.parametrize("mode", ["server", "client"])
async def test_the_catalogue_goes_once_per_session_without_bodies(
    tmp_path: Path, mode: str
) -> None:
    write_skill(repo_skills(tmp_path), "deploy", "deploy", "Deploy the app", "SECRET-BODY steps")
    model = ScriptedModel([text_response("one", response_id="r1"), text_response("two")])
    async with running_engine(model, tmp_path, history_mode=mode) as ui:
        await ui.submit(say("first"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        await ui.submit(say("second"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    first, second = (user_texts(r) for r in model.requests)
    (catalogue,) = [t for t in first if t.startswith("<skills_instructions>")]
    path = repo_skills(tmp_path) / "deploy" / "SKILL.md"
    assert f"- deploy: Deploy the app (file: {path})" in catalogue
    assert first.index(catalogue) < first.index("first")  # context before the prompt
    assert "SECRET-BODY" not in catalogue
    sent_again = [t for t in second if t.startswith("<skills_instructions>")]
    assert sent_again == ([] if mode == "server" else [catalogue])  # client mode resends history


async def test_a_resumed_session_does_not_get_it_twice(tmp_path: Path) -> None:
    write_skill(user_skills(), "deploy", "deploy", "Deploy the app")
    first = ScriptedModel([text_response("one", response_id="r1")])
    async with running_engine(first, tmp_path, history_mode="client") as ui:
        await ui.submit(say("first"))
        session_id = (await ui.until(p.SessionConfigured)).msg.session_id
        await ui.until(p.TaskComplete)
    second = ScriptedModel([text_response("two")])
    async with running_engine(second, tmp_path, history_mode="client") as ui:
        await ui.submit(p.ResumeSession(session_id), id="res")
        await ui.until(p.SessionConfigured, id="res")
        await ui.submit(say("again"), id="t2")
        await ui.until(p.TaskComplete, id="t2")
    texts = user_texts(second.requests[0])
    assert sum(t.startswith("<skills_instructions>") for t in texts) == 1
    assert texts[-1] == "again"


async def test_no_skills_no_catalogue(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("one")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("hi"))
        await ui.until(p.TaskComplete)
    assert user_texts(model.requests[0]) == ["hi"]


async def test_a_skill_item_attaches_the_whole_skill(tmp_path: Path) -> None:
    path = write_skill(repo_skills(tmp_path), "deploy", "deploy", "Deploy", "1. build\n2. ship\n")
    model = ScriptedModel([text_response("deployed"), text_response("ok")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(p.UserInput((p.TextInput("go"), p.SkillInput("deploy", str(path)))))
        await ui.until(p.TaskComplete)
        # A skill item that names the wrong skill, or no SKILL.md, is refused; the engine goes on.
        await ui.submit(p.UserInput((p.SkillInput("other", str(path)),)), id="bad1")
        bad1 = (await ui.until(p.ErrorEvent, id="bad1")).msg
        await ui.submit(p.UserInput((p.SkillInput("x", str(tmp_path / "x.md")),)), id="bad2")
        bad2 = (await ui.until(p.ErrorEvent, id="bad2")).msg
        await ui.submit(say("still here"), id="t3")
        await ui.until(p.TaskComplete, id="t3")
    body = user_texts(model.requests[0])[-1]
    assert body == (
        f"<skill>\n<name>deploy</name>\n<path>{path}</path>\n"
        "---\nname: deploy\ndescription: Deploy\n---\n1. build\n2. ship\n\n</skill>"
    )
    assert bad1.code == bad2.code == "bad_input"
    assert "that file is the skill 'deploy'" in bad1.message
    assert "must be the absolute path of a SKILL.md" in bad2.message
    assert user_texts(model.requests[1])[-1] == "still here"


async def test_a_dollar_mention_attaches_the_skill_in_every_face(tmp_path: Path) -> None:
    path = write_skill(user_skills(), "deploy", "deploy", "Deploy", "Ship it.\n")
    model = ScriptedModel([text_response("one"), text_response("two")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(say("Not $HOME: use $deploy."), id="t1")
        await ui.until(p.TaskComplete, id="t1")
        # Named by an item too: attached once. A skill broken since the catalogue was
        # read is left out, and the input still goes.
        await ui.submit(
            p.UserInput((p.TextInput("again $deploy"), p.SkillInput("deploy", str(path)))),
            id="t2",
        )
        await ui.until(p.TaskComplete, id="t2")
    first, second = (user_texts(r) for r in model.requests)
    assert first[-2] == "Not $HOME: use $deploy."
    assert first[-1].startswith(f"<skill>\n<name>deploy</name>\n<path>{path}</path>\n")
    assert sum(t.startswith("<skill>") for t in second) == 1  # server mode: this input's own
    assert second[-1].startswith("<skill>")
    assert second[-2] == "again $deploy"


async def test_a_mentioned_skill_that_broke_is_left_out(tmp_path: Path) -> None:
    path = write_skill(user_skills(), "deploy", "deploy", "Deploy")
    model = ScriptedModel([text_response("one"), text_response("two")])
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(p.ListSkills(), id="l1")  # the catalogue is read and kept
        await ui.until(p.ListSkillsResponse, id="l1")
        path.write_text("no front matter any more")
        await ui.submit(say("use $deploy"), id="t1")
        await ui.until(p.TaskComplete, id="t1")
    assert user_texts(model.requests[0])[-1] == "use $deploy"


# --- seed 000 over a real stdio server ---------------------------------------------------------


async def test_skills_list_in_the_seeds_shape_and_context_inspect(tmp_path: Path) -> None:
    path = write_skill(repo_skills(tmp_path), "review", "review", "Review a change")
    (user_skills() / "broken").mkdir(parents=True)
    (user_skills() / "broken" / "SKILL.md").write_text("no front matter")
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(
            tui_initialize(),
            req("2", "skills.list", force_reload=False),
            req("3", "context.inspect", include_skills=True),
        )
        assert (await ui.answer("1"))["result"]["server_capabilities"]["supports_skills_list"]
        listed = (await ui.answer("2"))["result"]
        inspected = (await ui.answer("3"))["result"]["skills"]
        await ui.server.send(req("4", "skills.list", force_reload="yes"))
        bad = await ui.answer("4")
        await finish(ui)
    (skill,) = listed["skills"]
    assert skill == {
        "id": skill["id"],
        "name": "review",
        "description": "Review a change",
        "path": str(path),
        "dir": str(path.parent),
        "scope": "repo",
        "mtime_ms": int(path.stat().st_mtime * 1000),
    }
    assert len(skill["id"]) == 24
    assert listed["errors"] == [
        {
            "path": str(user_skills() / "broken/SKILL.md"),
            "message": "missing YAML front matter delimited by ---",
        }
    ]
    assert listed["truncated"] is False
    assert inspected["catalog"] == listed
    assert (inspected["root_dir"], inspected["working_dir"]) == (str(tmp_path), str(tmp_path))
    assert bad["error"]["code"] == -32602
    assert "params.force_reload" in bad["error"]["message"]


async def test_a_mention_in_run_start_attaches_the_skill(tmp_path: Path) -> None:
    path = write_skill(user_skills(), "release-notes", "release-notes", "Notes", "Use the log.\n")
    model = ScriptedModel([text_response("Written.")])
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(
            tui_initialize(),
            req("2", "run.start", input={"type": "text", "text": "Not $HOME: do $release-notes."}),
        )
        run_id = (await ui.answer("2"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        await ui.server.send(req("3", "context.inspect", include_skills=True))
        loaded = (await ui.answer("3"))["result"]["skills"]["loaded_versions"]
        await finish(ui)
    texts = user_texts(model.requests[0])
    assert texts[-2] == "Not $HOME: do $release-notes."
    assert texts[-1].startswith(f"<skill>\n<name>release-notes</name>\n<path>{path}</path>\n")
    assert "Use the log." in texts[-1]
    assert loaded == [{"path": str(path), "mtime_ms": int(path.stat().st_mtime * 1000)}]


# --- the native dialect -----------------------------------------------------------------------


async def test_the_native_dialect_carries_list_skills_the_skill_item_and_plans(
    tmp_path: Path,
) -> None:
    path = write_skill(repo_skills(tmp_path), "deploy", "deploy", "Deploy it", "Ship.\n")
    plan = {"plan": [{"step": "ship", "status": "in_progress"}]}
    model = ScriptedModel(
        [function_call_response("update_plan", plan, call_id="c1"), text_response("Shipped.")]
    )
    async with ScriptedResponsesServer(model) as http:
        server = await StdioServer.start(http.base_url, tmp_path)
        try:
            await server.send(sub("l1", "list_skills"))
            listed = (await server.until("list_skills_response", id="l1"))["msg"]
            skill = {"type": "skill", "name": "deploy", "path": str(path)}
            await server.send(sub("t1", "user_input", items=[skill]))
            update = (await server.until("plan_update", id="t1"))["msg"]
            await server.until("task_complete", id="t1")
            await server.close_stdin()
            await server.to_end()
            assert await server.wait_exit() == 0, server.context()
        finally:
            await server.kill()
    assert listed["skills"] == [
        {"name": "deploy", "description": "Deploy it", "path": str(path), "scope": "repo"}
    ]
    assert listed["errors"] == []
    assert update == {
        "type": "plan_update",
        "plan": [{"step": "ship", "status": "in_progress"}],
        "explanation": None,
    }
    assert "<name>deploy</name>" in user_texts(model.requests[0])[-1]


def test_a_huge_catalogue_is_cut_and_says_so() -> None:
    skills = [p.SkillMetadata(f"s{n}", "d" * 1000, f"/w/s{n}/SKILL.md", "repo") for n in range(100)]
    text = catalogue_text(skills)
    assert text is not None
    listed = [line for line in text.splitlines() if line.startswith("- s")]
    assert 0 < len(listed) < 100
    assert sum(len(line) + 1 for line in listed) <= MAX_CATALOGUE_CHARS
    assert f"- ({100 - len(listed)} more skills not listed here for space)" in text
