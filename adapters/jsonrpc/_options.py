"""How JSON-RPC connections are served, without loading the JSON-RPC stack.

:class:`RpcOptions` lives apart from ``jsonrpc._server`` so that a transport
can be configured for both dialects while a connection that speaks the
native one never imports the JSON-RPC modules (``tests/test_import_guard.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from codexcore.protocol._value import Value

if TYPE_CHECKING:
    from ._methods import MethodTable


@attrs.frozen(repr=False, eq=False)
class RpcOptions(Value):
    """How JSON-RPC connections are served: their method table and their bound on calls.

    ``methods`` None serves the standard table (every seed's methods), built
    at the first JSON-RPC connection and shared by the connections after it.
    ``session_id`` binds every connection to that live session (a per-session
    control socket): its :meth:`RpcContext.session` attaches there instead of
    creating one.
    """

    methods: MethodTable | None = attrs.field(default=None, eq=False)
    max_pending: int = 100
    session_id: str | None = None
    diagnostics: bool = False
    """Send seed 000's opt-in ``run.diagnostics`` (``serve --diagnostics``)."""
