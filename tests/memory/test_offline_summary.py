"""The offline summary: sentences quoted from the conversation, chosen to fit a budget."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import (
    ChatMessage,
    CompactionMemory,
    CompactionMemoryConfig,
    ConfigurationError,
    TokenCounter,
    ToolCall,
    offline_summary,
)

REPO = Path(__file__).resolve().parents[2]
TAU_BENCH = REPO / "demo_data" / "tau-bench" / "gpt-4o-airline.json"
ITEM = re.compile(r"- (?:\[([^\]]+)\] )?([^:]+): (.*)")
SECTIONS = (
    "Earlier summary:",
    "User requests:",
    "Identifiers and tool results:",
    "Actions and results:",
    "Errors:",
    "Who said what, by date:",
    "Who said what:",
    "Latest state:",
)


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


def dated_chat() -> list[ChatMessage]:
    return [
        ChatMessage.user("[1:56 pm on 8 May, 2023] Hi Sam! I joined a pottery class yesterday."),
        ChatMessage.assistant("Nice, Ada! I finished the Lisbon half marathon in 2022."),
        ChatMessage.user("My uncle left me his old Leica camera in Oslo."),
        ChatMessage.assistant("[10:37 am on 27 June, 2023] We went kayaking at Lake Bled."),
        ChatMessage.user("I'm applying to the Glasgow School of Art this autumn."),
        ChatMessage.assistant("Good luck! My twins just started violin lessons."),
    ]


def items(summary: str) -> list[tuple[str, str | None, str, str]]:
    """``(section, date, speaker, body)`` of every item line."""
    out = []
    section = ""
    for line in summary.splitlines()[1:]:
        if line in SECTIONS:
            section = line
            continue
        match = ITEM.fullmatch(line)
        assert match is not None, f"not an item line: {line!r}"
        out.append((section, match.group(1), match.group(2), match.group(3)))
    return out


def quoted_runs(summary: str) -> list[str]:
    """The runs of quoted text: item bodies split where ``...`` marks a cut."""
    runs: list[str] = []
    for _, _, _, body in items(summary):
        body = body.removeprefix("... ").removesuffix(" ...")
        runs.extend(run for run in body.split(" ... ") if run)
    return runs


def sources(messages: list[ChatMessage]) -> str:
    texts = []
    for m in messages:
        texts.append(m.text)
        texts.extend(c.arguments for c in m.tool_calls)
    return "\n".join(texts)


def assert_quoted(summary: str, messages: list[ChatMessage]) -> None:
    """Every sentence in the summary is a verbatim piece of a message.

    A run of adjacent sentences is joined by one space where the message may
    have had a line break, so each run is checked sentence by sentence."""
    flat = "".join(sources(messages).split())
    for run in quoted_runs(summary):
        for sentence in re.split(r"(?<=[.!?\u3002])\s+", run):
            # Spaces aside: a line break between two sentences renders as one.
            assert "".join(sentence.split()) in flat, sentence


# -- what it writes ----------------------------------------------------------------------


def test_every_kept_item_is_a_sentence_quoted_from_the_conversation(
    counter: TokenCounter,
) -> None:
    session = airline_session()

    summary = offline_summary(session, budget_tokens=400, counter=counter)

    assert_quoted(summary, session)
    assert "It's mia_li_3668. The reservation is HATHAT." in summary
    assert "Flight HAT222 is full. HAT240 on May 22 costs $120 more." in summary


def test_items_are_attributed_to_who_said_them(counter: TokenCounter) -> None:
    summary = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    found = {(section, speaker) for section, _, speaker, _ in items(summary)}
    assert ("User requests:", "user") in found
    assert ("Identifiers and tool results:", "tool get_reservation_details") in found
    assert ("Actions and results:", "assistant called update_reservation_flights") in found
    assert ("Errors:", "tool update_reservation_flights") in found
    assert ("Latest state:", "user") in found
    assert ("Latest state:", "assistant") in found


def test_json_clauses_next_to_each_other_read_as_the_json_they_came_from(
    counter: TokenCounter,
) -> None:
    summary = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    tool_line = next(
        body for _, _, speaker, body in items(summary) if speaker == "tool get_reservation_details"
    )
    assert '"flights": [{"flight_number": "HAT136", "date": "2024-05-20"' in tool_line


def test_errors_and_the_latest_state_have_their_sections(counter: TokenCounter) -> None:
    summary = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    errors = summary.split("Errors:\n")[1].split("\n")[0]
    assert errors == (
        "- tool update_reservation_flights: Error: flight HAT222 not available on date 2024-05-22"
    )
    latest = summary.split("Latest state:\n")[1].splitlines()
    assert latest == [
        "- assistant: Flight HAT222 is full. HAT240 on May 22 costs $120 more.",
        "- user: OK, book HAT240 then, and email me at mia.li@example.com.",
    ]


@pytest.mark.parametrize(
    ("result", "section"),
    [
        ('{"error": "seat 12A is taken"}', "Errors:"),
        ("Traceback (most recent call last):\n  File \"x.py\"\nKeyError: 'k'", "Errors:"),
        ("ValueError: bad date 2024-13-01", "Errors:"),
        ('{"seat": "12A", "status": "held"}', "Identifiers and tool results:"),
        ("The error log is empty.", "Identifiers and tool results:"),
    ],
)
def test_a_tool_result_that_reports_a_failure_goes_to_errors(
    counter: TokenCounter, result: str, section: str
) -> None:
    messages = [
        ChatMessage.assistant(None, [call("c1", "hold_seat", seat="12A")]),
        ChatMessage.tool(result, "c1"),
        ChatMessage.user("Thanks."),
    ]

    summary = offline_summary(messages, budget_tokens=300, counter=counter)

    assert (section, "tool hold_seat") in {(sec, who) for sec, _, who, _ in items(summary)}


def test_a_code_listing_is_quoted_by_whole_lines_and_the_conclusion_is_kept(
    counter: TokenCounter,
) -> None:
    listing = "[File: src/fields.py (3000 lines total)]\n" + "\n".join(
        f"{n}:    value_{n} = resolve(field_{n}, schema, precision={n % 7})"
        for n in range(1400, 1460)
    )
    messages = [
        ChatMessage.user("Fix the TimeDelta rounding bug in src/fields.py."),
        ChatMessage.assistant(None, [call("c1", "open", path="src/fields.py")]),
        ChatMessage.tool(listing, "c1", "open"),
        ChatMessage.assistant(
            "The bug is on line 1474: int() truncates 345.9 to 345, so round() is needed."
        ),
        ChatMessage.assistant("I will edit it now."),
    ]

    summary = offline_summary(messages, budget_tokens=150, counter=counter)

    assert "The bug is on line 1474: int() truncates 345.9 to 345, so round() is needed." in (
        summary
    )
    tool_lines = [body for _, _, who, body in items(summary) if who == "tool open"]
    for body in tool_lines:  # whole lines of the listing, never cut at its commas
        for run in body.removeprefix("... ").removesuffix(" ...").split(" ... "):
            assert run.split(" ")[0].rstrip(":").isdigit() or run.startswith("[File:")


def test_it_keeps_identifiers_when_the_budget_is_tight(counter: TokenCounter) -> None:
    summary = offline_summary(airline_session(), budget_tokens=150, counter=counter)

    for ident in ("mia_li_3668", "HATHAT", "HAT240", "mia.li@example.com"):
        assert ident in summary, ident
    assert counter.count(summary) <= 150


def test_session_dates_and_times_are_shown_where_they_change_and_the_stamp_is_not_quoted(
    counter: TokenCounter,
) -> None:
    summary = offline_summary(dated_chat(), budget_tokens=400, counter=counter)

    lines = summary.splitlines()
    assert lines[1] == "Who said what, by date:"
    assert lines[2].startswith(
        "- [1:56 pm on 8 May, 2023] user: Hi Sam! I joined a pottery class yesterday."
    )
    assert "- [10:37 am on 27 June, 2023] assistant: We went kayaking at Lake Bled." in summary
    assert "] Hi Sam" not in summary
    assert summary.count("1:56 pm") == 1
    dates = [date for _, date, _, _ in items(summary) if date]
    assert dates == ["1:56 pm on 8 May, 2023", "10:37 am on 27 June, 2023"]


def test_a_date_in_the_message_metadata_is_used(counter: TokenCounter) -> None:
    message = ChatMessage.from_dict(
        {
            "role": "user",
            "content": "Deploy build 4411 to staging.",
            "timestamp": "2024-03-05T10:00Z",
        }
    )

    summary = offline_summary([message], budget_tokens=100, counter=counter)

    assert "- [2024-03-05] user: Deploy build 4411 to staging." in summary


def test_items_are_chronological_within_a_section(counter: TokenCounter) -> None:
    messages = [
        ChatMessage.user(f"Step {i}: migrate table t_{i:03d} to shard {i}.") for i in range(30)
    ]

    summary = offline_summary(messages, budget_tokens=250, counter=counter)

    numbers = [int(n) for n in re.findall(r"Step (\d+):", summary)]
    assert len(numbers) >= 5
    assert numbers == sorted(numbers)


def test_messages_of_one_speaker_share_a_line_joined_by_an_ellipsis(
    counter: TokenCounter,
) -> None:
    summary = offline_summary(airline_session(), budget_tokens=400, counter=counter)

    requests = summary.split("User requests:\n")[1].splitlines()[0]
    assert requests == (
        "- user: ... I want to change my flight to Seattle next week. ... "
        "It's mia_li_3668. The reservation is HATHAT."
    )


def test_long_messages_are_cut_at_sentence_boundaries_with_an_ellipsis(
    counter: TokenCounter,
) -> None:
    filler = "It was a long day and we talked about many things. " * 40
    long_message = filler + "The launch code is QX-7731-ALPHA. " + filler
    messages = [ChatMessage.user(long_message), ChatMessage.assistant("Noted.")]

    summary = offline_summary(messages, budget_tokens=80, counter=counter)

    assert "... The launch code is QX-7731-ALPHA. ..." in summary
    assert_quoted(summary, messages)
    assert counter.count(summary) <= 80


def test_sentences_that_touch_in_the_message_touch_in_the_summary(
    counter: TokenCounter,
) -> None:
    text = "I read Becoming Nicole by Amy Ellis Nutt last year!🌟 It changed how I see Lisbon."

    summary = offline_summary([ChatMessage.user(text)], budget_tokens=200, counter=counter)

    assert text in summary


def test_the_rarest_facts_win_over_chatter(counter: TokenCounter) -> None:
    chatter = [ChatMessage.user("That sounds great, thanks so much!") for _ in range(40)]
    fact = ChatMessage.user("My passport number is X9420771 and it expires in 2031.")
    messages = [*chatter[:20], fact, *chatter[20:], ChatMessage.assistant("Bye!")]

    summary = offline_summary(messages, budget_tokens=90, counter=counter)

    assert "My passport number is X9420771 and it expires in 2031." in summary


# -- the budget ---------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [1, 5, 20, 64, 200, 1_000, 4_000])
def test_it_never_exceeds_the_budget_for_big_inputs(counter: TokenCounter, budget: int) -> None:
    messages: list[ChatMessage] = []
    for i in range(300):
        messages.append(ChatMessage.user(f"Request {i}: look at /srv/app/module_{i}.py. " * 5))
        messages.append(
            ChatMessage.assistant(None, [call(f"call_{i}", "read_file", path=f"module_{i}.py")])
        )
        messages.append(ChatMessage.tool(f"line {i}\n" * 300, f"call_{i}", "read_file"))
        messages.append(ChatMessage.assistant(f"Module {i} defines Parser{i} and uses ID-{i}X."))

    summary = offline_summary(messages, budget_tokens=budget, counter=counter)

    assert counter.count(summary) <= budget
    if budget >= 64:
        assert summary.startswith("Summary of the earlier conversation (1200 messages")
        assert_quoted(summary, messages)


class WordCounter:
    """A counter that is not a TokenCounter: the summariser needs only ``count``."""

    def count(self, text: str) -> int:
        return len(re.findall(r"\w+|[^\w\s]", text))


@pytest.mark.parametrize("budget", [3, 30, 300])
def test_a_counter_needs_only_a_count_method(budget: int) -> None:
    counter = WordCounter()

    summary = offline_summary(airline_session() * 3, budget_tokens=budget, counter=counter)

    assert counter.count(summary) <= budget


def test_nothing_to_summarise_gives_a_short_text(counter: TokenCounter) -> None:
    assert offline_summary([], budget_tokens=50, counter=counter) == "No earlier conversation."
    assert offline_summary([], budget_tokens=2, counter=counter) == ""
    assert offline_summary(airline_session(), budget_tokens=0, counter=counter) == ""
    only_calls = [ChatMessage.assistant(None, [ToolCall(id="c", name="ping")])]
    assert offline_summary(only_calls, budget_tokens=50, counter=counter) == (
        "No earlier conversation."
    )


# -- folding a previous summary -------------------------------------------------------------


def test_a_previous_summary_is_folded_in_before_the_new_messages(counter: TokenCounter) -> None:
    first = offline_summary(airline_session(), budget_tokens=600, counter=counter)

    second = offline_summary(
        [ChatMessage.user("Also add a bag."), ChatMessage.assistant("Done: 1 bag added.")],
        budget_tokens=600,
        counter=counter,
        previous_summary=first,
    )

    assert second.startswith("Summary of the earlier conversation (11 messages")
    assert second.index("It's mia_li_3668.") < second.index("Also add a bag.")
    assert "HAT136" in second
    # The earlier latest state is history now: it moved to its speaker's section.
    assert "Latest state:\n- user: Also add a bag.\n- assistant: Done: 1 bag added." in second
    assert second.count("OK, book HAT240 then") == 1


def test_repeated_foldings_stay_within_the_budget_and_keep_the_rare_facts(
    counter: TokenCounter,
) -> None:
    summary: str | None = None
    for round_ in range(30):
        batch = [
            ChatMessage.user(f"Round {round_}: please check order ORD-{round_:04d} today."),
            ChatMessage.assistant(
                f"Order ORD-{round_:04d} shipped on 2024-06-{round_ % 28 + 1:02d}."
            ),
        ]
        summary = offline_summary(
            batch, budget_tokens=300, counter=counter, previous_summary=summary
        )
        assert counter.count(summary) <= 300

    assert summary is not None
    assert summary.startswith("Summary of the earlier conversation (60 messages")
    assert "Round 29: please check order ORD-0029 today." in summary
    assert len(set(re.findall(r"ORD-\d{4}", summary))) >= 10


def test_folding_its_own_summary_again_changes_nothing_when_all_fits(
    counter: TokenCounter,
) -> None:
    first = offline_summary(dated_chat(), budget_tokens=1_000, counter=counter)

    again = offline_summary([], budget_tokens=1_000, counter=counter, previous_summary=first)

    # Nothing new: the same text, dates and all.
    assert again == first


def test_a_summary_written_by_a_model_becomes_the_earlier_summary(counter: TokenCounter) -> None:
    model_summary = "The user (id bob_77) is migrating the billing service. " * 3 + (
        "Invoices live in the table inv_2024."
    )

    summary = offline_summary(
        [ChatMessage.user("Next, the invoices table.")],
        budget_tokens=200,
        counter=counter,
        previous_summary=model_summary,
    )

    assert "Earlier summary:\n- summary: " in summary
    assert "Invoices live in the table inv_2024." in summary
    assert "- user: Next, the invoices table." in summary
    assert counter.count(summary) <= 200


# -- odd input --------------------------------------------------------------------------------


def test_it_is_deterministic_across_runs_and_hash_seeds(counter: TokenCounter) -> None:
    code = (
        "import json, sys; sys.path.insert(0, '.');"
        "from memory import ChatMessage, TokenCounter, offline_summary;"
        "from tests.memory.test_offline_summary import airline_session, dated_chat;"
        "c = TokenCounter.for_model(None);"
        "print(offline_summary(airline_session() + dated_chat(), budget_tokens=180, counter=c))"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1
    here = offline_summary(airline_session() + dated_chat(), budget_tokens=180, counter=counter)
    assert outputs == {here + "\n"}


def test_unicode_is_quoted_unchanged(counter: TokenCounter) -> None:
    messages = [
        ChatMessage.user("Zürich → München: der Zug ICE 577 fährt um 14:05. Grüße! 🚆"),
        ChatMessage.assistant("東京駅の新幹線は7番線です。切符番号は JR-88213 です。"),
        ChatMessage.tool('{"città": "Milano", "prénom": "Zoë", "code": "Ω-42"}', "c1", "lookup"),
    ]

    summary = offline_summary(messages, budget_tokens=300, counter=counter)

    assert "Zürich → München: der Zug ICE 577 fährt um 14:05." in summary
    assert "切符番号は JR-88213 です。" in summary
    assert '"prénom": "Zoë"' in summary
    assert_quoted(summary, messages)


def test_odd_messages_are_read_or_skipped_without_failing(
    counter: TokenCounter, caplog: pytest.LogCaptureFixture
) -> None:
    messages: list = [
        {"role": "user", "content": [{"type": "text", "text": "Look at image IMG_2231."}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "gone", "content": ""},
        {"role": "robot", "content": "not a message"},
        "not even a dict",
        ChatMessage.assistant(None, [ToolCall(id="c1", name="f", arguments="{not json")]),
        ChatMessage.system("system prompts are not summarised"),
        ChatMessage.user("\u2028line\u2029separators\x0bin\x1ctext and a tab\there."),
        ChatMessage.tool('{"a": "line\u2028break inside a JSON string", "b": 1}', "c1"),
    ]

    with caplog.at_level(logging.ERROR):
        summary = offline_summary(messages, budget_tokens=300, counter=counter)

    assert caplog.records == []
    assert "Look at image IMG_2231." in summary
    assert "system prompts" not in summary
    assert "- assistant called f: not json" in summary
    items(summary)  # every line is a section title or an item


def test_a_huge_tool_result_is_read_through_its_head_and_tail_quickly(
    counter: TokenCounter,
) -> None:
    rows = [{"row": i, "sku": f"SKU-{i:06d}", "note": "x" * 40} for i in range(20_000)]
    rows[-1]["note"] = "Ship the last pallet to Zagreb by 2024-12-01."
    huge = json.dumps(rows)  # about 1.5 MB
    messages = [
        ChatMessage.user("Export the inventory."),
        ChatMessage.assistant(None, [call("c1", "export")]),
        ChatMessage.tool(huge, "c1", "export"),
        ChatMessage.assistant("Exported it all."),
    ]

    summary = offline_summary(messages, budget_tokens=500, counter=counter)

    assert counter.count(summary) <= 500
    tool_line = next(line for line in summary.splitlines() if line.startswith("- tool export: "))
    assert '"row": 10' in tool_line  # from its head...
    assert '"note": "Ship the last pallet to Zagreb by 2024-12-01."' in tool_line  # ...its tail
    assert_quoted(summary, messages)


def test_a_sentence_with_no_boundary_is_cut_and_marked(counter: TokenCounter) -> None:
    blob = "A" * 5_000
    messages = [ChatMessage.tool(blob, "c1", "dump"), ChatMessage.user("What was that?")]

    summary = offline_summary(messages, budget_tokens=400, counter=counter)

    assert counter.count(summary) <= 400
    assert "A" * 100 + "..." in summary or blob[:10] not in summary


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "tool"]),
            st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=0, max_size=300),
        ),
        max_size=25,
    ),
    budget=st.integers(min_value=1, max_value=600),
)
def test_any_conversation_gives_a_summary_within_the_budget_quoting_it(
    texts: list[tuple[str, str]], budget: int
) -> None:
    counter = TokenCounter.for_model(None)
    messages = [
        ChatMessage(role=role, content=text, tool_call_id="c" if role == "tool" else None)  # type: ignore[arg-type]
        for role, text in texts
    ]

    summary = offline_summary(messages, budget_tokens=budget, counter=counter)
    again = offline_summary(
        messages[:1], budget_tokens=budget, counter=counter, previous_summary=summary
    )

    assert counter.count(summary) <= budget
    assert counter.count(again) <= budget
    if summary.startswith("Summary of"):
        flat = "".join(sources(messages).split())
        for run in quoted_runs(summary):
            for word in run.split():
                assert word in flat or word.endswith("...")


def test_tau_bench_runs_keep_the_ids_their_tasks_act_on(counter: TokenCounter) -> None:
    if not TAU_BENCH.exists():
        pytest.skip("tau-bench demo data not available")
    kept = named = 0
    for run in json.loads(TAU_BENCH.read_text())[:40]:
        messages = [ChatMessage.from_dict(m) for m in run["traj"] if m["role"] != "system"]
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        folded = messages[:last_user]
        text = sources(messages)
        ids = {
            value
            for action in run["info"]["task"]["actions"]
            for key, value in action["kwargs"].items()
            if key.endswith("_id") and isinstance(value, str) and value in text
        }
        summary = offline_summary(folded, budget_tokens=500, counter=counter)
        context = summary + sources(messages[last_user:])
        kept += sum(i in context for i in ids)
        named += len(ids)

    assert named > 40
    assert kept / named >= 0.95


# -- the budget a compaction gives it ------------------------------------------------------


@pytest.mark.parametrize("ratio", [0, -0.5, 1.5, float("nan"), True, "0.5"])
def test_summary_budget_ratio_must_be_in_zero_one(ratio: object) -> None:
    with pytest.raises(ConfigurationError, match="summary_budget_ratio"):
        CompactionMemoryConfig(summary_budget_ratio=ratio)  # type: ignore[arg-type]


async def chat_through(memory: CompactionMemory, turns: int) -> None:
    for i in range(turns):
        await memory.add_message(
            ChatMessage.user(
                f"Turn {i}: the parcel PK-{i:05d} goes to depot D{i % 7}. "
                f"It weighs {i * 3 + 1} kg and holds item SKU-{i * 7919 % 10_000:04d}. "
                f"The sender is client_{i * 104_729 % 1_000:03d} in zone Z{i % 13}."
            )
        )
        await memory.add_message(
            ChatMessage.assistant(f"Parcel PK-{i:05d} is booked on truck T-{i * 31 % 97:02d}.")
        )


@pytest.mark.parametrize("ratio", [0.5, 0.75, 1.0])
async def test_after_a_compaction_the_context_holds_about_the_ratio_of_the_threshold(
    ratio: float,
) -> None:
    config = CompactionMemoryConfig(token_threshold=2_000, summary_budget_ratio=ratio)
    compactions: list[dict] = []
    memory = CompactionMemory(config=config, on_compact=compactions.append)
    memory.set_system_prompt("You route parcels.")

    await chat_through(memory, 60)

    assert compactions
    for stats in compactions:
        # The summary's budget is the ratio's share less what stays beside it.
        assert int(2_000 * ratio) - 250 <= stats["tokens_after"] <= int(2_000 * ratio) + 8
    assert memory.estimate_context_tokens() <= 2_000 + 200


async def test_summary_max_tokens_caps_the_budget() -> None:
    config = CompactionMemoryConfig(token_threshold=4_000, summary_max_tokens=100)
    compactions: list[dict] = []
    memory = CompactionMemory(config=config, on_compact=compactions.append)

    await chat_through(memory, 120)

    assert compactions
    counter = memory.token_counter
    assert all(counter.count(stats["summary"]) <= 100 for stats in compactions)


def test_an_assistants_reasoning_is_summarised_like_what_it_said(counter: TokenCounter) -> None:
    thinking = ChatMessage(
        role="assistant",
        content="I will book the morning flight.",
        reasoning_content="The user said the meeting in Tacoma starts at 14:30, so HAT083 fits.",
    )
    summary = offline_summary(
        [ChatMessage.user("Book me a flight to Seattle."), thinking],
        budget_tokens=400,
        counter=counter,
    )
    assert "assistant reasoning: The user said the meeting in Tacoma starts at 14:30" in summary


def test_a_wider_budget_on_the_same_messages_summarises_them_again_exactly(
    counter: TokenCounter,
) -> None:
    messages = airline_session()
    narrow = offline_summary(messages, budget_tokens=120, counter=counter)
    wide = offline_summary(messages, budget_tokens=900, counter=counter)  # reuses the reading
    other = [ChatMessage.user("Something else entirely.")]
    offline_summary(other, budget_tokens=50, counter=counter)  # another reading is kept now
    assert offline_summary(messages, budget_tokens=900, counter=counter) == wide
    assert counter.count(narrow) <= 120 < counter.count(wide)


def test_dicts_edited_between_two_summaries_are_read_again(counter: TokenCounter) -> None:
    messages: Any = [  # chat-format dicts, which the summariser reads too
        {"role": "user", "content": "Book the flight HAT083 to Seattle for May 20, please."},
        {"role": "assistant", "content": "Booked HAT083, departing 08:10 on May 20."},
    ]
    first = offline_summary(messages, budget_tokens=200, counter=counter)
    messages[1]["content"] = "Booked ZFA04Y instead, departing 11:45 on May 21."
    second = offline_summary(messages, budget_tokens=200, counter=counter)
    assert "HAT083, departing" in first
    assert "ZFA04Y" in second
