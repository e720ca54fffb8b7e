"""Operator actions that change a live session in place: rewind to a message
(and undo a rewind), correct a compaction's summary, compact now, unpin.

The same rules as ``actions``: owners and staff only (anyone else gets 404),
a form that names its target and the session's record count and carries a
one-time token, a POST done once through storage
(``motus_web.sessions.context_edits``) that answers 303 to the result, and a 409
page for a second submission, a stale target or a busy session. A rewind
asks first on a page that states the context it will leave.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from memory import CompactionError, LogPoint
from motus_web.sessions import context_edits, history, once
from motus_web.sessions.access import visible_session
from motus_web.sessions.models import CompactionEvent, ContextChange, Session
from motus_web.ui.rendering import render

from .actions import act_once, confirm_page, form_number, see_other, session_url
from .exactly_once import Refused, acting

REASON_CHARS = 500
SUMMARY_CHARS = 200_000
INSTRUCTION_CHARS = 2_000


def _reason(request: HttpRequest, default: str) -> str:
    return request.POST.get("reason", "").strip()[:REASON_CHARS] or default


def _cannot(
    request: HttpRequest, session: Session, title: str, why: str, status: int = 404
) -> HttpResponse:
    """A styled page saying why there is nothing to do: 404 for a page asked
    for (as "nothing to undo" is), 409 for a POST the library refused."""
    context = {"session": session, "title": title, "reason": why}
    return render(request, "dashboard/cannot.html", context, status=status)


# -- rewind to a message -------------------------------------------------------------


@require_safe
@login_required
def rewind_confirm(request: HttpRequest, public_id: str, seq: int) -> HttpResponse:
    session = visible_session(request, public_id)
    message = get_object_or_404(session.messages, seq=seq)
    try:
        plan = context_edits.rewind_plan(session, message)
    except context_edits.CannotRewindError as error:
        return _cannot(request, session, "No point to rewind to", str(error))
    return confirm_page(
        request,
        session,
        title=f"Rewind to message #{seq}?",
        explain=(
            f"This session continues from the context as it was right after message "
            f"#{plan.after}: the next message follows it. Everything logged after it stays in "
            "the log and on this session's page, marked inactive, and the rewind can be undone."
        ),
        moved=plan.moved,
        action=reverse("dashboard:rewind_session", args=[session.public_id, seq]),
        button=f"Rewind to #{plan.after}",
        reason=True,
        size=plan.size,
        target={"target": plan.after, "as_of": session.record_count},
    )


@require_POST
@login_required
def rewind_session(request: HttpRequest, public_id: str, seq: int) -> HttpResponse:
    session = visible_session(request, public_id)
    get_object_or_404(session.messages, seq=seq)
    back = reverse("dashboard:rewind_confirm", args=[session.public_id, seq])
    try:
        target = form_number(request, "target")
    except Refused as refused:
        return refused.response(request)
    return _rewind(request, session, LogPoint("after_message", target), back)


@require_safe
@login_required
def rewind_before_confirm(request: HttpRequest, public_id: str, position: int) -> HttpResponse:
    session = visible_session(request, public_id)
    event = get_object_or_404(session.compaction_events, position=position, kind="ok")
    return confirm_page(
        request,
        session,
        title=f"Rewind to before compaction {event.number}?",
        explain=(
            f"This session continues from the context as it was just before compaction "
            f"{event.number}, with the messages it folded. Everything logged after it stays "
            "in the log and on this session's page, marked inactive, and the rewind can be "
            "undone. (Restore makes a new session from there instead.)"
        ),
        action=reverse("dashboard:rewind_before", args=[session.public_id, position]),
        button=f"Rewind to before compaction {event.number}",
        reason=True,
        size=context_edits.rewind_preview(session, context_edits.before(event)),
        target={"as_of": session.record_count},
    )


@require_POST
@login_required
def rewind_before(request: HttpRequest, public_id: str, position: int) -> HttpResponse:
    session = visible_session(request, public_id)
    event = get_object_or_404(session.compaction_events, position=position, kind="ok")
    back = reverse("dashboard:rewind_before_confirm", args=[session.public_id, position])
    return _rewind(request, session, context_edits.before(event), back)


def _rewind(request: HttpRequest, session: Session, point: LogPoint, back: str) -> HttpResponse:
    """Rewind to ``point`` once for the form's token; 303 to the session page."""
    reason = _reason(request, f"rewound to {point} from the dashboard")
    try:
        as_of = form_number(request, "as_of")
    except Refused as refused:
        return refused.response(request)

    def rewind() -> str:
        number = context_edits.rewind(session, point, reason, as_of=as_of)
        return f"Rewind {number}: the session continues from {point}."

    try:
        return act_once(
            request,
            action="rewind",
            target=f"{session.public_id} {point}",
            back=back,
            result=session_url(session),
            do=rewind,
        )
    except CompactionError as error:
        return _cannot(request, session, "Not rewound", str(error), status=409)


@require_safe
@login_required
def undo_rewind_confirm(request: HttpRequest, public_id: str, number: int) -> HttpResponse:
    session = visible_session(request, public_id)
    latest = context_edits.latest_rewind(session)
    if latest is None or history.rewind_number(latest) != number:
        why = (
            f"Rewind {number} is not the session's latest rewind."
            if latest is not None
            else "This session has no rewind."
        )
        return _cannot(request, session, "No rewind to undo", why)
    return confirm_page(
        request,
        session,
        title=f"Undo rewind {number}?",
        explain=(
            f"The live context goes back to what it was just before rewind {number}: the "
            "messages it had rewound are in force again. A new rewind record says so; "
            "nothing is deleted."
        ),
        action=reverse("dashboard:undo_rewind", args=[session.public_id, number]),
        button=f"Undo rewind {number}",
        reason=True,
        size=context_edits.rewind_preview(session, LogPoint("before_rewind", number)),
        target={"as_of": session.record_count},
    )


@require_POST
@login_required
def undo_rewind(request: HttpRequest, public_id: str, number: int) -> HttpResponse:
    session = visible_session(request, public_id)
    back = reverse("dashboard:undo_rewind_confirm", args=[session.public_id, number])
    reason = _reason(request, f"rewind {number} undone from the dashboard")
    try:
        as_of = form_number(request, "as_of")
    except Refused as refused:
        return refused.response(request)

    def undo() -> str:
        new = context_edits.undo_rewind(session, number, reason, as_of=as_of)
        return f"Rewind {number} undone (rewind {new} went back to just before it)."

    return act_once(
        request,
        action="undo-rewind",
        target=f"{session.public_id} rewind{number}",
        back=back,
        result=session_url(session),
        do=undo,
    )


# -- undo a tool-result clearing ------------------------------------------------------


@require_safe
@login_required
def restore_tool_results_confirm(request: HttpRequest, public_id: str, number: int) -> HttpResponse:
    session = visible_session(request, public_id)
    return confirm_page(
        request,
        session,
        title=f"Restore the tool results of clearing {number}?",
        explain=(
            f"The results clearing {number} replaced with stubs, and that are still in the live "
            "context, become whole again (a later compaction that folded some must be undone "
            "first). A new record says so; nothing is deleted."
        ),
        action=reverse("dashboard:restore_tool_results", args=[session.public_id, number]),
        button="Restore the results",
        reason=True,
        target={"as_of": session.record_count},
    )


@require_POST
@login_required
def restore_tool_results(request: HttpRequest, public_id: str, number: int) -> HttpResponse:
    session = visible_session(request, public_id)
    back = reverse("dashboard:restore_tool_results_confirm", args=[session.public_id, number])
    reason = _reason(request, f"tool results of clearing {number} restored from the dashboard")
    try:
        as_of = form_number(request, "as_of")
    except Refused as refused:
        return refused.response(request)

    def restore() -> str:
        context_edits.restore_tool_results(session, number, reason, as_of=as_of)
        return f"The tool results of clearing {number} are whole again."

    return act_once(
        request,
        action="restore-tool-results",
        target=f"{session.public_id} clearing{number}",
        back=back,
        result=session_url(session),
        do=restore,
    )


# -- correct a compaction's summary --------------------------------------------------


@require_POST
@login_required
def correct_summary(request: HttpRequest, public_id: str, position: int) -> HttpResponse:
    session = visible_session(request, public_id)
    get_object_or_404(session.compaction_events, position=position)
    page = reverse("dashboard:compaction_detail", args=[session.public_id, position])
    text = request.POST.get("summary", "")
    if not text.strip() or len(text) > SUMMARY_CHARS:
        why = (
            "A corrected summary must not be empty."
            if not text.strip()
            else f"A corrected summary holds at most {SUMMARY_CHARS:,} characters."
        )
        return Refused(400, "Not corrected", f"{why} Nothing was changed.", page).response(request)
    reason = _reason(request, "corrected from the dashboard")
    try:
        target, as_of = form_number(request, "target"), form_number(request, "as_of")
    except Refused as refused:
        return refused.response(request)

    def correct() -> str:
        event = context_edits.correct_summary(session, target, text, reason, as_of=as_of)
        return f"The summary of compaction {event.number} was corrected."

    return act_once(
        request,
        action="correct",
        target=f"{session.public_id} summary@{target}",
        back=page,
        result=page,
        do=correct,
        content=text,
    )


# -- compact now ---------------------------------------------------------------------


@require_POST
@login_required
def compact_now(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    instructions = request.POST.get("instructions", "").strip()[:INSTRUCTION_CHARS]
    back = session_url(session)
    try:
        as_of = form_number(request, "as_of")
        target = f"{session.public_id} compact@{as_of}"
        with acting(request, "compact", target, back, instructions) as spent:
            if request.POST.get("clear_first"):
                outcome = context_edits.clear_then_compact(session, instructions, as_of=as_of)
            else:
                outcome = context_edits.compact_now(session, instructions, as_of=as_of)
            if isinstance(outcome, ContextChange):
                where, done = f"{back}#change-{outcome.position}", _cleared_text(outcome)
                once.done(spent, where, done)
                messages.success(request, done)
                return see_other(where)
            event = outcome
            where = reverse("dashboard:compaction_detail", args=[session.public_id, event.position])
            done = f"Compaction {event.number} done."
            if event.kind == CompactionEvent.Kind.OK:
                once.done(spent, where, done)
            else:  # logged as failed, nothing changed: the same form may be sent again
                spent.delete()
    except Refused as refused:
        return refused.response(request)
    except context_edits.NothingToFoldError as error:
        # Nothing was logged and the token is unspent: the form may be sent again.
        return _not_compacted(request, session, str(error), instructions, None, status=409)
    if event.kind != CompactionEvent.Kind.OK:
        return _not_compacted(request, session, event.error or "", instructions, where)
    messages.success(request, done)
    return see_other(where)


# -- unpin ---------------------------------------------------------------------------


@require_POST
@login_required
def unpin(request: HttpRequest, public_id: str) -> HttpResponse:
    """Let later compactions drop one pinned value (a form on the session page,
    naming the value and the record count it saw)."""
    session = visible_session(request, public_id)
    value = request.POST.get("value", "")
    back = session_url(session)
    if not value:
        return Refused(400, "Not unpinned", "The form names no pinned value.", back).response(
            request
        )
    reason = _reason(request, "unpinned from the dashboard")
    try:
        as_of = form_number(request, "as_of")
    except Refused as refused:
        return refused.response(request)

    def do() -> str:
        number = context_edits.unpin(session, value, reason, as_of=as_of)
        return (
            f"{value} is no longer pinned: compaction {number}'s summary still holds it, "
            "and a later compaction may let it go."
        )

    return act_once(
        request,
        action="unpin",
        target=f"{session.public_id} pin:{value}"[:255],
        back=back,
        result=back,
        do=do,
        content=value,
    )


def _cleared_text(change: ContextChange) -> str:
    cleared = change.record_extra.get("cleared")
    count = len(cleared) if isinstance(cleared, list) else 0
    sizes = ""
    if change.tokens_before is not None and change.tokens_after is not None:
        sizes = f" ({change.tokens_before:,} \u2192 {change.tokens_after:,} tokens)"
    return (
        f"{count} old tool result{'s' if count != 1 else ''} cleared{sizes}: "
        "the context is under the threshold, so nothing was summarised."
    )


def _not_compacted(
    request: HttpRequest,
    session: Session,
    why: str,
    instructions: str,
    event_url: str | None,
    status: int = 200,
) -> HttpResponse:
    """The page of a Compact now that did not compact: why, in words, and the
    instructions typed (``event_url``: the failed attempt's page, if logged)."""
    context = {
        "session": session,
        "why": why,
        "instructions": instructions,
        "event_url": event_url,
    }
    return render(request, "dashboard/compact_failed.html", context, status=status)
