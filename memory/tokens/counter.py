"""Token counting: how many tokens a text, a message or a whole context costs.

``TokenCounter.for_model(model)`` counts with the model's own tiktoken
encoding when there is one (OpenAI models) and with ``cl100k_base`` otherwise,
then ``approximate`` is true (see ``memory.tokens.encodings``). Text that spells a
special token (``<|endoftext|>``) is counted as the plain text it is.

What is exact and what is an estimate
-------------------------------------
- ``count(text)`` is exactly ``len(encoding.encode_ordinary(text))`` for any
  text in which no run of letters, of whitespace, or of punctuation/symbols is
  ``LONG_RUN_CHARS`` (4,096) characters or longer: prose, code, JSON, logs and
  base64 blobs (base64 has a digit every few characters, so no such run).
  With an ``approximate`` counter that exact count is of ``cl100k_base``, not
  of the model's own tokenizer.
- A text that holds such a run (megabytes of one repeated character, a letter
  string with no digit or space in it) is an estimate: each run is tokenised in
  ``RUN_CHUNK_CHARS`` (1,024) character chunks, identical chunks once, and the
  text around each run separately. Tiktoken would make each run one
  pre-token and BPE-merge it whole: measured with tiktoken 0.14 on this
  machine, 5 MB of ``"a"`` takes 3.4 s (cl100k) and 5.4 s (o200k), 5 MB of
  ``"."`` 2.9 s and 7.9 s, and o200k panics (a ``BaseException`` from its
  regex engine) on about a million spaces in a row. Chunked, each of these
  takes 35-125 ms, linear in the length. The estimate differs from tiktoken
  by at most a few tokens per run boundary and per chunk: exact or within
  0.1% for repeated characters, within 1% for varied letters (tested).
- ``truncate`` keeps the first ``max_tokens`` tokens of that same count, so
  ``count(truncate(text, n)) <= n`` always holds.
- ``cut_ids`` cuts a text from the token ids ``counted`` kept, at a point
  where the cl100k/o200k patterns always end a piece (``_is_cut_point``), so
  the kept text's count is the number of ids before it, without tokenising
  it again; ``count_lines`` is ``count`` summed over the parts between such
  points at line breaks, each part remembered (a summary rendered again).
- ``message_tokens`` and ``context_tokens`` follow the OpenAI cookbook "How to
  count tokens with tiktoken" (3 tokens per message, 1 more with ``name``, 3
  to prime the reply). The overhead of a tool call is an estimate; images
  follow the providers' published rules; audio and files are rough
  estimates (``memory.tokens.images``).
- They count what the model's provider receives and counts, by its
  documented rules (``memory.tokens.provider_rules``): the reasoning of
  earlier replies only where the provider keeps it, no empty system message,
  and ``tools_tokens`` the tool schemas as the provider renders them.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from ..messages import INSTRUCTION_ROLES, ChatMessage
from .encodings import encoding_for_model
from .images import (
    ANTHROPIC_UNKNOWN_IMAGE_TOKENS,
    AUDIO_PART_TYPES,
    FILE_PART_TYPES,
    FILE_TOKENS_PER_PAGE,
    IMAGE_PART_TYPES,
    OPENAI_LOW_DETAIL_TOKENS,
    OPENAI_UNKNOWN_IMAGE_TOKENS,
    PDF_PAGE,
    TEXT_PART_TYPES,
    anthropic_image_tokens,
    audio_part_tokens,
    b64decode_prefix,
    base64_payload,
    image_part_size,
    openai_image_tokens,
)
from .provider_rules import CountingRules, counting_rules, tools_tokens

# OpenAI cookbook, "How to count tokens with tiktoken" (gpt-3.5-turbo-0613 and later):
# every message is wrapped as <|start|>{role/name}\n{content}<|end|>\n.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
# Every reply is primed with <|start|>assistant<|message|>.
REPLY_PRIMING_TOKENS = 3
# Estimate of what the chat format adds around each tool call besides its name
# and arguments (recipient prefix such as "functions." and delimiters). The
# call id is not counted: it is not rendered into the prompt.
TOKENS_PER_TOOL_CALL = 4

# The encodings whose pattern the cut points of ``cut_ids`` are proven for.
_CUT_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})
# How far back from the budget ``cut_ids`` looks for cut points, in tokens.
_CUT_SEARCH_TOKENS = 256
_ASCII_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# After a letter or digit: ASCII punctuation, space, tab or a line break (the
# apostrophe aside: o200k's letter pieces may end in "'s", "'ll"...).
_AFTER_ALNUM = frozenset(range(0x20, 0x7F)) - _ASCII_ALNUM - {ord("'")} | frozenset(b"\t\n\r")

# ``count_lines`` remembers the counts of this many characters of lines at most.
_LINE_CACHE_CHARS = 8_000_000
_ALNUM_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# After a line break that follows a visible character: o200k's punctuation
# pieces take a "/" after their line breaks, so it is left out.
_VISIBLE_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F))
_LINE_START_CHARS = _VISIBLE_CHARS - {"/"}
_GAP = " ... "  # how a summary joins the runs it quotes

# Runs at least this long of one character class are counted in chunks (see above).
LONG_RUN_CHARS = 4096
RUN_CHUNK_CHARS = 1024
_SAMPLE_STRIDE = LONG_RUN_CHARS // 2


@dataclass(frozen=True, slots=True)
class TruncatedText:
    """The result of ``TokenCounter.truncate_counted``."""

    text: str  # the longest kept prefix
    tokens: int  # count(text)
    original_tokens: int  # count() of the whole input


@dataclass(frozen=True, slots=True)
class CountedText:
    """A text counted once: ``tokens`` is ``count(text)``; ``ids`` are its
    token ids when it was encoded whole (``None``: counted in chunks, see the
    module doc), for ``TokenCounter.cut_ids``."""

    text: str
    tokens: int
    ids: Sequence[int] | None


@dataclass(frozen=True, slots=True)
class CutText:
    """The result of ``TokenCounter.cut_ids``: ``text`` the kept prefix,
    ``tokens`` its count, ``total`` the count of ``text + ending``."""

    text: str
    tokens: int
    total: int


@functools.cache
def _run_patterns() -> tuple[Any, ...]:
    """(forward, backward) patterns for runs of the classes tiktoken's regexes group.

    Letters (o200k counts marks as letters too), whitespace, and the
    "punctuation" class (not a space, letter or number). Digits are split into
    groups of 3 by both encodings, so they never form a long pre-token.
    """
    classes = (r"[\p{L}\p{M}]+", r"\s+", r"[^\s\p{L}\p{N}]+")
    return tuple((regex.compile(c), regex.compile(f"(?r){c}")) for c in classes)


def _long_runs(text: str) -> list[tuple[int, int]]:
    """The maximal runs of one class that are at least ``LONG_RUN_CHARS`` long.

    Looks at every ``_SAMPLE_STRIDE``-th character only: a run of
    ``2 * _SAMPLE_STRIDE`` characters always holds one sample that is less than
    a stride from its start, so the scan is linear and cheap on ordinary text.
    """
    runs: list[tuple[int, int]] = []
    n = len(text)
    covered = 0
    for p in range(0, n, _SAMPLE_STRIDE):
        if p < covered:
            continue
        for forward, backward in _run_patterns():
            if forward.match(text, p, p + 1) is None:
                continue
            # A run of one repeated character (the usual pathological case) is
            # skipped with str.lstrip, much faster than the class pattern.
            same = _same_char_end(text, p) if text.startswith(text[p] * 64, p) else p + 1
            rest = forward.match(text, same) if same < n else None
            end = rest.end() if rest is not None else same
            if end - p >= LONG_RUN_CHARS - _SAMPLE_STRIDE:
                back = backward.match(text, max(0, p - _SAMPLE_STRIDE), p)
                start = back.start() if back is not None else p
                if end - start >= LONG_RUN_CHARS:
                    runs.append((start, end))
                    covered = end
            break
    return runs


def _same_char_end(text: str, p: int) -> int:
    """The end of the run of ``text[p]`` starting at ``p``, in O(run length)."""
    char = text[p]
    start, width = p, 4096
    while start < len(text):
        window = text[start : start + width]
        rest = window.lstrip(char)
        if rest:
            return start + len(window) - len(rest)
        start += len(window)
        width *= 4
    return len(text)


def _is_cut_point(data: bytes, offset: int) -> bool:
    """Whether ``offset`` in the UTF-8 ``data`` is a place where the
    cl100k/o200k patterns always end a piece, whatever follows.

    Two cases, both between ASCII characters: a space after a printable
    character (no piece holds a non-space followed by a space), and after a
    letter or digit any of ``_AFTER_ALNUM`` (letter and digit pieces end at
    the first other character). The text before such a point then splits
    into the same pieces alone as within the whole text, and the text from it
    on splits as it would alone (the patterns have no look-behind), so its
    tokens are the whole text's up to there.
    """
    if offset <= 0 or offset >= len(data):
        return False
    before, after = data[offset - 1], data[offset]
    if after == 0x20:
        return 0x21 <= before <= 0x7E
    return before in _ASCII_ALNUM and after in _AFTER_ALNUM


def _line_cuts(text: str) -> list[int]:
    """Offsets next to the line breaks of ``text``, and before each " ... "
    that joins quoted runs, where the cl100k/o200k patterns always end a
    piece, whatever is around (see ``_is_cut_point``): after a line break
    between a visible character and an ASCII one other than a space or "/"
    (a punctuation piece ends with its line breaks, a line break alone is a
    piece), or else before a line break that follows an ASCII letter or
    digit; before the space of " ... " after a visible ASCII character. The
    tokens of ``text`` are then those of its parts between these offsets, one
    after the other."""
    cuts = []
    find = text.find
    last = len(text) - 1
    i = find("\n", 1)
    while 0 < i < last:
        before = text[i - 1]
        if text[i + 1] in _LINE_START_CHARS and not before.isspace():
            cuts.append(i + 1)
        elif before in _ALNUM_CHARS:
            cuts.append(i)
        i = find("\n", i + 1)
    i = find(_GAP, 1)
    if i < 0:
        return cuts
    while i > 0:
        if text[i - 1] in _VISIBLE_CHARS:
            cuts.append(i)
        i = find(_GAP, i + 1)
    return sorted(cuts)


def _utf8_prefix_chars(text: str, nbytes: int) -> int:
    """How many whole characters of ``text`` fit in its first ``nbytes`` UTF-8 bytes."""
    data = text.encode("utf-8", "surrogatepass")[:nbytes]
    try:
        return len(data.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError as exc:  # a character cut in the middle: drop it
        return len(data[: exc.start].decode("utf-8", "surrogatepass"))


class TokenCounter:
    """Counts tokens with one model's encoding. Get one with ``for_model``.

    ``model`` is the name it was asked for, ``encoding_name`` the tiktoken
    encoding it uses, ``approximate`` whether that is not the model's own
    tokenizer, ``rules`` how its provider counts a request
    (``memory.tokens.provider_rules``). Thread-safe; every method is a pure
    function of its arguments.
    Raises ``memory.encodings.EncodingDataError`` at creation when the shipped
    BPE files are bad.
    """

    # The counters of the most recently used names: an importer reads the model
    # names of users' files, so there is no fixed set of them.
    MAX_SHARED = 32
    _instances: OrderedDict[str | None, TokenCounter] = OrderedDict()
    _instances_lock = threading.Lock()

    def __init__(self, model: str | None = None) -> None:
        resolved = encoding_for_model(model)
        self.model = model
        self.encoding_name = resolved.encoding_name
        self.approximate = resolved.approximate
        self._encode = resolved.encoding.encode_ordinary
        self._decode_bytes = resolved.encoding.decode_bytes
        self.rules: CountingRules = counting_rules(model, resolved.encoding_name)
        self._anthropic = self.rules.shape == "anthropic"
        self._short_counts: dict[str, int] = {}
        self._line_counts: dict[str, int] = {}
        self._line_chars = 0

    @classmethod
    def for_model(cls, model: str | None) -> TokenCounter:
        """The counter for ``model`` (``None``: ``cl100k_base``), shared per name.

        The counters of the last ``MAX_SHARED`` names asked for are kept; an
        older one is made again (its encoding is shared, so that is cheap).
        """
        with cls._instances_lock:
            counter = cls._instances.get(model)
            if counter is None:
                counter = cls._instances[model] = cls(model)
                if len(cls._instances) > cls.MAX_SHARED:
                    cls._instances.popitem(last=False)
            else:
                cls._instances.move_to_end(model)
            return counter

    def __repr__(self) -> str:
        approx = ", approximate" if self.approximate else ""
        return f"<TokenCounter model={self.model!r} encoding={self.encoding_name}{approx}>"

    # -- text ------------------------------------------------------------------

    def count(self, text: str) -> int:
        """Tokens in ``text`` (exact except for texts with very long runs: see the module doc)."""
        if len(text) < LONG_RUN_CHARS:
            return len(self._encode(text))
        runs = _long_runs(text)
        if not runs:
            return len(self._encode(text))
        return self._walk(text, runs, None)[1]

    def _short(self, text: str) -> int:
        """``count`` for the few short strings every message repeats (roles,
        tool and function names), remembered so each is tokenised once."""
        tokens = self._short_counts.get(text)
        if tokens is None:
            tokens = self.count(text)
            if len(text) <= 64 and len(self._short_counts) < 4096:
                self._short_counts[text] = tokens
        return tokens

    def count_lines(self, text: str) -> int:
        """``count(text)``, from the counts of its lines, each line remembered.

        For texts that are mostly lines seen before: a summary rendered again
        with a few lines more or less, the previous summary's lines in the
        next one. The text is split only where the tokens of the parts are the
        tokens of the whole (``_line_cuts``), so the result is exactly
        ``count(text)``; a new text costs one encode per part.
        """
        if len(text) >= LONG_RUN_CHARS and _long_runs(text):
            return self.count(text)
        counts = self._line_counts
        total = start = 0
        for end in [*_line_cuts(text), len(text)]:
            line = text[start:end]
            tokens = counts.get(line)
            if tokens is None:
                tokens = len(self._encode(line))
                if self._line_chars > _LINE_CACHE_CHARS:
                    counts.clear()
                    self._line_chars = 0
                counts[line] = tokens
                self._line_chars += len(line)
            total += tokens
            start = end
        return total

    def counted(self, text: str) -> CountedText:
        """``text`` counted once, keeping its token ids for ``cut_ids``."""
        if len(text) < LONG_RUN_CHARS or not _long_runs(text):
            ids = self._encode(text)
            return CountedText(text, len(ids), ids)
        return CountedText(text, self.count(text), None)

    def cut_ids(
        self, counted: CountedText, budget: int, max_tokens: int, ending: Callable[[int], str]
    ) -> CutText | None:
        """Cut ``counted.text`` from the token ids its count produced, without
        tokenising it again.

        The kept prefix ends at a cut point (``_is_cut_point``) at most
        ``budget`` tokens in, so its count is the number of ids before it;
        ``ending(kept_tokens)`` is appended and the count of the result is
        exact from the ids before the previous cut point plus one encode of
        the few characters from there on with the ending. ``total <=
        max_tokens``. ``None`` when that is not possible that way (no ids, an
        encoding whose pattern is not cl100k's or o200k's, text that is not
        valid UTF-8, no cut point within ``_CUT_SEARCH_TOKENS`` of the budget,
        a budget under 1): the caller cuts with ``truncate_counted``.
        """
        ids = counted.ids
        if ids is None or self.encoding_name not in _CUT_ENCODINGS:
            return None
        if budget < 1 or budget >= len(ids):
            return None
        try:
            data = counted.text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: tiktoken encodes a replacement
            return None
        # The cut points at token boundaries, from the budget backwards, as
        # (ids before, byte offset); each with the one before it is a candidate.
        kept: tuple[int, int] | None = None
        index, offset = budget, len(self._decode_bytes(ids[:budget]))
        while index >= 0 and budget - index <= _CUT_SEARCH_TOKENS:
            if index == 0 or _is_cut_point(data, offset):  # the empty prefix is one too
                if kept is not None:
                    window = data[offset : kept[1]].decode("utf-8") + ending(kept[0])
                    total = index + len(self._encode(window))
                    if total <= max_tokens:
                        return CutText(data[: kept[1]].decode("utf-8"), kept[0], total)
                kept = (index, offset)
            index -= 1
            if index >= 0:
                offset -= len(self._decode_bytes(ids[index : index + 1]))
        return None

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` made of its first ``max_tokens`` tokens.

        Never ends inside a character, and ``count(result) <= max_tokens``.
        Raises ``ValueError`` for a negative ``max_tokens``.
        """
        return self._truncate(text, max_tokens, want_total=False).text

    def truncate_counted(self, text: str, max_tokens: int) -> TruncatedText:
        """``truncate`` plus the tokens kept and the tokens of the whole text, in one pass."""
        return self._truncate(text, max_tokens, want_total=True)

    def _truncate(self, text: str, max_tokens: int, *, want_total: bool) -> TruncatedText:
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        runs = _long_runs(text) if len(text) >= LONG_RUN_CHARS else []
        cut, total = self._walk(text, runs, max_tokens, want_total=want_total)
        if cut is None:
            return TruncatedText(text, total, total)
        # The kept prefix is counted again on its own: cutting a pre-token can
        # change how the end is split, by a token or two.
        budget, attempt = max_tokens, 0
        while True:
            prefix = text[:cut]
            kept = self.count(prefix)
            if kept <= max_tokens:
                return TruncatedText(prefix, kept, total)
            excess = kept - max_tokens
            attempt += 1
            budget -= excess if attempt < 3 else max(excess, budget // 8)
            runs = _long_runs(prefix) if len(prefix) >= LONG_RUN_CHARS else []
            cut, _ = self._walk(prefix, runs, max(budget, 0), want_total=False)
            cut = len(prefix) if cut is None else cut

    def _walk(
        self,
        text: str,
        runs: Sequence[tuple[int, int]],
        budget: int | None,
        *,
        want_total: bool = True,
    ) -> tuple[int | None, int]:
        """Count ``text`` segment by segment; ``(cut, total)``.

        ``cut`` is where the first ``budget`` tokens end (``None``: everything
        fits or no budget). Without ``want_total`` the walk stops at the cut
        and ``total`` is -1.
        """
        used = 0
        cut: int | None = None
        chunk_counts: dict[str, int] = {}
        pos = 0
        for start, end in [*runs, (len(text), len(text))]:
            if pos < start:  # ordinary text before the run: counted exactly
                segment = text[pos:start]
                tokens = self._encode(segment)
                if budget is not None and cut is None and used + len(tokens) > budget:
                    cut = pos + self._chars_of_tokens(segment, tokens, budget - used)
                    if not want_total:
                        return cut, -1
                used += len(tokens)
            for i in range(start, end, RUN_CHUNK_CHARS):
                chunk = text[i : min(i + RUN_CHUNK_CHARS, end)]
                n = chunk_counts.get(chunk)
                if n is None:
                    n = chunk_counts[chunk] = len(self._encode(chunk))
                if budget is not None and cut is None and used + n > budget:
                    cut = i + self._chars_of_tokens(chunk, self._encode(chunk), budget - used)
                    if not want_total:
                        return cut, -1
                used += n
            pos = end
        return cut, used

    def _chars_of_tokens(self, text: str, tokens: Sequence[int], keep: int) -> int:
        """Characters of ``text`` covered by its first ``keep`` tokens (whole characters)."""
        if keep <= 0:
            return 0
        return _utf8_prefix_chars(text, len(self._decode_bytes(tokens[:keep])))

    # -- messages --------------------------------------------------------------

    def content_tokens(self, content: str | Sequence[Mapping[str, Any]] | None) -> int:
        """Tokens of a message's ``content``: text, a list of parts, or ``None``."""
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count(content)
        return sum(self.part_tokens(part) for part in content)

    def part_tokens(self, part: Mapping[str, Any]) -> int:
        """Tokens of one content part: text is tokenised, media follow the provider's rule."""
        kind = part.get("type")
        if not isinstance(kind, str):  # not a part any provider knows: count what it holds
            return self.count(json.dumps(part, ensure_ascii=False, default=str))
        if kind in TEXT_PART_TYPES:
            text = part.get("text")
            return self.count(text) if isinstance(text, str) else 0
        if kind in IMAGE_PART_TYPES:
            return self.image_tokens(part)
        if kind in AUDIO_PART_TYPES:
            return audio_part_tokens(part)
        if kind in FILE_PART_TYPES:
            return self._file_tokens(part)
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            return self.count(part["refusal"])
        return self.count(json.dumps(part, ensure_ascii=False, default=str))

    def image_tokens(self, part: Mapping[str, Any]) -> int:
        """Tokens of an image part, by the Anthropic rule for Claude models, else OpenAI's."""
        detail = part.get("detail")
        image_url = part.get("image_url")
        if isinstance(image_url, Mapping):
            detail = image_url.get("detail", detail)
        size = image_part_size(part)
        if self._anthropic:
            return anthropic_image_tokens(*size) if size else ANTHROPIC_UNKNOWN_IMAGE_TOKENS
        detail_name = detail if isinstance(detail, str) else "auto"
        if size is None:
            return OPENAI_LOW_DETAIL_TOKENS if detail_name == "low" else OPENAI_UNKNOWN_IMAGE_TOKENS
        return openai_image_tokens(size[0], size[1], detail_name)

    def _file_tokens(self, part: Mapping[str, Any]) -> int:
        inner = part.get("file")
        body: Mapping[str, Any] = inner if isinstance(inner, Mapping) else part
        source = part.get("source")
        if isinstance(source, Mapping):  # Anthropic document block
            if source.get("type") == "text" and isinstance(source.get("data"), str):
                return self.count(source["data"])
            if source.get("type") == "content" and isinstance(source.get("content"), list):
                return sum(self.part_tokens(p) for p in source["content"] if isinstance(p, Mapping))
            body = source
        filename = body.get("filename")
        tokens = self.count(filename) if isinstance(filename, str) else 0
        payload = base64_payload(body.get("file_data") or body.get("data"))
        pages = 1
        if payload is not None:
            data = b64decode_prefix(payload, len(payload))
            if data and not data.startswith(b"%PDF"):
                try:  # a text file is sent as its text
                    return tokens + self.count(data.decode("utf-8"))
                except UnicodeDecodeError:
                    pass
            pages = max(1, len(PDF_PAGE.findall(data)))
        return tokens + pages * FILE_TOKENS_PER_PAGE

    def message_tokens(self, message: ChatMessage, *, content_tokens: int | None = None) -> int:
        """Tokens one message costs in a chat request, its format's overhead included.

        ``content_tokens`` is the count of ``message.content`` when the caller
        has it already (truncation counts a tool result on its way in), so no
        text is tokenised twice.

        ``TOKENS_PER_MESSAGE`` + role + content (+ ``TOKENS_PER_NAME`` + name)
        + each tool call's name and arguments + ``TOKENS_PER_TOOL_CALL`` +
        ``tool_call_id`` + the reasoning the provider counts (``reasoning_tokens``)
        + an assistant's ``refusal`` text. Instructions with no text count 0:
        they are not sent. Other fields kept in ``extra`` are not sent and not
        counted.
        """
        if message.role in INSTRUCTION_ROLES and not message.text.strip():
            return 0
        tokens = TOKENS_PER_MESSAGE + self._short(message.role)
        if content_tokens is None:
            content_tokens = self.content_tokens(message.content)
        tokens += content_tokens
        if message.name is not None:
            tokens += self._short(message.name) + TOKENS_PER_NAME
        for call in message.tool_calls:
            tokens += self._short(call.name) + self.count(call.arguments) + TOKENS_PER_TOOL_CALL
        if message.tool_call_id is not None:
            tokens += self.count(message.tool_call_id)
        tokens += self.reasoning_tokens(message)
        if message.role == "assistant" and (refusal := message.refusal) is not None:
            tokens += self.count(refusal)
        return tokens

    def reasoning_tokens(self, message: ChatMessage) -> int:
        """Tokens of an assistant message's reasoning that its provider counts
        in every later request (``memory.tokens.provider_rules``).

        Anthropic: the text of its ``thinking_blocks``, only when the model
        keeps earlier thinking (the signature is not rendered into the prompt,
        and a ``redacted_thinking`` block's encrypted size is unknown, so it
        counts 0); the thinking of the current turn's tool-use replies is
        ``turn_reasoning_tokens``, counted by the context while that turn
        lasts. OpenAI chat: its ``reasoning_content``, when the message calls
        tools (``OpenAIChatClient`` sends it back on those). An Anthropic
        reply fills both fields with the same text; one shape counts one.
        """
        if message.role != "assistant":
            return 0
        if self._anthropic:
            if not (message.thinking_blocks and self.rules.counts_earlier_thinking):
                return 0
            return self._thinking_text_tokens(message)
        if message.reasoning_content and message.tool_calls:
            return self.count(message.reasoning_content)
        return 0

    def turn_reasoning_tokens(self, message: ChatMessage) -> int:
        """Tokens of a reply's reasoning that count only while its turn lasts.

        Anthropic, "The context window with extended thinking"
        (https://docs.anthropic.com/en/docs/build-with-claude/context-windows):
        ``context_window = (input_tokens - previous_thinking_tokens) +
        current_turn_tokens``. The thinking of a tool-use reply goes back with
        its results and counts until the next user message that is not a tool
        result; then the API strips it. 0 for models that keep earlier thinking
        (``reasoning_tokens`` counts it for good) and for the chat format.
        """
        if not (
            self._anthropic
            and message.role == "assistant"
            and message.tool_calls
            and message.thinking_blocks
            and not self.rules.counts_earlier_thinking
        ):
            return 0
        return self._thinking_text_tokens(message)

    def _thinking_text_tokens(self, message: ChatMessage) -> int:
        texts = [b.get("thinking") for b in message.thinking_blocks or ()]
        return sum(self.count(t) for t in texts if isinstance(t, str))

    def tools_tokens(self, schemas: Sequence[Mapping[str, Any]]) -> int:
        """Tokens the tool ``schemas`` (OpenAI function-tool dicts) add to a
        request, as the model's provider renders them
        (``memory.tokens.provider_rules``); 0 for none."""
        return tools_tokens(schemas, self.rules, self.count)

    def context_tokens(self, messages: Iterable[ChatMessage | Mapping[str, Any]]) -> int:
        """Tokens of a whole request's messages, plus ``REPLY_PRIMING_TOKENS``
        and the current turn's reasoning (``turn_reasoning_tokens`` of the
        turn in progress: ``current_turn_reasoning``)."""
        coerced = [ChatMessage.coerce(m) for m in messages]
        return (
            REPLY_PRIMING_TOKENS
            + sum(self.message_tokens(m) for m in coerced)
            + self.current_turn_reasoning(coerced)
        )

    def current_turn_reasoning(self, messages: Sequence[ChatMessage]) -> int:
        """``turn_reasoning_tokens`` summed over the tool-use replies of the
        turn in progress: those after the last user message, unless a reply
        without tool calls ended the turn (the next request starts a new one).
        Reads no message where no reply's thinking is counted per turn (a
        restore's messages stay unbuilt: ``memory.log.logged_message``)."""
        if not self._anthropic or self.rules.counts_earlier_thinking:
            return 0
        total = 0
        for message in reversed(messages):
            if ends_turn(message):
                break
            total += self.turn_reasoning_tokens(message)
        return total


def ends_turn(message: ChatMessage) -> bool:
    """A user message, or a reply that calls no tools: the thinking of the
    tool-use replies before it no longer counts (``turn_reasoning_tokens``)."""
    return message.role == "user" or (message.role == "assistant" and not message.tool_calls)


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in ``text`` for ``model`` (``None``: ``cl100k_base``). See ``TokenCounter.count``."""
    return TokenCounter.for_model(model).count(text)
