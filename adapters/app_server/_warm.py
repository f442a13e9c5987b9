"""What a thread's first Task would otherwise load inside its first Turn."""

from __future__ import annotations


def warm_up() -> None:
    """Import the model's client (httpx, and what httpx loads with its first client and
    request: httpcore, h11, anyio's asyncio backend) and the tool stack: a few hundred ms
    that the engine loads lazily with the first Task. The server starts this beside the
    handshake (``initialize``), and a thread is answered once it is done, so that no
    Turn pays it. Idempotent: after the first call it costs a dictionary look-up."""
    import anyio._backends._asyncio  # noqa: F401
    import h11  # noqa: F401
    import httpcore._async.http11
    import httpcore._backends.anyio  # noqa: F401

    import codexcore.engine._tools
    import codexcore.model._client  # noqa: F401
