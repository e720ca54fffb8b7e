"""The offline summary honours compaction instructions: it pins what they name."""

from __future__ import annotations

import json

import pytest

from memory import ChatMessage, TokenCounter, ToolCall, offline_summary
from memory.compaction.offline.instructions import shape, stem, terms


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.for_model(None)


def trip() -> list[ChatMessage]:
    """A booking reference among denser facts, and a second one said without the word."""
    return [
        ChatMessage.user("My booking reference is QX7T2M, for the hotel in Porto."),
        ChatMessage.assistant(
            "The Ribeira walk starts at Praça da Ribeira, passes Cais da Estiva and ends at "
            "Ponte Luís I, about 2.4 km in 45 minutes, with the Sé and São Bento station nearby."
        ),
        ChatMessage.user(
            "Last year Rui, Marta and Inês took the 08:12 Alfa Pendular from Lisboa Oriente "
            "to Campanhã, seats 41 to 44 in car 5, for 31.20 euros each."
        ),
        ChatMessage.user("Change it to ZZ81KP please, the old one was cancelled."),
        ChatMessage.assistant(
            "Livraria Lello opens at 09:30; tickets cost 8 euros and the queue on Rua das "
            "Carmelitas is shortest before 10:00 or after 18:30 on weekdays."
        ),
        ChatMessage.user("What about dinner near the Bolhão market on Friday at 20:00?"),
    ]


def test_without_instructions_a_tight_budget_drops_the_booking_reference(
    counter: TokenCounter,
) -> None:
    summary = offline_summary(trip(), budget_tokens=110, counter=counter)

    assert "QX7T2M" not in summary


def test_instructions_pin_the_sentences_holding_their_terms(counter: TokenCounter) -> None:
    summary = offline_summary(
        trip(), budget_tokens=110, counter=counter, instructions="keep every booking reference"
    )

    assert "My booking reference is QX7T2M, for the hotel in Porto." in summary
    assert counter.count(summary) <= 110


def test_an_identifier_shaped_like_a_pinned_one_is_pinned_too(counter: TokenCounter) -> None:
    summary = offline_summary(
        trip(), budget_tokens=110, counter=counter, instructions="keep every booking reference"
    )

    assert "Change it to ZZ81KP please, the old one was cancelled." in summary


def test_a_json_key_holding_a_term_is_matched_by_its_parts(counter: TokenCounter) -> None:
    call = ToolCall(id="c1", name="get_trip", arguments=json.dumps({"trip": "LIS-2024"}))
    sights = ["garden", "terrace", "rooftop", "harbour", "cloister", "tiles", "tram", "fado"]
    result = (
        {f"ticket_{n}": f"MU{n:02d}-{7919 * n % 10_000:04d}-LX" for n in range(12)}
        | {"booking_note": "ask for a quiet room"}
        | {f"tip_{n}": f"see the {sights[n % 8]} near {sights[n * 5 % 8]}" for n in range(12)}
    )
    messages = [
        ChatMessage.user("Plan my Lisbon museum days."),
        ChatMessage.assistant(None, [call]),
        ChatMessage.tool(json.dumps(result), "c1"),
        ChatMessage.assistant("Done: museums over three days."),
    ]

    plain = offline_summary(messages, budget_tokens=60, counter=counter)
    pinned = offline_summary(
        messages, budget_tokens=60, counter=counter, instructions="keep the booking notes"
    )

    assert "quiet room" not in plain
    assert '"booking_note": "ask for a quiet room"' in pinned


def test_pinned_sentences_give_way_to_the_budget(counter: TokenCounter) -> None:
    messages = [
        ChatMessage.user(f"Booking number {n}: reference RF{n:04d}X for guest {n}.")
        for n in range(60)
    ]

    summary = offline_summary(
        messages, budget_tokens=150, counter=counter, instructions="keep the bookings"
    )

    assert counter.count(summary) <= 150
    assert summary.count("Booking number") >= 4


def test_instructions_without_a_content_term_change_nothing(counter: TokenCounter) -> None:
    plain = offline_summary(trip(), budget_tokens=110, counter=counter)

    for instructions in (None, "", "Please keep everything important, exactly."):
        again = offline_summary(
            trip(), budget_tokens=110, counter=counter, instructions=instructions
        )
        assert again == plain


def test_the_content_terms_are_the_words_that_say_what() -> None:
    assert terms("keep every booking reference") == {stem("booking"), stem("reference")}
    assert terms("Remember all the passport numbers!") == {stem("passport"), stem("numbers")}
    assert terms("keep everything") == frozenset()
    assert terms("keep the booking notes") == {stem("booking"), stem("notes")}


@pytest.mark.parametrize(
    ("word", "other"),
    [
        ("booking", "bookings"),
        ("booking", "booked"),
        ("reference", "references"),
        ("flight", "Flights"),
    ],
)
def test_forms_of_one_word_share_a_stem(word: str, other: str) -> None:
    assert stem(word) == stem(other)


def test_identifiers_of_one_kind_share_a_shape() -> None:
    assert shape("QX7T2M") == shape("ZZ81KP")
    assert shape("QX7T2M") != shape("HTL-88231")
    assert shape("QX7T2M") != shape("qx7t2m")
