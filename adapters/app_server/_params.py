"""Reading a request's params: each field checked, and a wrong one named in the error
(``params.input[0].type: ...``), then turned into the engine's values."""

from __future__ import annotations

from typing import Any, get_args

from codexcore.protocol import (
    ApprovalPolicy,
    DynamicToolSpec,
    ImageInput,
    InputItem,
    LocalImageInput,
    ReasoningEffort,
    SandboxPolicy,
    TextInput,
)

from ._wire import invalid_params

APPROVAL_POLICIES: frozenset[str] = frozenset(get_args(ApprovalPolicy))
EFFORTS: frozenset[str] = frozenset(get_args(ReasoningEffort))
SANDBOX_MODES = {
    "read-only": "read-only",
    "workspace-write": "workspace-write",
    "danger-full-access": "danger-full-access",
}


class Params:
    """A request's params object, read field by field."""

    def __init__(self, params: Any) -> None:
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise invalid_params("params", "must be an object")
        self.raw: dict[str, Any] = params

    def string(self, name: str, *, required: bool = False) -> str | None:
        value = self.raw.get(name)
        if value is None:
            if required:
                raise invalid_params(f"params.{name}", "is required")
            return None
        if not isinstance(value, str):
            raise invalid_params(f"params.{name}", "must be a string")
        return value

    def required(self, name: str) -> str:
        value = self.string(name, required=True)
        assert value is not None
        return value

    def boolean(self, name: str) -> bool | None:
        value = self.raw.get(name)
        if value is not None and not isinstance(value, bool):
            raise invalid_params(f"params.{name}", "must be a boolean")
        return value

    def integer(self, name: str) -> int | None:
        value = self.raw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise invalid_params(f"params.{name}", "must be an integer")
        return value

    def approval_policy(self) -> ApprovalPolicy | None:
        value = self.raw.get("approvalPolicy")
        if value is None:
            return None
        if isinstance(value, dict) and "granular" in value:
            raise invalid_params(
                "params.approvalPolicy", "granular approval policies are not supported"
            )
        if value not in APPROVAL_POLICIES:
            raise invalid_params(
                "params.approvalPolicy",
                f"must be one of {', '.join(sorted(APPROVAL_POLICIES))}, not {value!r}",
            )
        return value  # type: ignore[no-any-return]

    def effort(self, name: str = "effort") -> ReasoningEffort | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if value not in EFFORTS:
            raise invalid_params(
                f"params.{name}", f"must be one of {', '.join(sorted(EFFORTS))}, not {value!r}"
            )
        return value  # type: ignore[no-any-return]

    def sandbox_mode(self) -> SandboxPolicy | None:
        """``sandbox`` of thread/start, resume and fork: a mode name."""
        value = self.raw.get("sandbox")
        if value is None:
            return None
        if value not in SANDBOX_MODES:
            raise invalid_params(
                "params.sandbox", f"must be one of {', '.join(SANDBOX_MODES)}, not {value!r}"
            )
        return SandboxPolicy(type=value)

    def sandbox_policy(self) -> SandboxPolicy | None:
        """``sandboxPolicy`` of turn/start: Codex's tagged object."""
        value = self.raw.get("sandboxPolicy")
        if value is None:
            return None
        field = "params.sandboxPolicy"
        if not isinstance(value, dict):
            raise invalid_params(field, "must be an object")
        kind = value.get("type")
        network = value.get("networkAccess", False)
        if kind == "dangerFullAccess":
            return SandboxPolicy(type="danger-full-access")
        if not isinstance(network, bool):
            raise invalid_params(f"{field}.networkAccess", "must be a boolean")
        if kind == "readOnly":
            return SandboxPolicy(type="read-only", network_access=network)
        if kind == "workspaceWrite":
            roots = value.get("writableRoots") or []
            if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
                raise invalid_params(f"{field}.writableRoots", "must be a list of paths")
            return SandboxPolicy("workspace-write", tuple(roots), network)
        raise invalid_params(
            f"{field}.type",
            f"must be dangerFullAccess, readOnly or workspaceWrite, not {kind!r}",
        )

    def input_items(self) -> tuple[InputItem, ...]:
        value = self.raw.get("input")
        if not isinstance(value, list) or not value:
            raise invalid_params("params.input", "must be a non-empty list of input items")
        return tuple(_input_item(f"params.input[{n}]", item) for n, item in enumerate(value))

    def dynamic_tools(self) -> tuple[DynamicToolSpec, ...] | None:
        """``dynamicTools`` of thread/start: Codex's ``DynamicToolSpec`` list (functions)."""
        value = self.raw.get("dynamicTools")
        if value is None:
            return None
        if not isinstance(value, list):
            raise invalid_params("params.dynamicTools", "must be a list of tools")
        return tuple(_tool(f"params.dynamicTools[{n}]", spec) for n, spec in enumerate(value))


def _tool(field: str, spec: Any) -> DynamicToolSpec:
    """One function tool; ``type`` may be left out (Codex before 0.100 had none), and
    ``deferLoading`` is accepted and ignored: every tool is offered from the start."""
    if not isinstance(spec, dict):
        raise invalid_params(field, "must be an object")
    kind = spec.get("type", "function")
    if kind == "namespace":
        raise invalid_params(f"{field}.type", "namespaces of tools are not supported")
    if kind != "function":
        raise invalid_params(f"{field}.type", f"must be function, not {kind!r}")
    name, description = spec.get("name"), spec.get("description", "")
    if not isinstance(name, str):
        raise invalid_params(f"{field}.name", "must be a string")
    if not isinstance(description, str):
        raise invalid_params(f"{field}.description", "must be a string")
    schema = spec.get("inputSchema", {"type": "object", "properties": {}})
    return DynamicToolSpec(name, description, schema)


def _input_item(field: str, item: Any) -> InputItem:
    if not isinstance(item, dict):
        raise invalid_params(field, "must be an object")
    kind = item.get("type")
    if kind == "text":
        text = item.get("text")
        if not isinstance(text, str):
            raise invalid_params(f"{field}.text", "must be a string")
        return TextInput(text)
    if kind == "image":
        url = item.get("url")
        if not isinstance(url, str):
            raise invalid_params(f"{field}.url", "must be a string (fileId is not supported)")
        return ImageInput(url)
    if kind == "localImage":
        path = item.get("path")
        if not isinstance(path, str):
            raise invalid_params(f"{field}.path", "must be a string")
        return LocalImageInput(path)
    raise invalid_params(f"{field}.type", f"must be text, image or localImage, not {kind!r}")
