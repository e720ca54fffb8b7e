"""Logs written by the reference implementation (lithosai-motus 0.4), restored to what it held.

Its ``compaction`` records carry only ``compaction_number``,
``messages_compacted`` and ``summary``. ``messages_compacted`` is the number of
context messages (its previous continuation included) that were folded; the
rest of the context was kept: the tool-call batch of a unit B. At a unit A the
pending user message was not kept as a message but written into the
continuation with another template. The reference's own ``restore_from_log``
drops what was kept; this module gives it back, with the reference's wording,
so a restored session shows the model exactly what it saw.

The two templates are the reference's ``CONTINUATION_TEMPLATE`` and
``CONTINUATION_WITH_PENDING_TEMPLATE`` (``motus/memory/compaction_prompts.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import ChatMessage

CONTINUATION_TEMPLATE = """\
This session is being continued from a previous conversation that ran out of \
context window space. The summary below was auto-generated and covers the \
earlier portion of the conversation.

<context_summary>
{summary}
</context_summary>

Please continue the conversation from where it left off. Do not ask the user \
any further questions about what was already discussed. Continue with the last \
task that was being worked on."""

CONTINUATION_WITH_PENDING_TEMPLATE = """\
This session is being continued from a previous conversation that ran out of \
context window space. The summary below was auto-generated and covers the \
earlier portion of the conversation.

<context_summary>
{summary}
</context_summary>

The user sent the following message which you have not yet responded to:
<pending_request>
{pending_request}
</pending_request>

Please respond to the pending request above, using the context summary as background."""


@dataclass(frozen=True, slots=True)
class ReferenceCut:
    """What a reference compaction kept: context indices, and the continuation text."""

    kept: list[int]
    continuation: str


def reference_cut(
    context: Sequence[ChatMessage], messages_compacted: object, summary: str
) -> ReferenceCut:
    """The reference's split of ``context`` (the continuation included).

    ``context[:messages_compacted]`` was folded and the rest kept; a kept
    pending user request is folded into the continuation instead. A count
    that is missing or out of range folds everything (what the reference's
    own restore assumes).
    """
    n = messages_compacted
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= len(context):
        n = len(context)
    kept = list(range(n, len(context)))
    if kept and context[kept[0]].role == "user":
        pending = context[kept[0]].content
        text = CONTINUATION_WITH_PENDING_TEMPLATE.format(
            summary=summary, pending_request=pending if isinstance(pending, str) else ""
        )
        return ReferenceCut([], text)
    return ReferenceCut(kept, CONTINUATION_TEMPLATE.format(summary=summary))
