"""The offline summary reads like a fair record: both speakers, true dates, no
filler, headings that fit the conversation."""

from __future__ import annotations

import json
import re

import pytest

from memory import ChatMessage, CompactionMemory, CompactionMemoryConfig, TokenCounter, ToolCall
from memory import offline_summary as summarise

LINE = re.compile(r"- (?:\[([^\]]+)\] )?([^:]+): (.*)")
MAY = "1:56 pm on 8 May, 2023"
JUNE = "10:37 am on 27 June, 2023"


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.for_model(None)


def two_people() -> list[ChatMessage]:
    """Ana (the user role) says what her work is, with names and numbers; Ben
    (the assistant role) talks about his family in plain words, as much as she does."""
    ana = [
        "I moved to Porto in 2019 and joined Farfetch on checkout team 7.",
        "Our release train ships every Tuesday at 14:00 from the Boavista office.",
        "Last March I gave a talk at PyCon Lisbon about Django migrations.",
        "My manager Rui wants the Stripe rollout finished before Q3 2023.",
        "I passed the AWS Solutions Architect exam with 912 points in April.",
        "We rented a flat on Rua das Flores, number 118, third floor.",
    ]
    ben = [
        "my sister opened a small bakery near the river and sells sourdough every morning.",
        "our old dog still sleeps by the stove while the kids build forts from blankets.",
        "grandma taught me to bake rye bread with seeds when I was a boy.",
        "we planted tomatoes, beans and pumpkins behind the garage this spring.",
        "my son learned to ride his bicycle without help last weekend.",
        "the neighbours invited us for a long dinner with grilled fish and salad.",
    ]
    messages = []
    for n, (a, b) in enumerate(zip(ana, ben, strict=True)):
        stamp = f"[{MAY}] " if n == 0 else ""
        messages.append(ChatMessage.user(f"{stamp}Ana: {a}"))
        messages.append(ChatMessage.assistant(f"Ben: {b[0].upper()}{b[1:]}"))
    return messages


def lines(summary: str) -> list[tuple[str, str | None, str, str]]:
    """``(section, date in force, speaker, body)`` of each item line."""
    out = []
    section, date = "", None
    for line in summary.splitlines()[1:]:
        found = LINE.fullmatch(line)
        if found is None:
            section, date = line, None
            continue
        date = found.group(1) or date
        out.append((section, date, found.group(2), found.group(3)))
    return out


def runs(body: str) -> list[str]:
    body = body.removeprefix("... ").removesuffix(" ...")
    return [run for run in body.split(" ... ") if run]


def tokens_by_speaker(summary: str, counter: TokenCounter) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, _, speaker, body in lines(summary):
        out[speaker] = out.get(speaker, 0) + sum(counter.count(run) for run in runs(body))
    return out


# -- both speakers --------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [150, 200, 250])
def test_both_speakers_get_the_budget_in_proportion_to_what_they_said(
    counter: TokenCounter, budget: int
) -> None:
    summary = summarise(two_people(), budget_tokens=budget, counter=counter)

    shares = tokens_by_speaker(summary, counter)
    total = sum(shares.values())
    # They said about as much each: neither gets much more than half.
    assert set(shares) == {"Ana", "Ben"}
    assert 0.35 <= shares["Ana"] / total <= 0.65, shares


def test_the_user_and_the_assistant_are_weighed_by_what_they_said_too(
    counter: TokenCounter,
) -> None:
    messages = [
        ChatMessage(role=m.role, content=m.text.split(": ", 1)[1].removeprefix(f"[{MAY}] "))
        for m in two_people()
    ]

    summary = summarise(messages, budget_tokens=150, counter=counter)

    shares = tokens_by_speaker(summary, counter)
    assert 0.35 <= shares["user"] / sum(shares.values()) <= 0.65, shares


def test_a_speaker_who_said_little_gets_little(counter: TokenCounter) -> None:
    messages = two_people()
    for n in range(1, len(messages), 2):  # Ben only says a word each time
        messages[n] = ChatMessage.assistant("Ben: Sourdough.")

    summary = summarise(messages, budget_tokens=150, counter=counter)

    shares = tokens_by_speaker(summary, counter)
    assert shares.get("Ben", 0) <= 0.2 * sum(shares.values())


def test_speakers_named_in_the_text_are_who_the_lines_are_attributed_to(
    counter: TokenCounter,
) -> None:
    summary = summarise(two_people(), budget_tokens=400, counter=counter)

    assert f"- [{MAY}] Ana: I moved to Porto in 2019" in summary
    assert "- Ben: My sister opened a small bakery" in summary
    assert "user" not in summary
    assert "Ana: Ana:" not in summary


def test_a_label_in_some_messages_is_text_not_a_speaker(counter: TokenCounter) -> None:
    messages = [
        ChatMessage.user("Note: the deploy of build 4411 failed on staging."),
        ChatMessage.assistant("Warning: the database migration 0042 is still pending."),
        ChatMessage.user("Please retry it after the migration."),
    ]

    summary = summarise(messages, budget_tokens=200, counter=counter)

    assert "- user: Note: the deploy of build 4411 failed on staging." in summary
    assert "- assistant: Warning: the database migration 0042" in summary


# -- true dates ----------------------------------------------------------------------------


def dated_sessions() -> list[ChatMessage]:
    """Two sessions; the second's stamp opens its first message only."""
    return [
        ChatMessage.user(f"[{MAY}] Ana: I adopted a grey cat called Miso from the shelter."),
        ChatMessage.assistant("Ben: We repainted the kitchen olive green over Easter."),
        ChatMessage.user("Ana: Miso hides under the sofa whenever the doorbell rings."),
        ChatMessage.assistant(f"[{JUNE}] Ben: I finished the Lisbon half marathon in 2:04."),
        ChatMessage.user("Ana: I signed up for a pottery course at the Ceramica studio."),
        ChatMessage.assistant("Ben: My daughter Inês won the regional chess final in Braga."),
        ChatMessage.user("Ana: The pottery teacher, Marta, fires the kiln on Thursdays."),
        ChatMessage.assistant("Ben: Next month we drive to Salamanca for the cathedral."),
    ]


def true_dates(messages: list[ChatMessage]) -> dict[str, str]:
    """Each message's text (label and stamp off) -> the date of its session."""
    out: dict[str, str] = {}
    date = ""
    for m in messages:
        stamp = re.match(r"\[([^\]]+)\] ", m.text)
        date = stamp.group(1) if stamp else date
        out[m.text.split(": ", 1)[1]] = date
    return out


def assert_every_line_under_its_date(summary: str, messages: list[ChatMessage]) -> int:
    dates = true_dates(messages)
    checked = 0
    for _, shown, _, body in lines(summary):
        for run in runs(body):
            (source,) = [text for text in dates if run in text]
            assert shown == dates[source], (run, shown)
            checked += 1
    return checked


def test_a_batch_starting_mid_session_is_dated_from_the_previous_summary(
    counter: TokenCounter,
) -> None:
    messages = dated_sessions()
    first = summarise(messages[:4], budget_tokens=300, counter=counter)

    second = summarise(messages[4:], budget_tokens=300, counter=counter, previous_summary=first)

    assert f"the last dated [{JUNE}]" in first.splitlines()[0]
    assert "Marta, fires the kiln on Thursdays." in second
    assert assert_every_line_under_its_date(second, messages) == 8


def test_the_date_in_force_survives_a_summary_that_kept_no_line_of_it(
    counter: TokenCounter,
) -> None:
    messages = dated_sessions()
    # The June session's only folded message is its stamp line: a summary of
    # 40 tokens has no room for it, yet says which date is in force.
    first = summarise(messages[:4], budget_tokens=45, counter=counter)
    assert JUNE not in "".join(body for *_, body in lines(first))

    second = summarise(messages[4:], budget_tokens=300, counter=counter, previous_summary=first)

    assert assert_every_line_under_its_date(second, messages) >= 4
    assert all(date == JUNE for _, date, _, body in lines(second) if "pottery" in body)


PLACES = ["Braga", "Porto", "Faro", "Evora", "Sintra", "Coimbra", "Tavira", "Nazare"]
THINGS = ["violin", "kayak", "easel", "telescope", "loom", "sourdough", "bonsai", "chessboard"]


def long_chat(sessions: int = 4, turns: int = 8) -> list[ChatMessage]:
    """``sessions`` dated sessions of ``turns`` messages, each with its own facts."""
    messages = []
    for n in range(sessions):
        date = f"{n + 1}:00 pm on {n + 3} May, 2023"
        for t in range(turns):
            place, thing = PLACES[(n + t) % 8], THINGS[(3 * n + t) % 8]
            name, role = ("Ana", ChatMessage.user) if t % 2 == 0 else ("Ben", ChatMessage.assistant)
            stamp = f"[{date}] " if t == 0 else ""
            text = f"In {place} I bought a {thing} for {10 * n + t + 12} euros on day {n}-{t}."
            messages.append(role(f"{stamp}{name}: {text}"))
    return messages


async def test_every_line_stays_under_its_session_date_across_compactions() -> None:
    messages = long_chat()
    summaries: list[str] = []
    memory = CompactionMemory(
        config=CompactionMemoryConfig(token_threshold=400),
        on_compact=lambda stats: summaries.append(stats["summary"]),
    )
    for message in messages:
        await memory.add_message(message)

    assert len(summaries) >= 3
    assert all(assert_every_line_under_its_date(summary, messages) for summary in summaries)


# -- no filler ---------------------------------------------------------------------------


FILLER = [
    "Hey Ben! Good to see you!",
    "Talk to you later.",
    "And Bon Appetit!",
    "Thanks, Ana!",
    "Thank you so much, that means a lot!",
    "Haha, so true!",
    "Bye! Take care!",
]


def test_sentences_without_a_content_word_are_never_chosen(counter: TokenCounter) -> None:
    messages = two_people()
    messages.insert(0, ChatMessage.user(f"[{MAY}] Ana: {FILLER[0]}"))
    for n, filler in enumerate(FILLER[1:]):
        role = ChatMessage.user if n % 2 else ChatMessage.assistant
        name = "Ana" if n % 2 else "Ben"
        messages.insert(2 * n + 2, role(f"{name}: {filler}"))
    messages.append(ChatMessage.assistant("Ben: Bye! Talk to you later."))

    # Room for everything: what is left out is left out for what it says.
    summary = summarise(messages, budget_tokens=2_000, counter=counter)

    assert "Porto in 2019" in summary
    assert "sourdough every morning" in summary
    for filler in FILLER:
        for sentence in re.split(r"(?<=[.!?])\s+", filler):
            assert sentence not in summary, sentence


def test_a_filler_opening_is_cut_but_the_rest_of_its_message_is_kept(
    counter: TokenCounter,
) -> None:
    messages = [
        ChatMessage.user("Hi! Good morning! My booking reference is QX7T2M."),
        ChatMessage.assistant("Thanks! I found booking QX7T2M for 14 March."),
    ]

    summary = summarise(messages, budget_tokens=200, counter=counter)

    assert "- user: ... My booking reference is QX7T2M." in summary
    assert "- assistant: ... I found booking QX7T2M for 14 March." in summary


# -- headings -------------------------------------------------------------------------------


def test_a_conversation_between_people_reads_as_who_said_what_by_date(
    counter: TokenCounter,
) -> None:
    summary = summarise(dated_sessions(), budget_tokens=400, counter=counter)

    assert summary.splitlines()[1] == "Who said what, by date:"
    assert "User requests:" not in summary
    assert "Latest state:" not in summary
    assert [(date, speaker) for _, date, speaker, _ in lines(summary)] == [
        (MAY, "Ana"),
        (MAY, "Ben"),
        (JUNE, "Ben"),
        (JUNE, "Ana"),
    ]


def test_a_task_agents_session_reads_as_requests_actions_and_results(
    counter: TokenCounter,
) -> None:
    call = ToolCall(id="c1", name="get_reservation", arguments=json.dumps({"id": "QX7T2M"}))
    messages = [
        ChatMessage.user("Please move my booking QX7T2M to Friday."),
        ChatMessage.assistant(None, [call]),
        ChatMessage.tool(json.dumps({"reservation": "QX7T2M", "date": "2024-05-20"}), "c1"),
        ChatMessage.assistant("Booking QX7T2M is on 2024-05-20; Friday has seats."),
        ChatMessage.user("Then book the 9:15 departure on Friday."),
        ChatMessage.assistant("Done: QX7T2M now leaves on Friday at 9:15."),
    ]

    summary = summarise(messages, budget_tokens=300, counter=counter)

    sections = [section for section, *_ in lines(summary)]
    assert "Who said what" not in summary
    assert sections[:3] == [
        "User requests:",
        "Identifiers and tool results:",
        "Actions and results:",
    ]
    assert sections[-1] == "Latest state:"


def test_a_conversation_summary_becomes_a_task_summary_when_tools_appear(
    counter: TokenCounter,
) -> None:
    chat = summarise(two_people()[:4], budget_tokens=300, counter=counter)
    call = ToolCall(id="c1", name="search_flights", arguments=json.dumps({"to": "OPO"}))

    summary = summarise(
        [ChatMessage.assistant(None, [call]), ChatMessage.tool('{"flight": "TP1947"}', "c1")],
        budget_tokens=400,
        counter=counter,
        previous_summary=chat,
    )

    # The people's lines keep their heading; the task's have theirs.
    found = {(section, speaker) for section, _, speaker, _ in lines(summary)}
    assert ("Who said what, by date:", "Ana") in found
    assert ("Actions and results:", "assistant called search_flights") in found
    assert ("Identifiers and tool results:", "tool search_flights") in found


def test_a_chat_with_an_assistant_moves_to_the_task_sections_when_tools_appear(
    counter: TokenCounter,
) -> None:
    chat = summarise(
        [ChatMessage.user("Find me a flight to Porto on 12 May."), ChatMessage.assistant("Sure.")],
        budget_tokens=300,
        counter=counter,
    )
    call = ToolCall(id="c1", name="search_flights", arguments=json.dumps({"to": "OPO"}))

    summary = summarise(
        [ChatMessage.assistant(None, [call]), ChatMessage.tool('{"flight": "TP1947"}', "c1")],
        budget_tokens=400,
        counter=counter,
        previous_summary=chat,
    )

    assert chat.splitlines()[1] == "Who said what:"  # no dates
    assert "Who said what" not in summary
    assert "User requests:\n- user: Find me a flight to Porto on 12 May." in summary


def test_a_tasks_first_request_is_kept_from_summary_to_summary(counter: TokenCounter) -> None:
    def lookup(n: int) -> list[ChatMessage]:
        call = ToolCall(id=f"c{n}", name="get_order", arguments=json.dumps({"order": n}))
        rows = [
            {"order_id": f"ORD-{n}{k:03d}", "sku": f"SKU-{k * 7919 % 9973}", "paid": 10 + k}
            for k in range(30)
        ]
        return [
            ChatMessage.assistant(None, [call]),
            ChatMessage.tool(json.dumps({"orders": rows}), f"c{n}"),
            ChatMessage.user(f"Now check batch {n} too."),
            ChatMessage.assistant(f"Batch {n} has twelve orders."),
        ]

    request = "I want my money back for a broken thing."
    summary = summarise(
        [ChatMessage.user(f"Hello! {request}"), *lookup(1)], budget_tokens=150, counter=counter
    )
    for n in range(2, 5):
        summary = summarise(lookup(n), budget_tokens=150, counter=counter, previous_summary=summary)
        assert f"User requests:\n- user: ... {request}" in summary


def test_a_label_followed_by_more_than_one_space_still_names_the_speaker(
    counter: TokenCounter,
) -> None:
    messages = two_people()
    messages[4] = ChatMessage.user("Ana:  Last March I gave a talk at PyCon Lisbon about Django.")

    summary = summarise(messages, budget_tokens=400, counter=counter)

    assert "user" not in summary
    ana = next(body for _, _, speaker, body in lines(summary) if speaker == "Ana")
    assert "Last March I gave a talk at PyCon Lisbon about Django." in ana
