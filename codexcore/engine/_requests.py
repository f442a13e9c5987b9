"""Building Responses-API request bodies and reading output items.

Plain functions from values to values, so what the model is sent can be
tested without a model.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..protocol import ImageInput, InputItem, LocalImageInput, SkillInput, TextInput, UserMessage
from ..tools._safe_read import read_regular
from ._config import SessionConfig
from ._history import History, Item
from ._images import MAX_IMAGE_BYTES, VIEW_IMAGE_TOOL
from ._instructions import is_contextual
from ._models import BUILTIN_CATALOG, ModelCatalog
from ._plan import PLAN_TOOL
from ._skills import SKILL_OPEN, SkillError, skill_part

SHELL_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "shell",
    "description": "Runs a command (an argv list, no shell unless you call one) and returns "
    "its output and exit code.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "command": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The command and its arguments.",
            },
            "workdir": {"type": "string", "description": "The directory to run it in."},
            "timeout_ms": {"type": "number", "description": "Kill it after this long."},
            "with_escalated_permissions": {
                "type": "boolean",
                "description": "Ask the user to run it without the sandbox.",
            },
            "justification": {
                "type": "string",
                "description": "Why escalation is needed, shown to the user.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}


APPLY_PATCH_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "apply_patch",
    "description": (
        "Edits files. The input is a patch:\n"
        "*** Begin Patch\n"
        "*** Add File: PATH        (then every line prefixed with +)\n"
        "*** Delete File: PATH\n"
        "*** Update File: PATH     (optionally followed by *** Move to: NEWPATH)\n"
        "@@ optional line to find first\n"
        " context line\n-removed line\n+added line\n"
        "*** End of File           (optional: the hunk ends the file)\n"
        "*** End Patch\n"
        "Paths are relative to the working directory. All files change or none."
    ),
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The whole patch."}},
        "required": ["input"],
        "additionalProperties": False,
    },
}

TOOLS = (SHELL_TOOL, APPLY_PATCH_TOOL, PLAN_TOOL, VIEW_IMAGE_TOOL)


class InputError(ValueError):
    """User input that cannot be turned into a model request (e.g. a missing image)."""


def user_message(items: Sequence[InputItem]) -> Item:
    """The Responses ``message`` item for the user's input items."""
    return {"type": "message", "role": "user", "content": [_content(i) for i in items]}


def user_message_event(item: Item) -> UserMessage | None:
    """The ``user_message`` event for a user's input item (None for any other item):
    its text parts joined, as Codex's ``UserMessageEvent`` has them, and its images."""
    if item.get("type") != "message" or item.get("role") != "user" or is_contextual(item):
        return None
    parts = item.get("content") or ()
    # A skill the input attached (its whole SKILL.md) is for the model, not the user's words.
    said = [p for p in parts if p.get("type") == "input_text" and not _is_skill(p["text"])]
    text = "".join(p["text"] for p in said)
    images = tuple(p["image_url"] for p in parts if p.get("type") == "input_image")
    return UserMessage(text, images or None)


def _is_skill(text: str) -> bool:
    return text.startswith(SKILL_OPEN)


def _content(item: InputItem) -> dict[str, Any]:
    if isinstance(item, TextInput):
        return {"type": "input_text", "text": item.text}
    # ``detail`` is required by the API's input type; "auto" is what it means unsaid.
    if isinstance(item, ImageInput):
        return {"type": "input_image", "image_url": item.image_url, "detail": "auto"}
    if isinstance(item, SkillInput):
        try:
            return skill_part(item)
        except SkillError as exc:
            raise InputError(str(exc)) from None
    return {"type": "input_image", "image_url": _data_url(item), "detail": "auto"}


def _data_url(item: LocalImageInput) -> str:
    import mimetypes  # reads the system's mime.types: only for a local image

    path = Path(item.path)
    mime, _ = mimetypes.guess_type(path.name)
    if mime is None or not mime.startswith("image/"):
        raise InputError(f"local_image {item.path}: not an image file type")
    try:
        data = read_regular(str(path), MAX_IMAGE_BYTES)  # a FIFO or a device is refused
    except OSError as exc:
        raise InputError(f"local_image {item.path}: {exc.strerror or exc}") from None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def build_request(
    config: SessionConfig,
    history: History,
    new_items: Sequence[Item],
    tools: Sequence[dict[str, Any]],
    *,
    session_id: str,
    catalog: ModelCatalog = BUILTIN_CATALOG,
    output_schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of one POST /responses for the next Turn.

    ``server`` mode stores responses and sends only what the provider has
    not seen; ``client`` mode stores nothing and resends the whole history,
    each item in its input shape (:func:`input_item`). Reasoning options go
    only to a model that takes them (``catalog``, the session's override
    first): the summary setting (left out when it is ``"none"``), the effort
    when one is configured, and in ``client`` mode the encrypted reasoning to
    carry into the next request. ``output_schema`` asks for structured output
    (``text.format``, see :func:`structured_output`).
    """
    store = config.history_mode == "server"
    reasoning = catalog.supports_reasoning(config.model, config.model_supports_reasoning_summaries)
    body: dict[str, Any] = {
        "model": config.model,
        "instructions": config.instructions,
        "tools": list(tools),
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "store": store,
        "stream": True,
        "prompt_cache_key": session_id,
    }
    if store:
        body["input"] = [*history.unsent_items(), *new_items]
        if history.last_response_id is not None:
            body["previous_response_id"] = history.last_response_id
    else:
        body["input"] = [input_item(item) for item in (*history.items(), *new_items)]
        if reasoning:
            body["include"] = ["reasoning.encrypted_content"]
    if reasoning:
        options: dict[str, Any] = {}
        if config.reasoning_summary != "none":
            options["summary"] = config.reasoning_summary
        if config.reasoning_effort is not None:
            options["effort"] = config.reasoning_effort
        body["reasoning"] = options
    if output_schema is not None:
        body["text"] = {"format": structured_output(output_schema)}
    return body


OUTPUT_SCHEMA_NAME = "codex_output_schema"
"""The name Codex gives the schema of a Task's final answer (``exec --output-schema``)."""


def structured_output(schema: dict[str, Any]) -> dict[str, Any]:
    """The Responses API's ``text.format`` that constrains the answer to ``schema``,
    strictly, as Codex sends it."""
    return {"type": "json_schema", "name": OUTPUT_SCHEMA_NAME, "schema": schema, "strict": True}


def output_schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot constrain a final answer (None when it can): structured
    output takes a JSON Schema whose root is an object (``"type": "object"``). The
    rest of the schema is the provider's to judge: its error names the problem."""
    if not isinstance(schema, dict):
        return f"output_schema must be a JSON object (a JSON Schema), not {type(schema).__name__}"
    if schema.get("type") != "object":
        return 'output_schema must describe an object: its root needs "type": "object"'
    return None


# The keys each item type takes as input (the openai SDK's ``*Param`` types),
# ``id`` left out: with ``store: false`` the API rejects an id it never stored.
_INPUT_KEYS: dict[str, frozenset[str]] = {
    "message": frozenset({"type", "role", "content", "status", "phase"}),
    "reasoning": frozenset({"type", "summary", "content", "encrypted_content", "status"}),
    "function_call": frozenset({"type", "call_id", "name", "arguments", "namespace", "status"}),
    "custom_tool_call": frozenset({"type", "call_id", "name", "input", "namespace"}),
    "function_call_output": frozenset({"type", "call_id", "output", "status"}),
    "custom_tool_call_output": frozenset({"type", "call_id", "output"}),
}
_PART_KEYS: dict[str, frozenset[str]] = {
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
    "summary_text": frozenset({"type", "text"}),
    "reasoning_text": frozenset({"type", "text"}),
}


def input_item(item: Item) -> Item:
    """``item`` (an output item as the server sent it) as ``client`` mode re-sends it.

    No ``id`` (the server stored nothing to refer to), no null field, and for
    the item types the engine knows only the keys their input shape takes;
    content and summary parts are shaped the same way.
    """
    keys = _INPUT_KEYS.get(item.get("type", ""))
    shaped: Item = {}
    for key, value in item.items():
        if value is None or key == "id" or (keys is not None and key not in keys):
            continue
        if key in ("content", "summary") and isinstance(value, list):
            value = [_input_part(part) for part in value]
        shaped[key] = _without_nulls(value)
    return shaped


def _input_part(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    keys = _PART_KEYS.get(part.get("type", ""))
    return {k: v for k, v in part.items() if keys is None or k in keys}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def message_text(item: Item) -> str:
    """The text of an assistant ``message`` output item: its answer or its refusal."""
    parts = item.get("content") or []
    return "".join(_part_text(p) for p in parts if isinstance(p, dict))


def is_refusal(item: Item) -> bool:
    """Whether an assistant ``message`` output item holds a refusal."""
    parts = item.get("content") or []
    return any(isinstance(p, dict) and p.get("type") == "refusal" for p in parts)


def _part_text(part: dict[str, Any]) -> str:
    kind = part.get("type")
    text = part.get("text") if kind == "output_text" else part.get("refusal")
    return text if kind in ("output_text", "refusal") and isinstance(text, str) else ""


def reasoning_text(item: Item) -> str:
    """The summary text of a ``reasoning`` output item."""
    parts = item.get("summary") or []
    return "\n\n".join(p.get("text", "") for p in parts if p.get("text"))


def is_call(item: Item) -> bool:
    """Whether an output item is a call the model waits on: it carries a ``call_id``
    and the server did not run it itself (``"execution": "server"``)."""
    kind = item.get("type")
    return (
        isinstance(kind, str)
        and not kind.endswith("_output")
        and isinstance(item.get("call_id"), str)
        and item.get("execution") != "server"
    )


def function_output(call_id: str, output: str) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def call_output(call: Item, output: str) -> Item:
    """The answer to ``call`` in the matching kind: a custom tool's for a custom call
    (``function_call``, and ``local_shell_call`` as Codex answers it, get a function's)."""
    call_id = str(call.get("call_id", ""))
    if call.get("type") == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}
    return function_output(call_id, output)


INTERRUPTED = "the user interrupted before this call ran"
"""Why a call the Task stopped before got no real output."""

CUT_OFF = "the session stopped before this call's output was recorded; it may or may not have run"
"""Why a recorded call has no output: the process ended (a crash, kill -9) while it ran."""


def unanswered_calls(items: Sequence[Item]) -> list[Item]:
    """The calls in ``items`` that no output item in ``items`` answers, in order."""
    # Only string ids answer a call: a recorded item may hold anything (a list is unhashable).
    answered = {
        call_id
        for item in items
        if not is_call(item) and isinstance(call_id := item.get("call_id"), str)
    }
    return [item for item in items if is_call(item) and item.get("call_id") not in answered]


def aborted_output(call: Item, why: str = INTERRUPTED) -> Item:
    """The output that answers ``call`` when it never ran to an end, so the next
    request is still a conversation the API accepts (every call answered)."""
    return call_output(call, f"aborted: {why}")
