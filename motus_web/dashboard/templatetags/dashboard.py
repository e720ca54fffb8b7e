import json
from dataclasses import dataclass
from typing import Any

from django import template

from memory import ChatMessage

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
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str | list):
        return ChatMessage(role="user", content=content).text
    return ""


@register.filter
def non_text_parts(content: Any) -> list[str]:
    """The types of content parts that are not text (images, audio...)."""
    if not isinstance(content, list):
        return []
    return [
        str(part.get("type")) for part in content if part.get("type") not in ("text", "input_text")
    ]


@register.filter
def pretty_json(text: str) -> str:
    """Tool-call arguments indented for reading; text that is not JSON as it is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return text
