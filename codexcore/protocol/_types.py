"""Values shared by Ops and EventMsgs: input items, policies, file changes."""

from __future__ import annotations

from typing import Annotated, Literal

import attrs

from ._skills import SkillInput
from ._value import Value
from ._wire import FILE_CHANGES, INPUT_ITEMS, Tagged

ApprovalPolicy = Literal["untrusted", "on-failure", "on-request", "never"]
"""When the engine asks the user before running a command.

``untrusted``: before anything not on the known-safe read-only list.
``on-failure``: run sandboxed without asking; ask to rerun unsandboxed when the
sandbox made it fail. ``on-request``: only when the model asks for escalation.
``never``: never ask.
"""

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
HistoryMode = Literal["server", "client"]
"""``server``: the provider stores responses and Turns chain by
``previous_response_id``. ``client``: nothing is stored (``store: false``) and
the whole history is resent with every request."""

ReasoningEffort = Literal["minimal", "low", "medium", "high"]
ReasoningSummary = Literal["auto", "concise", "detailed", "none"]
"""How much of its reasoning a reasoning model summarises (Codex's ``ReasoningSummary``):
``none`` asks for no summary."""
ReviewDecision = Literal["approved", "approved_for_session", "denied", "abort"]
AbortReason = Literal["interrupted", "replaced", "reconfigured", "shutdown", "worker_lost"]
StopKind = Literal["stop", "checkpoint"]
"""What ended a Task after its Turn, at the UI's request: ``stop`` (done for now) or
``checkpoint`` (paused until the next input). Either way the conversation goes on with
the next ``user_input`` or ``inject_input``."""
OutputStream = Literal["stdout", "stderr"]
ExecStatus = Literal["completed", "failed", "timed_out"]
ExecCommandSource = Literal["agent", "user_shell"]
"""Who ran a command: the model's ``shell`` call (``agent``), or the user through
``run_user_shell_command`` (``user_shell``). Codex's ``ExecCommandSource``."""
SandboxKind = Literal["bwrap", "none"]


@INPUT_ITEMS.register("text")
@attrs.frozen(repr=False, eq=False)
class TextInput(Tagged):
    """Text typed by the user."""

    text: str


@INPUT_ITEMS.register("image")
@attrs.frozen(repr=False, eq=False)
class ImageInput(Tagged):
    """An image by URL (``https:`` or a ``data:`` URL)."""

    image_url: str


@INPUT_ITEMS.register("local_image")
@attrs.frozen(repr=False, eq=False)
class LocalImageInput(Tagged):
    """An image file on the engine's machine; the engine inlines it as a data URL."""

    path: str


InputItem = Annotated[TextInput | ImageInput | LocalImageInput | SkillInput, INPUT_ITEMS]


@attrs.frozen(repr=False, eq=False)
class SandboxPolicy(Value):
    """How the model's commands are confined.

    ``read-only``: the whole filesystem read-only, no network.
    ``workspace-write``: writes only under the cwd, ``writable_roots`` and a
    private /tmp; network only when ``network_access``.
    ``danger-full-access``: no confinement.
    """

    type: SandboxMode = "workspace-write"
    writable_roots: tuple[str, ...] = ()
    network_access: bool = False


@FILE_CHANGES.register("add")
@attrs.frozen(repr=False, eq=False)
class AddChange(Tagged):
    """A file the patch creates, with its whole content."""

    content: str


@FILE_CHANGES.register("delete")
@attrs.frozen(repr=False, eq=False)
class DeleteChange(Tagged):
    """A file the patch removes, with the content it had."""

    content: str


@FILE_CHANGES.register("update")
@attrs.frozen(repr=False, eq=False)
class UpdateChange(Tagged):
    """A file the patch edits (and perhaps moves to ``move_path``)."""

    unified_diff: str
    move_path: str | None = None


FileChange = Annotated[AddChange | DeleteChange | UpdateChange, FILE_CHANGES]
