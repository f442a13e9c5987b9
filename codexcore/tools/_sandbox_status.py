"""What :func:`~codexcore.tools.sandbox.probe_sandbox` found, apart from the sandbox helpers.

The engine holds a :class:`SandboxStatus` from a session's start; keeping the
type here lets it do so without importing the helpers (``sandbox``,
``_seccomp``, ``subprocess``, ``shutil``), which load when a command first
needs them.
"""

from __future__ import annotations

from typing import Literal

from attrs import frozen

from codexcore.protocol._value import Value


@frozen(repr=False, eq=False)
class SandboxStatus(Value):
    """Whether commands can be confined here, as found by :func:`probe_sandbox`.

    ``kind == "bwrap"``: ``executable`` is the absolute path of a bwrap that
    started a sandbox; pass it to :func:`wrap_command`. ``kind == "none"``:
    ``reason`` says why there is no confinement, in words for the user.
    """

    kind: Literal["bwrap", "none"]
    reason: str | None = None
    executable: str | None = None
