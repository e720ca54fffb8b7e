"""What the model is sent now, part by part, with a token breakdown.

Built from the memory the library restores, so the page shows exactly
``restore_from_log(...).get_context()``: the system prompt, the long-term
memories a background memory placed after it (in the same message, shown as
their own part), the continuation summary when there is one, and the
messages kept since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from memory import ChatMessage, CompactionMemory

SHOWN_TAIL = 200  # latest context messages the page lists in full

# Breakdown parts, in the order the bar stacks them, with their labels.
PARTS: dict[str, str] = {
    "system": "System prompt",
    "memories": "Long-term memories",
    "summary": "Summary",
    "user": "User",
    "assistant": "Assistant text",
    "tool_calls": "Tool calls",
    "tool_results": "Tool results",
}


@dataclass(frozen=True, slots=True)
class Part:
    kind: str  # a key of PARTS
    message: ChatMessage
    tokens: int
    index: int  # in get_context()
    seq: int | None = None  # the logged message's; None for the instructions and the summary

    @property
    def label(self) -> str:
        return PARTS[self.kind]


@dataclass(frozen=True, slots=True)
class LiveContext:
    parts: tuple[Part, ...]
    threshold: int
    estimate: int  # the memory's estimate of the whole request: parts, tool schemas, priming
    tool_tokens: int = 0  # the tool schemas sent beside the messages
    # Context messages between the head and ``parts``' tail that were counted, not
    # loaded (``context_now``), and their tokens by part kind.
    earlier: int = 0
    earlier_tokens: Mapping[str, int] = field(default_factory=dict)

    @property
    def messages(self) -> list[ChatMessage]:
        return [part.message for part in self.parts]

    @property
    def count(self) -> int:
        """Messages in the context, those counted and not loaded included (the
        instructions' message once, though its prompt and memories are two parts)."""
        return len({part.index for part in self.parts}) + self.earlier

    @property
    def tokens(self) -> int:
        return sum(part.tokens for part in self.parts) + sum(self.earlier_tokens.values())

    @property
    def head(self) -> tuple[Part, ...]:
        """The system prompt, the recalled memories and the summary, those there are."""
        count = 0
        while count < len(self.parts) and self.parts[count].kind in INSTRUCTIONS:
            count += 1
        if count < len(self.parts) and self.parts[count].kind == "summary":
            count += 1
        return self.parts[:count]

    @property
    def tail(self) -> tuple[Part, ...]:
        """The latest ``SHOWN_TAIL`` messages after the head: what the page lists
        in full (the breakdown counts them all)."""
        rest = self.parts[len(self.head) :]
        return rest[-SHOWN_TAIL:]

    @property
    def hidden(self) -> int:
        return self.count - len(self.head) - len(self.tail)

    @property
    def priming(self) -> int:
        return self.estimate - self.tokens - self.tool_tokens

    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(PARTS, 0)
        for kind, tokens in self.earlier_tokens.items():
            out[kind] += tokens
        for part in self.parts:
            out[part.kind] += part.tokens
        return out


INSTRUCTIONS = ("system", "memories")  # the parts of the instructions' message


def kind_of(role: str, calls_tools: bool) -> str:
    """The part a context message after the instructions and summary is."""
    if role == "tool":
        return "tool_results"
    if role == "assistant":
        return "tool_calls" if calls_tools else "assistant"
    return "user" if role == "user" else "system"


def _instructions(memory: CompactionMemory, message: ChatMessage, tokens: int) -> list[Part]:
    """The instructions' message as two parts: the prompt, then the recalled
    memories the same message carries (its tokens split between them)."""
    block = memory.memory_block
    block_tokens = min(tokens, memory.token_counter.count(block))
    memories = Part("memories", ChatMessage(role=message.role, content=block), block_tokens, 0)
    if not memory.system_prompt:
        return [memories]
    prompt = ChatMessage(role=message.role, content=memory.system_prompt)
    return [Part("system", prompt, tokens - block_tokens, 0), memories]


def of(
    memory: CompactionMemory,
    seqs: Sequence[int | None] = (),
    logged_tokens: Mapping[int, int] | None = None,
    earlier: Mapping[str, int] | None = None,
    earlier_count: int = 0,
) -> LiveContext:
    """The parts of ``memory.get_context()``, each with its tokens.

    ``earlier_count`` messages with ``earlier`` tokens (by part kind) come
    before ``memory``'s own messages in the context and were counted, not
    restored (``context_now``): they shift the parts' indexes and add to the
    totals and the estimate.

    ``seqs`` are the logged seqs of the context after the instructions
    (``get_session_state().seqs``: None for the summary and derived
    placeholders) and ``logged_tokens`` the tokens the log states for them,
    which is what the memory counted (except for a tool result the memory
    holds as a stub: ``cleared_seqs``); anything else is estimated afresh. An
    assistant message that calls tools counts as "tool calls" whole, its text
    included. A session without a system prompt or recalled memories has no
    instructions' message: its context starts with the summary or a message.
    """
    context = memory.get_context()
    # get_context() is the instructions' message, when there is one, then memory.messages.
    instructed = len(context) > len(memory.messages)
    logged = logged_tokens or {}
    stubs = memory.cleared_seqs
    parts = []
    for index, message in enumerate(context):
        if instructed and index == 0:
            whole = memory.estimate_message_tokens(message)
            if memory.memory_block:
                parts.extend(_instructions(memory, message, whole))
            else:
                parts.append(Part("system", message, whole, 0))
            continue
        after = index - instructed  # the position in memory.messages and in seqs
        seq = seqs[after] if after < len(seqs) else None
        found = logged.get(seq) if seq is not None and seq not in stubs else None
        tokens = memory.estimate_message_tokens(message) if found is None else found
        if after == 0 and memory.summary is not None:
            kind = "summary"
        else:
            kind = kind_of(message.role, bool(message.tool_calls))
        parts.append(Part(kind, message, tokens, index + earlier_count, seq))
    earlier = earlier or {}
    return LiveContext(
        tuple(parts),
        memory.token_threshold,
        memory.estimate_context_tokens() + sum(earlier.values()),
        memory.tool_schema_tokens,
        earlier_count,
        earlier,
    )


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str
    label: str
    tokens: int
    x: float  # start, 0 to 100
    width: float


def stacked_bar(live: LiveContext) -> list[Segment]:
    """One segment per part with tokens, laid end to end over 0..100."""
    totals = live.totals()
    whole = sum(totals.values()) or 1
    segments, x = [], 0.0
    for kind, tokens in totals.items():
        if tokens:
            width = round(100 * tokens / whole, 3)
            segments.append(Segment(kind, PARTS[kind], tokens, round(x, 3), width))
            x += width
    return segments
