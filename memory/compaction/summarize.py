"""Summarisation for compaction: the prompts, the model call and chunking.

The messages to fold are rendered as a plain transcript inside one user
message, so the request is valid for any provider (no tool definitions are
needed to show past tool calls) and can be split anywhere between messages.
When the transcript does not fit the compaction model's context window, it is
summarised in chunks, each request within the window, every chunk folding the
summary of the ones before it (the same way a new compaction folds the
previous summary).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ..clients.base import ChatClient
from ..errors import CompactionError
from ..json_values import clean_text
from ..messages import ChatMessage
from ..tokens import TokenCounter

CompactFn = Callable[[list[ChatMessage], str], "str | Awaitable[str]"]
"""``compact_fn(messages, system_prompt) -> summary``, sync or async. ``messages``
starts with the current continuation message when the context already holds
a summary, so the new summary can fold the old one in."""

SUMMARY_INSTRUCTIONS = """\
You are compacting the working memory of an AI agent. Below is the earlier part of \
its conversation as a transcript{previous_note}. Write a summary the agent can \
continue from without the transcript. Use these sections:

1. User requests: every user message, in order, paraphrased closely (quote short ones).
2. Current task: what the user asked most recently and what the agent was doing.
3. Key facts and decisions: constraints, choices made and why.
4. Identifiers: every id, name, file path, URL, number, amount and date that may be \
needed again, verbatim.
5. Tool calls and results: what was called and what it returned, briefly; errors and \
how they were handled.
6. Pending work and next step.

Be specific and factual; do not generalise identifiers; no commentary about the \
summary itself. Keep it under {max_tokens} tokens."""

CONTINUATION_TEMPLATE = """\
This session is being continued from an earlier conversation that no longer fits \
the context window. The summary below covers the earlier part of the conversation.

<context_summary>
{summary}
</context_summary>

Continue from where the conversation left off; any messages after this one are \
kept verbatim."""

_REQUEST_OVERHEAD_TOKENS = 64


def continuation_message(summary: str) -> ChatMessage:
    """The user message that carries a summary at the head of the context."""
    return ChatMessage.user(CONTINUATION_TEMPLATE.format(summary=summary))


def render_transcript_line(message: ChatMessage) -> str:
    """One message as transcript text: ``[role] text`` plus its tool calls.

    An assistant's reasoning (``ChatMessage.reasoning_text``) comes first, as
    ``[assistant reasoning] ...``, and a refusal as ``[assistant refusal] ...``:
    the summary folds them like any text.
    """
    if message.role == "tool":
        label = (
            " ".join(["[tool result", *filter(None, [message.name, *message.tool_call_ids])]) + "]"
        )
    else:
        label = f"[{message.role}]"
    parts = []
    if reasoning := message.reasoning_text:
        parts.append(f"[{message.role} reasoning] {reasoning}")
    parts.append(f"{label} {message.text}".rstrip())
    if isinstance(message.content, list) and message.content and not message.text:
        parts.append("(non-text content)")
    if (refusal := message.refusal) is not None:
        parts.append(f"[{message.role} refusal] {refusal}")
    parts.extend(f"  -> call {c.name}({c.arguments}) id={c.id}" for c in message.tool_calls)
    return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary and how it was made."""

    text: str
    model: str
    chunks: int = 1


async def call_compact_fn(
    fn: CompactFn, messages: list[ChatMessage], system_prompt: str, *, timeout_s: float
) -> str:
    """Run a user ``compact_fn`` (sync or async) and check it returned text.

    An async function gets ``timeout_s`` seconds; raises ``CompactionError`` on
    a timeout or a result that is not a non-empty string.
    """
    result = fn(messages, system_prompt)
    if inspect.isawaitable(result):
        try:
            result = await asyncio.wait_for(result, timeout=timeout_s)
        except TimeoutError as exc:
            raise CompactionError(f"compact_fn did not return within {timeout_s:g} s") from exc
    return _checked(result, "compact_fn")


async def summarize_with_model(
    client: ChatClient,
    *,
    model: str,
    messages: Sequence[ChatMessage],
    previous_summary: str | None,
    counter: TokenCounter,
    context_window: int,
    max_output_tokens: int,
    timeout_s: float,
) -> Summary:
    """Summarise ``messages`` (folding ``previous_summary``) with a model.

    Every request stays within ``context_window`` tokens: the transcript is split
    into chunks of at most ``context_window - max_output_tokens - overhead``
    tokens, and one message larger than a chunk is shortened for the request.
    Raises ``CompactionError`` on a timeout (``timeout_s`` seconds per request),
    a provider error or an empty reply.
    """
    instructions_tokens = counter.count(SUMMARY_INSTRUCTIONS) + _REQUEST_OVERHEAD_TOKENS
    budget = context_window - max_output_tokens - instructions_tokens
    summary = previous_summary
    chunks = _chunk_transcript(
        messages, counter, budget - (counter.count(summary) if summary else 0)
    )
    for number, chunk in enumerate(chunks, start=1):
        request = _summary_request(chunk, summary, max_output_tokens)
        try:
            completion = await asyncio.wait_for(
                client.create(model=model, messages=request, max_tokens=max_output_tokens),
                timeout=timeout_s,
            )
        except TimeoutError as exc:
            raise CompactionError(
                f"the compaction model did not answer within {timeout_s:g} s (chunk {number})"
            ) from exc
        except Exception as exc:  # any provider failure leaves the context as it was
            raise CompactionError(f"the compaction model call failed: {exc}") from exc
        summary = _checked(completion.message.text, f"model {model}")
    return Summary(summary or "", model, len(chunks))


def _summary_request(transcript: str, previous: str | None, max_tokens: int) -> list[ChatMessage]:
    note = " and the summary of what came before it" if previous else ""
    body = f"<earlier_summary>\n{previous}\n</earlier_summary>\n\n" if previous else ""
    return [
        ChatMessage.system(SUMMARY_INSTRUCTIONS.format(previous_note=note, max_tokens=max_tokens)),
        ChatMessage.user(f"{body}<transcript>\n{transcript}\n</transcript>"),
    ]


def _chunk_transcript(
    messages: Sequence[ChatMessage], counter: TokenCounter, budget: int
) -> list[str]:
    budget = max(budget, 256)
    chunks: list[str] = []
    lines: list[str] = []
    used = 0
    for message in messages:
        line = render_transcript_line(message)
        tokens = counter.count(line) + 1
        if tokens > budget:
            line = _shorten(line, counter, budget - 16)
            tokens = counter.count(line) + 1
        if lines and used + tokens > budget:
            chunks.append("\n".join(lines))
            lines, used = [], 0
        lines.append(line)
        used += tokens
    if lines or not chunks:
        chunks.append("\n".join(lines))
    return chunks


def _shorten(text: str, counter: TokenCounter, max_tokens: int) -> str:
    """Keep the head and the tail of ``text`` within ``max_tokens`` tokens."""
    half = max(max_tokens // 2 - 8, 1)
    head = counter.truncate(text, half)
    # A token is rarely more than 4 characters of ordinary text; start from that
    # many and trim, so a multi-megabyte message is never tokenised whole.
    tail = text[max(len(head), len(text) - half * 4) :]
    while tail and counter.count(tail) > half:
        tail = tail[len(tail) // 4 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail):,} characters omitted ...]\n{tail}"


def _checked(result: object, source: str) -> str:
    if not isinstance(result, str):
        raise CompactionError(f"{source} returned {type(result).__name__}, not a summary string")
    if not result.strip():
        raise CompactionError(f"{source} returned an empty summary")
    return clean_text(result)  # kept, counted and logged as the same text
