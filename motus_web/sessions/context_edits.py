"""Actions that change a live session in place: rewind (and undo a rewind),
correct a compaction's summary, compact now, unpin.

Each is done by the memory library on the session's memory restored from the
database (``operations.writing``: one transaction, under the session's
writer lease, after checking that the target is still current and that the
session logged nothing since the confirmation was made), and appends one
record (``rewind``, ``summary_correction``, ``compaction``, ``unpin``) through
``DatabaseLogStore``; nothing logged is changed. The chat and every restore
read those records back, so they see the context the action left. Each has a
preview that runs the same library call on a memory that writes nowhere
(``memories.restore_view``), for its confirmation page to state the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from asgiref.sync import async_to_sync

from memory import ChatClient, CompactionError, CompactionMemory, LogPoint, PointNotFoundError
from motus_web.providers import ChatModel, configured_for

from . import history, operations, pins
from .memories import ContextSize, restore_view
from .models import CompactionEvent, ContextChange, Message, Session
from .once import StaleTargetError
from .operations import fork_cut, writing

# -- rewind ------------------------------------------------------------------------------


class CannotRewindError(ValueError):
    """There is no earlier point to rewind to here (the message says why)."""


@dataclass(frozen=True, slots=True)
class RewindPlan:
    """Where a rewind asked for at message ``asked`` goes (``point``), and the
    context it leaves (``size``); ``moved`` says why it is not right after
    ``asked`` ("" when it is)."""

    asked: int
    point: LogPoint
    moved: str
    size: ContextSize

    @property
    def after(self) -> int:
        return self.point.key


def rewind_plan(session: Session, message: Message) -> RewindPlan:
    """A rewind to just after ``message``, moved to a unit boundary as a fork
    is (``operations.fork_cut``: a point inside a tool round moves to the end
    of the round). Raises ``CannotRewindError`` when the cut falls before
    every message (there is no point of the log there to rewind to)."""
    cut = fork_cut(session, message, what="rewind")
    if cut.after is None:
        raise CannotRewindError(f"{cut.moved} There is no earlier point to continue from.")
    point = LogPoint("after_message", cut.after)
    # The cut's memory is the restore of the same prefix unless the cut moved
    # before a round that events follow.
    size = cut.size if stop_of(session, point) == cut.stop else rewind_preview(session, point)
    return RewindPlan(message.seq, point, cut.moved, size)


def before(event: CompactionEvent) -> LogPoint:
    """The point just before compaction ``event`` (numbers restart after a
    reset, so its ``through_seq`` narrows it)."""
    return LogPoint("before_compaction", event.number or 0, event.through_seq)


def rewind_preview(session: Session, point: LogPoint) -> ContextSize:
    """The context a rewind to ``point`` would leave, writing nothing: the
    library's rewind makes the context (instructions and tools included) what
    a restore of the log up to ``point`` gives, so this is that restore, read
    from the checkpoint nearest the point (``restore_view``) rather than by a
    rewind on a copy of the live memory, which reads the log back from its
    end to the point. Raises ``PointNotFoundError`` for a point the log lacks."""
    return ContextSize.of(restore_view(session, stop_of(session, point)))


def stop_of(session: Session, point: LogPoint) -> int:
    """How many records of the session's log lie before ``point``: the log
    position just after the record an ``after_`` point names, else of that
    record (the newest with its key, as the library places points). Raises
    ``PointNotFoundError`` when the log has no such record."""
    position: int | None = None
    if point.kind in ("after_message", "before_message"):
        found = session.messages.filter(seq=point.key).values_list("position", flat=True)
        position = found.first()
    elif point.kind == "before_compaction":
        numbered = session.compaction_events.filter(kind=CompactionEvent.Kind.OK, number=point.key)
        if point.through_seq is not None:
            numbered = numbered.filter(through_seq=point.through_seq)
        position = numbered.order_by("-position").values_list("position", flat=True).first()
    else:
        rewinds = session.context_changes.filter(kind=history.REWIND).order_by("-position")
        position = next(
            (row.position for row in rewinds if history.rewind_number(row) == point.key), None
        )
    if position is None:
        raise PointNotFoundError(point)
    return position + 1 if point.includes_its_record else position


def rewind(session: Session, point: LogPoint, reason: str, *, as_of: int) -> int:
    """Continue the session in place from ``point`` (a plan's: the session
    unchanged since ``as_of`` is what makes it still the plan's): the library
    appends a ``rewind`` record after which the live context is its restore
    of the log up to ``point``. Returns the rewind's number. Raises
    ``StaleTargetError`` when the session logged anything since it had
    ``as_of`` records, ``CompactionError`` for a point inside a tool round,
    ``SessionBusyError`` while a chat turn writes it."""
    with writing(session, "rewind", as_of=as_of) as memory:
        return memory.rewind(point, reason=reason)


def latest_rewind(session: Session) -> ContextChange | None:
    """The session's newest rewind, the one "undo the rewind" undoes."""
    return session.context_changes.filter(kind=history.REWIND).order_by("-position").first()


def undo_rewind(session: Session, number: int, reason: str, *, as_of: int) -> int:
    """Undo rewind ``number``, the newest: a new ``rewind`` record back to
    just before it (the context it had rewound, and what it held then,
    return). Returns the new rewind's number. Raises ``StaleTargetError``
    when rewind ``number`` is no longer the newest or the session logged
    anything since ``as_of``; ``SessionBusyError`` while a turn writes it."""

    def check() -> None:
        newest = latest_rewind(session)
        now = history.rewind_number(newest) if newest is not None else None
        if now != number:
            raise StaleTargetError(
                f"This page was for rewind {number}, but rewind {now} is the latest now. "
                "Nothing was undone."
            )

    with writing(session, "rewind", as_of=as_of, check=check) as memory:
        return memory.rewind(LogPoint("before_rewind", number), reason=reason)


# -- undoing a tool-result clearing ------------------------------------------------------


def restore_tool_results(session: Session, number: int, reason: str, *, as_of: int) -> int:
    """Undo tool-result clearing ``number`` through the library (a
    ``tool_results_restored`` record): its results still in the context are
    whole again. Returns its number. Raises ``StaleTargetError`` when it is
    not the newest clearing in force (the library's word: a later clearing,
    or a compaction that folded its stubs, came first) or the session logged
    anything since ``as_of``; ``SessionBusyError`` while a turn writes it."""
    with writing(session, "undo", as_of=as_of) as memory:
        try:
            return memory.restore_tool_results(reason, number=number)
        except CompactionError as error:
            raise StaleTargetError(f"{error}. Nothing was restored.") from error


# -- correcting a summary ----------------------------------------------------------------


def in_force(session: Session) -> CompactionEvent | None:
    """The compaction whose summary heads the live context (``history``)."""
    return operations.in_force(Session.objects.get(pk=session.pk))


def _corrects(change: ContextChange, event: CompactionEvent) -> bool:
    """Whether ``change`` (a ``summary_correction`` row) corrects ``event``'s summary."""
    number = change.record_extra.get("compaction_number")
    return change.position > event.position and number == event.number


def corrections_of(session: Session, event: CompactionEvent) -> list[ContextChange]:
    """The corrections of ``event``'s summary, oldest first (the last is in
    force while ``event`` is)."""
    later = session.context_changes.filter(
        kind=history.SUMMARY_CORRECTION, position__gt=event.position
    ).order_by("position")
    return [change for change in later if _corrects(change, event)]


def corrected_summaries(
    events: Sequence[CompactionEvent | ContextChange], compactions: Sequence[CompactionEvent]
) -> dict[int, str]:
    """The summary in use of each of ``compactions`` that an operator
    corrected (its latest correction among ``events``, the session's event
    rows in log order), by the compaction's log position."""
    corrections = [
        e for e in events if isinstance(e, ContextChange) and e.kind == history.SUMMARY_CORRECTION
    ]
    out: dict[int, str] = {}
    for event in compactions:
        for change in corrections:
            text = change.record_extra.get("summary")
            if _corrects(change, event) and isinstance(text, str):
                out[event.position] = text
    return out


def correct_summary(
    session: Session, target: int, text: str, reason: str, *, as_of: int
) -> CompactionEvent:
    """Replace the summary of the compaction at log position ``target``,
    the one in force, with an operator's ``text`` (the library's
    ``correct_summary``: a ``summary_correction`` record; the compaction's
    own record keeps the original). Returns that compaction. Raises
    ``StaleTargetError`` when it is not in force any more or the session
    logged anything since ``as_of``, ``CompactionError`` for an empty text,
    ``SessionBusyError`` while a chat turn writes the session."""
    found: list[CompactionEvent] = []

    def check() -> None:
        event = in_force(session)
        if event is None or event.position != target:
            now = (
                f"compaction {event.number} is the one in force now"
                if event is not None
                else "no compaction is in force now"
            )
            raise StaleTargetError(
                f"This page was for the summary at log position {target}, but {now}. "
                "Nothing was corrected."
            )
        found.append(event)

    with writing(session, "correct", as_of=as_of, check=check) as memory:
        memory.correct_summary(text, reason=reason, number=found[0].number)
    return found[0]


# -- compact now -------------------------------------------------------------------------


def _configured(session: Session) -> ChatModel | None:
    """The session's own model among the chat's (``MOTUS_CHAT_MODELS``), if configured."""
    return configured_for(session.model_name)


def compactor_name(session: Session) -> str | None:
    """The model that writes the session's summaries; ``None``: the offline summariser."""
    model = _configured(session)
    return (model.compact_model or model.model) if model is not None else None


class NothingToFoldError(ValueError):
    """Compact now found nothing to fold; the message says why
    (``CompactionMemory.nothing_to_fold``). Nothing was logged."""


def compact_now(
    session: Session, instructions: str, *, as_of: int, model: ChatModel | None = None
) -> CompactionEvent:
    """Compact the session's context now with ``instructions`` (what the
    summary must keep; ``""``: none). ``model`` is a configured chat model
    (``motus_web.providers.ChatModel``: its client and summary model
    write the summary); ``None``: the session's own model when it is
    configured, else the offline summariser. Returns the event logged: the
    compaction, or a failed attempt (the context is then as it was; its
    ``error`` says why). Synchronous ORM: call it from a thread in async code.

    The summary request runs inside the action's transaction, under the
    lease: a turn cannot start meanwhile, and a crash logs nothing. Raises
    ``NothingToFoldError`` when there is nothing to fold (before any request,
    logging nothing), ``StaleTargetError`` when the session logged anything
    since ``as_of``, ``SessionBusyError`` while a chat turn writes it."""
    model = model if model is not None else _configured(session)
    client = model.client() if model is not None else None
    summary_model = (model.compact_model or model.model) if model is not None else None
    with writing(
        session, "compact", as_of=as_of, client=client, compact_model=summary_model
    ) as memory:
        why = memory.nothing_to_fold()
        if why is not None:
            async_to_sync(_close)(client)
            raise NothingToFoldError(why)
        async_to_sync(_compact)(memory, instructions.strip() or None, client)
    # A manual compaction with something to fold always logs its outcome.
    return session.compaction_events.filter(
        position__gte=as_of, kind__in=[CompactionEvent.Kind.OK, CompactionEvent.Kind.FAILED]
    ).latest("position")


def clear_then_compact(
    session: Session, instructions: str, *, as_of: int, model: ChatModel | None = None
) -> CompactionEvent | ContextChange:
    """Compact now's option "clear old tool results first": tool results older
    than the newest ``clear_keep_tool_results`` of the session's config (3 by
    default) become one-line stubs (``memory.compaction.clearing``), and a
    summary is written, as ``compact_now`` writes it, only when the context is
    still above the threshold. Returns the clearing's row when that was
    enough (or nothing was left to fold), else the compaction event (or the
    failed attempt). One transaction under the lease, as ``compact_now``: a
    crash logs nothing. Raises ``NothingToFoldError`` when there is nothing to
    clear and nothing to fold, ``StaleTargetError`` and ``SessionBusyError``
    as ``compact_now``."""
    model = model if model is not None else _configured(session)
    client = model.client() if model is not None else None
    summary_model = (model.compact_model or model.model) if model is not None else None
    summarised = False
    with writing(
        session, "compact", as_of=as_of, client=client, compact_model=summary_model
    ) as memory:
        cleared = memory.clear_tool_results()
        why = memory.nothing_to_fold()
        enough = memory.estimate_context_tokens() <= memory.threshold_estimate
        if cleared is None and why is not None:
            async_to_sync(_close)(client)
            raise NothingToFoldError(why)
        if (cleared is not None and enough) or why is not None:
            async_to_sync(_close)(client)
        else:
            async_to_sync(_compact)(memory, instructions.strip() or None, client)
            summarised = True
    if summarised:
        return session.compaction_events.filter(
            position__gte=as_of, kind__in=[CompactionEvent.Kind.OK, CompactionEvent.Kind.FAILED]
        ).latest("position")
    return session.context_changes.filter(
        position__gte=as_of, kind=ContextChange.Kind.TOOL_RESULTS_CLEARED
    ).latest("position")


async def _compact(
    memory: CompactionMemory, instructions: str | None, client: ChatClient | None
) -> None:
    # One event loop for the request and the client's close: its connections belong to it.
    try:
        await memory.compact(instructions=instructions)
    finally:
        await _close(client)


async def _close(client: ChatClient | None) -> None:
    if (aclose := getattr(client, "aclose", None)) is not None:
        await aclose()


# -- unpin -------------------------------------------------------------------------------


def unpin(session: Session, value: str, reason: str, *, as_of: int) -> int:
    """Let later compactions of the session drop the pinned ``value`` (the
    library's ``unpin``: an ``unpin`` record; the context is unchanged).
    Returns the number of the compaction whose ledger held the pin. Raises
    ``StaleTargetError`` when ``value`` is no longer pinned or the session
    logged anything since ``as_of``, ``SessionBusyError`` while a chat turn
    writes it."""
    found: list[int] = []

    def check() -> None:
        now = pins.in_force(Session.objects.get(pk=session.pk), None)
        if now.compaction is None or value not in {pin.value for pin in now.pins}:
            raise StaleTargetError(f"{value} is not pinned any more. Nothing was unpinned.")
        found.append(now.compaction.number or 0)

    with writing(session, "unpin", as_of=as_of, check=check) as memory:
        memory.unpin([value], reason=reason, number=found[0] or None)
    return found[0]
