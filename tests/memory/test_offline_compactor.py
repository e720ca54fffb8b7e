"""The offline (extractive, model-free) summariser used when no model compacts."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory import offline_compactor as oc
from memory.messages import ChatMessage, ToolCall
from memory.offline_compactor import offline_summary
from memory.tokens import TokenCounter

TAU_BENCH = Path(__file__).resolve().parents[2] / "demo_data" / "tau-bench" / "gpt-4o-airline.json"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.for_model(None)


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def airline_session() -> list[ChatMessage]:
    return [
        ChatMessage.user("Hi! I want to change my flight to Seattle next week."),
        ChatMessage.assistant("Sure. What is your user id?"),
        ChatMessage.user("It's mia_li_3668. The reservation is HATHAT."),
        ChatMessage.assistant(None, [call("call_1", "get_reservation_details", id="HATHAT")]),
        ChatMessage.tool(
            json.dumps(
                {
                    "reservation_id": "HATHAT",
                    "user_id": "mia_li_3668",
                    "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
                    "payment": {"payment_id": "credit_card_4421486", "amount": 250},
                    "receipt": "/var/receipts/2024/HATHAT.pdf",
                    "agent": "f47ac10b-58cc-4372-a567-0e02b2c3d479",
                }
            ),
            "call_1",
            "get_reservation_details",
        ),
        ChatMessage.assistant(
            None,
            [
                call(
                    "call_2",
                    "update_reservation_flights",
                    reservation_id="HATHAT",
                    flights=[{"flight_number": "HAT222", "date": "2024-05-22"}],
                )
            ],
        ),
        ChatMessage.tool("Error: flight HAT222 not available on date 2024-05-22", "call_2"),
        ChatMessage.assistant("Flight HAT222 is full. HAT240 on May 22 costs $120 more."),
        ChatMessage.user("OK, book HAT240 then, and email me at mia.li@example.com."),
    ]


def test_it_keeps_every_user_request_in_order(counter: TokenCounter) -> None:
    summary = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    requests = [
        "Hi! I want to change my flight to Seattle next week.",
        "It's mia_li_3668. The reservation is HATHAT.",
        "OK, book HAT240 then, and email me at mia.li@example.com.",
    ]
    positions = [summary.index(r) for r in requests]
    assert positions == sorted(positions)
    assert summary.startswith("Summary of the earlier conversation")
    assert "User requests:" in summary


def test_it_keeps_the_ids_paths_and_dates_that_appear_in_tool_results(
    counter: TokenCounter,
) -> None:
    summary = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    for ident in (
        "HAT136",
        "credit_card_4421486",
        "/var/receipts/2024/HATHAT.pdf",
        "f47ac10b-58cc-4372-a567-0e02b2c3d479",
        "2024-05-20",
        "mia.li@example.com",
        "$120",
    ):
        assert ident in summary, ident


def test_it_lists_tool_calls_with_short_arguments_and_errors_with_their_first_line(
    counter: TokenCounter,
) -> None:
    summary = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    assert "get_reservation_details(id=HATHAT)" in summary
    assert "update_reservation_flights(reservation_id=HATHAT" in summary
    errors = summary.split("Errors:")[1]
    assert "Error: flight HAT222 not available on date 2024-05-22" in errors
    latest = summary.split("Latest state:")[1]
    assert "HAT240 on May 22 costs $120 more" in latest


def test_long_requests_are_shortened_to_their_head_and_tail(counter: TokenCounter) -> None:
    long_request = "Please fix the parser. " + "Some detail about the grammar. " * 200 + "END."
    messages = [ChatMessage.user(long_request), ChatMessage.assistant("On it.")]

    summary = offline_summary(messages, budget_tokens=400, counter=counter)

    assert "Please fix the parser." in summary
    assert "… " in summary
    assert summary.rstrip().endswith("On it.")
    assert "END." in summary
    assert counter.count(summary) <= 400


@pytest.mark.parametrize("budget", [1, 5, 20, 60, 200, 1_000, 4_000])
def test_it_never_exceeds_the_budget_for_big_inputs(counter: TokenCounter, budget: int) -> None:
    messages: list[ChatMessage] = []
    for i in range(300):
        messages.append(ChatMessage.user(f"Request {i}: look at /srv/app/module_{i}.py " * 5))
        messages.append(
            ChatMessage.assistant(None, [call(f"call_{i}", "read_file", path=f"module_{i}.py")])
        )
        messages.append(ChatMessage.tool(f"line {i}\n" * 300, f"call_{i}", "read_file"))
        messages.append(ChatMessage.assistant(f"Module {i} defines Parser{i} and uses ID-{i}X."))

    summary = offline_summary(messages, budget_tokens=budget, counter=counter)

    assert 0 < counter.count(summary) <= budget


def test_repeated_foldings_of_its_own_summary_stay_within_the_budget(
    counter: TokenCounter,
) -> None:
    summary: str | None = None
    sizes = []
    for round_ in range(20):
        batch = [
            ChatMessage.user(
                f"Round {round_}: please check order ORD-{round_:04d} for acme_{round_}"
            ),
            ChatMessage.assistant(
                f"Order ORD-{round_:04d} was shipped on 2024-06-{round_ + 1:02d}."
            ),
        ]
        summary = offline_summary(
            batch, budget_tokens=300, counter=counter, previous_summary=summary
        )
        sizes.append(counter.count(summary))

    assert summary is not None
    assert max(sizes) <= 300
    assert "Round 19" in summary  # the newest request
    assert "Round 0" in summary  # the first request (the task) survives the foldings
    assert "ORD-0019" in summary
    assert "(40 messages, extractive)" in summary


def test_a_previous_summary_folds_in_its_requests_and_identifiers(counter: TokenCounter) -> None:
    first = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    second = offline_summary(
        [ChatMessage.user("Also add a bag."), ChatMessage.assistant("Done: 1 bag added.")],
        budget_tokens=600,
        counter=counter,
        previous_summary=first,
    )

    assert second.index("I want to change my flight") < second.index("Also add a bag.")
    assert "mia_li_3668" in second
    assert "HAT136" in second


def test_a_summary_written_by_a_model_is_kept_shortened(counter: TokenCounter) -> None:
    model_summary = "The user (id bob_77) is migrating the billing service. " * 40

    summary = offline_summary(
        [ChatMessage.user("Next, the invoices table.")],
        budget_tokens=200,
        counter=counter,
        previous_summary=model_summary,
    )

    assert "Earlier summary:" in summary
    assert "bob_77" in summary
    assert "Next, the invoices table." in summary
    assert counter.count(summary) <= 200


def test_it_is_deterministic_across_runs_and_hash_seeds(counter: TokenCounter) -> None:
    messages = airline_session() * 5
    here = offline_summary(messages, budget_tokens=300, counter=counter)
    assert here == offline_summary(messages, budget_tokens=300, counter=counter)

    script = (
        "import json\n"
        "from tests.memory.test_offline_compactor import airline_session\n"
        "from memory.offline_compactor import offline_summary\n"
        "from memory.tokens import TokenCounter\n"
        "print(json.dumps(offline_summary(airline_session() * 5, budget_tokens=300,"
        " counter=TokenCounter.for_model(None))))\n"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(json.loads(done.stdout))
    assert outputs == {here}


def test_it_tolerates_odd_content(counter: TokenCounter) -> None:
    huge = '{"rows": [' + ",".join(f'"row {i} of /data/file_{i}.csv"' for i in range(200_000))
    huge += '], "next": "cursor_LAST99"}'  # about 6 MB, and not valid JSON once capped
    messages = [
        ChatMessage.user(None),
        ChatMessage.user(""),
        ChatMessage.user(
            [
                {"type": "text", "text": "Voici le reçu: ticket №42 pour Zoë — 東京 trip"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]
        ),
        ChatMessage.assistant([{"type": "text", "text": "Merci! 🎉"}]),
        ChatMessage.assistant(None, [ToolCall(id="call_x", name="dump", arguments="{not json")]),
        ChatMessage.tool(huge, "call_x", "dump"),
        ChatMessage.tool("orphan result", "call_unknown"),
        ChatMessage.tool(None, "call_none"),
        ChatMessage.system("You are helpful."),
    ]

    summary = offline_summary(messages, budget_tokens=500, counter=counter)

    assert counter.count(summary) <= 500
    assert "Voici le reçu" in summary
    assert "/data/file_0.csv" in summary
    assert "cursor_LAST99" in summary  # the tail of a huge result is scanned too


def test_chat_dicts_and_broken_tool_calls_do_not_raise(counter: TokenCounter) -> None:
    messages = [
        {"role": "user", "content": "Look up user_id bob_9"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": None}]},
        {"role": "tool", "content": ["not a part"], "tool_call_id": 5},
        {"role": "wizard", "content": "?"},
        "not a message",
    ]

    summary = offline_summary(messages, budget_tokens=200, counter=counter)  # type: ignore[arg-type]

    assert "bob_9" in summary


def test_code_that_mentions_errors_is_not_reported_as_an_error(counter: TokenCounter) -> None:
    source = "def parse(value):\n    try:\n        return int(value)\n"
    source += "    except (TypeError, ValueError) as error:\n        raise ParseError(error)\n"
    messages = [
        ChatMessage.user("Show me parser.py"),
        ChatMessage.assistant(None, [call("call_1", "open", path="src/parser.py")]),
        ChatMessage.tool(source, "call_1", "open"),
        ChatMessage.assistant(None, [call("call_2", "bash", command="python -m pytest")]),
        ChatMessage.tool(
            'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n'
            "    parse(None)\nParseError: int() argument must be a string",
            "call_2",
            "bash",
        ),
    ]

    summary = offline_summary(messages, budget_tokens=400, counter=counter)

    errors = summary.split("Errors:")[1].split("Latest state:")[0]
    assert "ParseError: int() argument must be a string" in errors
    assert "except" not in errors
    assert "src/parser.py" in summary


class WordCounter:
    """A counter with nothing but ``count``: one token per word or punctuation mark."""

    def count(self, text: str) -> int:
        return len(re.findall(r"\w+|[^\w\s]", text))


@pytest.mark.parametrize("budget", [1, 3, 30, 300])
def test_a_counter_needs_only_a_count_method(budget: int) -> None:
    counter = WordCounter()

    summary = offline_summary(airline_session() * 3, budget_tokens=budget, counter=counter)

    assert 0 < counter.count(summary) <= budget


def test_nothing_to_summarise_gives_a_short_text(counter: TokenCounter) -> None:
    assert offline_summary([], budget_tokens=50, counter=counter) == "No earlier conversation."
    assert offline_summary([], budget_tokens=0, counter=counter) == ""


@pytest.mark.skipif(not TAU_BENCH.exists(), reason="tau-bench data not available")
def test_a_tau_bench_run_keeps_the_task_user_id(counter: TokenCounter) -> None:
    run = json.loads(TAU_BENCH.read_text())[0]
    messages = [ChatMessage.from_dict(m) for m in run["traj"] if m["role"] != "system"]
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")

    summary = offline_summary(messages[:last_user], budget_tokens=1_000, counter=counter)

    assert counter.count(summary) <= 1_000
    assert run["info"]["task"]["user_id"] in summary


# --- the fast paths find what the plain definitions find ----------------------------------

PIECES = [
    *"abcdefhpstxz ABFJMSTZ 0123456789",
    *" \n\t\r.,;:!?-_/\\@%+~$€£¥'\"()[]{}#*=&<>|^`é\u2019\u2028\u00a0",
    "http://",
    "https://ex.com/a?b=1",
    "May ",
    "June",
    "Sept",
    "Mayday",
    " of ",
    "th",
    "am",
    "pm",
    "3 days",
    "GB",
    "C:\\",
    "a" * 70,
    "b" * 41,
    "A" * 70,
    "deadbeef",
    "deadbeef-",
    "http",
    "://",
    "١٢",
    "HAT083",
    "mia_li_3668",
    "mia.li@example.com",
    "Ab1",
    "_x",
    "Seattle",
    "New York",
    "Jan, 2024",
    "5 of May",
    "10 am",
    "$1,204.50",
    "2024-05-20",
    "2024-05-20 10:30",
    "2024-05-20T10:30",
    "@x.com",
    "$ 5",
    " million",
    "/var/log/x.log",
    "src/app.py",
    "IMPORTANT NOTE",
    "getUser",
    "IDs",
    "error",
    "Error: boom",
    "not found",
    "ValueError: bad",
    "Traceback (most recent call last)",
    "\u017f",  # long s, "s" when ignoring case
    "\u0131",  # dotless i
    "İ",
    "booked",
    "**",
    "__",
    ". ",
    "? ",
    "- ",
    "> ",
    "don\u2019t",
    "it's",
]


def random_texts(seed: int, count: int, max_pieces: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice(PIECES) for _ in range(rng.randint(0, max_pieces))) for _ in range(count)
    ]


def test_the_fast_scan_matches_what_the_kinds_alone_match() -> None:
    plain = re.compile(oc._KINDS, re.VERBOSE)

    shortcuts = {"fword": "word", "fiso": "iso", "fmoney": "money"}

    def fast_matches(text: str) -> list[tuple[str | None, tuple[int, int]]]:
        found: list[tuple[str | None, tuple[int, int]]] = []
        for match in oc._TOKEN.finditer(text):
            kind = match.lastgroup
            if kind is not None and kind != "skip":
                found.append((shortcuts.get(kind, kind), match.span(kind)))
        return found

    texts = random_texts(1, 20_000, 30)
    texts += ["the flight HAT083 of mia_li_3668 to JFK on 2024-05-20 for $1,204.50 " * 20]
    for text in texts:
        assert fast_matches(text) == [(m.lastgroup, m.span()) for m in plain.finditer(text)], text


def plain_content_words(text: str) -> list[str]:
    out: dict[str, None] = {}
    for match in oc._WORD.finditer(text.lower()):
        word = oc._norm(match.group())
        if (len(word) >= 3 and word not in oc._STOPWORDS) or word.isdigit():
            out.setdefault(word, None)
    return list(out)


def plain_error_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    if oc._TOOL_ERROR.any_case.search(lines[0]) and not lines[0].startswith("Traceback"):
        return oc._shorten(oc._flat(lines[0]), oc._ERROR_CHARS)
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        exceptions = [line for line in lines if oc._EXCEPTION_LINE.match(line)]
        if exceptions:
            return oc._shorten(oc._flat(exceptions[-1]), oc._ERROR_CHARS)
    for line in lines[:200]:
        if oc._ERROR_START.match(line):
            return oc._shorten(oc._flat(line), oc._ERROR_CHARS)
    return None


def plain_rank_words(
    text: str, weights: dict[str, float], default: float
) -> tuple[list[str], list[int]]:
    tokens = text.split()
    scored: list[tuple[float, int]] = []
    for index, token in enumerate(tokens):
        key = oc._norm(token)
        capitalised = (
            index > 0
            and len(key) > 1
            and token.lstrip(oc._PUNCT)[:1].isupper()
            and not tokens[index - 1].endswith((".", "!", "?", ":", "]"))
        )
        if not key or (key in oc._FILLER and not (capitalised and key in oc._CAPITALISED)):
            continue
        if key in oc._NEGATIONS:
            weight = 2 * default
        elif any(c.isdigit() for c in key):
            weight = default + weights.get(key, default)
        elif capitalised:
            weight = 1.5 * weights.get(key, default)
        else:
            weight = weights.get(key, default)
        scored.append((-weight, index))
    scored.sort()
    return [t.strip(oc._PUNCT) or t for t in tokens], [index for _, index in scored]


def test_the_text_helpers_give_what_their_plain_definitions_give() -> None:
    sentence_split = re.compile(r"(?<=[.!?])\s+|\n+")
    markdown = re.compile(r"^[\s>*#\u2022\u2013\u2014-]+|\*\*|__|`")
    words_seen: dict[str, tuple[str, ...]] = {}
    tokens_seen: dict[str, tuple[str, bool, bool, int]] = {}
    weights = {"flight": 0.3, "seattle": 2.0, "hat083": 1.1, "may": 0.7, "error": 0.2}
    for text in random_texts(2, 5_000, 40) + random_texts(3, 200, 400):
        assert oc._content_words(text) == plain_content_words(text), text
        assert oc._content_words(text, words_seen) == plain_content_words(text), text
        for max_chars in (16, 60, 80, 180):
            assert oc._flat_short(text, max_chars) == oc._shorten(oc._flat(text), max_chars)
        for words in (oc._OUTCOME, oc._TOOL_ERROR, oc._PROSE_ERROR):
            assert words.search(text) == (words.any_case.search(text) is not None), text
        assert oc._SENTENCE_SPLIT.split(text) == sentence_split.split(text), text
        assert oc._clean_sentence(text) == oc._flat(markdown.sub("", text)).strip(), text
        assert oc._error_line(text) == plain_error_line(text), text
        expected = plain_rank_words(text, weights, 1.5)
        assert oc._rank_words(text, weights, 1.5, tokens_seen) == expected, text


@pytest.mark.parametrize(
    "result",
    [
        "a" * 16_000 + "_",
        ("a" * 63 + "_") * 250,
        "A" * 16_000,
        "1" * 16_000,
        "-" * 16_000,
        "ab:" * 5_000,
        "x~" * 8_000,
        "Seattle " * 2_000,
        "HAT083 JFK mia_li_3668 2024-05-20 " * 500,
    ],
)
def test_pathological_tool_results_are_summarised_quickly(
    counter: TokenCounter, result: str
) -> None:
    messages = [
        ChatMessage.user("Look it up"),
        ChatMessage.assistant(None, [call("call_1", "search", q="x")]),
        ChatMessage.tool(result, "call_1", "search"),
    ]

    started = time.perf_counter()
    summary = offline_summary(messages, budget_tokens=500, counter=counter)

    assert time.perf_counter() - started < 2.0  # linear: some milliseconds
    assert counter.count(summary) <= 500


def test_ids_among_plain_words_are_all_found(counter: TokenCounter) -> None:
    result = "the flight HAT083 of mia_li_3668 to JFK and ZFA04Y on 2024-05-20 for $1,204.50 "
    messages = [
        ChatMessage.user("Find my booking"),
        ChatMessage.assistant(None, [call("call_1", "search", q="booking")]),
        ChatMessage.tool(result * 50, "call_1", "search"),
        ChatMessage.assistant("Found it."),
    ]

    summary = offline_summary(messages, budget_tokens=300, counter=counter)

    ids = summary.split("Identifiers in tool results:")[1].splitlines()[0]
    for ident in ("HAT083", "mia_li_3668", "JFK", "ZFA04Y", "2024-05-20", "$1,204.50"):
        assert ident in ids, ident


class UnhashableCounter:
    """A counter that cannot key a dictionary: its line counts are not kept between calls."""

    __hash__ = None  # type: ignore[assignment]

    def count(self, text: str) -> int:
        return len(text) // 4 + 1


def test_line_counts_kept_between_calls_change_nothing() -> None:
    messages = airline_session()
    cold = offline_summary(messages, budget_tokens=300, counter=TokenCounter(None))

    warm = TokenCounter(None)
    offline_summary(messages * 2, budget_tokens=500, counter=warm)
    assert offline_summary(messages, budget_tokens=300, counter=warm) == cold

    for other in (WordCounter(), UnhashableCounter()):  # counting otherwise: counted again
        for _ in range(2):
            summary = offline_summary(messages, budget_tokens=60, counter=other)
            assert 0 < other.count(summary) <= 60
