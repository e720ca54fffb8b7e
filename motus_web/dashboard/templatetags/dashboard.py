import json
from typing import Any

from django import template

from memory import ChatMessage

register = template.Library()


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
