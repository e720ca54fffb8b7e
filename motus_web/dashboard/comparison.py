"""A what-if replay against its original, over the messages replayed so far.

Each side is read the same way: compactions logged (as the session page
counts them, with how many were undone since), the tokens sent in total (the
estimate of every reply's request: its logged context size less the reply's
own tokens), the peak context, and how many identifiers of its messages are
still in the final context, its summary included (what counts as one is the
compaction page's definition, ``lost.identifiers_in``). The original is cut
to the replay's length (with what it logged after its last message there, a
compaction that message set off included), so a replay stopped half-way
compares with the same half and a whole one with the whole session.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, Max, Min, Q, Sum

from memory import kept_in
from motus_web.sessions.memories import restore_view
from motus_web.sessions.models import CompactionEvent, Message, Session

from . import lost


@dataclass(frozen=True, slots=True)
class Side:
    compactions: int  # logged, as the session page counts them
    undone: int  # of them, undone since
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
    """``session`` over its messages ``0 .. upto - 1`` and what it logged
    before message ``upto``."""
    messages = session.messages.filter(seq__lt=upto)
    figures = messages.aggregate(
        peak=Max("context_tokens"),
        sent=Sum(F("context_tokens") - F("tokens"), filter=Q(role=Message.Role.ASSISTANT)),
    )
    following = session.messages.filter(seq__gte=upto).aggregate(first=Min("position"))["first"]
    events = session.compaction_events.all()
    if following is not None:
        events = events.filter(position__lt=following)
    compactions = events.aggregate(
        ok=Count("pk", filter=Q(kind=CompactionEvent.Kind.OK)),
        reverted=Count("pk", filter=Q(kind=CompactionEvent.Kind.REVERT)),
    )
    identifiers, _ = lost.identifiers_in(lost.texts(messages))
    kept = 0
    if identifiers:
        memory = restore_view(session, following)
        context = "\n".join(m.text for m in memory.get_context())
        kept = sum(ok for _, ok in kept_in(context, identifiers))
    return Side(
        compactions["ok"],
        compactions["reverted"],
        figures["sent"] or 0,
        figures["peak"] or 0,
        kept,
        len(identifiers),
    )


def compare(original: Session, replay: Session) -> Comparison:
    done = replay.message_count
    return Comparison(_side(original, done), _side(replay, done), done)
