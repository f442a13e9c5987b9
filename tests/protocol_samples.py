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
    ),
    p.UserInput(
        (
            p.TextInput("hi"),
            p.ImageInput("https://example.com/cat.png"),
            p.LocalImageInput("/tmp/cat.png"),
        ),
        last_response_id="resp_1",
    ),
    p.InjectInput((p.TextInput("also this"),)),
    p.Interrupt(),
    p.ExecApproval("call_1", "approved_for_session"),
    p.PatchApproval("call_2", "denied"),
    p.Shutdown(),
]

EVENT_MSGS: list[Any] = [
    p.SessionConfigured(
        "sess_1", "gpt-5", "/work", "untrusted", SANDBOX, "server", "high", "bwrap", None
    ),
    p.TaskStarted(),
    p.AgentMessage("Done."),
    p.AgentMessageDelta("Do"),
    p.AgentReasoning("Thinking about it"),
    p.AgentReasoningDelta("Think"),
    p.ExecApprovalRequest("call_1", ("rm", "-rf", "build"), "/work", "cleans the build"),
    p.ExecCommandBegin("call_1", ("ls", "-l"), "/work"),
    p.ExecCommandOutputDelta("call_1", "stdout", b"total 0\n\xff"),
    p.ExecCommandEnd("call_1", "total 0\n", "", "total 0\n", 0, 12, "completed"),
    p.ApplyPatchApprovalRequest("call_2", CHANGES, "writes outside the workspace", "/srv"),
    p.PatchApplyBegin("call_2", True, CHANGES),
    p.PatchApplyEnd("call_2", "Success. Updated the following files:\nA new.txt\n", "", True),
    p.TurnDiff("diff --git a/x b/x\n"),
    p.TurnComplete("resp_2"),
    p.TaskComplete("Done.", "resp_2"),
    p.TokenCount(100, 20, 50, 10, 150),
    p.WarningEvent("sandbox unavailable"),
    p.StreamError("server error 500; retrying", 1, 5),
    p.ErrorEvent("interrupted by the model provider", "retries_exhausted"),
    p.TurnAborted("interrupted"),
    p.SubmissionAck("sub-1", False),
    p.ShutdownComplete(),
]
