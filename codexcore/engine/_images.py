"""The built-in ``view_image`` tool: the model looks at a local image of the workspace.

The file must lie inside the workspace (the Session's cwd or a writable root, symlinks
resolved), be a PNG, JPEG, GIF or WebP by its content (its first bytes, whatever its
name says) and be at most :data:`MAX_IMAGE_BYTES`. Then it is attached to the model's
next request as an ``input_image`` (a data URL) in a user message, as Codex's
``view_image`` does, and ``view_image_tool_call`` is sent. Anything else is an error
for the model naming the problem; nothing is attached and no event is sent.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import attrs

from ..protocol._value import Value
from ..tools._safe_read import FileRefused, FileTooLarge, read_regular
from ._history import Item

VIEW_IMAGE_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "view_image",
    "description": (
        "Attach a local image (PNG, JPEG, GIF or WebP inside the workspace) to the "
        "conversation, so you can see it. Use it for images the user names or that a "
        "command produced."
    ),
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The image file, absolute or relative to the working directory.",
            }
        },
        "required": ["path"],
        "additionalProperties": False,
    },
}

MAX_IMAGE_BYTES = 10 * 1024 * 1024
"""The largest image attached (the Responses API takes images up to 50 MB per request)."""

_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),  # after "RIFF" and the chunk size
)


class ImageError(ValueError):
    """The image cannot be attached; the message names the problem, for the model."""


@attrs.frozen(repr=False, eq=False)
class ViewedImage(Value):
    path: str  # absolute, symlinks resolved
    mime: str
    size: int
    data_url: str


def sniff_image_type(head: bytes) -> str | None:
    """The MIME type of an image from its first bytes (at least 12), or None."""
    for magic, offset, mime in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            if mime == "image/webp" and not head.startswith(b"RIFF"):
                continue
            return mime
    return None


def load_image(
    raw_path: str, cwd: str, roots: list[str], limit: int = MAX_IMAGE_BYTES
) -> ViewedImage:
    """Read and check the image ``raw_path`` (relative to ``cwd``); ``roots`` are where
    it may lie. Blocking: call it off the event loop."""
    if not raw_path or "\0" in raw_path:
        raise ImageError("'path' must be a non-empty path without NUL bytes")
    path = os.path.realpath(os.path.join(cwd, os.path.expanduser(raw_path)))
    if not any(_inside(path, os.path.realpath(root)) for root in roots):
        raise ImageError(
            f"{raw_path} is outside the workspace ({', '.join(roots)}); "
            "view_image only reads images inside it"
        )
    data = _read_regular(path, raw_path, limit)
    mime = sniff_image_type(data[:16])
    if mime is None:
        raise ImageError(
            f"{raw_path} is not a PNG, JPEG, GIF or WebP image (checked by its content)"
        )
    encoded = base64.b64encode(data).decode("ascii")
    return ViewedImage(path, mime, len(data), f"data:{mime};base64,{encoded}")


def _read_regular(path: str, raw_path: str, limit: int) -> bytes:
    """All of the regular file ``path`` (already resolved: a link put in its place since
    is refused), opened without blocking and read no further than ``limit``."""
    try:
        return read_regular(path, limit, follow_links=False)
    except FileTooLarge as exc:
        raise ImageError(
            f"{raw_path} is {exc.size} bytes; images up to {limit} bytes are attached"
        ) from None
    except FileRefused as exc:
        raise ImageError(f"{raw_path} {exc.problem}") from None
    except OSError as exc:
        raise ImageError(f"cannot read {raw_path}: {exc.strerror or exc}") from None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def image_message(image: ViewedImage) -> Item:
    """The user message that shows the model the image with its next request."""
    return {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": f"<image path={image.path!r}> (from view_image)"},
            {"type": "input_image", "image_url": image.data_url, "detail": "auto"},
        ],
    }


def attached(image: ViewedImage) -> str:
    """What the model is told of the call: where the image is."""
    return f"attached {image.path} ({image.mime}, {image.size} bytes); it follows as an image"
