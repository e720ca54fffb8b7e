"""Operator actions: a GET page states the result, a POST does it, once.

Owners and staff only (the same rule as seeing a session: anyone else gets
404). Each confirmation page names its target in its form, carries a
one-time token (``exactly_once``) and states what the context will be
afterwards against the threshold. The POST acts through
``motus_web.sessions.operations`` and answers 303 to the result; a second
submission, a stale target or a busy session is refused with a page that
says so. Nothing is deleted or rewritten, except by "delete session", which
asks first: undo appends a revert, restore and fork create new sessions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from memory import MotusMemoryError
from motus_web.sessions import jobs, once, operations
from motus_web.sessions.access import visible_session
from motus_web.sessions.memories import ContextSize
from motus_web.sessions.models import CompactionEvent, Session
from motus_web.ui.rendering import render

from .exactly_once import Refused, acting, fields, spent_before
from .forms import RestoreForm

logger = logging.getLogger(__name__)


def owner_of(request: HttpRequest) -> object:
    return request.user if request.user.is_authenticated else None


def confirm_page(
    request: HttpRequest,
    session: Session,
    *,
    size: ContextSize | None = None,
    target: dict[str, object] | None = None,
    **context: object,
) -> HttpResponse:
    hidden = fields(request, state=session.record_count, **(target or {}))
    page = {"session": session, "size": size, "hidden": hidden, **context}
    return render(request, "dashboard/confirm.html", page)


def see_other(url: str) -> HttpResponseRedirect:
    """303 See Other: the browser GETs the result, whatever it POSTed."""
    return HttpResponseRedirect(url, status=303)


def act_once(
    request: HttpRequest,
    *,
    action: str,
    target: str,
    back: str,
    result: str,
    do: Callable[[], str],
    content: str = "",
) -> HttpResponse:
    """Do ``do`` once for the form's token, ``action`` and ``content``
    (``acting``, in its transaction):
    it returns the message to show, which a second submission's refusal
    links to ``result`` with; 303 to ``result``. A refusal answers with its
    page; any other exception leaves ``do`` rolled back and propagates."""
    try:
        with acting(request, action, target, back, content) as spent:
            done = do()
            once.done(spent, result, done)
    except Refused as refused:
        return refused.response(request)
    messages.success(request, done)
    return see_other(result)


def form_number(request: HttpRequest, name: str) -> int:
    """An integer field the confirmation form put there; 400 when it is missing."""
    try:
        return int(request.POST.get(name, ""))
    except ValueError:
        raise Refused(
            400, "This form cannot be sent", f"It does not say which {name} it is for.", ""
        ) from None


def session_url(session: Session) -> str:
    return reverse("dashboard:session_detail", args=[session.public_id])


# -- undo the latest compaction -------------------------------------------------


@require_safe
@login_required
def undo_confirm(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    event, why = operations.undoable_now(session)
    if event is None:
        context = {"session": session, "reason": why}
        return render(request, "dashboard/nothing_to_undo.html", context, status=404)
    return confirm_page(
        request,
        session,
        title=f"Undo {_name(event)}?",
        explain=(
            f"The live context goes back to what it was just before {_name(event)}, "
            "plus every message added since. The log keeps the compaction and gains a revert "
            "record; nothing is deleted."
        ),
        action=reverse("dashboard:undo_compaction", args=[session.public_id]),
        button="Undo the compaction",
        reason=True,
        size=operations.undo_preview(session),
        target={"target": event.position, "as_of": session.record_count},
    )


@require_POST
@login_required
def undo_compaction(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    back = reverse("dashboard:undo_confirm", args=[session.public_id])
    reason = request.POST.get("reason", "").strip()[:500] or "undone from the dashboard"
    try:
        target, as_of = form_number(request, "target"), form_number(request, "as_of")
    except Refused as refused:
        return refused.response(request)

    def undo() -> str:
        number = operations.undo_compaction(session, reason, target=target, as_of=as_of)
        return f"Compaction {number} undone; the log has a revert record."

    return act_once(
        request,
        action="undo",
        target=f"{session.public_id} compaction@{target}",
        back=back,
        result=session_url(session),
        do=undo,
    )


# -- restore to before a compaction, fork from a message --------------------------


@require_safe
@login_required
def restore_confirm(request: HttpRequest, public_id: str, position: int) -> HttpResponse:
    session = visible_session(request, public_id)
    event = get_object_or_404(session.compaction_events, position=position)
    return confirm_page(
        request,
        session,
        title=f"Restore to before {_name(event)}?",
        explain=(
            "A new session starts from the context as it was just before this event, "
            "linked to this one. This session stays as it is."
        ),
        action=reverse("dashboard:restore_session", args=[session.public_id, position]),
        button="Create the restored session",
        size=operations.restore_preview(session, event),
    )


@require_POST
@login_required
def restore_session(request: HttpRequest, public_id: str, position: int) -> HttpResponse:
    session = visible_session(request, public_id)
    event = get_object_or_404(session.compaction_events, position=position)
    title = f"{session} (restored before {_name(event)})"
    back = reverse("dashboard:restore_confirm", args=[session.public_id, position])
    try:
        with acting(request, "restore", f"{session.public_id} before@{position}", back) as spent:
            child = operations.restore_before(session, event, owner_of(request), title)  # type: ignore[arg-type]
            once.done(spent, session_url(child), str(child))
    except (MotusMemoryError, operations.NothingToForkError) as error:
        return _not_created(request, session, error)
    except Refused as refused:
        return refused.response(request)
    return _created(request, session, child)


@require_safe
@login_required
def fork_confirm(request: HttpRequest, public_id: str, seq: int) -> HttpResponse:
    session = visible_session(request, public_id)
    cut = operations.fork_cut(session, get_object_or_404(session.messages, seq=seq))
    where = f"right after message #{cut.after}" if cut.after is not None else "before any message"
    return confirm_page(
        request,
        session,
        title=f"Fork from message #{seq}?",
        explain=(
            f"A new session starts from the context as it was {where}, linked to this one. "
            "This session stays as it is."
        ),
        moved=cut.moved,
        action=reverse("dashboard:fork_session", args=[session.public_id, seq]),
        button="Create the fork",
        size=cut.size,
        empty=not cut.memory.messages,
    )


@require_POST
@login_required
def fork_session(request: HttpRequest, public_id: str, seq: int) -> HttpResponse:
    session = visible_session(request, public_id)
    message = get_object_or_404(session.messages, seq=seq)
    back = reverse("dashboard:fork_confirm", args=[session.public_id, seq])
    try:
        with acting(request, "fork", f"{session.public_id} after#{seq}", back) as spent:
            cut = operations.fork_cut(session, message)
            title = f"{session} (fork at #{cut.after})"
            child = operations.fork(cut, session, owner_of(request), title)  # type: ignore[arg-type]
            once.done(spent, session_url(child), str(child))
    except (MotusMemoryError, operations.NothingToForkError) as error:
        return _not_created(request, session, error)
    except Refused as refused:
        return refused.response(request)
    return _created(request, session, child)


def _created(request: HttpRequest, session: Session, child: Session) -> HttpResponse:
    messages.success(request, f"Created \u201c{child}\u201d from \u201c{session}\u201d.")
    return see_other(session_url(child))


def _not_created(request: HttpRequest, session: Session, error: Exception) -> HttpResponse:
    messages.error(request, f"No session was created: {error}")
    return see_other(session_url(session))


def _name(event: CompactionEvent) -> str:
    if event.kind == CompactionEvent.Kind.OK:
        return "the compaction" if event.number is None else f"compaction {event.number}"
    where = f" after #{event.through_seq}" if event.through_seq is not None else ""
    return f"the {event.get_kind_display()}{where}"


# -- restore from a log file -----------------------------------------------------


def _restore_page(request: HttpRequest, form: RestoreForm, status: int = 200) -> HttpResponse:
    context = {"form": form, "hidden": fields(request)}
    return render(request, "dashboard/restore_upload.html", context, status=status)


@require_safe
@login_required
def restore_upload_form(request: HttpRequest) -> HttpResponse:
    return _restore_page(request, RestoreForm())


@require_POST
@login_required
def restore_upload(request: HttpRequest) -> HttpResponse:
    """Keep the uploaded log and queue its restore as an import job (with the
    upload's caps); 303 to the job's page. A file whose first line is no log's
    is refused at once."""
    form = RestoreForm(request.POST, request.FILES)
    if not form.is_valid():
        return _restore_page(request, form, status=400)
    upload = form.cleaned_data["file"]
    name = (upload.name or "upload")[-100:]
    back = reverse("dashboard:restore_upload_form")
    try:
        with acting(request, "restore-file", name, back) as spent:
            operations.check_log_head(upload)
            job = jobs.create(
                upload,
                name,
                request.user,  # type: ignore[arg-type]
                None,
                kind=jobs.RESTORE,
                title=f"Restored from {name}",
            )
            job_url = reverse("dashboard:import_job", args=[job.public_id])
            once.done(spent, job_url, f"Restore of {name}")
    except operations.NotALogError as error:
        form.add_error("file", f"{name} could not be restored: {error}")
        return _restore_page(request, form, status=400)
    except OSError:
        logger.exception("could not keep the log %s", name)
        form.add_error("file", "The server could not keep the file to restore it. Try again later.")
        return _restore_page(request, form, status=503)
    except Refused as refused:
        return refused.response(request)
    return see_other(job_url)


# -- delete ------------------------------------------------------------------------


@require_safe
@login_required
def delete_confirm(request: HttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    return confirm_page(
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
        target={"as_of": session.record_count},
    )


@require_POST
@login_required
def delete_session(request: HttpRequest, public_id: str) -> HttpResponse:
    try:
        session = visible_session(request, public_id)
    except Http404:
        # Sent again after it was done: the session is gone, the token says so.
        if (refused := spent_before(request, "delete")) is not None:
            return refused.response(request)
        raise
    name = str(session)
    back = reverse("dashboard:delete_confirm", args=[session.public_id])
    listing = reverse("dashboard:session_list")
    try:
        as_of = form_number(request, "as_of")
        with acting(request, "delete", session.public_id, back) as spent:
            operations.delete_session(session, as_of=as_of)
            once.done(spent, listing, f"Deleted {name}.")
    except Refused as refused:
        return refused.response(request)
    messages.success(request, f"Deleted {name}.")
    return see_other(listing)
