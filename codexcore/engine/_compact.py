"""Compaction: the model summarises the conversation, and the summary replaces it.

After Codex's ``compact.rs``. A compaction sends the conversation so far plus
:data:`SUMMARIZATION_PROMPT` (no tools), takes the answer's last message as the
summary, and replaces the History by:

1. the initial context (:func:`initial_context`: the contextual messages of the
   conversation, such as project instructions and the environment context);
2. the most recent user messages, newest kept first, within
   :data:`USER_MESSAGE_BUDGET` tokens (the oldest one that does not fit whole
   is cut in the middle);
3. the summary, as a user message beginning with :data:`SUMMARY_PREFIX`.

When the summary request itself does not fit the context window, the oldest
quarter of the conversation is left out of it and it is sent again (Codex
drops the oldest item at a time), until it fits or nothing is left to drop;
the user messages kept are still taken from the whole conversation.

The replacement is one ``compacted`` change of the History, recorded whole in
the rollout, so a resumed or forked session rebuilds it without the model. A
compaction that fails or is interrupted changes nothing.

When to compact is decided by the Task (:mod:`._task`): the ``compact`` op,
the auto-compact token limit (:func:`auto_compact_limit`) between two Turns,
and a model error that says the context window is exceeded
(:func:`is_context_window_exceeded`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final

import attrs

from ..model import Completed, ModelError, OutputItemDone, RetryScheduled
from ..protocol import (
    CompactionTrigger,
    ContextCompacted,
    ContextCompactionStarted,
    EventMsg,
    StreamError,
    TokenCount,
    TokenUsage,
    WarningEvent,
)
from ..protocol._value import Value
from ._config import SessionConfig
from ._history import History, Item
from ._instructions import is_contextual
from ._requests import build_request, input_item, is_call, message_text

if TYPE_CHECKING:
    from ..model import ModelClient

Emit = Callable[[EventMsg], Awaitable[None]]

SUMMARIZATION_PROMPT: Final = """\
Compact this conversation into a handoff note for the model that will continue the work \
(it will see the note instead of the conversation). Write, concisely and in order:
- what the user wants, in their terms, and any constraints or preferences they stated;
- what has been done so far and the decisions taken, with the reasons that still matter;
- the current state: files changed, commands that matter, results, open errors;
- what remains to be done, as concrete next steps;
- any exact data the next model needs (names, paths, values, snippets).
Do not address the user, and do not call any tool."""
"""The request that makes the model write the summary (a user message after the history)."""

SUMMARY_PREFIX: Final = (
    "An earlier model worked on this task and left the summary below of the conversation "
    "so far, which was compacted to fit the context window. Build on it and do not "
    "repeat work already done. Summary:"
)
"""Begins the summary message, so that a later compaction recognises it (and leaves it
out of the user messages it keeps)."""

USER_MESSAGE_BUDGET: Final = 20_000
"""Tokens of recent user messages a compacted History keeps (Codex's figure)."""

AUTO_COMPACT_PERCENT: Final = 90
"""The default auto-compact limit, in percent of the model's context window."""

LOSES_DETAIL: Final = (
    "Heads up: long conversations and repeated compactions make the model less accurate. "
    "Start a new session when you can, to keep conversations small and focused."
)

NO_SUMMARY: Final = "(no summary available)"


_CHARS_PER_TOKEN: Final = 4  # Codex's approximation, used for budgets only


class ContextWindowExceeded(Exception):
    """The conversation does not fit the model's context window, even compacted.

    The engine ends the Task with one ``error`` whose ``codex_error_info`` is
    ``context_window_exceeded``.
    """


def auto_compact_limit(window: int, configured: int | None) -> int:
    """Total tokens at which a Task compacts between two Turns: ``configured``, else
    :data:`AUTO_COMPACT_PERCENT` of the model's context ``window``."""
    if configured is not None:
        return configured
    return window * AUTO_COMPACT_PERCENT // 100


def is_context_window_exceeded(exc: BaseException) -> bool:
    """Whether a model error says the request does not fit the context window.

    The Responses API says so with the error code ``context_length_exceeded``, as an
    HTTP 400 body or in ``response.failed``; the client keeps it as ``server_code``.
    """
    if not isinstance(exc, ModelError):
        return False
    return exc.server_code == "context_length_exceeded"


def approx_tokens(text: str) -> int:
    return (len(text.encode()) + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN


def user_text(item: Item) -> str | None:
    """The text of a user ``message`` item (its text parts joined), else None."""
    if item.get("type") != "message" or item.get("role") != "user":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") == "input_text"
        and isinstance(part.get("text"), str)
        and part["text"]
    ]
    return "\n".join(texts)


def initial_context(items: Sequence[Item]) -> list[Item]:
    """The initial context a compacted History keeps: every contextual user message of
    the conversation (project instructions, the environment context and its later
    short updates), in order, each exact repeat once.

    Kept from the History rather than built anew, so what the model was told (and
    what a resumed session reads back to know it) survives compaction unchanged.
    """
    kept: list[Item] = []
    for item in items:
        if is_contextual(item) and item not in kept:
            kept.append(item)
    return kept


def collect_user_messages(items: Sequence[Item]) -> list[str]:
    """The user's own messages, oldest first: no contextual message, no earlier
    summary, no user shell record, and no empty one (an image alone)."""
    messages = []
    for item in items:
        text = user_text(item)
        if not text or is_contextual(item) or is_summary(text):
            continue
        if text.startswith("<user_shell_command>"):
            continue
        messages.append(text)
    return messages


def is_summary(text: str) -> bool:
    return text.startswith(SUMMARY_PREFIX)


def _input_message(text: str) -> Item:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def truncate_middle(text: str, max_tokens: int) -> str:
    """``text`` cut to about ``max_tokens`` tokens: its head and tail, and a marker
    saying how many tokens went from the middle."""
    data = text.encode()
    keep = max_tokens * _CHARS_PER_TOKEN
    if len(data) <= keep:
        return text
    half = keep // 2
    head = data[:half].decode(errors="ignore")
    tail = data[len(data) - half :].decode(errors="ignore")
    cut = approx_tokens(text) - max_tokens
    return f"{head}\n[… {cut} tokens truncated …]\n{tail}"


def build_compacted_history(
    initial: Sequence[Item],
    user_messages: Sequence[str],
    summary: str,
    budget: int = USER_MESSAGE_BUDGET,
) -> list[Item]:
    """``initial``, then the newest ``user_messages`` within ``budget`` tokens, then the
    summary message (:data:`SUMMARY_PREFIX` and ``summary``)."""
    kept: list[str] = []
    remaining = budget
    for message in reversed(user_messages):
        if remaining <= 0:
            break
        tokens = approx_tokens(message)
        if tokens <= remaining:
            kept.append(message)
            remaining -= tokens
        else:
            kept.append(truncate_middle(message, remaining))
            break
    summary_text = f"{SUMMARY_PREFIX}\n{summary.strip() or NO_SUMMARY}"
    return [
        *initial,
        *(_input_message(m) for m in reversed(kept)),
        _input_message(summary_text),
    ]


def trim_oldest(items: Sequence[Item]) -> tuple[list[Item], int]:
    """``items`` without their oldest quarter (at least one item), and without the
    outputs whose call went with it (the API refuses an output with no call); with
    how many items went. The contextual messages stay (the summary is written under
    the same instructions); nothing goes from a conversation without other items."""
    context = initial_context(items)
    rest = [i for i in items if i not in context]
    if not rest:
        return list(items), 0
    kept = rest[max(1, len(rest) // 4) :]
    calls = {i.get("call_id") for i in kept if is_call(i)}
    kept = [i for i in kept if is_call(i) or "call_id" not in i or i.get("call_id") in calls]
    return [*context, *kept], len(rest) - len(kept)


@attrs.frozen(repr=False, eq=False)
class Compactor(Value):
    """Runs compactions of one Session's History for a Task."""

    session_id: str
    config: SessionConfig
    history: History
    client: ModelClient
    emit: Emit
    count: Callable[[TokenUsage], Awaitable[None]] | None = None
    """Counts the summary's tokens with the Session's (``token_count`` with its info);
    without it a bare ``token_count`` is sent."""

    async def compact(self, trigger: CompactionTrigger, pending: Sequence[Item] = ()) -> None:
        """Summarise the conversation (and ``pending``, input not yet in the History)
        and replace the History by its compacted form.

        Raises :class:`ContextWindowExceeded` when even the summary request does not
        fit, and the model's error for any other failure; the History is then as it
        was. ``pending`` user messages are kept among the recent user messages.
        """
        await self.emit(ContextCompactionStarted(trigger))
        conversation = [*self.history.items(), *pending]
        summary = await self._summary(list(pending))
        self.history.compact(
            build_compacted_history(
                initial_context(conversation), collect_user_messages(conversation), summary
            )
        )
        await self.emit(ContextCompacted())
        await self.emit(WarningEvent(LOSES_DETAIL))

    async def _summary(self, pending: list[Item]) -> str:
        """The model's summary of the History and ``pending``; while the request does
        not fit, the oldest part of the conversation is left out of it."""
        new = [*pending, _input_message(SUMMARIZATION_PROMPT)]
        body = build_request(self.config, self.history, new, (), session_id=self.session_id)
        items = [input_item(i) for i in self.history.items() if i.get("type") != "reasoning"]
        dropped = 0
        while True:
            try:
                summary = await self._summarise(body)
                break
            except ModelError as exc:
                if not is_context_window_exceeded(exc):
                    raise
                items, cut = trim_oldest(items)
                if not cut:
                    raise ContextWindowExceeded(
                        f"the conversation does not fit the model's context window, even "
                        f"for its summary: {exc.message}"
                    ) from exc
                dropped += cut
                body = self._standalone_request(items, new)
        if dropped:
            await self.emit(
                WarningEvent(
                    f"left the {dropped} oldest conversation item(s) out of the summary "
                    "so that the request fits the model's context window"
                )
            )
        return summary

    def _standalone_request(self, items: list[Item], new: list[Item]) -> dict[str, object]:
        """A request that sends ``items`` whole, chained on nothing (in ``server`` mode
        too: the stored chain is what did not fit)."""
        alone = History()
        alone.compact(items)
        return build_request(self.config, alone, new, (), session_id=self.session_id)

    async def _summarise(self, body: dict[str, object]) -> str:
        """Stream the summary request; its last assistant message is the summary. The
        summary is for the next model, not the user: no message events."""
        messages: list[str] = []
        async for event in self.client.stream(body):
            if isinstance(event, OutputItemDone) and event.item.get("type") == "message":
                messages.append(message_text(event.item))
            elif isinstance(event, Completed) and event.usage is not None:
                usage = TokenUsage(**attrs.asdict(event.usage))
                await (
                    self.count(usage)
                    if self.count
                    else self.emit(TokenCount(**attrs.asdict(usage)))
                )
            elif isinstance(event, RetryScheduled):
                messages.clear()  # the retried response starts over
                await self.emit(StreamError(event.reason, event.attempt, event.max_attempts))
        return messages[-1] if messages else ""
