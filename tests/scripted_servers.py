"""``serve``: a scripted model server on a thread, for tests that run real ``codexcore``
processes against it (the ``servers`` fixture, in ``tests/conftest.py``, stops them)."""

from __future__ import annotations

from codexcore.testing import Responder, ScriptedModel, ScriptedResponsesServer


def serve(
    servers: list[ScriptedResponsesServer], *script: Responder
) -> tuple[ScriptedModel, ScriptedResponsesServer]:
    """A scripted model and its server, started on a thread; stopped after the test."""
    model = ScriptedModel(script)
    servers.append(ScriptedResponsesServer(model).start_in_thread())
    return model, servers[-1]
