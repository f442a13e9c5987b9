"""``generate`` and ``customize`` of the Copilot-CLI-style chat protocol: code from an API spec.

Each is one Task whose final answer is constrained by a JSON Schema (structured
output, as ``exec --output-schema``) holding the protocol's result fields. The
``code`` field is decoded out of the answer while the model writes it
(:class:`~._json_stream.FieldStream`) and streams as ``stream/chunk``; the last
(``done``) chunk carries whatever of the final ``code`` was not streamed, so the
chunks always add up to the result's ``code``. The model may ask the user
(``request_user_input`` is offered in these Tasks), and ``customize``'s answer may
say a clarification is needed: either way the result is the protocol's
``clarify`` shape (``code: null``, ``clarificationNeeded: true``, ``question``,
``options``), and the app sends the user's answer with its next request. The
instructions are a prompt file (:mod:`._prompts`), not code.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import orjson

from codexcore._logging import get_logger
from codexcore.adapters.jsonrpc._errors import (
    CONTEXT_TOO_LARGE,
    CUSTOMIZATION_FAILED,
    SERVER_ERROR,
    SPEC_INVALID,
)
from codexcore.adapters.jsonrpc._machine import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    Id,
    RpcError,
)
from codexcore.adapters.jsonrpc._methods import MethodTable
from codexcore.adapters.jsonrpc._server import RpcContext, current_call
from codexcore.protocol import (
    EventMsg,
    RequestUserInput,
    TaskComplete,
    TextInput,
    UserInput,
)
from codexcore.protocol._wire import Tagged

from ._deltas import _DONE, _NOT_DONE, cut_deltas, event_head, line_head
from ._jobs import Job, job_key, jobs_of, task_error
from ._json_stream import FieldStream
from ._prompts import PromptError, render

__all__ = ["CONTEXT_TOO_LARGE", "register_generation"]

log = get_logger(__name__)

GENERATION_FAILED = SERVER_ERROR
"""The protocol's -32000, "code generation failed"."""

GENERATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string"},
        "componentCount": {"type": "integer"},
        "description": {"type": "string"},
    },
    "required": ["code", "componentCount", "description"],
    "additionalProperties": False,
}
"""The structured answer of a ``generate`` Task: the protocol's result, field for field."""

_STRINGS = {"type": ["array", "null"], "items": {"type": "string"}}
CUSTOMIZE_SCHEMA: dict[str, Any] = {
    "type": "object",
    # The decision first: the model settles whether it must ask before writing code.
    "properties": {
        "clarificationNeeded": {"type": "boolean"},
        "question": {"type": ["string", "null"]},
        "options": _STRINGS,
        "code": {"type": ["string", "null"]},
        "description": {"type": "string"},
        "assumptions": {"type": "array", "items": {"type": "string"}},
    },
    "required": [
        "clarificationNeeded",
        "question",
        "options",
        "code",
        "description",
        "assumptions",
    ],
    "additionalProperties": False,
}
"""The structured answer of a ``customize`` Task: its result's fields and its clarify's."""


# --- params -------------------------------------------------------------------------------


@attrs.frozen
class GenerateParams:
    """``generate``: ``{spec, format, theme, options}``."""

    spec: Any
    format: str = "react"
    theme: str = "light"
    options: dict[str, Any] | None = None


@attrs.frozen
class HistoryEntry:
    role: str
    content: str


@attrs.frozen
class CustomizeParams:
    """``customize``: ``{currentCode, prompt, spec?, history?}``."""

    current_code: str = attrs.field(metadata={"wire": "currentCode"})
    prompt: str
    spec: Any = None
    history: list[Any] | None = None


def _spec(spec: Any, *, required: bool) -> Any:
    """``spec`` checked: -32002 naming ``params.spec`` when it is no usable spec."""
    if spec is None and not required:
        return None
    if not isinstance(spec, dict):
        kind = "null" if spec is None else type(spec).__name__
        problem = f"expected an object (the parsed API spec), not {kind}"
        raise RpcError(SPEC_INVALID, f"Spec invalid: params.spec: {problem}", {"field": "spec"})
    if not spec:
        problem = "the spec is empty: it describes no API"
        raise RpcError(SPEC_INVALID, f"Spec invalid: params.spec: {problem}", {"field": "spec"})
    return spec


def _history(entries: list[Any] | None) -> list[HistoryEntry]:
    """The app's conversation: -32602 naming the entry and field at fault."""
    history = []
    for n, entry in enumerate(entries or ()):
        where = f"params.history[{n}]"
        if not isinstance(entry, dict):
            raise RpcError(INVALID_PARAMS, f"Invalid params: {where}: expected {{role, content}}")
        role, content = entry.get("role"), entry.get("content")
        if role not in ("user", "assistant", "system"):
            problem = f"expected one of ['user', 'assistant', 'system'], got {role!r}"
            raise RpcError(INVALID_PARAMS, f"Invalid params: {where}.role: {problem}")
        if not isinstance(content, str):
            raise RpcError(INVALID_PARAMS, f"Invalid params: {where}.content: expected a string")
        history.append(HistoryEntry(role, content))
    return history


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


# --- the job ------------------------------------------------------------------------------


class CodeJob(Job):
    """A ``generate`` or ``customize`` Task: its answer's ``code`` streams as it is written."""

    ask_user = True
    schema: dict[str, Any] = GENERATE_SCHEMA
    failed = GENERATION_FAILED

    def __init__(self, request_id: Id, prompt: str, *, quiet: bool, key: bytes) -> None:
        super().__init__(request_id, quiet=quiet, key=key)
        self.prompt = prompt
        self.field = FieldStream("code")
        self.fed = False  # the current agent message came as deltas
        self.sent: list[str] = []  # the code streamed from the current model stream
        self.indexes: dict[Id, int] = {request_id: 0}
        self.heads: dict[Id, bytes] = {request_id: line_head(request_id)}
        self.event_head = b""
        self.question: RequestUserInput | None = None
        self.final: dict[str, Any] | None = None

    def ops(self) -> list[Tagged]:
        self.event_head = event_head(self.sub_id)
        return [UserInput((TextInput(self.prompt),), output_schema=self.schema)]

    def take_deltas(self, batch: list[bytes], start: int, into: list[bytes]) -> int:
        texts, at = cut_deltas(self.event_head, batch, start)
        if texts:
            self.fed = True
            feed, loads = self.field.feed, orjson.loads
            for text in texts:
                self._stream(feed(loads(text)), into)
        return at

    def delta(self, text: str, into: list[bytes]) -> None:
        self.fed = True
        self._stream(self.field.feed(text), into)

    def message(self, text: str, into: list[bytes]) -> None:
        if not self.fed:  # a message that came whole
            self._stream(FieldStream("code").feed(text), into)
        self.field, self.fed = FieldStream("code"), False

    def joined(self, request_id: Id, into: list[bytes]) -> None:
        self.indexes[request_id] = 0
        self.heads[request_id] = line_head(request_id)
        so_far = "".join(self.sent)
        if so_far:
            into.append(self._line(request_id, so_far, done=False))

    def left(self, request_id: Id) -> None:
        self.indexes.pop(request_id, None)
        self.heads.pop(request_id, None)

    def retried(self) -> None:
        # The retried stream writes the answer again from its start, and so streams the
        # code again; what the last attempt streamed is what the done chunk completes.
        self.field, self.fed, self.sent = FieldStream("code"), False, []

    def end(self, msg: EventMsg, into: list[bytes]) -> None:
        rest = ""
        if isinstance(msg, TaskComplete) and self.question is None:
            self.final = _parse(msg.last_agent_message)
            code = (self.final or {}).get("code")
            streamed = "".join(self.sent)
            if isinstance(code, str) and code.startswith(streamed):
                rest = code[len(streamed) :]
            elif isinstance(code, str):  # cannot happen with a whole answer: said, not hidden
                log.warning("the streamed code is not the answer's", streamed=len(streamed))
        for request_id in list(self.indexes):
            into.append(self._line(request_id, rest, done=True))

    def asked(self, request: RequestUserInput) -> None:
        self.question = request

    def answer(self, msg: EventMsg) -> dict[str, Any]:
        if self.question is not None:
            return _clarify_from_tool(self.question)
        if not isinstance(msg, TaskComplete):
            raise task_error(msg, self.failed, self.kind)
        if self.final is None:
            raise RpcError(
                self.failed,
                f"{self.kind} failed: the model's answer is not the JSON result asked for",
                {"code": "bad_answer"},
            )
        return self.result(self.final)

    def result(self, answer: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _stream(self, piece: str, into: list[bytes]) -> None:
        if not piece:
            return
        self.sent.append(piece)
        for request_id in self.indexes:
            into.append(self._line(request_id, piece, done=False))

    def _line(self, request_id: Id, chunk: str, *, done: bool) -> bytes:
        index = self.indexes[request_id]
        self.indexes[request_id] = index + 1
        tail = (_DONE if done else _NOT_DONE) % index
        return self.heads[request_id] + _string(chunk) + tail

    def _bad(self, problem: str) -> RpcError:
        message = f"{self.kind} failed: the model's answer {problem}"
        return RpcError(self.failed, message, {"code": "bad_answer"})


class GenerateJob(CodeJob):
    kind = "generate"

    def result(self, answer: dict[str, Any]) -> dict[str, Any]:
        code, count = answer.get("code"), answer.get("componentCount")
        description = answer.get("description")
        if not isinstance(code, str) or not code:
            raise self._bad("has no code")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise self._bad(f"has no componentCount (a count), but {count!r}")
        if not isinstance(description, str):
            raise self._bad("has no description")
        return {"code": code, "componentCount": count, "description": description}


class CustomizeJob(CodeJob):
    kind = "customize"
    schema = CUSTOMIZE_SCHEMA
    failed = CUSTOMIZATION_FAILED

    def result(self, answer: dict[str, Any]) -> dict[str, Any]:
        if answer.get("clarificationNeeded") is True:
            question = answer.get("question")
            if not isinstance(question, str) or not question.strip():
                raise self._bad("asks for a clarification without a question")
            options = [o for o in answer.get("options") or () if isinstance(o, str)]
            return clarify(question, options)
        code = answer.get("code")
        description = answer.get("description")
        description = description if isinstance(description, str) else ""
        if not isinstance(code, str) or not code:
            why = description or "the model returned no code and asked nothing"
            message = f"the customization cannot be applied: {why}"
            raise RpcError(CUSTOMIZATION_FAILED, message, {"code": "not_applied"})
        assumptions = [a for a in answer.get("assumptions") or () if isinstance(a, str)]
        return {
            "code": code,
            "description": description,
            "assumptions": assumptions,
            "clarificationNeeded": False,
        }


def _string(text: str) -> bytes:
    """``text`` as a JSON string (a lone surrogate, from a bad answer, escaped)."""
    try:
        return orjson.dumps(text)
    except TypeError:
        return json.dumps(text).encode()


def clarify(question: str, options: list[str]) -> dict[str, Any]:
    """The protocol's ``clarify`` result."""
    return {"code": None, "clarificationNeeded": True, "question": question, "options": options}


def _clarify_from_tool(request: RequestUserInput) -> dict[str, Any]:
    """The model's ``request_user_input`` as a ``clarify`` result: its questions (one per
    line when it asked several) and the first question's options' labels."""
    question = "\n".join(q.question for q in request.questions)
    first = request.questions[0]
    return clarify(question, [option.label for option in first.options or ()])


def _parse(message: str | None) -> dict[str, Any] | None:
    if not message:
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- the methods --------------------------------------------------------------------------


def _request_id(method: str) -> Id:
    call = current_call()
    if call.notification:
        message = f"Invalid Request: {method} needs an id (its answer is a response)"
        raise RpcError(INVALID_REQUEST, message)
    return call.id


def _prompt(ctx: RpcContext, method: str, values: dict[str, str], failed: int) -> str:
    try:
        return render(ctx.host.config.chat_prompts, method, values)
    except PromptError as exc:
        log.error("prompt file unusable", error=str(exc))
        raise RpcError(failed, f"{method} failed: {exc}", {"code": "bad_prompt_file"}) from None


async def generate(ctx: RpcContext, params: GenerateParams) -> dict[str, Any]:
    """``generate``: one Task; its code streams as ``stream/chunk``; then the result."""
    request_id = _request_id("generate")
    spec = _spec(params.spec, required=True)
    values = {
        "format": params.format,
        "theme": params.theme,
        "options": _text(params.options or {}),
        "spec": _text(spec),
    }
    prompt = _prompt(ctx, "generate", values, GENERATION_FAILED)
    jobs = jobs_of(ctx)
    job = GenerateJob(request_id, prompt, quiet=not jobs.streaming, key=job_key("generate"))
    return await jobs.run(request_id, job)


async def customize(ctx: RpcContext, params: CustomizeParams) -> dict[str, Any]:
    """``customize``: as ``generate``, on the current code; or the ``clarify`` result."""
    request_id = _request_id("customize")
    if not params.prompt.strip():
        raise RpcError(INVALID_PARAMS, "Invalid params: params.prompt: empty (nothing to change)")
    spec = _spec(params.spec, required=False)
    history = _history(params.history)
    values = {
        "prompt": params.prompt,
        "current_code": params.current_code,
        "spec": _text(spec),
        "history": "\n".join(f"{e.role}: {e.content}" for e in history) or "(none)",
    }
    prompt = _prompt(ctx, "customize", values, CUSTOMIZATION_FAILED)
    jobs = jobs_of(ctx)
    job = CustomizeJob(request_id, prompt, quiet=not jobs.streaming, key=job_key("customize"))
    return await jobs.run(request_id, job)


_RESULT = {"type": "object", "properties": GENERATE_SCHEMA["properties"]}
GENERATE_RESULT = {**_RESULT, "required": GENERATE_SCHEMA["required"]}
CUSTOMIZE_RESULT: dict[str, Any] = {
    "oneOf": [
        {
            "title": "the change, applied",
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "description": {"type": "string"},
                "assumptions": {"type": "array", "items": {"type": "string"}},
                "clarificationNeeded": {"const": False},
            },
            "required": ["code", "description", "assumptions", "clarificationNeeded"],
        },
        {
            "title": "clarify: the model asks the user",
            "type": "object",
            "properties": {
                "code": {"type": "null"},
                "clarificationNeeded": {"const": True},
                "question": {"type": "string"},
                "options": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["code", "clarificationNeeded", "question", "options"],
        },
    ]
}


def register_generation(table: MethodTable) -> None:
    """Add ``generate`` and ``customize`` to ``table``."""
    table.add(
        "generate",
        generate,
        GenerateParams,
        summary="Generate an interface's code from an API spec; the code streams as "
        "stream/chunk, then this answers (or answers clarify, when the model asks the user)",
        result={"oneOf": [GENERATE_RESULT, CUSTOMIZE_RESULT["oneOf"][1]]},
        notifications=("stream/chunk",),
        errors=(GENERATION_FAILED, SPEC_INVALID, CONTEXT_TOO_LARGE),
    )
    table.add(
        "customize",
        customize,
        CustomizeParams,
        summary="Change generated code as the user asks; the code streams as stream/chunk, "
        "then this answers, or answers clarify when the model needs the user's choice",
        result=CUSTOMIZE_RESULT,
        notifications=("stream/chunk",),
        errors=(CUSTOMIZATION_FAILED, SPEC_INVALID, CONTEXT_TOO_LARGE),
    )
