"""The session list's search, filters and sort, and its bounded previews.

Everything the list shows comes from the session rows plus three correlated
subqueries (failed compactions, forks, the first user message's stored
preview, ``Message.preview``), so a page costs the same whatever its sessions
hold: no message's content is read, however large.
"""

from __future__ import annotations

import unicodedata
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.db.models import (
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Greatest, Lower, StrIndex, Substr
from django.http import QueryDict

from motus_web.sessions.models import CompactionEvent, Message, Session

# Sort keys and the columns they order by.
SORTS: dict[str, str] = {
    "title": "title",
    "messages": "message_count",
    "compactions": "compaction_count",
    "failed": "failed_count",
    "forks": "fork_count",
    "context": "context_tokens",
    "tokens": "total_tokens",
    "updated": "updated_at",
}
DEFAULT_SORT = "-updated"
SORT_LABELS: dict[str, str] = {
    "-updated": "Latest activity first",
    "updated": "Oldest activity first",
    "title": "Title, A to Z",
    "-title": "Title, Z to A",
    "-messages": "Most messages",
    "messages": "Fewest messages",
    "-compactions": "Most compactions",
    "-failed": "Most failed compactions",
    "-forks": "Most forks",
    "-context": "Largest context",
    "context": "Smallest context",
    "-tokens": "Most message tokens",
}


SEARCH_MAX_CHARS = 200


def _no_control_characters(value: str) -> None:
    # NUL cannot be stored or searched in PostgreSQL text; the others are never typed.
    if any(unicodedata.category(char) == "Cc" for char in value):
        raise forms.ValidationError(
            "Search cannot contain control characters (NUL, tab, newline...).", code="control"
        )


class SessionFilterForm(forms.Form):
    """The list's filters. Each field is checked alone: a bad one is reported
    and left out, the valid ones still apply (``applied``)."""

    q = forms.CharField(
        required=False,
        max_length=SEARCH_MAX_CHARS,
        strip=True,
        label="Search",
        validators=[_no_control_characters],
        error_messages={
            "max_length": (
                f"Search is at most {SEARCH_MAX_CHARS} characters (this one has %(show_value)d)."
            ),
            "null_characters_not_allowed": (
                "Search cannot contain control characters (NUL, tab, newline...)."
            ),
        },
    )
    model = forms.CharField(required=False, max_length=100)
    since = forms.DateField(
        required=False, label="Active since", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label="Until", widget=forms.DateInput(attrs={"type": "date"})
    )
    compacted = forms.BooleanField(required=False, label="With compactions")
    failed = forms.BooleanField(required=False, label="With failed compactions")
    forks = forms.BooleanField(required=False, label="Forks only")
    sort = forms.ChoiceField(
        required=False,
        choices=[(key, key) for name in SORTS for key in (name, f"-{name}")],
    )

    def applied(self) -> dict[str, Any]:
        """The valid fields' values; an invalid field is missing (its error is in ``errors``)."""
        self.is_valid()
        return {name: value for name, value in self.cleaned_data.items() if name not in self.errors}


def _count(query: QuerySet[Any]) -> Subquery:
    counted = query.order_by().values("session" if query.model is not Session else "parent")
    return Subquery(counted.annotate(n=Count("pk")).values("n"), output_field=IntegerField())


def sessions(visible: QuerySet[Session], form: SessionFilterForm) -> QuerySet[Session]:
    """``visible`` searched, filtered, annotated and sorted as ``form`` says.

    A field the form cannot read (a bad date, say) is left out and the others
    still apply; a search it cannot read matches nothing, since "every
    session" would pass for the answer to it.
    """
    data = form.applied()
    failed = CompactionEvent.objects.filter(
        session=OuterRef("pk"), kind=CompactionEvent.Kind.FAILED
    )
    first_user = (
        Message.objects.filter(session=OuterRef("pk"), role=Message.Role.USER)
        .order_by("seq")
        .values("preview")[:1]
    )
    found = visible.annotate(
        failed_count=Coalesce(_count(failed), Value(0)),
        fork_count=Coalesce(_count(Session.objects.filter(parent=OuterRef("pk"))), Value(0)),
        preview=Subquery(first_user, output_field=TextField()),
    )
    if "q" in form.errors:
        found = found.none()
    if query := data.get("q"):
        text = Message.objects.annotate(text=Cast("content", TextField())).filter(
            session=OuterRef("pk"), text__icontains=query
        )
        # The first matching message's stored text around the match, for its snippet.
        at = StrIndex(Lower("text"), Lower(Value(query)))
        window = text.order_by("seq").annotate(
            around=Substr("text", Greatest(at - SNIPPET_BEFORE, Value(1)), SNIPPET_CHARS)
        )
        found = found.filter(
            Q(title__icontains=query)
            | Q(public_id__icontains=query)
            | Q(original_id__icontains=query)
            | Exists(text)
        ).annotate(snippet=Subquery(window.values("around")[:1], output_field=TextField()))
    if model := data.get("model"):
        found = found.filter(model_name=model)
    if since := data.get("since"):
        found = found.filter(updated_at__date__gte=since)
    if until := data.get("until"):
        found = found.filter(updated_at__date__lte=until)
    if data.get("compacted"):
        found = found.filter(compaction_count__gt=0)
    if data.get("failed"):
        found = found.filter(failed_count__gt=0)
    if data.get("forks"):
        found = found.filter(parent__isnull=False)
    sort = data.get("sort") or DEFAULT_SORT
    column = SORTS[sort.lstrip("-")]
    return found.order_by(f"-{column}" if sort.startswith("-") else column, "-pk")


SNIPPET_BEFORE = 60  # characters of a search snippet before the match
SNIPPET_CHARS = 200


def snippet(stored: object, query: str) -> tuple[str, str, str]:
    """The text around ``query`` in a message's stored JSON, split at the match:
    (before, match, after), escapes undone and on one line; the match as the
    message has it (its case). ``("", "", "")`` when it is not found."""
    if not isinstance(stored, str) or not query:
        return "", "", ""
    text = " ".join(unescape_json(stored).split())
    at = text.lower().find(query.lower())
    if at < 0:
        return "", "", ""
    end = at + len(query)
    # The JSON's own quotes and brackets at the window's ends are not the message's.
    return "…" + text[:at].lstrip('"[{ '), text[at:end], text[end:].rstrip('"]} ') + "…"


def unescape_json(fragment: str) -> str:
    """A cut piece of JSON text with its common escapes undone (it rarely parses)."""
    for escaped, plain in (("\\n", " "), ("\\t", " "), ('\\"', '"'), ("\\\\", "\\")):
        fragment = fragment.replace(escaped, plain)
    return fragment


def model_names(visible: QuerySet[Session]) -> list[str]:
    names = (
        visible.exclude(model_name="").order_by("model_name").values_list("model_name", flat=True)
    )
    return list(names.distinct()[:100])


def sort_links(query: QueryDict, current: str) -> dict[str, tuple[str, str]]:
    """For each sortable column: the query string that sorts by it (descending
    first, then toggling) and the arrow to show beside it, if it is the sort."""
    kept = [(k, v) for k, v in query.items() if isinstance(v, str) and v and k not in _RESET]
    links = {}
    for name in SORTS:
        if current == f"-{name}":
            sort, arrow = name, "\u2193"
        elif current == name:
            sort, arrow = f"-{name}", "\u2191"
        else:
            sort, arrow = f"-{name}" if name != "title" else name, ""
        links[name] = (urlencode([*kept, ("sort", sort)]), arrow)
    return links


_RESET = ("page", "sort")  # what a new sort starts afresh
