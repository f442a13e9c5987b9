"""The ``request_user_input`` tool: the model asks the user, and waits for the answer.

Offered only when the Session's UI said it can answer (``SessionConfig.ask_user``).
The tool's name, its parameters and the answer the model reads are Codex's
(``handlers/request_user_input.rs``): questions with an ``id``, a ``header`` and
``options`` of ``{label, description}``, answered by
``{"answers": {"<id>": {"answers": [...]}}}``. Beyond Codex, a question may have no
options (the user answers in their own words) and may say ``multiSelect``,
``isOther`` (own words beside the options; default true, as Codex always sets
it) and ``isSecret``. The Task waits for the answer as it waits for an approval
(:class:`~._approvals.Approvals`): ``interrupt`` and ``shutdown`` end the wait
and the Task, ``stop`` withdraws the question.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..protocol import (
    RequestUserInput,
    RequestUserInputQuestion,
    RequestUserInputQuestionOption,
    RequestUserInputResponse,
    UserInputAnswer,
)

NAME = "request_user_input"
MAX_QUESTIONS = 3
MAX_OPTIONS = 10
MAX_TEXT = 2000

_OPTION = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "description": "User-facing label (1-5 words)."},
        "description": {
            "type": "string",
            "description": "One short sentence on what picking it means.",
        },
    },
    "required": ["label", "description"],
    "additionalProperties": False,
}

_QUESTION = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "Stable identifier of the answer (snake_case)."},
        "header": {"type": "string", "description": "Short title shown in the UI (12 chars)."},
        "question": {"type": "string", "description": "Single-sentence question to the user."},
        "options": {
            "type": "array",
            "description": "2-3 choices, the recommended one first. Leave it out to ask for "
            "a free-text answer. Add no 'Other' choice: the user may always answer in "
            "their own words unless isOther is false.",
            "items": _OPTION,
        },
        "multiSelect": {"type": "boolean", "description": "Several options may be picked."},
        "isOther": {
            "type": "boolean",
            "description": "The user may answer in their own words (default true).",
        },
        "isSecret": {
            "type": "boolean",
            "description": "The answer is a secret (a password, a key): the UI hides it.",
        },
    },
    "required": ["id", "header", "question"],
    "additionalProperties": False,
}

ASK_USER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": NAME,
    "description": (
        "Asks the user one to three short questions and waits for the answers. Use it "
        "when a choice is the user's to make or you lack information only they have; "
        "before calling it, tell the user briefly why you ask."
    ),
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "description": "The questions; prefer one, at most three.",
                "items": _QUESTION,
            }
        },
        "required": ["questions"],
        "additionalProperties": False,
    },
}

CANCELLED = "the user cancelled the question without answering; do not ask it again the same way"
WITHDRAWN = "not asked: the user stopped the task before the question was answered"
UNAVAILABLE = f"{NAME} is unavailable: the user's interface cannot answer questions"


class AskError(ValueError):
    """The model's arguments are no valid question; the message names the problem."""


class AnswerError(ValueError):
    """A ``user_input_answer`` that does not fit the questions it answers."""


def parse_request(call_id: str, args: dict[str, Any]) -> RequestUserInput:
    """The tool's arguments (a decoded JSON object) as a checked ``request_user_input``."""
    questions = args.get("questions")
    if not isinstance(questions, list) or not questions:
        raise AskError("'questions' must be a non-empty array")
    if len(questions) > MAX_QUESTIONS:
        raise AskError(f"ask at most {MAX_QUESTIONS} questions at once, not {len(questions)}")
    parsed = tuple(_question(n, q) for n, q in enumerate(questions))
    ids = [q.id for q in parsed]
    if len(set(ids)) != len(ids):
        raise AskError("every question needs its own 'id'")
    return RequestUserInput(call_id, parsed)


def _question(n: int, value: Any) -> RequestUserInputQuestion:
    where = f"questions[{n}]"
    if not isinstance(value, dict):
        raise AskError(f"{where} must be an object {{id, header, question, options}}")
    text = {key: _text(value.get(key), f"{where}.{key}") for key in ("id", "header", "question")}
    flags = {key: _flag(value.get(key), f"{where}.{key}") for key in _FLAGS}
    options = _options(value.get("options"), where)
    # Without options the only answer is the user's own words.
    other = flags["isOther"] is not False or not options
    return RequestUserInputQuestion(
        text["id"],
        text["header"],
        text["question"],
        isOther=other,
        isSecret=flags["isSecret"] is True,
        options=options or None,
        multiSelect=flags["multiSelect"] is True and bool(options),
    )


_FLAGS = ("isOther", "isSecret", "multiSelect")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AskError(f"{where} must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise AskError(f"{where} is longer than {MAX_TEXT} characters")
    return value.strip()


def _flag(value: Any, where: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise AskError(f"{where} must be true or false")
    return value


def _options(value: Any, where: str) -> tuple[RequestUserInputQuestionOption, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_OPTIONS:
        raise AskError(f"{where}.options must be an array of at most {MAX_OPTIONS} choices")
    options = []
    for n, option in enumerate(value):
        at = f"{where}.options[{n}]"
        if not isinstance(option, dict):
            raise AskError(f"{at} must be an object {{label, description}}")
        description = option.get("description", "")
        if not isinstance(description, str):
            raise AskError(f"{at}.description must be a string")
        label = _text(option.get("label"), f"{at}.label")
        options.append(RequestUserInputQuestionOption(label, description))
    labels = [o.label for o in options]
    if len(set(labels)) != len(labels):
        raise AskError(f"{where}.options: every choice needs its own label")
    return tuple(options)


def check_answer(request: RequestUserInput, op: UserInputAnswer) -> None:
    """Raise :class:`AnswerError` naming the first answer that does not fit a question."""
    if op.cancelled:
        return
    questions = {q.id: q for q in request.questions}
    for question_id, answer in op.response.answers.items():
        question = questions.get(question_id)
        if question is None:
            known = ", ".join(repr(q) for q in questions)
            raise AnswerError(f"no question {question_id!r} was asked (the questions: {known})")
        if len(answer.answers) > 1 and not question.multiSelect:
            raise AnswerError(f"question {question_id!r} takes one answer, not several")
        labels = {o.label for o in question.options or ()}
        for given in answer.answers:
            if not question.isOther and given not in labels:
                raise AnswerError(
                    f"question {question_id!r} takes only its options' labels, not {given!r}"
                )


def reply_output(reply: RequestUserInputResponse | None) -> str:
    """What the model reads: Codex's ``{"answers": {id: {"answers": [...]}}}``."""
    if reply is None:
        return CANCELLED
    answers = {key: {"answers": list(a.answers)} for key, a in reply.answers.items()}
    return orjson.dumps({"answers": answers}).decode()
