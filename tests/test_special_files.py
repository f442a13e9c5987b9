"""Paths that are not regular files (issue 26, items 3-5): FIFOs, devices, links to them.

Each is read by a real engine on the scripted model, or by the reader every such
read goes through; each must end at once with a clear error or a skip-and-warn,
and a Task must end with exactly one terminal event (``running_engine`` checks).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codexcore import protocol as p
from codexcore.protocol import LocalImageInput, UserInput
from codexcore.testing import ScriptedModel, function_call_response, shell_call, text_response
from codexcore.tools._safe_read import (
    FileRefused,
    FileTooLarge,
    NotRegularFile,
    read_head,
    read_regular,
)

from .engine_helpers import running_engine
from .flows import outputs_sent
from .test_engine import say

pytestmark = pytest.mark.anyio


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    yield path
    server.close()


# --- the reader ----------------------------------------------------------------------------


def test_a_fifo_is_refused_at_once_naming_what_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile) as caught:
        read_regular(str(fifo), 100)
    assert str(caught.value) == f"{fifo} is a FIFO (named pipe), not a regular file"
    assert caught.value.strerror == "is a FIFO (named pipe), not a regular file"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_and_links_to_them_are_refused(tmp_path: Path, device: str) -> None:
    link = tmp_path / "data.txt"
    link.symlink_to(device)
    for path in (device, str(link)):
        with pytest.raises(NotRegularFile, match="is a character device, not a regular file"):
            read_regular(path, 100)
        with pytest.raises(NotRegularFile):
            read_head(path, 100)


def test_no_follow_refuses_a_link_and_within_keeps_reads_inside(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("key")
    (inside / "ok").write_text("fine")
    (inside / "link").symlink_to(outside / "secret")
    (inside / "near").symlink_to(inside / "ok")
    with pytest.raises(NotRegularFile, match="is a symbolic link"):
        read_regular(str(inside / "near"), 100, follow_links=False)
    with pytest.raises(FileRefused, match="leads outside the allowed folders"):
        read_regular(str(inside / "link"), 100, within=[str(inside)])
    assert read_regular(str(inside / "near"), 100, within=[str(inside)]) == b"fine"


def test_directories_sockets_and_limits(tmp_path: Path, unix_socket: Path) -> None:
    with pytest.raises(NotRegularFile, match="is a directory"):
        read_regular(str(tmp_path), 100)
    with pytest.raises(NotRegularFile, match="is a socket"):
        read_regular(str(unix_socket), 100)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(FileTooLarge, match=r"over the 100-byte limit \(101 bytes\)"):
        read_regular(str(big), 100)
    assert read_head(str(big), 10) == (b"x" * 10, 101)
    with pytest.raises(FileNotFoundError):
        read_regular(str(tmp_path / "absent"), 100)


# --- the turn diff (item 3, 4) -------------------------------------------------------------


SWAPS = {
    "fifo": "rm data.txt && mkfifo data.txt",
    "dev_zero": "rm data.txt && ln -s /dev/zero data.txt",
    "dev_urandom": "rm data.txt && ln -s /dev/urandom data.txt",
}


@pytest.mark.parametrize("swap", sorted(SWAPS))
async def test_a_command_swapping_a_file_for_a_special_one_ends_its_task(
    workspace: Path, swap: str
) -> None:
    (workspace / "data.txt").write_text("before\n")
    (workspace / "other.txt").write_text("old\n")
    command = f"{SWAPS[swap]} && echo new > other.txt"
    model = ScriptedModel([shell_call(["bash", "-c", command]), text_response("done")])
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("swap it"), id="t1")
        await ui.until(p.TaskComplete, id="t1", within=20)
    assert ui.of(p.ExecCommandEnd)[0].exit_code == 0
    diff = ui.of(p.TurnDiff)[0].unified_diff
    assert "diff --git a/data.txt b/data.txt\ndeleted file mode 100644\n" in diff
    assert "+new\n" in diff  # the rest of the Turn's changes are still shown
    kind = "a FIFO (named pipe)" if swap == "fifo" else "a character device"
    warnings = [w.message for w in ui.of(p.WarningEvent)]
    assert f"data.txt is {kind}, not a regular file: the turn diff shows it as removed" in warnings


# --- apply_patch on special files (item 5) -------------------------------------------------


def patch_update(path: str) -> str:
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch"


@pytest.mark.parametrize("target", ["/dev/urandom", "/dev/zero", "fifo"])
async def test_a_patch_on_a_special_file_fails_before_any_approval(
    workspace: Path, target: str
) -> None:
    if target == "fifo":
        os.mkfifo(workspace / "pipe.txt")
        target, kind = "pipe.txt", "a FIFO (named pipe)"
    else:
        kind = "a character device"
    call = function_call_response("apply_patch", {"input": patch_update(target)}, call_id="p1")
    model = ScriptedModel([call, text_response("gave up")])
    async with running_engine(model, workspace, approval_policy="untrusted") as ui:
        await ui.submit(say("patch it"), id="t1")
        await ui.until(p.TaskComplete, id="t1", within=20)
    assert ui.of(p.ApplyPatchApprovalRequest) == []
    assert ui.of(p.PatchApplyBegin) == []
    output = outputs_sent(model.requests[-1])["p1"]
    assert output.startswith("error: patch not applied, nothing changed:")
    assert f"{target} is {kind}, not a regular file" in output


async def test_a_patch_over_the_size_limit_says_the_limit(workspace: Path) -> None:
    from codexcore.tools._patch_fs import MAX_PATCH_FILE_BYTES

    (workspace / "huge.txt").touch()
    os.truncate(workspace / "huge.txt", MAX_PATCH_FILE_BYTES + 1)  # sparse: nothing written
    call = function_call_response("apply_patch", {"input": patch_update("huge.txt")})
    model = ScriptedModel([call, text_response("ok")])
    async with running_engine(model, workspace, approval_policy="never") as ui:
        await ui.submit(say("patch it"))
        await ui.until(p.TaskComplete, within=20)
    output = next(iter(outputs_sent(model.requests[-1]).values()))
    assert f"apply_patch edits files up to {MAX_PATCH_FILE_BYTES} bytes" in output


# --- other inputs the engine reads ---------------------------------------------------------


async def test_a_local_image_that_is_a_fifo_is_rejected_and_the_engine_goes_on(
    workspace: Path,
) -> None:
    fifo = workspace / "cat.png"
    os.mkfifo(fifo)
    model = ScriptedModel([text_response("still here")])
    async with running_engine(model, workspace) as ui:
        await ui.submit(UserInput((LocalImageInput(str(fifo)),)), id="bad")
        error = await ui.until(p.ErrorEvent, id="bad", within=10)
        assert error.msg.code == "bad_input"
        assert f"local_image {fifo}: is a FIFO (named pipe), not a regular file" in (
            error.msg.message
        )
        await ui.submit(say("hello"), id="ok")
        await ui.until(p.TaskComplete, id="ok")


async def test_an_agents_md_swapped_for_a_fifo_is_left_out_with_a_warning(
    workspace: Path,
) -> None:
    """The discovery sees a file; by the read it is a FIFO (a command swapped it)."""
    from codexcore.engine._instructions import read_project_docs

    (workspace / ".git").mkdir()
    doc = workspace / "AGENTS.md"
    doc.write_text("rules\n")
    os.remove(doc)
    os.mkfifo(doc)
    docs = read_project_docs(str(workspace), None, 1000)
    assert docs.text == ""
    assert docs.warnings == (
        f"cannot read {doc}: is a FIFO (named pipe), not a regular file; it is left out",
    )


if sys.platform != "linux":  # pragma: no cover - the suite runs on Linux
    pytestmark = pytest.mark.skip(reason="Linux special files")
