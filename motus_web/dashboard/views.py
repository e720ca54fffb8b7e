from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.db.models import OuterRef, Subquery
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import ngettext
from django.views import defaults
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from motus_web.sessions.fields import LosslessJSONField
from motus_web.sessions.importers import ImportOptions, ImportReport, import_stream
from motus_web.sessions.models import CompactionEvent, ContextChange, Message, Session

from .forms import ImportForm

SESSIONS_PER_PAGE = 25
MESSAGES_PER_PAGE = 50


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@dataclass(frozen=True, slots=True)
class TimelineItem:
    kind: str  # "message", "compaction" or "change": which fragment renders it
    row: Message | CompactionEvent | ContextChange


def _visible_session(request: HttpRequest, public_id: str) -> Session:
    """The session, or 404 when it does not exist or the user may not see it."""
    sessions = Session.objects.visible_to(request.user).select_related("owner", "parent")
    return get_object_or_404(sessions, public_id=public_id)


def _visible_parent(request: HttpRequest, session: Session) -> Session | None:
    """The session this one was forked from, if the user may see it too."""
    parent = session.parent
    return parent if parent is not None and parent.is_visible_to(request.user) else None


def _fragment(request: HtmxHttpRequest, template: str, partial: str) -> str:
    """The partial for an htmx swap; the whole page otherwise, and for htmx's
    history restore (a cache miss on Back asks with HX-Request for the page)."""
    if request.htmx and not request.htmx.history_restore_request:
        return f"{template}#{partial}"
    return template


@require_GET
@login_required
@vary_on_headers("HX-Request")
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    first_user_message = (
        Message.objects.filter(session=OuterRef("pk"), role=Message.Role.USER)
        .order_by("seq")
        .values("content")[:1]
    )
    sessions = (
        Session.objects.visible_to(request.user)
        .annotate(first_user_content=Subquery(first_user_message, output_field=LosslessJSONField()))
        .order_by("-updated_at", "-pk")
    )
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    template = _fragment(request, "dashboard/session_list.html", "session-table")
    return render(request, template, {"page": page})


@require_GET
@login_required
@vary_on_headers("HX-Request")
def session_detail(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    session = _visible_session(request, public_id)
    page = Paginator(session.messages.order_by("seq"), MESSAGES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "session": session,
        "parent": _visible_parent(request, session),
        "page": page,
        "timeline": _timeline(session, page),
    }
    template = _fragment(request, "dashboard/session_detail.html", "timeline")
    return render(request, template, context)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def message_detail(request: HtmxHttpRequest, public_id: str, seq: int) -> HttpResponse:
    """One message in full: its own page, or the timeline's fragment for htmx."""
    session = _visible_session(request, public_id)
    message = get_object_or_404(session.messages, seq=seq)
    context = {"session": session, "message": message, "full": True}
    if request.htmx:
        return render(request, "dashboard/_message.html", context)
    before = session.messages.filter(seq__lt=seq).count()
    context["page_number"] = before // MESSAGES_PER_PAGE + 1
    return render(request, "dashboard/message_detail.html", context)


def _import_notice(report: ImportReport, name: str) -> str:
    imported, skipped = len(report.imported), len(report.skipped)
    if not imported:
        if not skipped:
            return f"No sessions found in {name}."
        if skipped == 1:
            return f"Nothing new in {name}: it was imported before."
        return f"Nothing new in {name}: its {skipped} sessions were imported before."
    notice = ngettext("Imported %d session", "Imported %d sessions", imported) % imported
    notice += f" from {name}"
    if skipped:
        notice += ngettext("; %d was imported before", "; %d were imported before", skipped) % (
            skipped
        )
    return notice + "."


def _upload_name(name: str | None) -> str:
    """The uploaded file's name as pages show it: no folders, at most 120 characters."""
    name = (name or "upload").replace("\\", "/").rsplit("/", 1)[-1] or "upload"
    return name if len(name) <= 120 else name[:60] + "…" + name[-59:]


def _timeline(session: Session, page: Page[Message]) -> list[TimelineItem]:
    """The page's messages with the events logged after each, in log order.

    Events from before the first message (through_seq -1) open page 1.
    """
    page_messages = list(page.object_list)
    if not page_messages:
        return []
    low = -1 if page.number == 1 else page_messages[0].seq
    high = page_messages[-1].seq
    in_range = {"through_seq__gte": low, "through_seq__lte": high}
    events: list[CompactionEvent | ContextChange] = sorted(
        [
            *session.compaction_events.filter(**in_range),
            *session.context_changes.filter(**in_range),
        ],
        key=lambda row: row.position,
    )
    after: defaultdict[int | None, list[TimelineItem]] = defaultdict(list)
    items: list[TimelineItem] = []
    for event in events:
        item = TimelineItem("compaction" if isinstance(event, CompactionEvent) else "change", event)
        if event.through_seq is not None and event.through_seq < page_messages[0].seq:
            items.append(item)
        else:
            after[event.through_seq].append(item)
    for message in page_messages:
        items.append(TimelineItem("message", message))
        items.extend(after[message.seq])
    return items


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400, except for an upload whose multipart form cannot be read:
    the import page then says why (a file name over about 1,000 bytes is the
    usual cause: Django reads at most 1,024 bytes of a part's headers)."""
    if isinstance(exception, MultiPartParserError):
        reason = (
            "The upload could not be read: its file name is too long or the form is damaged "
            f"({exception}). Rename the file to a shorter name and try again."
        )
        context = {"form": ImportForm(), "upload_error": reason}
        return render(request, "dashboard/import.html", context, status=400)
    return defaults.bad_request(request, exception)


@require_GET
@login_required
def import_form(request: HtmxHttpRequest) -> HttpResponse:
    return render(request, "dashboard/import.html", {"form": ImportForm()})


@require_POST
@login_required
def import_upload(request: HtmxHttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "dashboard/import.html", {"form": form}, status=400)
    upload = form.cleaned_data["file"]
    options = ImportOptions(
        owner=request.user if request.user.is_authenticated else None,
        replay_threshold=form.cleaned_data["threshold"] if form.cleaned_data["replay"] else None,
        max_messages=settings.MOTUS_UPLOAD_MAX_MESSAGES,
    )
    name = _upload_name(upload.name)
    report = import_stream(upload, name, options)
    if report.problems:
        imported = Session.objects.filter(public_id__in=report.imported).order_by("pk")
        context = {"form": ImportForm(), "report": report, "imported": imported}
        return render(request, "dashboard/import.html", context, status=400)
    messages.success(request, _import_notice(report, name))
    if len(report.imported) == 1:
        return redirect("dashboard:session_detail", public_id=report.imported[0])
    if not report.imported and len(report.skipped) == 1:
        return redirect("dashboard:session_detail", public_id=report.skipped[0].public_id)
    return redirect("dashboard:session_list")
