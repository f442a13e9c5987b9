"""Compaction's wire types: the ``compact`` op and the events of a compaction.

Kept in one module of their own so the ops and events of other features can
grow beside them without touching these lines. Names follow Codex's
(``Op::Compact``, ``EventMsg::ContextCompacted``); the start event has no Codex
counterpart and is what lets a UI show "compacting…" while the summary streams.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._wire import EVENT_MSGS, OPS, Tagged

CompactionTrigger = Literal["manual", "auto", "context_window_exceeded"]
"""Why a compaction ran: the ``compact`` op, the auto-compact token limit, or a model
that answered "context length exceeded"."""


@OPS.register("compact")
@attrs.frozen(repr=False, eq=False)
class Compact(Tagged):
    """Run a compaction Task: the model summarises the conversation, and the History
    becomes the initial context, the most recent user messages (up to a token budget)
    and that summary.

    The Task emits ``context_compaction_started {trigger: "manual"}``, then
    ``context_compacted`` and a ``warning`` that long conversations lose detail,
    and ends with ``task_complete``. A running Task is replaced, as Codex does.
    """


@EVENT_MSGS.register("context_compaction_started")
@attrs.frozen(repr=False, eq=False)
class ContextCompactionStarted(Tagged):
    """A compaction began: the model is summarising the conversation.

    Followed by ``context_compacted`` when the History was replaced, or by the
    Task's terminal event when the compaction failed or was interrupted (then the
    History is unchanged).
    """

    trigger: CompactionTrigger = "manual"


@EVENT_MSGS.register("context_compacted")
@attrs.frozen(repr=False, eq=False)
class ContextCompacted(Tagged):
    """The History was replaced by its compacted form (Codex's ``ContextCompacted``).

    In the ``server`` history mode the next request starts a new
    ``previous_response_id`` chain.
    """
