"""One sample of every wire variant, shared by the round-trip and golden tests."""

from __future__ import annotations

from typing import Any

from codexcore import protocol as p

SANDBOX = p.SandboxPolicy("workspace-write", ("/work/extra",), network_access=True)
CHANGES: dict[str, p.FileChange] = {
    "/work/new.txt": p.AddChange("hello\n"),
    "/work/old.txt": p.DeleteChange("bye\n"),
    "/work/src.py": p.UpdateChange("@@ -1 +1 @@\n-a\n+b\n", move_path="/work/dst.py"),
}

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
    "additionalProperties": False,
}

EDITOR_TOOL = p.DynamicToolSpec(
    "editor_selection",
    "The open editor's path and selection.",
    {"type": "object", "properties": {"include_text": {"type": "boolean"}}},
)

OPS: list[Any] = [
    p.ConfigureSession(
        model="gpt-5",
        instructions="Be brief.",
        cwd="/work",
        approval_policy="on-request",
        sandbox_policy=SANDBOX,
        history_mode="client",
        reasoning_effort="low",
        base_url="http://127.0.0.1:8080/v1",
        model_supports_reasoning_summaries=False,
        reasoning_summary="concise",
        ask_user=True,
        dynamic_tools=(EDITOR_TOOL,),
        dynamic_tool_timeout_ms=60000,
    ),
    p.UserInput(
        (
            p.TextInput("hi"),
            p.ImageInput("https://example.com/cat.png"),
            p.LocalImageInput("/tmp/cat.png"),
            p.SkillInput("release-notes", "/work/.codexcore/skills/release-notes/SKILL.md"),
        ),
        last_response_id="resp_1",
        output_schema=ANSWER_SCHEMA,
    ),
    p.InjectInput((p.TextInput("also this"),)),
    p.UserTurn(
        (p.TextInput("now in src"),),
        cwd="/work/src",
        approval_policy="never",
        sandbox_policy=SANDBOX,
        model="gpt-5-mini",
        effort="low",
        summary="detailed",
        output_schema=ANSWER_SCHEMA,
    ),
    p.OverrideTurnContext(
        cwd="/work/src",
        approval_policy="on-request",
        sandbox_policy=p.SandboxPolicy("read-only"),
        model="gpt-5.1-codex",
        effort="high",
        summary="none",
        dynamic_tools=(),
    ),
    p.Interrupt(),
    p.RunUserShellCommand("git status --short", timeout_ms=30000, cwd="src"),
    p.WritePty("y\n", call_id="user_shell_0123456789ab"),
    p.Stop(),
    p.Checkpoint(),
    p.ExecApproval("call_1", "approved_for_session"),
    p.PatchApproval("call_2", "denied", reason="keep the config as it is"),
    p.ListSessions(cwd="/work", limit=20),
    p.ResumeSession("sess_1"),
    p.ForkSession("sess_1", "resp_1"),
    p.GetHistory("sess_1", offset=10, limit=100),
    p.Compact(),
    p.ListMcpTools(),
    p.ListSkills(("/work", "/work/sub"), force_reload=True),
    p.UserInputAnswer(
        "call_4",
        p.RequestUserInputResponse(
            {
                "storage": p.RequestUserInputAnswer(("SQLite (Recommended)",)),
                "extras": p.RequestUserInputAnswer(("Search", "Export")),
            }
        ),
    ),
    p.DynamicToolResponse(
        "call_5",
        "src/app.py, lines 10-12 selected",
        success=True,
        content_items=(
            p.DynamicToolOutputText("src/app.py, lines 10-12 selected"),
            p.DynamicToolOutputImage("data:image/png;base64,iVBORw0KGgo="),
        ),
    ),
    p.Shutdown(),
]

EVENT_MSGS: list[Any] = [
    p.SessionConfigured(
        "sess_1", "gpt-5", "/work", "untrusted", SANDBOX, "server", "high", "bwrap", None
    ),
    p.TaskStarted(400000),
    p.UserMessage("What is in this picture?", ("https://example.com/cat.png",)),
    p.AgentMessage("Done."),
    p.AgentMessageDelta("Do"),
    p.AgentReasoning("Thinking about it"),
    p.AgentReasoningDelta("Think"),
    p.ExecApprovalRequest("call_1", ("rm", "-rf", "build"), "/work", "cleans the build"),
    p.ExecCommandBegin("call_1", ("ls", "-l"), "/work"),
    p.ExecCommandOutputDelta("call_1", "stdout", b"total 0\n\xff"),
    p.ExecCommandEnd(
        "call_1", "total 0\n", "", "total 0\n", 0, 12, "completed", source="user_shell"
    ),
    p.ApplyPatchApprovalRequest(
        "call_2",
        CHANGES,
        "writes outside the writable roots: new.txt -> /srv/new.txt",
        resolved_paths={
            "/work/new.txt": "/srv/new.txt",
            "/work/old.txt": "/work/old.txt",
            "/work/src.py": "/work/src.py",
            "/work/dst.py": "/work/dst.py",
        },
    ),
    p.PatchApplyBegin("call_2", True, CHANGES),
    p.PatchApplyEnd("call_2", "Success. Updated the following files:\nA new.txt\n", "", True),
    p.TurnDiff("diff --git a/x b/x\n"),
    p.TurnComplete("resp_2", "gpt-5.1-codex", "2026-01-02T03:04:05.678Z", 1234),
    p.TaskComplete("Done.", "resp_2", stopped_by="checkpoint"),
    p.TokenCount(
        100,
        20,
        50,
        10,
        150,
        info=p.TokenUsageInfo(
            p.TokenUsage(300, 120, 90, 30, 390), p.TokenUsage(100, 20, 50, 10, 150), 400000
        ),
    ),
    p.WarningEvent("sandbox unavailable"),
    p.StreamError("server error 500; retrying", 1, 5),
    p.ErrorEvent("interrupted by the model provider", "retries_exhausted"),
    p.ContextCompactionStarted("context_window_exceeded"),
    p.ContextCompacted(),
    p.TurnAborted("interrupted"),
    p.SubmissionAck("sub-1", False),
    p.SessionList(
        (
            p.SessionSummary(
                "sess_1",
                "2026-11-22T12:00:00+00:00",
                "2026-11-22T12:05:00+00:00",
                "/work",
                "fix the tests",
                "now the docs",
                6,
                "/home/u/.codexcore/sessions/2026/11/22/rollout-2026-11-22T12-00-00-sess_1.jsonl",
                None,
                "codexcore:3f9a1c0b7d2e",
            ),
        )
    ),
    p.SessionHistory("sess_1", 0, 40, (p.Event("s1", 0, p.TaskStarted()),)),
    p.McpStartupUpdate("docs", p.McpStartupStatus("failed", "did not start within 10 s")),
    p.McpStartupComplete(
        ("search",), (p.McpStartupFailure("docs", "did not start within 10 s"),), ()
    ),
    p.McpToolCallBegin(
        "call_7", p.McpInvocation("search", "find", {"query": "codexcore", "limit": 3})
    ),
    p.McpToolCallEnd(
        "call_7",
        p.McpInvocation("search", "find", {"query": "codexcore", "limit": 3}),
        p.Duration(0, 41_500_000),
        {"Ok": {"content": [{"type": "text", "text": "3 results"}], "isError": False}},
    ),
    p.McpListToolsResponse(
        {
            "search__find": {
                "name": "find",
                "description": "Search the index.",
                "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
                "annotations": {"readOnlyHint": True},
            }
        },
        {"search": "unsupported"},
        (
            p.McpServerStatus("docs", "http", True, "failed", 0, "did not start within 10 s"),
            p.McpServerStatus(
                "search", "stdio", True, "ready", 1, None, "2026-11-25T16:00:00.000Z"
            ),
        ),
    ),
    p.PlanUpdate(
        (
            p.PlanItem("Read the failing test", "completed"),
            p.PlanItem("Fix the parser", "in_progress"),
        ),
        explanation="The test points at the parser.",
    ),
    p.ViewImageToolCall("call_3", "/work/screenshot.png"),
    p.ListSkillsResponse(
        (
            p.SkillMetadata(
                "release-notes",
                "Write release notes from the git log",
                "/work/.codexcore/skills/release-notes/SKILL.md",
                "repo",
            ),
        ),
        (p.SkillErrorInfo("/home/u/.codexcore/skills/broken/SKILL.md", "missing field `name`"),),
    ),
    p.RequestUserInput(
        "call_4",
        (
            p.RequestUserInputQuestion(
                "storage",
                "Storage",
                "Where should the notes be kept?",
                isOther=True,
                options=(
                    p.RequestUserInputQuestionOption(
                        "SQLite (Recommended)", "One file, queries, no server."
                    ),
                    p.RequestUserInputQuestionOption("JSON files", "Plain files, easy to diff."),
                ),
            ),
            p.RequestUserInputQuestion(
                "extras",
                "Extras",
                "Which extras do you want?",
                options=(
                    p.RequestUserInputQuestionOption("Search", "Full-text search."),
                    p.RequestUserInputQuestionOption("Export", "Export to Markdown."),
                ),
                multiSelect=True,
            ),
            p.RequestUserInputQuestion(
                "token", "API token", "Paste the service's API token.", isOther=True, isSecret=True
            ),
        ),
    ),
    p.DynamicToolCallRequest("call_5", "editor_selection", {"include_text": True}),
    p.ShutdownComplete(),
]

CONNECTION_MSGS: list[Any] = [
    p.Hello(
        1,
        p.Peer("my-ui", "0.3.0"),
        token="s3cret",
        session_id="7d7bcf52-3c38-4f4c-a0c3-4c1f0d1b8e6a",
        last_seq=41,
        control=True,
    ),
    p.Welcome(
        1,
        p.Peer("codexcore", "0.1.0"),
        ("acks", "coalesced_deltas", "control", "replay"),
        "7d7bcf52-3c38-4f4c-a0c3-4c1f0d1b8e6a",
        resumed=True,
        control=True,
        replay_from=42,
        replay_complete=True,
        limits=p.Limits(1048576, 600.0, 600.0),
        agent_id="codexcore:3f9a1c0b7d2e",
        control_messages=p.ControlMessages(1, True, True, False, 1048576),
    ),
    p.Refused("unauthorized", "the token is missing or wrong", (1,)),
    p.ControlChanged(False, "taken_over"),
    p.SubmissionRejected("s7", "not_controller", "this connection does not control the session"),
    p.Closing("lagged", "the client fell behind the replay buffer; reattach to resume"),
]
