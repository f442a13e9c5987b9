"""The model asks the user: the ``request_user_input`` event and its ``user_input_answer``.

Codex's shapes, field for field (``protocol/src/request_user_input.rs``):
``RequestUserInputEvent`` with its questions (``isOther`` and ``isSecret`` in
Codex's camelCase) and ``Op::UserInputAnswer`` carrying a
``RequestUserInputResponse``. Beyond Codex: a question's ``multiSelect`` (several
options may be picked) and the op's ``cancelled`` (the user declined to answer).
The engine offers the tool only to a Session whose UI said it can answer
(``configure_session``'s ``ask_user``).
"""

from __future__ import annotations

import attrs

from ._value import Value
from ._wire import EVENT_MSGS, OPS, Tagged


@attrs.frozen(repr=False, eq=False)
class RequestUserInputQuestionOption(Value):
    """One choice: its ``label`` (what an answer names) and what picking it means."""

    label: str
    description: str = ""


@attrs.frozen(repr=False, eq=False)
class RequestUserInputQuestion(Value):
    """One question. ``id`` keys its answer; ``header`` is a short title for it.

    ``options`` are the choices to pick from (null: none, the answer is free
    text); ``multiSelect`` whether several may be picked; ``isOther`` whether the
    user may answer in their own words (always true without options);
    ``isSecret`` whether the answer is a secret (a password, a key) that the UI
    should not show as it is typed.
    """

    id: str
    header: str
    question: str
    isOther: bool = False  # Codex's wire name
    isSecret: bool = False  # Codex's wire name
    options: tuple[RequestUserInputQuestionOption, ...] | None = None
    multiSelect: bool = False  # camelCase, as its neighbours


@EVENT_MSGS.register("request_user_input")
@attrs.frozen(repr=False, eq=False)
class RequestUserInput(Tagged):
    """The model asks the user: the Task waits for a ``user_input_answer`` whose ``id``
    is this ``call_id`` (as for an approval; ``interrupt`` ends the wait, and the Task)."""

    call_id: str
    questions: tuple[RequestUserInputQuestion, ...]


@attrs.frozen(repr=False, eq=False)
class RequestUserInputAnswer(Value):
    """The answers to one question: the labels picked, or the user's own words."""

    answers: tuple[str, ...] = ()


@attrs.frozen(repr=False, eq=False)
class RequestUserInputResponse(Value):
    """The answers, keyed by question ``id``; a question may be left unanswered."""

    answers: dict[str, RequestUserInputAnswer] = attrs.field(factory=dict)


@OPS.register("user_input_answer")
@attrs.frozen(repr=False, eq=False)
class UserInputAnswer(Tagged):
    """Answer a ``request_user_input``; ``id`` is the request's ``call_id``.

    ``response`` goes to the model as the call's output. ``cancelled`` true: the
    user declined to answer (``response`` is ignored) and the model is told so;
    the Task goes on. An answer that does not fit the questions (an unknown
    question id, several answers where one is asked for, a label that is not an
    option where no own words are taken) is answered by ``error`` (code
    ``bad_answer``) and the request keeps waiting.
    """

    id: str
    response: RequestUserInputResponse = attrs.field(factory=RequestUserInputResponse)
    cancelled: bool = False
