from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Mapping
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.functional import cached_property
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST, require_safe
from django_htmx.middleware import HtmxDetails

from memory import OFFLINE_SUMMARISER as OFFLINE
from memory import clean_text, provider_names
from motus_web.sessions import context_edits, history, jobs, memories, once, operations, pins
from motus_web.sessions.access import visible_job, visible_parent, visible_session
from motus_web.sessions.importers import ImportReport, first_problem
from motus_web.sessions.importers.formats import SUPPORTED
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import CompactionEvent, ContextChange, ImportJob, Message, Session
from motus_web.sessions.once import StaleTargetError
from motus_web.ui.rendering import render

from . import (
    chart_points,
    charts,
    comparison,
    context_now,
    costs,
    live_context,
    lost,
    page_events,
    steps,
    timeline,
    trace,
)
from . import session_list as listing
from .exactly_once import Refused, acting, fields, spent_before, stale
from .forms import ImportForm
from .recalled import recalled_for

SESSIONS_PER_PAGE = 25
MESSAGES_PER_PAGE = 50
# The session page lists the latest compaction events; the trace has them all.
COMPACTIONS_LISTED = 20
TRACE_PER_PAGE = 50
FOLDED_SHOWN = 200  # messages a compaction page lists in full; the rest are counted
IMPORTED_SHOWN = 200  # sessions an import job's page links to; the rest are counted
RECENT_JOBS = 10  # import jobs the Import page lists

logger = logging.getLogger(__name__)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _wants_fragment(request: HtmxHttpRequest) -> bool:
    # A history restore (htmx found no snapshot) needs the whole page.
    return bool(request.htmx) and not request.htmx.history_restore_request


def _render(
    request: HtmxHttpRequest, template: str, partial: str, context: Mapping[str, object]
) -> HttpResponse:
    """The page, or only its ``partial`` for htmx; either way varying on HX-Request."""
    name = f"{template}#{partial}" if _wants_fragment(request) else template
    response = render(request, name, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_safe
@login_required
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    visible = Session.objects.visible_to(request.user)
    form = listing.SessionFilterForm(request.GET)
    found = listing.sessions(visible, form)
    page = Paginator(found, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    current = form.applied().get("sort")
    context = {
        "page": page,
        "form": form,
        "model_names": listing.model_names(visible),
        "query": _query_without_page(request),
        "sort_links": listing.sort_links(request.GET, current or listing.DEFAULT_SORT),
        "sort": current or listing.DEFAULT_SORT,
        "sort_labels": listing.SORT_LABELS,
        "filtered": any(v for k, v in request.GET.items() if k not in ("page", "sort")),
    }
    return _render(request, "dashboard/session_list.html", "session-table", context)


class _CountedPaginator(Paginator):
    """A paginator over a session's messages (in seq order) that takes their
    count from the session's own total (kept by the log store in the same
    transaction as the rows) instead of counting every row; when the seqs are
    ``0 .. count - 1`` (``_dense``), a page is a range of seqs read by index,
    not an offset the database counts its way to."""

    def __init__(self, object_list: QuerySet[Message], per_page: int, session: Session) -> None:
        super().__init__(object_list, per_page)
        self.messages = object_list
        self.known_count = session.message_count
        self.dense = _dense(session)

    @cached_property
    def count(self) -> int:
        return self.known_count

    def page(self, number: int | str) -> Page:
        number = self.validate_number(number)
        if not self.dense:
            return super().page(number)
        bottom = (number - 1) * self.per_page
        shown = self.messages.filter(seq__gte=bottom, seq__lt=bottom + self.per_page)
        return Page(shown, number, self)


def _dense(session: Session) -> bool:
    """Whether the session's seqs are exactly ``0 .. message_count - 1``: distinct
    non-negative integers whose highest is one less than their number are."""
    last = session.messages.order_by("-seq").values_list("seq", flat=True).first()
    return last is not None and last + 1 == session.message_count


@require_safe
@login_required
def session_detail(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    messages = session.messages.order_by("seq")
    page = _CountedPaginator(messages, MESSAGES_PER_PAGE, session).get_page(request.GET.get("page"))
    shown = list(page.object_list)
    found = page_events.of(session, shown, first_page=page.number == 1, listed=COMPACTIONS_LISTED)
    context: dict[str, object] = {
        "session": session,
        "parent": visible_parent(request, session),
        "page": page,
        "timeline": timeline.group(shown, found.shown, found.active, first_page=page.number == 1),
        "in_context_from": found.in_context_from,
        "latest_rewind": next((e for e in reversed(found.shown) if history.is_rewind(e)), None),
    }
    if _wants_fragment(request):
        return _render(request, "dashboard/session_detail.html", "timeline", context)
    context.update(
        gauge=charts.gauge(
            session.context_tokens,
            session.config,
            session.model_name,
            memories.file_limits(session.record_extra),
        ),
        provider=_provider_reading(session, found),
        cost=costs.of_totals(session.usage_totals),
        price_data=costs.PRICE_DATA,
        chart=_token_chart(session),
        compactions=_with_lost_identifiers(session, found.listed, found.shown),
        compactions_total=session.event_count,
        undoable=found.undoable,
        compact_fields=fields(request, as_of=session.record_count),
        compactor=context_edits.compactor_name(session),
        undone=found.undone,
        pins=_pins(request, session, found),
    )
    return _render(request, "dashboard/session_detail.html", "timeline", context)


def _pins(
    request: HttpRequest, session: Session, found: page_events.PageEvents
) -> tuple[pins.Pins, list[tuple[pins.Pin, dict[str, object]]]]:
    """The pins in force, each with its unpin form's hidden fields."""
    now = pins.in_force(session, found.shown if found.walked else None)
    forms = [
        (pin, fields(request, as_of=session.record_count, value=pin.value)) for pin in now.pins
    ]
    return now, forms


def _with_lost_identifiers(
    session: Session,
    compactions: list[CompactionEvent],
    events: list[CompactionEvent | ContextChange],
) -> list[tuple[CompactionEvent, list[str]]]:
    """Each compaction with the identifiers from user messages its summary lost
    (reading only the user messages those compactions folded), checked against
    the corrected summary where ``events`` hold a correction."""
    ranges = [
        (e.summarized_first_seq, e.summarized_last_seq)
        for e in compactions
        if e.summarized_first_seq is not None and e.summarized_last_seq is not None
    ]
    if not ranges:
        return [(event, []) for event in compactions]
    users = session.messages.filter(
        role=Message.Role.USER,
        seq__gte=min(first for first, _ in ranges),
        seq__lte=max(last for _, last in ranges),
    )
    corrected = context_edits.corrected_summaries(events, compactions)
    # What the contexts after them hold word for word besides the folded user
    # messages they replayed: every message they kept (tool calls' arguments too).
    kept = Q(seq__in=[s for e in compactions for s in e.replayed_seqs or [] if isinstance(s, int)])
    for event in compactions:
        after, through = event.summarized_last_seq, event.through_seq
        if after is not None and through is not None and through > after:
            kept |= Q(seq__gt=after, seq__lte=through)
    verbatim = session.messages.filter(kept)
    flags = lost.lost_user_identifiers(
        compactions,
        lost.texts(users),
        corrected,
        lost.texts(verbatim),
        lost.recalled_blocks(session, compactions),
    )
    return [(event, flags.get(event.position, [])) for event in compactions]


def _provider_reading(
    session: Session, found: page_events.PageEvents
) -> charts.ProviderReading | None:
    """The provider's count of the latest request it reported, beside the
    estimate of that request: the context before the reply it produced, so
    its logged context size less the reply's own tokens; with what changed
    the context since (the latest such event: among every event row when the
    page walked them, else, in a log that only compacted, the latest
    compaction after it)."""
    row = (
        session.messages.filter(provider_tokens__isnull=False)
        .order_by("-seq")
        .only("seq", "position", "tokens", "context_tokens", "provider_tokens")
        .first()
    )
    if row is None or row.provider_tokens is None:
        return None
    since = ""
    if found.walked:
        for event in found.shown:
            if event.position > row.position:
                since = _context_change(event) or since
    else:
        later = session.compaction_events.filter(
            position__gt=row.position,
            kind__in=[CompactionEvent.Kind.OK, CompactionEvent.Kind.REVERT],
        )
        latest = later.order_by("-position").first()
        since = _context_change(latest) if latest is not None else ""
    return charts.ProviderReading(
        row.seq, row.context_tokens - row.tokens, row.provider_tokens, since
    )


def _context_change(event: CompactionEvent | ContextChange) -> str:
    """What ``event`` did to the context, in words; ``""`` when it left it alone."""
    if isinstance(event, ContextChange):
        return {
            ContextChange.Kind.RESET: "a reset",
            ContextChange.Kind.SYSTEM_PROMPT: "a system prompt change",
            history.REWIND: "a rewind",
            history.SUMMARY_CORRECTION: "a summary correction",
            pins.UNPIN: "",  # the context is as it was
            ContextChange.Kind.TOOL_RESULTS_CLEARED: "a tool-result clearing",
            ContextChange.Kind.TOOL_RESULTS_RESTORED: "an undo of a tool-result clearing",
        }.get(event.kind, f"a {event.kind} record")
    if event.kind == CompactionEvent.Kind.OK:
        return f"compaction {event.number}" if event.number is not None else "a compaction"
    if event.kind == CompactionEvent.Kind.REVERT:
        return "an undo"
    return ""


def _token_chart(session: Session) -> charts.TokenChart:
    """The chart from a bounded number of points and at most ``chart_points.MARKERS``
    of the compaction events (spread over the session; the trace has them all),
    both read through the session's stored aggregates."""
    marks = [
        charts.EventMark(
            key=event.position,
            seq=event.through_seq if event.through_seq is not None else -1,
            kind=event.kind,
            tokens_before=event.tokens_before,
            tokens_after=_size_after(event),
            label=_event_label(event),
        )
        for event in chart_points.marked(session)
    ]
    marks += [
        charts.EventMark(
            key=change.position,
            seq=change.through_seq if change.through_seq is not None else -1,
            kind="cleared",
            tokens_before=change.tokens_before,
            tokens_after=change.tokens_after,
            label=_clearing_label(change),
        )
        for change in chart_points.cleared(session)
    ]
    marks.sort(key=lambda mark: mark.key)
    threshold = memories.threshold_of(session)
    line, sampled = chart_points.points(session)
    chart = charts.token_chart(line, marks, threshold, sampled=sampled)
    events_total = session.chart_event_count + session.clearing_count
    return dataclasses.replace(chart, events_total=events_total)


def _clearing_label(change: ContextChange) -> str:
    figures = ""
    if change.tokens_before is not None and change.tokens_after is not None:
        figures = f": {change.tokens_before:,} \u2192 {change.tokens_after:,} tokens"
    return f"Old tool results cleared after #{change.through_seq}{figures}"


def _size_after(event: CompactionEvent) -> int | None:
    """The context size an event leaves, when it changed it and said so."""
    if event.kind == CompactionEvent.Kind.OK:
        return event.tokens_after
    if event.kind == CompactionEvent.Kind.REVERT:
        stated = event.record_extra.get("context_tokens")
        return stated if isinstance(stated, int) and not isinstance(stated, bool) else None
    return None


def _event_label(event: CompactionEvent) -> str:
    where = f"after #{event.through_seq}" if event.through_seq is not None else ""
    if event.kind == CompactionEvent.Kind.OK:
        figures = ""
        if event.tokens_before is not None and event.tokens_after is not None:
            figures = f": {event.tokens_before:,} \u2192 {event.tokens_after:,} tokens"
        return f"Compaction {event.number or ''} {where}{figures}".replace("  ", " ")
    return f"{event.get_kind_display().capitalize()} {where}".strip()


@require_safe
@login_required
def message_detail(request: HtmxHttpRequest, public_id: str, seq: int) -> HttpResponse:
    """One message in full: its own page, or the timeline's fragment for htmx."""
    session = visible_session(request, public_id)
    message = get_object_or_404(session.messages, seq=seq)
    context: dict[str, object] = {"session": session, "message": message, "full": True}
    if _wants_fragment(request):
        response = render(request, "dashboard/_message.html", context)
    else:
        context["page_number"] = _page_of(session, seq)
        response = render(request, "dashboard/message_detail.html", context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _import_notice(report: ImportReport, name: str) -> str:
    imported, skipped, updated = len(report.imported), len(report.skipped), len(report.updated)
    if updated and not imported:
        notice = ngettext("Updated %d session", "Updated %d sessions", updated) % updated
        return f"{notice} from {name} with what was new."
    if not imported:
        if report.older and not skipped:
            return f"Nothing new in {name}: it is an older copy of what was imported before."
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


@require_safe
@login_required
def import_form(request: HtmxHttpRequest) -> HttpResponse:
    return render(request, "dashboard/import.html", _import_page(request, ImportForm()))


def _import_page(request: HttpRequest, form: ImportForm, **more: object) -> dict[str, object]:
    user = getattr(request, "user", None)  # bad_request may run before authentication
    recent = ImportJob.objects.none()
    if user is not None and user.is_authenticated:
        recent = ImportJob.objects.filter(owner=user.pk).order_by("-created_at")
    formats = list(SUPPORTED.values())  # the importers' own list, so the page cannot drift
    return {
        "form": form,
        "hidden": fields(request),  # a fresh one-time token: one upload per page
        "recent_jobs": recent[:RECENT_JOBS],
        "formats": formats,
        **more,
    }


@require_POST
@login_required
def import_upload(request: HtmxHttpRequest) -> HttpResponse:
    """Keep the uploaded file and queue its import; 303 to the job's page.

    What the form and the file's first 64 KB show to be wrong is answered
    at once with 400 (the form's one-time token stays unspent, to send it
    again); the rest of the file is read by the job. A form without its
    token is refused (400); one sent again gets 409 naming the job it made.
    """
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "dashboard/import.html", _import_page(request, form), status=400)
    upload = form.cleaned_data["file"]
    name = _upload_name(upload.name)
    if problem := first_problem(upload, name):
        report = ImportReport(problems=[problem])
        context = _import_page(request, ImportForm(), report=report)
        return render(request, "dashboard/import.html", context, status=400)
    threshold = form.cleaned_data["threshold"] if form.cleaned_data["replay"] else None
    try:
        with acting(request, "import-file", name, reverse("dashboard:import_form")) as spent:
            job = jobs.create(upload, name, request.user, threshold)  # type: ignore[arg-type]
            job_url = reverse("dashboard:import_job", args=[job.public_id])
            once.done(spent, job_url, f"Import of {name}")
    except OSError:
        logger.exception("could not keep the upload %s", name)
        reason = "The server could not keep the file to import it. Try again later."
        context = _import_page(request, ImportForm(), upload_error=reason)
        return render(request, "dashboard/import.html", context, status=503)
    except Refused as refused:
        return refused.response(request)
    return _see_job(job)


def _see_job(job: ImportJob) -> HttpResponseRedirect:
    """303 See Other: the browser GETs the job's page, whatever it POSTed."""
    return HttpResponseRedirect(reverse("dashboard:import_job", args=[job.public_id]), status=303)


@require_safe
@login_required
def import_job(request: HtmxHttpRequest, public_id: uuid.UUID) -> HttpResponse:
    """An import job's progress, then what it imported and refused; htmx polls its partial."""
    job = visible_job(request, public_id)
    if not job.finished:
        jobs.wake()  # a queued job left by a restart runs
    job = jobs.with_live_progress(jobs.check_runner(job))
    report = jobs.report_of(job)
    imported = Session.objects.filter(public_id__in=report.imported).order_by("pk")
    context = {
        "job": job,
        "report": report,
        "imported": imported[:IMPORTED_SHOWN],
        "imported_hidden": max(len(report.imported) - IMPORTED_SHOWN, 0),
        # As the page said before jobs: a notice when all went well, else the problems.
        "notice": _import_notice(report, job.file_name)
        if job.status == ImportJob.Status.DONE and not report.problems
        else "",
        "can_retry": jobs.can_retry(job),
        # One token per form: Cancel spent must not answer Import again "already done".
        "retry_fields": fields(request, state="retry", as_of=_job_state(job)),
        "cancel_fields": fields(request, state="cancel", as_of=_job_state(job)),
    }
    return _render(request, "dashboard/import_job.html", "job-status", context)


def _job_state(job: ImportJob) -> str:
    """What a job's form names as its target's state: its status, and whether
    a cancel was asked for."""
    return f"{job.status}{'+cancelling' if job.cancel_requested else ''}"


def _job_unchanged(job: ImportJob, request: HttpRequest) -> None:
    """Raise ``StaleTargetError`` unless the job is as the page that sent the form saw it."""
    seen, now = request.POST.get("as_of", ""), _job_state(job)
    if seen != now:
        raise StaleTargetError(
            f"The job is {job.status} now"
            + (", with a cancel asked for" if job.cancel_requested else "")
            + f"; the page showed it {seen.replace('+cancelling', ', cancelling') or 'earlier'}. "
            "Nothing was done."
        )


@require_POST
@login_required
def import_job_cancel(request: HtmxHttpRequest, public_id: uuid.UUID) -> HttpResponse:
    job = visible_job(request, public_id)
    back = reverse("dashboard:import_job", args=[job.public_id])
    # Cancel is idempotent and must reach a running job before anything waits for
    # the database: on SQLite a write waits for the session the runner is writing,
    # and the cancel is what ends it. So the token is spent after the cancel.
    try:
        if (refused := spent_before(request, "cancel")) is not None:
            raise refused
        _job_unchanged(job, request)
        jobs.cancel(job)
        with acting(request, "cancel", str(job.public_id), back) as spent:
            once.done(spent, back, f"Cancel of the import of {job.file_name}")
    except StaleTargetError as error:
        return stale(error, back).response(request)
    except Refused as refused:
        return refused.response(request)
    return _see_job(job)


@require_POST
@login_required
def import_job_retry(request: HtmxHttpRequest, public_id: uuid.UUID) -> HttpResponse:
    job = visible_job(request, public_id)
    back = reverse("dashboard:import_job", args=[job.public_id])
    try:
        with acting(request, "import-again", str(job.public_id), back) as spent:
            _job_unchanged(ImportJob.objects.select_for_update().get(pk=job.pk), request)
            jobs.retry(job)
            once.done(spent, back, f"Import of {job.file_name} again")
    except Refused as refused:
        return refused.response(request)
    return _see_job(job)


def _upload_name(name: str | None) -> str:
    """The uploaded file's name as pages show it: no folders, at most 120 characters."""
    name = clean_text(name or "upload").replace("\x00", "\ufffd")
    name = name.replace("\\", "/").rsplit("/", 1)[-1] or "upload"
    return name if len(name) <= 120 else name[:60] + "…" + name[-59:]


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The product's 400 page, saying why for a ``BadRequest`` (whose message is
    ours); an upload whose multipart form cannot be read gets the import page,
    saying why (a file name over about 1,000 bytes is the usual cause: Django
    reads at most 1,024 bytes of a part's headers)."""
    if isinstance(exception, MultiPartParserError):
        reason = (
            "The upload could not be read: its file name is too long or the form is damaged "
            f"({exception}). Rename the file to a shorter name and try again."
        )
        context = _import_page(request, ImportForm(), upload_error=reason)
        return render(request, "dashboard/import.html", context, status=400)
    reason = str(exception) if isinstance(exception, BadRequest) else ""
    return render(request, "errors/400.html", {"reason": reason}, status=400)


# -- what the model sees now -------------------------------------------------


@require_safe
@login_required
def session_context(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """The exact context the library restores for the session, part by part."""
    session = visible_session(request, public_id)
    now = context_now.request_now(session)
    context = {
        "session": session,
        "live": now.live,
        "bar": live_context.stacked_bar(now.live),
        "request": now,
    }
    return _render(request, "dashboard/session_context.html", "panel", context)


# -- what the model saw for a reply -------------------------------------------------


@require_safe
@login_required
def step_detail(request: HtmxHttpRequest, public_id: str, seq: int) -> HttpResponse:
    """The request that produced reply ``seq``, and what changed since an earlier reply.

    Asked for another message (a point of the token chart), it answers with the
    step of the first reply whose request carried that message."""
    session = visible_session(request, public_id)
    reply = _reply_at(session, seq)
    if reply.seq != seq:
        return HttpResponseRedirect(reverse("dashboard:step_detail", args=[public_id, reply.seq]))
    this = steps.before(session, reply)
    earlier = _earlier_reply(session, reply, request.GET.get("since"))
    change = None
    if earlier is not None:
        change = steps.between(session, earlier, reply, steps.before(session, earlier), this)
    provider = _provider_choice(request, session)
    context = {
        "session": session,
        "reply": reply,
        "request": this,
        "live": this.live,
        "bar": live_context.stacked_bar(this.live),
        "earlier": earlier,
        "change": change,
        "provider": provider,
        "providers": steps.providers(),
        "body_size": len(json.dumps(steps.body(this, session.model_name, provider))),
        "page_number": _page_of(session, reply.seq),
        "recalled": recalled_for(session, reply, this.memory.memory_block),
    }
    return render(request, "dashboard/step_detail.html", context)


@require_safe
@login_required
def step_request(request: HtmxHttpRequest, public_id: str, seq: int) -> HttpResponse:
    """The request body of reply ``seq``'s step as JSON, to send to a provider by hand."""
    session = visible_session(request, public_id)
    reply = get_object_or_404(session.messages, seq=seq, role=Message.Role.ASSISTANT)
    provider = _provider_choice(request, session)
    data = steps.body(steps.before(session, reply), session.model_name, provider)
    response = HttpResponse(
        json.dumps(data, ensure_ascii=False, indent=2), content_type="application/json"
    )
    response["Content-Disposition"] = _attachment(session, f"request-{seq}-{provider}.json")
    return response


def _provider_choice(request: HttpRequest, session: Session) -> str:
    asked = request.GET.get("provider")
    return asked if asked in provider_names() else steps.provider_of(session)


def _reply_at(session: Session, seq: int) -> Message:
    """The first reply at or after message ``seq``, else the last one before it; 404 without."""
    replies = session.messages.filter(role=Message.Role.ASSISTANT)
    found = replies.filter(seq__gte=seq).order_by("seq").first()
    found = found or replies.filter(seq__lt=seq).order_by("-seq").first()
    if found is None:
        raise Http404("This session has no reply from the model.")
    return found


def _earlier_reply(session: Session, reply: Message, since: str | None) -> Message | None:
    """The reply to compare with: ``since`` (a seq) when it names an earlier one,
    else the reply before ``reply``."""
    replies = session.messages.filter(role=Message.Role.ASSISTANT, seq__lt=reply.seq)
    if since and since.isdigit():
        named = replies.filter(seq=int(since)).first()
        if named is not None:
            return named
    return replies.order_by("-seq").first()


def _page_of(session: Session, seq: int) -> int:
    """The timeline page that shows message ``seq`` (counting the messages
    before it only when the seqs have gaps: ``_dense``)."""
    if _dense(session):
        return seq // MESSAGES_PER_PAGE + 1
    return session.messages.filter(seq__lt=seq).count() // MESSAGES_PER_PAGE + 1


# -- a what-if replay against its original ------------------------------------------


@require_safe
@login_required
def replay_comparison(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """The replay's figures beside its original's (htmx: the table only)."""
    replay = visible_session(request, public_id)
    original_id = replay.replay_of
    if original_id is None:
        raise Http404("This session is not a replay.")
    original = get_object_or_404(Session.objects.visible_to(request.user), public_id=original_id)
    context = {
        "session": replay,
        "original": original,
        "comparison": comparison.compare(original, replay),
    }
    return _render(request, "dashboard/replay_comparison.html", "table", context)


# -- a compaction event --------------------------------------------------------


@require_safe
@login_required
def compaction_detail(request: HtmxHttpRequest, public_id: str, position: int) -> HttpResponse:
    """A compaction event: what it folded (the previous summary included) beside
    the summary it wrote, every identifier kept or lost (htmx: that list only,
    ``?show=lost`` for the lost ones), the compactions before and after it."""
    session = visible_session(request, public_id)
    event = get_object_or_404(session.compaction_events, position=position)
    compactions = session.compaction_events.filter(kind=CompactionEvent.Kind.OK)
    folded_in = _summary_before(session, event.position)
    previous_summary = None
    if folded_in is not None:
        # The text this compaction folded in: the previous summary as corrected by then.
        earlier = [
            c
            for c in context_edits.corrections_of(session, folded_in)
            if c.position < event.position
        ]
        previous_summary = earlier[-1].record_extra.get("summary") if earlier else folded_in.summary
    folded, replayed = _compaction_messages(session, event)
    texts = lost.texts(folded)
    kept = _kept_verbatim(session, event)
    entries = event.record_extra.get("ledger_given_way")
    given_way = [
        e
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict) and isinstance(e.get("value"), str)
    ]
    only_lost = request.GET.get("show") == "lost"
    corrections = context_edits.corrections_of(session, event) if event.summary is not None else []
    corrected = corrections[-1].record_extra.get("summary") if corrections else None
    context = {
        "session": session,
        "event": event,
        "corrections": corrections,
        "corrected": corrected,
        "report": lost.report(
            event,
            texts,
            previous_summary,
            corrected,
            lost.texts(kept),
            lost.recalled_blocks(session, [event])[event.position],
        ),
        "given_way": given_way,
        "given_way_by_user": [e["value"] for e in given_way if e.get("role") == "user"],
        "only_lost": only_lost,
        "folded_count": len(texts),
        "previous": compactions.filter(position__lt=position).order_by("-position").first(),
        "next": compactions.filter(position__gt=position).order_by("position").first(),
        "previous_summary": previous_summary,
        "folded_in": folded_in,
        "message_urls": {
            text.seq: reverse("dashboard:message_detail", args=[session.public_id, text.seq])
            for text in texts
            if text.seq is not None
        },
    }
    if _wants_fragment(request):
        return _render(request, "dashboard/compaction_detail.html", "identifiers", context)
    shown = texts[:FOLDED_SHOWN]  # one line each, from the bounded texts already read
    context.update(
        folded=shown,
        folded_hidden=max(len(texts) - len(shown), 0),
        replayed=replayed,
        boundary_unit=_unit_at(session, event.through_seq),
        # An offline summary right after a failed attempt is the library's fallback.
        fallback_after=session.compaction_events.filter(
            kind=CompactionEvent.Kind.FAILED,
            position=event.position - 1,
            through_seq=event.through_seq,
        ).first()
        if event.model == OFFLINE
        else None,
        correct_fields=fields(request, target=event.position, as_of=session.record_count)
        if context_edits.in_force(session) == event
        else None,
        later_revert=session.compaction_events.filter(
            kind=CompactionEvent.Kind.REVERT, reverts=event.number, position__gt=event.position
        ).first()
        if session.revert_count
        else None,
    )
    return _render(request, "dashboard/compaction_detail.html", "identifiers", context)


def _summary_before(session: Session, position: int) -> CompactionEvent | None:
    """The compaction whose summary was in force just before log position
    ``position``, as the library replays it: a compaction sets the summary, an
    undo gives back the one before, a reset clears it. A log that only
    compacted and undid needs no walk (``operations.in_force``)."""
    if operations.undone_numbers(session, before=position) is not None:
        return operations.in_force(session, before=position)
    events: list[CompactionEvent | ContextChange] = [
        *session.compaction_events.filter(position__lt=position).exclude(
            kind__in=[CompactionEvent.Kind.FAILED, CompactionEvent.Kind.WARNING]
        ),
        *session.context_changes.filter(position__lt=position, kind=ContextChange.Kind.RESET),
    ]
    in_force: list[CompactionEvent] = []
    for event in sorted(events, key=lambda row: row.position):
        if isinstance(event, ContextChange):
            in_force.clear()
        elif event.kind == CompactionEvent.Kind.OK:
            in_force.append(event)
        elif in_force and in_force[-1].number == event.reverts:
            in_force.pop()
    return in_force[-1] if in_force else None


def _unit_at(session: Session, seq: int | None) -> str:
    """The turn unit (kind and index, "B3") of message ``seq``, or ""."""
    if seq is None:
        return ""
    found = session.messages.filter(seq=seq).values_list("unit", "unit_index").first()
    return f"{found[0]}{found[1]}" if found else ""


def _compaction_messages(
    session: Session, event: CompactionEvent
) -> tuple[QuerySet[Message], list[Message]]:
    """The messages ``event`` folded (unevaluated) and those it replayed verbatim."""
    if event.kind != CompactionEvent.Kind.OK or event.summarized_first_seq is None:
        folded = session.messages.none()
    else:
        folded = session.messages.filter(
            seq__gte=event.summarized_first_seq, seq__lte=event.summarized_last_seq
        ).exclude(seq__in=event.replayed_seqs or [])
    seqs = [s for s in event.replayed_seqs or [] if isinstance(s, int)]
    replayed = list(session.messages.filter(seq__in=seqs).order_by("seq")) if seqs else []
    return folded, replayed


def _kept_verbatim(session: Session, event: CompactionEvent) -> QuerySet[Message]:
    """The messages the context after ``event`` holds word for word: those it
    replayed, and those after what it folded up to the point it compacted at."""
    replayed = [s for s in event.replayed_seqs or [] if isinstance(s, int)]
    after = event.summarized_last_seq
    through = event.through_seq
    query = Q(seq__in=replayed)
    if after is not None and through is not None and through > after:
        query |= Q(seq__gt=after, seq__lte=through)
    return session.messages.filter(query)


# -- memory trace --------------------------------------------------------------


@require_safe
@login_required
def session_trace(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    session = visible_session(request, public_id)
    kind = request.GET.get("kind", "")
    page = trace.paginator(session, kind, TRACE_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "session": session,
        "page": page,
        "entries": trace.entries(session, page.object_list),
        "children": session.children.visible_to(request.user).order_by("created_at")[:50],
        "kind": kind,
        "kinds": trace.KINDS,
        "query": _query_without_page(request),
    }
    return _render(request, "dashboard/session_trace.html", "trace-table", context)


@require_safe
@login_required
def session_trace_json(request: HtmxHttpRequest, public_id: str) -> StreamingHttpResponse:
    session = visible_session(request, public_id)
    chunks = trace.json_chunks(session, request.GET.get("kind", ""))
    response = StreamingHttpResponse(chunks, content_type="application/json")
    response["Content-Disposition"] = _attachment(session, "trace.json")
    return response


def _query_without_page(request: HttpRequest) -> str:
    """The query string without its page and empty fields, for links that keep it."""
    kept = [(k, v) for k, v in request.GET.items() if v and k != "page"]
    return urlencode(kept)


def _attachment(session: Session, suffix: str) -> str:
    return f'attachment; filename="{session.public_id}-{suffix}"'


# -- exports -------------------------------------------------------------------


@require_safe
@login_required
def export_jsonl(request: HtmxHttpRequest, public_id: str) -> StreamingHttpResponse:
    """The session's log as Motus JSONL, one record a line, streamed."""
    session = visible_session(request, public_id)
    records = DatabaseLogStore().read(session.public_id)
    lines = (trace.dumps(record) + b"\n" for record in records)
    response = StreamingHttpResponse(lines, content_type="application/jsonl")
    response["Content-Disposition"] = _attachment(session, "log.jsonl")
    return response


@require_safe
@login_required
def export_openai(request: HtmxHttpRequest, public_id: str) -> StreamingHttpResponse:
    """Every logged message as an OpenAI chat ``messages`` array, the system prompt first."""
    session = visible_session(request, public_id)
    response = StreamingHttpResponse(
        trace.openai_messages(session), content_type="application/json"
    )
    response["Content-Disposition"] = _attachment(session, "messages.json")
    return response
