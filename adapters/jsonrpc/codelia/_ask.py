"""The model asks the user, over the Codelia runtime protocol (section 7.2, 7.3).

The engine's ``request_user_input`` (the model's ``request_user_input`` tool,
offered only to a session whose UI can answer) becomes, one question at a
time, a ``ui.pick.request`` (a question with options, ``multi`` when several
may be picked; a last item "Other" when the user may also answer in their own
words and the UI can prompt) or a ``ui.prompt.request`` (a free-text question,
``secret`` for a password or a key; a question with options asked of a UI that
cannot pick, ``default_value`` its recommended option). The answers go back as
one ``user_input_answer``. ``{value: null}``, ``{ids: []}``, or an error
response (the protocol's -32003, "user cancelled", or any other) cancel the
question: the model is told the user declined, and the run goes on. While
the UI is asked, the run's status is ``awaiting_ui``, as for a confirm.

The tool is turned on (``configure_session {ask_user: true}``) before a
connection's first run, when its UI declared ``supports_pick`` or
``supports_prompt`` in ``initialize``'s ``ui_capabilities``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codexcore._logging import get_logger
from codexcore.adapters.jsonrpc._errors import USER_CANCELLED
from codexcore.adapters.jsonrpc._machine import RpcError
from codexcore.protocol import (
    ConfigureSession,
    RequestUserInput,
    RequestUserInputAnswer,
    RequestUserInputQuestion,
    RequestUserInputResponse,
    UserInputAnswer,
)

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext

    from ._runs import Codelia, Run

log = get_logger(__name__)

OTHER_ID = "__other__"
"""The pick item that asks for the user's own words (the UI is then prompted)."""
PROMPT_TRIES = 3
"""How often a prompt is asked again when its answer must be one of the options."""


class Cancelled(Exception):
    """The user declined to answer (or the UI could not ask)."""


def can_ask(capabilities: Mapping[str, Any]) -> bool:
    """Whether a UI with these ``ui_capabilities`` can answer the model's questions."""
    return capabilities.get("supports_pick") is True or capabilities.get("supports_prompt") is True


async def turn_on(state: Codelia) -> None:
    """Before the connection's first run: offer the model the ask tool when its UI can
    answer (submitted ahead of the run's input, so no round trip is waited for)."""
    if state.ask_user_set or not can_ask(state.ctx.client_capabilities):
        return
    await state.submit(ConfigureSession(ask_user=True))
    state.ask_user_set = True


async def ask(state: Codelia, run: Run, request: RequestUserInput) -> None:
    """Ask the UI each question in turn, then answer the engine (in a task of its own)."""
    from codexcore.adapters.jsonrpc._outbox import ConnectionClosed

    answers: dict[str, RequestUserInputAnswer] = {}
    cancelled = False
    try:
        for question in request.questions:
            given = await _ask_one(state.ctx, run.id, question)
            answers[question.id] = RequestUserInputAnswer(tuple(given))
    except ConnectionClosed:
        return  # the UI is gone: the question stays unanswered, as a confirm does
    except Cancelled as exc:
        log.info("question cancelled", run=run.id, call=request.call_id, why=str(exc))
        cancelled = True
    async with run.lock:
        if run.finished:
            return
        await state.send_status(run, "running")
    op = UserInputAnswer(
        request.call_id, RequestUserInputResponse(answers if not cancelled else {}), cancelled
    )
    with contextlib.suppress(RpcError):  # the session ended: nothing waits for it
        await state.submit(op)


async def _ask_one(ctx: RpcContext, run_id: str, question: RequestUserInputQuestion) -> list[str]:
    caps = ctx.client_capabilities
    pick, prompt = caps.get("supports_pick") is True, caps.get("supports_prompt") is True
    if question.options and pick:
        return await _pick(ctx, run_id, question, other=question.isOther and prompt)
    if prompt:
        return await _prompt(ctx, run_id, question)
    raise Cancelled("the UI can pick from options only, and the question wants free text")


async def _pick(
    ctx: RpcContext, run_id: str, question: RequestUserInputQuestion, *, other: bool
) -> list[str]:
    options = question.options or ()
    items = [{"id": o.label, "label": o.label, "detail": o.description} for o in options]
    if other:
        items.append({"id": OTHER_ID, "label": "Other", "detail": "answer in your own words"})
    params = {
        "run_id": run_id,
        "title": _title(question),
        "items": items,
        "multi": question.multiSelect,
    }
    result = await _request(ctx, "ui.pick.request", params)
    ids = result.get("ids") if isinstance(result, dict) else None
    if not isinstance(ids, list) or not ids:
        raise Cancelled("the UI answered ids: [] (cancelled)")
    labels = {o.label for o in options}
    picked = [i for i in ids if isinstance(i, str) and i in labels]
    if OTHER_ID in ids:
        picked += await _prompt(ctx, run_id, question, own_words=True)
    if not picked:
        raise Cancelled(f"the UI picked no item it was offered: {ids!r}")
    return picked if question.multiSelect else picked[:1]


async def _prompt(
    ctx: RpcContext, run_id: str, question: RequestUserInputQuestion, *, own_words: bool = False
) -> list[str]:
    options = () if own_words else (question.options or ())
    message = question.question
    if options:
        message += "\n" + "\n".join(f"- {o.label}: {o.description}" for o in options)
    params: dict[str, Any] = {
        "run_id": run_id,
        "title": question.header,
        "message": message,
        "multiline": False,
        "secret": question.isSecret,
    }
    if options:
        params["default_value"] = options[0].label  # the recommended one comes first
    labels = {o.label for o in options}
    for _ in range(PROMPT_TRIES):
        result = await _request(ctx, "ui.prompt.request", params)
        value = result.get("value") if isinstance(result, dict) else None
        if not isinstance(value, str):
            raise Cancelled("the UI answered value: null (cancelled)")
        if question.isOther or own_words or value.strip() in labels:
            return [value.strip() if labels else value]
        params["message"] = f"{message}\nAnswer with one of: {', '.join(sorted(labels))}"
    raise Cancelled(f"no answer among the options after {PROMPT_TRIES} tries")


def _title(question: RequestUserInputQuestion) -> str:
    return f"{question.header}: {question.question}"


async def _request(ctx: RpcContext, method: str, params: dict[str, Any]) -> Any:
    try:
        return await ctx.request(method, params)
    except RpcError as exc:
        why = "the user cancelled" if exc.code == USER_CANCELLED else exc.message
        raise Cancelled(f"{method} answered error {exc.code}: {why}") from None
