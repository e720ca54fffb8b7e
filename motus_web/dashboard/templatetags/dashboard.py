import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from memory import ChatMessage, InvalidMessageError
from motus_web.sessions.models import CompactionEvent

register = template.Library()

# Longer texts show their start only, with a link to the whole message: a page
# of 50 messages stays small whatever a tool returned.
PREVIEW_CHARS = 3000


@dataclass(frozen=True, slots=True)
class Clipped:
    text: str  # what to show
    chars: int  # length of the whole text
    size: int  # bytes of the whole text in UTF-8 (0 when nothing was cut)

    @property
    def cut(self) -> bool:
        return len(self.text) < self.chars


@register.simple_tag(takes_context=True)
def clip(context: template.Context, text: object) -> Clipped:
    """``{% clip text as clipped %}``: the first ``PREVIEW_CHARS`` characters of
    ``text``, or all of it on a page that sets ``full``."""
    text = text if isinstance(text, str) else str(text)
    if context.get("full") or len(text) <= PREVIEW_CHARS:
        return Clipped(text, len(text), 0)
    return Clipped(text[:PREVIEW_CHARS], len(text), len(text.encode("utf-8", "surrogatepass")))


@register.filter
def message_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list;
    content no message could hold (an imported text part that is not text, an
    integer past 64 bits: the fuzz test's find) is shown as its JSON, never a 500."""
    if isinstance(content, str | list):
        try:
            return ChatMessage(role="user", content=content).text
        except InvalidMessageError:
            return json.dumps(content, ensure_ascii=False, default=str)
    return ""


@register.filter
def non_text_parts(content: Any) -> list[str]:
    """The types of content parts that are not text (images, audio...)."""
    if not isinstance(content, list):
        return []
    return [
        str(part.get("type")) for part in content if part.get("type") not in ("text", "input_text")
    ]


# Pretty-printing is for reading: past these bounds the raw text is shown instead,
# so no stored value can make a page slow or fail (a recursion error, say).
PRETTY_MAX_CHARS = 100_000
PRETTY_MAX_DEPTH = 32


@register.filter
def pretty_json(text: object) -> str:
    """Tool-call arguments indented for reading; anything else (not JSON, too
    large, nested too deep) as the raw text."""
    raw = text if isinstance(text, str) else str(text)
    if len(raw) > PRETTY_MAX_CHARS:
        return raw
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if _depth(value) > PRETTY_MAX_DEPTH:
        return raw
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def call_arguments(call: object) -> str:
    """A stored tool call's arguments (a function's) or input (a custom tool's), as text."""
    if not isinstance(call, dict):
        return ""
    payload = call.get("function") or call.get("custom") or {}
    text = payload.get("arguments", payload.get("input", "")) if isinstance(payload, dict) else ""
    return text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)


@register.filter
def line_count(text: object) -> int:
    return str(text).count("\n") + 1


@register.filter
def as_json(value: object) -> str:
    """A value from the log (a tool schema, say) as JSON text."""
    return json.dumps(value, ensure_ascii=False)


def _depth(value: object) -> int:
    """How deeply ``value`` nests lists and objects, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > PRETTY_MAX_DEPTH:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


@register.simple_tag(takes_context=True)
def paired_calls(context: template.Context, message: Any) -> list[tuple[Any, Any]]:
    """``{% paired_calls message as pairs %}``: ``(call, result entry or None)``
    for each tool call; results come from the timeline ``entry`` in the context."""
    calls = message.tool_calls if isinstance(message.tool_calls, list) else []
    results = getattr(context.get("entry"), "results", None) or {}
    return [
        (call, results.get(call.get("id")) if isinstance(call, dict) else None) for call in calls
    ]


FINISH_REASONS = {
    "length": (
        "cut off at the output limit",
        "The reply ended because it reached the output limit",
    ),
    "content_filter": (
        "stopped by a content filter",
        "The provider's content filter ended the reply",
    ),
    "interrupted": (
        "interrupted",
        "The turn was stopped while this reply streamed: a partial answer",
    ),
    "invalid_tool_calls": (
        "tool calls not run",
        "The reply's tool calls had arguments that are not valid JSON: none was run or sent back",
    ),
}


@register.filter
def finish_badge(reason: str) -> tuple[str, str]:
    """The badge text and its explanation of a reply's ``finish_reason``."""
    return FINISH_REASONS.get(reason, (f"ended: {reason}", f"The reply ended with {reason!r}"))


@register.simple_tag(takes_context=True)
def reply_cost(context: template.Context, message: Any) -> Any:
    """``{% reply_cost message as cost %}``: the estimated cost of a reply's reported
    usage (``costs.Cost``), or ``None``."""
    from ..costs import Tokens, cost

    if message.role != "assistant":
        return None
    session = context.get("session")
    tokens = Tokens.of(
        getattr(session, "model_name", "") or "", message.provider_tokens, message.record_extra
    )
    return cost(tokens) if tokens is not None and tokens.model else None


@register.filter
def dollars(amount: Any) -> str:
    """An estimated amount in dollars (``costs.dollars``: never ``$7.5e-05``)."""
    from ..costs import dollars as readable

    return readable(amount)


@register.simple_tag
def identifier_items(report: Any, only_lost: bool, message_urls: dict[int, str]) -> str:
    """The ``<li>`` of each identifier of a ``lost.Report`` (the lost ones only when
    ``only_lost``), each naming where it was held: a compaction can list a
    thousand, so they are joined here rather than looped over in the template."""
    rows = []
    for item in report.found:
        if only_lost and item.kept:
            continue
        state = "kept" if item.kept else "lost"
        user = ", named by the user" if item.from_user else ""
        if item.seq is None:
            where = mark_safe("in the previous summary")
        else:
            where = format_html('in <a href="{}">#{}</a>', message_urls.get(item.seq, ""), item.seq)
        rows.append(
            format_html(
                '<li class="{}"><span class="mark">{}</span> <code>{}</code> '
                '<span class="muted">{}{}, {}</span></li>',
                state,
                state,
                item.identifier.value,
                item.identifier.kind,
                user,
                where,
            )
        )
    return mark_safe("".join(rows))  # each row built by format_html, which escapes


@register.filter
def event_name(event: CompactionEvent) -> str:
    """How a page names a compaction event: "Compaction 3", or its kind; never "None"."""
    if event.kind != CompactionEvent.Kind.OK:
        return str(event.get_kind_display()).capitalize()
    return "Compaction" if event.number is None else f"Compaction {event.number}"


@register.filter
def is_compaction(event: object) -> bool:
    return isinstance(event, CompactionEvent)


@register.filter
def warning_text(event: CompactionEvent) -> str:
    """A warning record's reason with its figures once, grouped (``wording.warning_text``)."""
    from motus_web.ui.wording import warning_text as worded

    return worded(event.reason, event.floor_tokens, event.threshold)


@register.filter
def percent_of(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "\u2013"


@register.filter
def ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "\u2013"


@register.filter
def snippet_parts(stored: object, query: object) -> tuple[str, str, str]:
    """A search result's snippet, split at the match (``session_list.snippet``)."""
    from ..session_list import snippet

    return snippet(stored, query if isinstance(query, str) else "")


@register.filter
def gauge_of(session: Any) -> Any:
    """The context gauge of a session row (``charts.Gauge``)."""
    from motus_web.sessions.memories import file_limits

    from ..charts import gauge

    limits = file_limits(session.record_extra)
    return gauge(session.context_tokens, session.config, session.model_name, limits)


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def minutes(duration: object) -> str:
    """A ``timedelta`` in whole minutes, for people ("15 minutes"); "" for anything else."""
    if not isinstance(duration, timedelta):
        return ""
    count = max(1, round(duration.total_seconds() / 60))
    return f"{count} minute{'s' if count != 1 else ''}"
