"""The engine's defaults and a Session's effective configuration."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .._api_key import DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, missing_key_message, needs_key
from ..protocol import (
    ApprovalPolicy,
    ConfigureSession,
    DynamicToolSpec,
    HistoryMode,
    OverrideTurnContext,
    ReasoningEffort,
    ReasoningSummary,
    SandboxPolicy,
    UserTurn,
)
from ..protocol._value import Value
from ._mcp_config import McpServerConfig
from ._models import ModelCatalog

if TYPE_CHECKING:
    import httpx

    from ..tools.exec import ExecResult

CommandRunner = Callable[[str, tuple[str, ...], str, int], Awaitable["ExecResult"]]
"""Runs a model command somewhere else: ``(call_id, argv, cwd, timeout_ms)`` -> its result.
See ``EngineConfig.command_runner``."""

DEFAULT_MODEL = "gpt-5-codex"
DEFAULT_INSTRUCTIONS = (
    "You are a coding agent working in the user's workspace. Use the shell tool to "
    "inspect and change files, keep the user informed in short messages, and finish "
    "with a brief summary of what you did."
)


@attrs.frozen(repr=False, eq=False)
class SessionConfig(Value):
    """What a Session runs with: the engine defaults overlaid by ``configure_session``.

    ``model_supports_reasoning_summaries`` says whether ``model`` takes
    ``reasoning`` options; None (the default) leaves it to the model catalogue
    (:mod:`codexcore.engine._models`). ``reasoning_effort`` is sent only to a
    model that takes reasoning options. ``ask_user`` is the UI's word that it can
    answer the model's questions: only then is the model offered the
    ``request_user_input`` tool (:mod:`codexcore.engine._ask_user`).
    ``dynamic_tools`` are the client's own tools and ``dynamic_tool_timeout_ms``
    how long a call of one waits for the client's answer
    (:mod:`codexcore.engine._dynamic_tools`).
    """

    model: str = DEFAULT_MODEL
    instructions: str = DEFAULT_INSTRUCTIONS
    cwd: str = attrs.field(factory=os.getcwd)
    approval_policy: ApprovalPolicy = "on-request"
    sandbox_policy: SandboxPolicy = attrs.field(factory=SandboxPolicy)
    history_mode: HistoryMode = "server"
    reasoning_effort: ReasoningEffort | None = None
    model_supports_reasoning_summaries: bool | None = None
    base_url: str | None = None
    reasoning_summary: ReasoningSummary = "auto"
    ask_user: bool = False
    dynamic_tools: tuple[DynamicToolSpec, ...] = ()
    dynamic_tool_timeout_ms: int = 300_000

    def overlay(self, op: ConfigureSession) -> SessionConfig:
        """This configuration with every field that ``op`` sets replaced."""
        changes = {
            field.name: getattr(op, field.name)
            for field in attrs.fields(ConfigureSession)
            if getattr(op, field.name) is not None
        }
        if "cwd" in changes:
            changes["cwd"] = os.path.abspath(changes["cwd"])
        return attrs.evolve(self, **changes)

    def with_turn_settings(self, op: OverrideTurnContext | UserTurn) -> SessionConfig:
        """This configuration under the per-turn settings ``op`` sets.

        Raises :class:`BadTurnContext` naming the first bad field: a ``cwd``
        (relative ones are taken from this one's) that is not a directory, a
        blank ``model``, a writable root that is not an absolute path.
        """
        changes: dict[str, object] = {}
        if op.cwd is not None:
            cwd = os.path.normpath(os.path.join(self.cwd, os.path.expanduser(op.cwd)))
            if not os.path.isdir(cwd):
                raise BadTurnContext("cwd", f"{cwd} is not a directory")
            changes["cwd"] = cwd
        if op.model is not None:
            if not op.model.strip():
                raise BadTurnContext("model", "must not be blank")
            changes["model"] = op.model.strip()
        if op.sandbox_policy is not None:
            for root in op.sandbox_policy.writable_roots:
                if not os.path.isabs(root):
                    raise BadTurnContext(
                        "sandbox_policy.writable_roots", f"{root!r} is not an absolute path"
                    )
            changes["sandbox_policy"] = op.sandbox_policy
        if op.approval_policy is not None:
            changes["approval_policy"] = op.approval_policy
        if op.effort is not None:
            changes["reasoning_effort"] = op.effort
        if op.summary is not None:
            changes["reasoning_summary"] = op.summary
        if isinstance(op, OverrideTurnContext) and op.dynamic_tools is not None:
            changes["dynamic_tools"] = op.dynamic_tools
        return attrs.evolve(self, **changes)  # type: ignore[arg-type]


class BadTurnContext(ValueError):
    """A per-turn setting that cannot be taken; ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


@attrs.frozen(repr=False, eq=False)
class EngineConfig(Value):
    """How a :class:`~codexcore.Codex` engine behaves.

    ``session`` holds the defaults a Session starts from. ``api_key`` falls
    back to ``OPENAI_API_KEY`` and ``session.base_url`` to ``OPENAI_BASE_URL``
    (read when the model client is made, never logged); ``headers`` are added
    to every model request. ``home`` is where sessions are recorded (default
    ``$CODEXCORE_HOME``, else ``~/.codexcore``); an ``ephemeral`` engine
    records nothing. The queues are
    bounded: a UI that does not read events eventually pauses the engine
    rather than growing its memory.

    With ``acknowledge_submissions`` every accepted submission is answered by
    ``submission_ack``, and an id accepted within ``duplicate_ttl`` seconds is
    acknowledged as a duplicate and not run again: what makes a client's
    resend after a reconnect safe.

    ``model_auto_compact_token_limit`` is the total tokens (of a response's usage)
    at which a Task compacts its conversation between two Turns; None (the
    default) means 90% of the model's context window (``engine._models``).
    ``command_runner`` runs the model's *unconfined* commands (those the policy
    lets run outside the sandbox) somewhere else, such as an editor's terminal;
    confined ones always run here, under bubblewrap. The engine still sends
    ``exec_command_begin`` and ``exec_command_end`` around it (no output
    deltas: the output is shown where it runs). Cancelled with the Task, the
    runner must stop the command before it returns.
    ``mcp_servers`` are the MCP servers (by name) every Session starts, in
    parallel, as it is created (see :mod:`codexcore.engine._mcp`); their tools
    are offered to the model beside the built-in ones.

    ``response_header_timeout`` is how many seconds a model request may wait
    for its response's headers, ``stream_idle_timeout`` how many the streamed
    body may then stay silent; either failing is retried like a dropped
    connection (up to ``max_attempts``).

    ``pty_commands`` runs the model's commands (those run here) each in a
    terminal of its own, a PTY (``codexcore exec --interactive``): a program
    that wants a terminal gets one, ``write_pty`` types into it while it runs,
    and its output (stdout and stderr merged) streams as ``stdout``.

    ``models`` is the model catalogue (limits, prices, reasoning support), with
    ``config.toml``'s per-model overrides. ``project_doc_max_bytes`` caps the
    AGENTS.md text sent to the model (0: none is read).
    """

    session: SessionConfig = attrs.field(factory=SessionConfig)
    api_key: str | None = attrs.field(default=None, repr=False)
    headers: dict[str, str] = attrs.field(factory=dict, repr=False)
    home: str | None = None
    ephemeral: bool = False
    max_attempts: int = 5
    retry_base_delay: float = 0.2
    stream_idle_timeout: float = 300.0
    response_header_timeout: float = 60.0
    submission_queue_size: int = 64
    event_queue_size: int = 1024
    exec_timeout_ms: int = 120_000
    exec_output_limit: int = 10_000
    acknowledge_submissions: bool = False
    duplicate_ttl: float = 600.0
    models: ModelCatalog = attrs.field(factory=ModelCatalog)
    project_doc_max_bytes: int = 32 * 1024
    model_auto_compact_token_limit: int | None = None
    command_runner: CommandRunner | None = attrs.field(default=None, repr=False, eq=False)
    pty_commands: bool = False
    mcp_servers: Mapping[str, McpServerConfig] = attrs.field(factory=dict, repr=False)

    def missing_key(self) -> str | None:
        """Why model requests would go out unauthenticated, or None when they would not.

        A key is missing when ``api_key`` is None (so ``$OPENAI_API_KEY`` is
        read), that variable is unset or empty, and the base URL is OpenAI's
        API, which refuses every request without one. ``api_key=""`` says "no
        key" on purpose (a local server), and is never missing.
        """
        if self.api_key is not None or os.environ.get(DEFAULT_API_KEY_ENV):
            return None
        base_url, url_from = self.session.base_url, "base_url"
        if not base_url:
            base_url = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
            url_from = "$OPENAI_BASE_URL" if os.environ.get("OPENAI_BASE_URL") else "the default"
        if not needs_key(base_url):
            return None
        return missing_key_message(
            DEFAULT_API_KEY_ENV,
            base_url.rstrip("/"),
            url_from=f"base_url from {url_from}",
            fix=(
                "Set it, pass api_key=..., or point base_url at a server that needs no "
                'key (api_key="" sends none).'
            ),
        )

    def with_client_options(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int | None = None,
        default_headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
    ) -> EngineConfig:
        """This configuration with the openai SDK's client options applied (None: unchanged).

        ``api_key`` and ``base_url`` as the SDK takes them; ``max_retries``
        counts retries after the first attempt (``max_attempts - 1``);
        ``default_headers`` are added to ``headers``; ``timeout`` (seconds, or
        an ``httpx.Timeout``, whose ``read`` part counts) is how long a model
        stream may stay silent (``stream_idle_timeout``). For every phase of
        httpx's timeout, pass an ``http_client`` made with it.
        """
        changes: dict[str, Any] = {}
        if api_key is not None:
            changes["api_key"] = api_key
        if base_url is not None:
            changes["session"] = attrs.evolve(self.session, base_url=base_url)
        if max_retries is not None:
            if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
                raise ValueError(f"max_retries must be a whole number >= 0, not {max_retries!r}")
            changes["max_attempts"] = max_retries + 1
        if default_headers is not None:
            changes["headers"] = {**self.headers, **default_headers}
        if timeout is not None:
            changes["stream_idle_timeout"] = _idle_seconds(timeout)
        return attrs.evolve(self, **changes) if changes else self


def _idle_seconds(timeout: float | httpx.Timeout) -> float:
    """The seconds a stream may stay silent under ``timeout`` (a number or an httpx.Timeout)."""
    seconds = timeout if isinstance(timeout, int | float) else timeout.read
    if seconds is None or isinstance(seconds, bool) or seconds <= 0:
        raise ValueError(
            f"timeout must be a positive number of seconds (or an httpx.Timeout with a "
            f"read timeout), not {timeout!r}: a model stream must not wait forever"
        )
    return float(seconds)
