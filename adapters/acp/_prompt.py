"""A ``session/prompt``'s content blocks as the engine's input items.

Text is text; an image is an image input (a web address as it is, else a data
URL), refused when the model is not known to take images; a resource link is
the file's text (the editor's buffer when it offers ``fs/read_text_file``, else
the disk, up to 1 MiB, a regular file only: a FIFO or a device is named as
unreadable) or, not a file, the link itself; an embedded resource is its text, an
image, or a line naming a binary. File text is wrapped in ``<context ref>``, as
Codex's own ACP agent does. Audio is refused (``promptCapabilities.audio`` is false).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import unquote, urlsplit

from acp import RequestError
from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from codexcore._logging import get_logger
from codexcore.protocol import ImageInput, InputItem, TextInput
from codexcore.tools._safe_read import read_head

from ._session import READ_LIMIT, AcpSession

log = get_logger(__name__)


async def prompt_input(session: AcpSession, block: Any) -> list[InputItem]:
    """One prompt content block as input items."""
    agent = session.agent
    if isinstance(block, TextContentBlock):
        return [TextInput(block.text)]
    if isinstance(block, ImageContentBlock) and not agent.takes_images:
        model = agent.config.session.model
        raise RequestError(-32602, f"the model {model!r} is not known to take images", None)
    if isinstance(block, ImageContentBlock):
        web = block.uri if block.uri and _is_web(block.uri) else None
        return [ImageInput(web or _data_url(block.mime_type, block.data))]
    if isinstance(block, ResourceContentBlock):
        return [TextInput(await _linked(session, block.uri, block.name))]
    if isinstance(block, EmbeddedResourceContentBlock):
        return [_embedded(block.resource)]
    if isinstance(block, AudioContentBlock):
        raise RequestError(
            -32602, "audio prompts are not supported (promptCapabilities.audio is false)", None
        )
    raise RequestError(-32602, f"unsupported prompt content: {type(block).__name__}", None)


async def _linked(session: AcpSession, uri: str, name: str) -> str:
    """A resource link: a file's text (the editor's buffer when it offers
    ``fs/read_text_file``, else the disk), or the link itself."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return f"[@{name}]({uri})"
    path = unquote(parts.path)
    agent = session.agent
    if agent.can_read:
        try:
            content: str | None = (
                await agent.conn.read_text_file(session_id=session.id, path=path)
            ).content
        except RequestError as exc:
            log.warning("editor could not read a linked file", path=path, error=str(exc))
            content = None
    else:
        try:
            content = await asyncio.to_thread(_read_disk, path)
        except OSError as exc:
            log.warning("a linked file cannot be read", path=path, error=str(exc))
            return f"[@{name}]({uri}) (could not be read: {exc.strerror or exc})"
    if content is None:
        return f"[@{name}]({uri}) (could not be read)"
    return _context(uri, content)


def _read_disk(path: str) -> str:
    """The linked file's text, up to :data:`READ_LIMIT` bytes; opened without blocking,
    so a FIFO or a device is an ``OSError`` saying what it is, never a wait."""
    return read_head(path, READ_LIMIT)[0].decode("utf-8", "replace")


def _is_web(uri: str) -> bool:
    return urlsplit(uri).scheme in ("http", "https")


def _data_url(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


def _context(uri: str, content: str) -> str:
    return f'<context ref="{uri}">\n{content}\n</context>'


def _embedded(resource: TextResourceContents | BlobResourceContents) -> InputItem:
    if isinstance(resource, TextResourceContents):
        return TextInput(_context(resource.uri, resource.text))
    mime = resource.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return ImageInput(_data_url(mime, resource.blob))
    return TextInput(f"[binary resource {resource.uri} ({mime}), not shown]")
