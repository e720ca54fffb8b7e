"""A what-if replay against its original, over the messages replayed so far.

Each side is read the same way: compactions that took effect, the tokens
sent in total (the estimate of every reply's request: its logged context
size less the reply's own tokens), the peak context, and how many of the
identifiers the user named are still in the final context (summary
included). The original is cut to the replay's length, so a replay stopped
half-way compares with the same half.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, Max, Q, Sum

from memory import find_identifiers, kept_in
from motus_web.sessions.memories import restore_view
from motus_web.sessions.models import CompactionEvent, Message, Session

from . import lost


@dataclass(frozen=True, slots=True)
class Side:
    compactions: int
    tokens_sent: int
    peak: int
    identifiers_kept: int
    identifiers: int


@dataclass(frozen=True, slots=True)
class Comparison:
    original: Side
    replay: Side
    messages: int  # replayed so far


def _side(session: Session, upto: int) -> Side:
    """``session`` over its messages ``0 .. upto - 1``."""
    messages = session.messages.filter(seq__lt=upto)
    figures = messages.aggregate(
        peak=Max("context_tokens"),
        sent=Sum(F("context_tokens") - F("tokens"), filter=Q(role=Message.Role.ASSISTANT)),
        last=Max("position"),
    )
    stop = (figures["last"] or 0) + 1
    compactions = session.compaction_events.filter(position__lt=stop).aggregate(
        ok=Count("pk", filter=Q(kind=CompactionEvent.Kind.OK)),
        reverted=Count("pk", filter=Q(kind=CompactionEvent.Kind.REVERT)),
    )
    named = {
        ident: None
        for text in lost.texts(messages.filter(role=Message.Role.USER))
        for ident in find_identifiers(text.text)
        if ident.kind not in lost.NOT_CHECKED
    }
    kept = 0
    if named:
        memory = restore_view(session, stop)
        context = "\n".join(m.text for m in memory.get_context())
        kept = sum(ok for _, ok in kept_in(context, named))
    return Side(
        compactions["ok"] - compactions["reverted"],
        figures["sent"] or 0,
        figures["peak"] or 0,
        kept,
        len(named),
    )


def compare(original: Session, replay: Session) -> Comparison:
    done = replay.message_count
    return Comparison(_side(original, done), _side(replay, done), done)
