"""Long ``shell.exec`` output, kept whole for the UI to page through (``tool_output_cache``).

``shell.exec`` answers at most 64 KiB of each stream inline; a stream cut there is
kept here and its id given as ``stdout_cache_id`` / ``stderr_cache_id``, as the
Codelia runtime protocol describes. ``tool.call {name: "tool_output_cache",
arguments: {ref_id, offset?, limit?}}`` reads it back by lines (Codelia's
tool of that name: ``offset`` 0-based, ``limit`` lines). The cache is the
connection's and bounded: at most :data:`MAX_ENTRIES` outputs and
:data:`MAX_BYTES` bytes in all, the oldest forgotten first; an id forgotten (or
never given) is -32602 saying so.
"""

from __future__ import annotations

import collections
import secrets
import weakref
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext

MAX_ENTRIES = 32
MAX_BYTES = 32 * 1024 * 1024
DEFAULT_LINES = 2000
MAX_READ_BYTES = 1024 * 1024
"""What one read answers at most (lines past it are left for the next read)."""


class OutputCache:
    """One connection's cached outputs, oldest first."""

    def __init__(self) -> None:
        self._texts: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._bytes = 0

    def keep(self, text: str) -> str:
        """Keep ``text``; its id."""
        ref_id = f"out_{secrets.token_hex(8)}"
        self._texts[ref_id] = text
        self._bytes += len(text.encode())
        while len(self._texts) > MAX_ENTRIES or (self._bytes > MAX_BYTES and len(self._texts) > 1):
            _, old = self._texts.popitem(last=False)
            self._bytes -= len(old.encode())
        return ref_id

    def read(self, ref_id: str, offset: int, limit: int) -> dict[str, Any]:
        text = self._texts.get(ref_id)
        if text is None:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: params.arguments.ref_id: no cached output {ref_id!r} "
                f"(never given on this connection, or forgotten: the cache keeps the last "
                f"{MAX_ENTRIES} outputs, {MAX_BYTES // (1024 * 1024)} MiB in all)",
            )
        lines = text.splitlines(keepends=True)
        taken: list[str] = []
        size = 0
        for line in lines[offset : offset + limit]:
            size += len(line.encode())
            if taken and size > MAX_READ_BYTES:
                break
            taken.append(line)
        end = offset + len(taken)
        return {
            "ref_id": ref_id,
            "content": "".join(taken),
            "offset": offset,
            "total_lines": len(lines),
            "next_offset": end if end < len(lines) else None,
        }


_CACHES: weakref.WeakKeyDictionary[RpcContext, OutputCache] = weakref.WeakKeyDictionary()


def cache_of(ctx: RpcContext) -> OutputCache:
    cache = _CACHES.get(ctx)
    if cache is None:
        cache = _CACHES[ctx] = OutputCache()
    return cache


@attrs.frozen
class CacheRead:
    ref_id: str
    offset: int = 0
    limit: int = DEFAULT_LINES


def read_cached(ctx: RpcContext, params: CacheRead) -> dict[str, Any]:
    if params.offset < 0 or params.limit < 1:
        raise RpcError(
            INVALID_PARAMS,
            "Invalid params: params.arguments: offset must be 0 or more, limit 1 or more",
        )
    return cache_of(ctx).read(params.ref_id, params.offset, params.limit)


CACHE_READ_RESULT = {
    "type": "object",
    "properties": {
        "ref_id": {"type": "string"},
        "content": {"type": "string"},
        "offset": {"type": "integer"},
        "total_lines": {"type": "integer"},
        "next_offset": {"type": ["integer", "null"]},
    },
    "required": ["ref_id", "content", "offset", "total_lines", "next_offset"],
}
