"""Cutting a tool result that is too long to enter the context.

``truncate_tool_result(message, max_tokens, counter)`` keeps the head of a
tool result and ends it with a marker that states the original size::

    ...kept text...

    [... tool result truncated: kept 49,968 of 183,204 tokens (734,112 bytes)]

The content, marker included, counts at most ``max_tokens`` tokens with
``counter`` (its ``content_tokens``, the same measure the memory uses), and the
cut never ends inside a character. The cost is bounded for any input,
megabytes of one repeated character included (see ``memory.tokens``).

Content given as a list of parts: the text parts share what is left of the
budget once the other parts (images, files) are counted, in order; the first
text part that does not fit is cut, the text parts after it are dropped, the
other parts are all kept, and the marker is added as a last text part. If the
non-text parts alone exceed ``max_tokens`` the result cannot fit and keeps them
with the marker only; a list without text parts is never cut.

When ``max_tokens`` is so small that the marker would take more than half of
it, the short marker ``[... truncated]`` is used, or none if even that does not
fit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..messages import ChatMessage
from .counter import TokenCounter

__all__ = [
    "SHORT_MARKER",
    "Fitted",
    "Truncation",
    "fit_tool_result",
    "truncate_tool_result",
    "truncation_marker",
]

SHORT_MARKER = "\n\n[... truncated]"
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_MAX_ATTEMPTS = 32


@dataclass(frozen=True, slots=True)
class Truncation:
    """A cut tool result.

    ``message`` is a new message (same role, ``tool_call_id``, ``name`` and
    ``extra``) whose content was cut; ``original_tokens`` and
    ``original_bytes`` (UTF-8 of the text) measure the content before, and
    ``kept_tokens`` the content kept, marker excluded.
    """

    message: ChatMessage
    original_tokens: int
    original_bytes: int
    kept_tokens: int

    def as_dict(self) -> dict[str, int]:
        """The sizes, as recorded in the log's ``truncation`` field."""
        return {
            "original_tokens": self.original_tokens,
            "original_bytes": self.original_bytes,
            "kept_tokens": self.kept_tokens,
        }


@dataclass(frozen=True, slots=True)
class Fitted:
    """A tool result as it enters the context: ``message`` (cut or as given),
    the ``truncation`` when it was cut, and the tokens of its content, counted
    on the way (``None`` when they were not counted: not a tool result, or
    one with no more UTF-8 bytes than the limit, which cannot be over it)."""

    message: ChatMessage
    truncation: Truncation | None
    content_tokens: int | None


def truncation_marker(kept_tokens: int, original_tokens: int, original_bytes: int) -> str:
    """The text that ends a cut tool result."""
    return (
        f"\n\n[... tool result truncated: kept {kept_tokens:,} of {original_tokens:,} tokens "
        f"({original_bytes:,} bytes)]"
    )


def truncate_tool_result(
    message: ChatMessage, max_tokens: int, counter: TokenCounter
) -> Truncation | None:
    """Cut ``message``'s content to ``max_tokens`` tokens, marker included.

    Returns ``None`` when ``message`` is not a tool result, ``max_tokens`` is
    0 (no limit), or the content already fits. Raises ``ValueError`` for a
    negative ``max_tokens``.
    """
    return fit_tool_result(message, max_tokens, counter).truncation


def fit_tool_result(message: ChatMessage, max_tokens: int, counter: TokenCounter) -> Fitted:
    """``truncate_tool_result`` plus the content's token count, from the same pass.

    The memory uses this so that a tool result's text is tokenised once on its
    way in: the count that decides the cut is the count of the context.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if message.role != "tool" or max_tokens == 0:
        return Fitted(message, None, None)
    content = message.content
    if isinstance(content, str):
        return _truncate_text(message, content, max_tokens, counter)
    if isinstance(content, list):
        return _truncate_parts(message, content, max_tokens, counter)
    return Fitted(message, None, None)


def _utf8_len(text: str) -> int:
    # ``isascii`` is O(1) on a str: most tool results are not copied to be measured.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _choose_marker(
    counter: TokenCounter, max_tokens: int, original_tokens: int, original_bytes: int
) -> tuple[bool, int]:
    """(use the full marker?, tokens to keep free for the marker)."""
    # kept <= max_tokens, so this marker has at least as many digits as the final one.
    full = counter.count(truncation_marker(max_tokens, original_tokens, original_bytes))
    if full <= max_tokens // 2:
        return True, full
    short = counter.count(SHORT_MARKER)
    return False, short if short < max_tokens else 0


def _marker(
    use_full: bool, reserve: int, kept_tokens: int, original_tokens: int, original_bytes: int
) -> str:
    if use_full:
        return truncation_marker(kept_tokens, original_tokens, original_bytes)
    return SHORT_MARKER if reserve else ""


def _truncate_text(
    message: ChatMessage, content: str, max_tokens: int, counter: TokenCounter
) -> Fitted:
    original_bytes = _utf8_len(content)
    if original_bytes <= max_tokens:
        # Every token covers at least one UTF-8 byte (the chunked count of
        # long runs too), so this text cannot be over the limit: it is not
        # tokenised here but when the memory counts the message.
        return Fitted(message, None, None)
    counted = counter.counted(content)
    original = counted.tokens
    if original <= max_tokens:
        return Fitted(message, None, original)
    use_full, reserve = _choose_marker(counter, max_tokens, original, original_bytes)

    def marker(kept_tokens: int) -> str:
        return _marker(use_full, reserve, kept_tokens, original, original_bytes)

    cut = counter.cut_ids(counted, max_tokens - reserve, max_tokens, marker)
    if cut is not None:  # the usual case: cut from the ids the count produced
        kept_text, kept_tokens, total = cut.text, cut.tokens, cut.total
        text = kept_text + marker(kept_tokens)
    else:
        text, kept_tokens, total = _truncate_retokenising(
            content, max_tokens, reserve, marker, counter
        )
    cut_message = replace(message, content=text)
    return Fitted(
        cut_message, Truncation(cut_message, original, original_bytes, kept_tokens), total
    )


def _truncate_retokenising(
    content: str, max_tokens: int, reserve: int, marker: Callable[[int], str], counter: TokenCounter
) -> tuple[str, int, int]:
    """(cut text, kept tokens, its total) by counting prefixes again: for the
    texts ``TokenCounter.cut_ids`` cannot cut (very long runs, no cut point
    near the budget, a tiny budget)."""
    head = counter.truncate(content, max_tokens)
    # From here on only the first max_tokens tokens are looked at again.
    budget = max_tokens - reserve
    for attempt in range(_MAX_ATTEMPTS + 1):
        if attempt == _MAX_ATTEMPTS:
            budget = 0  # the marker alone always fits
        kept = counter.truncate_counted(head, max(budget, 0))
        cut = kept.text + marker(kept.tokens)
        total = counter.count(cut)
        if total <= max_tokens or budget <= 0:
            break
        budget -= total - max_tokens
    return cut, kept.tokens, total


def _truncate_parts(
    message: ChatMessage, parts: Sequence[Mapping[str, Any]], max_tokens: int, counter: TokenCounter
) -> Fitted:
    is_text = [p.get("type") in _TEXT_PART_TYPES and isinstance(p.get("text"), str) for p in parts]
    if not any(is_text):
        return Fitted(message, None, None)  # nothing that can be cut
    original = counter.content_tokens(parts)
    if original <= max_tokens:
        return Fitted(message, None, original)
    original_bytes = sum(_utf8_len(p["text"]) for p, t in zip(parts, is_text, strict=True) if t)
    fixed = sum(counter.part_tokens(p) for p, t in zip(parts, is_text, strict=True) if not t)
    use_full, reserve = _choose_marker(counter, max_tokens, original, original_bytes)
    budget = max_tokens - reserve - fixed
    for attempt in range(_MAX_ATTEMPTS + 1):
        if attempt == _MAX_ATTEMPTS:
            budget = 0
        kept_parts = _fill_text_parts(parts, is_text, max(budget, 0), counter)
        kept_tokens = counter.content_tokens(kept_parts)
        marker = _marker(use_full, reserve, kept_tokens, original, original_bytes)
        new_parts = (
            [*kept_parts, {"type": "text", "text": marker.lstrip("\n")}] if marker else kept_parts
        )
        total = counter.content_tokens(new_parts)
        if total <= max_tokens or budget <= 0:
            break
        budget -= total - max_tokens
    cut_message = replace(message, content=new_parts)
    truncation = Truncation(cut_message, original, original_bytes, kept_tokens)
    return Fitted(cut_message, truncation, total)


def _fill_text_parts(
    parts: Sequence[Mapping[str, Any]], is_text: Sequence[bool], budget: int, counter: TokenCounter
) -> list[dict[str, Any]]:
    """All non-text parts, and the text parts in order while ``budget`` lasts."""
    out: list[dict[str, Any]] = []
    left = budget
    for part, text_part in zip(parts, is_text, strict=True):
        if not text_part:
            out.append(dict(part))
            continue
        if left <= 0:
            continue
        kept = counter.truncate_counted(part["text"], left)
        left = 0 if kept.tokens < kept.original_tokens else left - kept.tokens
        if kept.text:
            out.append({**part, "text": kept.text})
    return out
