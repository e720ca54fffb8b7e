"""Operator actions: a GET view shows what will happen, a POST view does it.

Owners and staff only (the same rule as seeing a session: anyone else gets
404). Nothing is deleted or rewritten, except by "delete session", which asks
first: undo appends a revert, restore and fork create new sessions.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from memory import CompactionError, MotusMemoryError
from motus_web.sessions.models import CompactionEvent, Message, Session

from . import operations
from .access import visible_session
from .forms import RestoreForm
from .rendering import render
from .timeline import not_undoable, undoable


def _owner(request: HttpRequest) -> object:
    return request.user if request.user.is_authenticated else None


def _confirm(request: HttpRequest, session: Session, **context: object) -> HttpResponse:
    return render(request, "dashboard/confirm.html", {"session": session, **context})


# -- undo the latest compaction -------------------------------------------------


@require_safe
@login_required
def undo_confirm(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    compactions = list(session.compaction_events.order_by("position"))
    event = undoable(compactions)
    if event is None:
        context = {"session": session, "reason": not_undoable(compactions)}
        return render(request, "dashboard/nothing_to_undo.html", context, status=404)
    return _confirm(
        request,
        session,
        title=f"Undo compaction {event.number}?",
        explain=(
            f"The live context goes back to what it was just before compaction {event.number}, "
            "plus every message added since. The log keeps the compaction and gains a revert "
            "record; nothing is deleted."
        ),
        action=reverse("dashboard:undo_compaction", args=[session.public_id]),
        button="Undo the compaction",
        reason=True,
    )


@require_POST
@login_required
def undo_compaction(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    reason = request.POST.get("reason", "").strip()[:500] or "undone from the dashboard"
    try:
        number = operations.undo_latest_compaction(session, reason)
    except CompactionError:
        reason = not_undoable(list(session.compaction_events.order_by("position")))
        messages.error(request, f"Nothing was undone. {reason}")
    else:
        messages.success(request, f"Compaction {number} undone; the log has a revert record.")
    return redirect("dashboard:session_detail", public_id=session.public_id)


# -- restore to before a compaction, fork from a message --------------------------


@require_safe
@login_required
def restore_confirm(request: HttpRequest, public_id: str, position: int) -> HttpResponse:
    session = visible_session(request, public_id)
    event = get_object_or_404(session.compaction_events, position=position)
    return _confirm(
        request,
        session,
        title=f"Restore to before {_name(event)}?",
        explain=(
            "A new session starts from the context as it was just before this event, "
            "linked to this one. This session stays as it is."
        ),
        action=reverse("dashboard:restore_session", args=[session.public_id, position]),
        button="Create the restored session",
    )


@require_POST
@login_required
def restore_session(request: HttpRequest, public_id: str, position: int) -> HttpResponse:
    session = visible_session(request, public_id)
    event = get_object_or_404(session.compaction_events, position=position)
    title = f"{session} (restored before {_name(event)})"
    return _fork(request, session, event.position, title)


@require_safe
@login_required
def fork_confirm(request: HttpRequest, public_id: str, seq: int) -> HttpResponse:
    session = visible_session(request, public_id)
    message = get_object_or_404(session.messages.only("seq", "position"), seq=seq)
    return _confirm(
        request,
        session,
        title=f"Fork from message #{message.seq}?",
        explain=(
            f"A new session starts from the context as it was right after message "
            f"#{message.seq}, linked to this one. This session stays as it is."
        ),
        action=reverse("dashboard:fork_session", args=[session.public_id, seq]),
        button="Create the fork",
    )


@require_POST
@login_required
def fork_session(request: HttpRequest, public_id: str, seq: int) -> HttpResponse:
    session = visible_session(request, public_id)
    message = get_object_or_404(session.messages.only("seq", "position"), seq=seq)
    return _fork(request, session, message.position + 1, f"{session} (fork at #{seq})")


def _fork(request: HttpRequest, session: Session, stop: int, title: str) -> HttpResponse:
    try:
        child = operations.fork_at(session, stop, _owner(request), title)  # type: ignore[arg-type]
    except (MotusMemoryError, operations.NothingToForkError) as error:
        messages.error(request, f"No session was created: {error}")
        return redirect("dashboard:session_detail", public_id=session.public_id)
    messages.success(request, f"Created \u201c{child}\u201d from \u201c{session}\u201d.")
    return redirect("dashboard:session_detail", public_id=child.public_id)


def _name(event: CompactionEvent) -> str:
    if event.kind == CompactionEvent.Kind.OK:
        return f"compaction {event.number}"
    return f"the {event.get_kind_display()} after #{event.through_seq}"


# -- restore from a log file -----------------------------------------------------


@require_safe
@login_required
def restore_upload_form(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/restore_upload.html", {"form": RestoreForm()})


@require_POST
@login_required
def restore_upload(request: HttpRequest) -> HttpResponse:
    form = RestoreForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "dashboard/restore_upload.html", {"form": form}, status=400)
    upload = form.cleaned_data["file"]
    name = (upload.name or "upload")[-100:]
    try:
        session, problems = operations.restore_from_file(
            upload,
            _owner(request),  # type: ignore[arg-type]
            f"Restored from {name}",
        )
    except (MotusMemoryError, operations.NothingToForkError, operations.NotALogError) as error:
        form.add_error("file", f"{name} could not be restored: {error}")
        return render(request, "dashboard/restore_upload.html", {"form": form}, status=400)
    for problem in problems[:20]:
        messages.warning(request, f"{name}: {problem}")
    messages.success(request, f"Restored {name} into a new session.")
    return redirect("dashboard:session_detail", public_id=session.public_id)


# -- delete ------------------------------------------------------------------------


@require_safe
@login_required
def delete_confirm(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    return _confirm(
        request,
        session,
        title=f"Delete {session}?",
        explain=(
            f"Its {session.message_count} messages and its events go with it. Sessions forked "
            "from it keep their own copy and lose only the link. This cannot be undone."
        ),
        action=reverse("dashboard:delete_session", args=[session.public_id]),
        button="Delete the session",
        danger=True,
    )


@require_POST
@login_required
def delete_session(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    name = str(session)
    with transaction.atomic():
        # Bulk deletes per table: a long session's rows go in three statements.
        Message.objects.filter(session=session).delete()
        session.delete()
    messages.success(request, f"Deleted {name}.")
    return redirect("dashboard:session_list")
