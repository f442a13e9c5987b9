"""The built-in view_image tool: a workspace image, checked by content, sent to the model."""

from __future__ import annotations

import base64
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from codexcore import protocol as p
from codexcore.adapters.jsonrpc.codelia._events import RunView, build
from codexcore.engine._images import MAX_IMAGE_BYTES, sniff_image_type
from codexcore.testing import ScriptedModel, function_call_response, text_response

from .engine_helpers import running_engine
from .flows import outputs_sent

pytestmark = pytest.mark.anyio


def png_1x1() -> bytes:
    """A real one-pixel PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"


def say(text: str) -> p.UserInput:
    return p.UserInput((p.TextInput(text),))


async def view(tmp_path: Path, path: str) -> tuple[ScriptedModel, list[Any]]:
    """Run a Task whose model calls view_image(path); the model and the events seen."""
    model = ScriptedModel(
        [function_call_response("view_image", {"path": path}, call_id="v1"), text_response("Seen.")]
    )
    async with running_engine(model, tmp_path, approval_policy="never") as ui:
        await ui.submit(say("look"))
        await ui.until(p.TaskComplete)
    return model, [e.msg for e in ui.events]


def images_sent(request: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]
        for item in request["input"]
        if item.get("type") == "message"
        for part in item["content"]
        if part.get("type") == "input_image"
    ]


async def test_an_image_is_attached_to_the_next_request_and_announced(tmp_path: Path) -> None:
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "ui.png").write_bytes(png_1x1())
    model, events = await view(tmp_path, "shots/ui.png")
    expected = "data:image/png;base64," + base64.b64encode(png_1x1()).decode()
    assert images_sent(model.requests[1]) == [expected]
    assert images_sent(model.requests[0]) == []
    output = outputs_sent(model.requests[1])["v1"]
    assert output.startswith(f"attached {tmp_path / 'shots' / 'ui.png'} (image/png, ")
    calls = [m for m in events if isinstance(m, p.ViewImageToolCall)]
    assert calls == [p.ViewImageToolCall("v1", str(tmp_path / "shots" / "ui.png"))]
    # The image message follows the call's output, so the request is a valid conversation.
    kinds = [i.get("type") for i in model.requests[1]["input"]]
    assert kinds.index("function_call_output") < len(kinds) - 1
    assert model.requests[1]["input"][-1]["role"] == "user"


async def test_the_type_comes_from_the_content_not_the_name(tmp_path: Path) -> None:
    (tmp_path / "photo.txt").write_bytes(JPEG)
    (tmp_path / "fake.png").write_text("just text, named like an image\n")
    model, _ = await view(tmp_path, "photo.txt")
    assert images_sent(model.requests[1])[0].startswith("data:image/jpeg;base64,")
    model, events = await view(tmp_path, "fake.png")
    output = outputs_sent(model.requests[1])["v1"]
    assert "fake.png is not a PNG, JPEG, GIF or WebP image (checked by its content)" in output
    assert images_sent(model.requests[1]) == []
    assert not any(isinstance(m, p.ViewImageToolCall) for m in events)


@pytest.mark.parametrize(
    ("make", "path", "problem"),
    [
        (lambda ws, out: None, "missing.png", "cannot read missing.png: No such file"),
        (lambda ws, out: (out / "x.png").write_bytes(png_1x1()), "../outside/x.png", "outside"),
        (
            lambda ws, out: (
                (out / "x.png").write_bytes(png_1x1()),
                (ws / "link.png").symlink_to(out / "x.png"),
            ),
            "link.png",
            "outside the workspace",
        ),
        (lambda ws, out: (ws / "dir.png").mkdir(), "dir.png", "dir.png"),
        (lambda ws, out: os.mkfifo(ws / "pipe.png"), "pipe.png", "not a regular file"),
        (lambda ws, out: (ws / "empty.png").write_bytes(b""), "empty.png", "is not a PNG"),
    ],
    ids=["missing", "outside", "symlink-out", "directory", "fifo", "empty"],
)
async def test_what_cannot_be_attached_is_an_error_for_the_model(
    tmp_path: Path, make: Any, path: str, problem: str
) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    make(workspace, outside)
    model, events = await view(workspace, path)
    output = outputs_sent(model.requests[1])["v1"]
    assert output.startswith("error: view_image: "), output
    assert problem in output, output
    assert images_sent(model.requests[1]) == []
    assert not any(isinstance(m, p.ViewImageToolCall) for m in events)


async def test_an_image_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    with big.open("wb") as file:
        file.write(png_1x1())
        file.truncate(MAX_IMAGE_BYTES + 1)  # sparse: nothing written past the header
    model, _ = await view(tmp_path, "big.png")
    output = outputs_sent(model.requests[1])["v1"]
    assert f"is {MAX_IMAGE_BYTES + 1} bytes; images up to {MAX_IMAGE_BYTES} bytes" in output


def test_sniffing() -> None:
    assert sniff_image_type(png_1x1()) == "image/png"
    assert sniff_image_type(b"GIF89a" + bytes(10)) == "image/gif"
    assert sniff_image_type(b"RIFF\x10\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image_type(b"RIFF\x10\x00\x00\x00WAVEfmt ") is None
    assert sniff_image_type(b"%PDF-1.7\n") is None


def test_seed_000_shows_the_call_and_its_result() -> None:
    events = build(RunView("run-1"), p.ViewImageToolCall("v1", "/w/ui.png"))
    assert [(e["type"], e.get("tool")) for e in events] == [
        ("step_start", None),
        ("tool_call", "view_image"),
        ("tool_result", "view_image"),
    ]
    assert events[1]["args"] == {"file_path": "/w/ui.png"}
    assert events[2]["tool_call_id"] == "v1"
