"""Reading a control request's line: longer than other lines may be (``docs/control.md``).

Inline content up to the hard limit must reach the receiver, and content over
it must get its ``rejected`` ack carrying its ``request_id``, so a control stdin
request's line may be up to :meth:`ControlConfig.line_bytes` long, beyond the
server's ``max_line_bytes`` for every other line. Light on purpose: every
connection's reader is built here, and the envelopes' module is loaded only with
the first control request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from codexcore.adapters.transports._conduit import Conduit, Lines

if TYPE_CHECKING:
    from codexcore.adapters.host._config import HostConfig


def is_control_stdin(line: bytes) -> bool:
    """Whether ``line`` is a control stdin request, in either dialect (a native line
    of that ``type``, or a JSON-RPC call of ``control.stdin``)."""
    if b'"control.stdin' not in line:
        return False
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(value, dict):
        return False
    if value.get("type") == "control.stdin.request" and "op" not in value:
        return True
    return value.get("method") == "control.stdin"


def control_lines(conduit: Conduit, config: HostConfig) -> Lines:
    """A connection's lines: ``max_line_bytes`` each, a control stdin request's longer."""
    wide = config.control.line_bytes(config.max_line_bytes)
    return Lines(conduit, config.max_line_bytes, wide=wide, admit=is_control_stdin)
