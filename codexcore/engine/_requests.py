"""Building Responses-API request bodies and reading output items.

Plain functions from values to values, so what the model is sent can be
tested without a model.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..protocol import ImageInput, InputItem, LocalImageInput, TextInput
from ._config import SessionConfig
from ._history import History, Item

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

TOOLS = (SHELL_TOOL, APPLY_PATCH_TOOL)


class InputError(ValueError):
    """User input that cannot be turned into a model request (e.g. a missing image)."""


def user_message(items: Sequence[InputItem]) -> Item:
    """The Responses ``message`` item for the user's input items."""
    return {"type": "message", "role": "user", "content": [_content(i) for i in items]}


def _content(item: InputItem) -> dict[str, Any]:
    if isinstance(item, TextInput):
        return {"type": "input_text", "text": item.text}
    if isinstance(item, ImageInput):
        return {"type": "input_image", "image_url": item.image_url}
    return {"type": "input_image", "image_url": _data_url(item)}


def _data_url(item: LocalImageInput) -> str:
    import mimetypes  # reads the system's mime.types: only for a local image

    path = Path(item.path)
    mime, _ = mimetypes.guess_type(path.name)
    if mime is None or not mime.startswith("image/"):
        raise InputError(f"local_image {item.path}: not an image file type")
    try:
        data = path.read_bytes()
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
) -> dict[str, Any]:
    """The body of one POST /responses for the next Turn.

    ``server`` mode stores responses and sends only what the provider has
    not seen; ``client`` mode stores nothing and resends the whole history.
    """
    store = config.history_mode == "server"
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
        body["input"] = [*history.items(), *new_items]
        body["include"] = ["reasoning.encrypted_content"]
    if config.reasoning_effort is not None:
        body["reasoning"] = {"effort": config.reasoning_effort, "summary": "auto"}
    return body


def message_text(item: Item) -> str:
    """The text of an assistant ``message`` output item."""
    parts = item.get("content") or []
    return "".join(p.get("text", "") for p in parts if p.get("type") == "output_text")


def reasoning_text(item: Item) -> str:
    """The summary text of a ``reasoning`` output item."""
    parts = item.get("summary") or []
    return "\n\n".join(p.get("text", "") for p in parts if p.get("text"))


def function_output(call_id: str, output: str) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


INTERRUPTED = "the user interrupted before this call ran"
"""Why a call the Task stopped before got no real output."""

CUT_OFF = "the session stopped before this call's output was recorded; it may or may not have run"
"""Why a recorded call has no output: the process ended (a crash, kill -9) while it ran."""


def is_call(item: Item) -> bool:
    """An output item the model expects an answer to: it names a ``call_id``
    (``function_call``, ``custom_tool_call``, ``local_shell_call`` …)."""
    kind = item.get("type")
    return (
        item.get("call_id") is not None and isinstance(kind, str) and not kind.endswith("_output")
    )


def unanswered_calls(items: Sequence[Item]) -> list[Item]:
    """The calls in ``items`` that no output item in ``items`` answers, in order."""
    answered = {item.get("call_id") for item in items if not is_call(item)}
    return [item for item in items if is_call(item) and item.get("call_id") not in answered]


def aborted_output(call: Item, why: str = INTERRUPTED) -> Item:
    """The output that answers ``call`` when it never ran to an end, so the next
    request is still a conversation the API accepts (every call answered)."""
    text = f"aborted: {why}"
    call_id = str(call.get("call_id"))
    if call.get("type") == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": text}
    # function_call, and local_shell_call as Codex answers it.
    return function_output(call_id, text)
