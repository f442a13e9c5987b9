"""``$/cancelRequest`` (as in LSP): a client cancels one of its requests still running.

The request's handler task is cancelled; :func:`~._server.run_call` answers it
with -32800 (``REQUEST_CANCELLED``). A handler that started work
beyond its own task (a Task on the engine) undoes it when cancelled: the chat
protocol's requests interrupt their Task once no request waits for it.
"""

from __future__ import annotations

from typing import Any

import attrs

from codexcore._logging import get_logger

from ._methods import MethodTable
from ._server import RpcContext

log = get_logger(__name__)


@attrs.frozen
class CancelParams:
    """``$/cancelRequest``: ``{id}``, the id of a request of this connection."""

    id: Any


async def cancel_request(ctx: RpcContext, params: CancelParams) -> bool:
    """``$/cancelRequest`` (as in LSP): the named request, if it still runs, is cancelled
    and answered -32800; the result (when sent as a request) says whether it ran."""
    valid = isinstance(params.id, int | float | str) and not isinstance(params.id, bool)
    cancelled = valid and ctx.cancel(params.id)  # no request has another kind of id
    log.info("cancel request", request=str(params.id), running=cancelled)
    return cancelled


def add_cancel_method(table: MethodTable) -> None:
    """Add ``$/cancelRequest``: admitted beyond the bound on calls in flight, run at once."""
    table.add(
        "$/cancelRequest",
        cancel_request,
        CancelParams,
        bounded=False,
        inline=True,
        summary="(A notification) cancel a running request: it is answered -32800",
        result={"type": "boolean"},
    )
