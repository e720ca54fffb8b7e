"""Tool-result truncation: a valid prefix, a marker with the sizes, a bounded cost."""

from __future__ import annotations

import base64
import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.messages import ChatMessage
from memory.tokens import TokenCounter
from memory.tokens.counter import _is_cut_point
from memory.tokens.truncation import (
    SHORT_MARKER,
    Truncation,
    truncate_tool_result,
    truncation_marker,
)

MARKER = re.compile(
    r"\n\n\[\.\.\. tool result truncated: kept ([\d,]+) of ([\d,]+) tokens \(([\d,]+) bytes\)\]$"
)

MARKER_TEXT = truncation_marker(2_000, 100_000, 1_000_000)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.for_model("gpt-4o")


def tool(content: object) -> ChatMessage:
    return ChatMessage.from_dict(
        {
            "role": "tool",
            "content": content,
            "tool_call_id": "call_42",
            "name": "read_file",
            "agent": "coder",
        }
    )


def split_marker(text: str) -> tuple[str, int, int, int]:
    match = MARKER.search(text)
    assert match is not None, text[-200:]
    kept, original, size = (int(g.replace(",", "")) for g in match.groups())
    return text[: match.start()], kept, original, size


def check(result: Truncation | None, original: str, max_tokens: int, counter: TokenCounter) -> str:
    assert result is not None
    content = result.message.content
    assert isinstance(content, str)
    assert counter.count(content) <= max_tokens
    kept_text, kept, total, size = split_marker(content)
    assert original.startswith(kept_text)
    assert (kept, total, size) == (
        result.kept_tokens,
        result.original_tokens,
        result.original_bytes,
    )
    assert result.original_tokens == counter.count(original)
    assert result.original_bytes == len(original.encode("utf-8"))
    assert result.kept_tokens == counter.count(kept_text)
    return kept_text


def test_it_leaves_other_messages_alone(counter: TokenCounter) -> None:
    long_text = "word " * 10_000
    assert truncate_tool_result(ChatMessage.user(long_text), 100, counter) is None
    assert truncate_tool_result(ChatMessage.assistant(long_text), 100, counter) is None


def test_zero_means_no_limit(counter: TokenCounter) -> None:
    assert truncate_tool_result(tool("word " * 10_000), 0, counter) is None


def test_a_result_that_fits_is_not_cut(counter: TokenCounter) -> None:
    text = "word " * 100
    assert truncate_tool_result(tool(text), counter.count(text), counter) is None
    assert truncate_tool_result(tool(None), 10, counter) is None


def test_a_negative_limit_is_refused(counter: TokenCounter) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        truncate_tool_result(tool("x"), -1, counter)


def test_it_cuts_a_long_result_and_states_its_size(counter: TokenCounter) -> None:
    original = "\n".join(f"line {i}: some output from the tool, id={i * 7}" for i in range(20_000))
    result = truncate_tool_result(tool(original), 5_000, counter)
    kept_text = check(result, original, 5_000, counter)
    assert result is not None
    assert 4_950 <= result.kept_tokens < 5_000
    assert kept_text.startswith("line 0: some output")
    assert f"of {counter.count(original):,} tokens" in result.message.text
    assert f"({len(original.encode()):,} bytes)]" in result.message.text


def test_the_cut_message_keeps_everything_but_the_content(counter: TokenCounter) -> None:
    message = tool("data " * 5_000)
    result = truncate_tool_result(message, 500, counter)
    assert result is not None
    cut = result.message
    assert (cut.role, cut.tool_call_id, cut.name, dict(cut.extra)) == (
        "tool",
        "call_42",
        "read_file",
        {"agent": "coder"},
    )
    assert message.content == "data " * 5_000  # the original is untouched
    assert result.as_dict() == {
        "original_tokens": result.original_tokens,
        "original_bytes": result.original_bytes,
        "kept_tokens": result.kept_tokens,
    }


def test_the_cut_never_splits_a_character(counter: TokenCounter) -> None:
    original = "\U0001f600\u00e9\u4e2d" * 3_000
    for max_tokens in (100, 101, 102, 103):
        result = truncate_tool_result(tool(original), max_tokens, counter)
        kept_text = check(result, original, max_tokens, counter)
        assert kept_text.encode("utf-8").decode("utf-8") == kept_text


@pytest.mark.parametrize(
    ("char", "max_tokens"),
    [("a", 50_000), ("\u00e9", 50_000), (".", 50_000), (" ", 10_000)],
)
def test_five_megabytes_of_one_character_are_cut_with_their_size_stated(
    char: str, max_tokens: int, counter: TokenCounter
) -> None:
    original = char * 5_000_000
    result = truncate_tool_result(tool(original), max_tokens, counter)
    kept_text = check(result, original, max_tokens, counter)
    assert result is not None
    assert kept_text == char * len(kept_text)
    assert result.original_bytes == len(char.encode()) * 5_000_000
    assert result.kept_tokens >= max_tokens - 100


def test_a_three_megabyte_base64_blob_is_cut(counter: TokenCounter) -> None:
    original = base64.b64encode(random.Random(1).randbytes(2_250_000)).decode()
    assert len(original) == 3_000_000
    result = truncate_tool_result(tool(original), 50_000, counter)
    kept_text = check(result, original, 50_000, counter)
    assert result is not None
    assert result.original_bytes == 3_000_000
    assert result.original_tokens > 1_000_000
    assert len(kept_text) > 50_000


def test_a_special_token_spelling_in_a_result_is_plain_text(counter: TokenCounter) -> None:
    original = "<|endoftext|><|im_start|>" * 2_000
    result = truncate_tool_result(tool(original), 300, counter)
    check(result, original, 300, counter)


def test_a_tiny_limit_uses_the_short_marker_or_none(counter: TokenCounter) -> None:
    original = "word " * 1_000
    short = truncate_tool_result(tool(original), 12, counter)
    assert short is not None
    assert isinstance(short.message.content, str)
    assert short.message.content.endswith(SHORT_MARKER)
    assert counter.count(short.message.content) <= 12
    bare = truncate_tool_result(tool(original), 3, counter)
    assert bare is not None
    assert bare.message.content == counter.truncate(original, 3)


def test_text_parts_are_cut_in_order_and_other_parts_kept(counter: TokenCounter) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "first " * 300},
        image,
        {"type": "text", "text": "second " * 3_000},
        {"type": "text", "text": "third " * 3_000},
    ]
    result = truncate_tool_result(tool(parts), 2_500, counter)
    assert result is not None
    content = result.message.content
    assert isinstance(content, list)
    assert counter.content_tokens(content) <= 2_500
    assert content[0] == parts[0]
    assert content[1] == image
    assert content[2]["type"] == "text"
    assert parts[2]["text"].startswith(content[2]["text"])
    assert len(content[2]["text"]) < len(parts[2]["text"])
    assert len(content) == 4  # the third text part is dropped, the marker added
    _, kept, total, size = split_marker("\n\n" + content[3]["text"])
    assert kept == result.kept_tokens == counter.content_tokens(content[:3])
    assert total == result.original_tokens == counter.content_tokens(parts)
    assert size == result.original_bytes == len("first " * 300 + ("second " + "third ") * 3_000)


def test_a_list_without_text_parts_is_not_cut(counter: TokenCounter) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    assert truncate_tool_result(tool([image, image]), 100, counter) is None


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("ab .\n\u00e9\u4e2d\U0001f600<|>")) | st.characters(),
        min_size=1,
        max_size=2_000,
    ),
    max_tokens=st.integers(min_value=1, max_value=400),
)
def test_a_cut_result_always_fits_and_starts_with_the_original(text: str, max_tokens: int) -> None:
    counter = TokenCounter.for_model("gpt-4o")
    result = truncate_tool_result(tool(text), max_tokens, counter)
    if counter.count(text) <= max_tokens:
        assert result is None
        return
    assert result is not None
    content = result.message.content
    assert isinstance(content, str)
    assert counter.count(content) <= max_tokens
    kept = content
    for marker in (MARKER.search(content), re.search(re.escape(SHORT_MARKER) + "$", content)):
        if marker is not None:
            kept = content[: marker.start()]
            break
    assert text.startswith(kept)


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("aZ9 .,:'\"{}[]\n\t\r-_/$\u00e9\u4e2d\U0001f600")),
        min_size=2,
        max_size=400,
    ),
    model=st.sampled_from(["gpt-4o", "gpt-4"]),
)
def test_a_cut_point_splits_the_text_as_its_whole_tokens_do(text: str, model: str) -> None:
    counter = TokenCounter.for_model(model)
    ids = counter._encode(text)
    data = text.encode("utf-8")
    offset = 0
    for index, token in enumerate(ids):
        if index and _is_cut_point(data, offset):
            head, rest = data[:offset].decode(), data[offset:].decode()
            assert counter._encode(head) == ids[:index]
            for ending in (rest[:7] + "\n\n[... truncated]", rest[:1]):
                assert counter._encode(head + ending) == ids[:index] + counter._encode(ending)
        offset += len(counter._decode_bytes([token]))


def test_a_json_result_is_cut_from_its_own_token_ids(
    counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = json.dumps(
        [{"flight": f"HAT{i:03d}", "price": i * 7, "ok": True} for i in range(3_000)]
    )
    encoded: list[str] = []
    real = counter._encode

    def spy(text: str) -> list[int]:
        encoded.append(text)
        return real(text)

    monkeypatch.setattr(counter, "_encode", spy)
    result = truncate_tool_result(tool(original), 2_000, counter)
    monkeypatch.undo()
    check(result, original, 2_000, counter)
    assert result is not None
    assert result.kept_tokens >= 1_990 - counter.count(MARKER_TEXT)
    assert encoded.count(original) == 1
    # Besides the whole text: the markers, and a few characters at the cut with the marker.
    assert all(len(text) < 200 for text in encoded if text != original), encoded


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("ab .\n\u00e9\u4e2d\U0001f600<|>")) | st.characters(),
        max_size=600,
    ),
    run=st.sampled_from(["", "a" * 5_000, " " * 5_000, "." * 5_000, "\u00e9" * 5_000]),
    model=st.sampled_from(["gpt-4o", "gpt-4"]),
)
def test_no_text_counts_more_tokens_than_its_utf8_bytes(text: str, run: str, model: str) -> None:
    """The bound that lets a tool result no longer in bytes than the limit
    pass uncounted: long runs, counted in chunks, keep it too."""
    whole = text + run + text
    count = TokenCounter.for_model(model).count(whole)
    assert count <= len(whole.encode("utf-8", "surrogatepass"))
