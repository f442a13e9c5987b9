"""The model asks the user, over ACP: ``request_user_input`` as a form elicitation.

ACP offers an agent one way to ask its user something: ``elicitation/create`` in
form mode (an UNSTABLE part of the protocol, which the ``agent-client-protocol``
package carries), offered only by a client that says so in ``initialize``
(``clientCapabilities.elicitation.form``). Only for such a client does a session
get ``ask_user`` on, so the model is offered the tool; for any other, the model
never sees it.

A ``request_user_input`` of the prompt in flight becomes one form, one field per
question (its ``id``), titled by its ``header`` and described by its question:

- options to pick one of, no own words: a string with titled choices (``oneOf``);
- options to pick several of, no own words: an array of them (``anyOf``);
- own words (with or without options, which the description then lists): a string.

A secret is said in the field's description and ``_meta`` (``codexcore.secret``):
ACP's form has no field that hides what is typed. ``accept`` answers with the
fields given (an empty one is left unanswered); ``decline``, ``cancel``, a failed
request, or an answer that does not fit the questions is the user cancelling;
``session/cancel`` withdraws the form (the interrupt that follows ends the wait).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import (
    ElicitationFormSessionMode,
    ElicitationMultiSelectPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    EnumOption,
    TitledMultiSelectItems,
)

from codexcore._logging import get_logger
from codexcore.engine import AnswerError, check_answer
from codexcore.protocol import (
    RequestUserInput,
    RequestUserInputAnswer,
    RequestUserInputQuestion,
    RequestUserInputResponse,
    UserInputAnswer,
)

if TYPE_CHECKING:
    from ._session import AcpSession

log = get_logger(__name__)

Field = ElicitationStringPropertySchema | ElicitationMultiSelectPropertySchema


def form_schema(request: RequestUserInput) -> ElicitationSchema:
    """The form that asks ``request``'s questions, a field each."""
    fields: dict[str, Any] = {q.id: _field(q) for q in request.questions}
    return ElicitationSchema(type="object", properties=fields)


def _field(question: RequestUserInputQuestion) -> Field:
    options = question.options or ()
    choices = [
        EnumOption(const=o.label, title=o.label, description=o.description or None) for o in options
    ]
    meta = {"codexcore": {"secret": True}} if question.isSecret else None
    about = question.question + (" (a secret: it is shown as typed)" if question.isSecret else "")
    if choices and not question.isOther:
        if question.multiSelect:
            return ElicitationMultiSelectPropertySchema(
                type="array",
                title=question.header,
                description=about,
                items=TitledMultiSelectItems(any_of=choices),
                field_meta=meta,
            )
        return ElicitationStringPropertySchema(
            type="string",
            title=question.header,
            description=about,
            one_of=choices,
            field_meta=meta,
        )
    if options:
        listed = "; ".join(
            o.label + (f" ({o.description})" if o.description else "") for o in options
        )
        about += f" Choices: {listed}; or your own words."
    return ElicitationStringPropertySchema(
        type="string", title=question.header, description=about, field_meta=meta
    )


def message_of(request: RequestUserInput) -> str:
    """What the form says above its fields."""
    if len(request.questions) == 1:
        return request.questions[0].question
    headers = ", ".join(q.header for q in request.questions)
    return f"The agent asks {len(request.questions)} questions: {headers}."


def answer_of(request: RequestUserInput, content: dict[str, Any] | None) -> UserInputAnswer:
    """The engine's answer for an accepted form's ``content`` (cancelled when it does not
    fit the questions)."""
    answers: dict[str, RequestUserInputAnswer] = {}
    for key, value in (content or {}).items():
        given = [value] if isinstance(value, str) else value
        if not isinstance(given, list) or not all(isinstance(v, str) for v in given):
            log.warning("elicitation answer of the wrong shape", field=key)
            return UserInputAnswer(request.call_id, cancelled=True)
        texts = tuple(v for v in given if v.strip())
        if texts:
            answers[key] = RequestUserInputAnswer(texts)
    op = UserInputAnswer(request.call_id, RequestUserInputResponse(answers))
    try:
        check_answer(request, op)
    except AnswerError as exc:
        log.warning("elicitation answer does not fit the questions", why=str(exc))
        return UserInputAnswer(request.call_id, cancelled=True)
    return op


class Questions:
    """One session's questions waiting on the editor's forms."""

    def __init__(self, session: AcpSession) -> None:
        self.session = session
        self.asking: set[asyncio.Task[None]] = set()

    def request(self, msg: RequestUserInput) -> None:
        """Ask the editor in a task of its own (the pump goes on meanwhile)."""
        task = asyncio.create_task(self._ask(msg))
        self.asking.add(task)
        task.add_done_callback(self.asking.discard)

    def withdraw(self) -> None:
        """Cancel every form still waiting on the editor."""
        for task in list(self.asking):
            task.cancel()

    async def _ask(self, msg: RequestUserInput) -> None:
        session = self.session
        mode = ElicitationFormSessionMode(session_id=session.id, requested_schema=form_schema(msg))
        try:
            response = await session.agent.conn.create_elicitation(
                message=message_of(msg), mode=mode
            )
        except asyncio.CancelledError:
            return  # session/cancel: the interrupt that follows ends the Task's wait
        except (RequestError, ConnectionError) as exc:
            log.warning("elicitation failed", error=str(exc))
            response = None
        if response is not None and response.action == "accept":
            op = answer_of(msg, response.content)
        else:
            op = UserInputAnswer(msg.call_id, cancelled=True)
        await session.submit(op)
