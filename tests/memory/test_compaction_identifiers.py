"""Identifier extraction and the lost-identifier check the LLM compactor relies on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.compaction.identifiers import (
    extract_identifiers,
    find_identifiers,
    kept_in,
    lost_identifiers,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Book flight HAT123 for mia_li_3668 please.", ["HAT123", "mia_li_3668"]),
        ("Reservation ZFA04Y and order #4521.", ["ZFA04Y", "#4521"]),
        (
            "Edit src/memory/base.py and /etc/motus/config.yaml now.",
            ["src/memory/base.py", "/etc/motus/config.yaml"],
        ),
        ("Docs at https://example.com/docs?page=2, thanks.", ["https://example.com/docs?page=2"]),
        ("Write to mia.li@example.com today.", ["mia.li@example.com"]),
        ("We fly on 2024-05-14 and return 7 May 2023.", ["2024-05-14", "7 May 2023"]),
        ("It costs $1,250.50 or 30 EUR.", ["$1,250.50", "30 EUR"]),
        ("She ran 5 km in 32 minutes.", ["5 km", "32 minutes"]),
        ("Port 8080 answered with 404.", ["8080", "404"]),
        (
            "The CompactionMemory calls estimate_context_tokens on gpt-4o.",
            ["CompactionMemory", "estimate_context_tokens", "gpt-4o"],
        ),
    ],
)
def test_it_finds_the_identifiers_a_conversation_names(text: str, expected: list[str]) -> None:
    assert extract_identifiers(text) == expected


def test_it_finds_proper_names_but_not_capitalised_sentence_openers() -> None:
    text = "Hello! Please ask Melanie Smith about Paris. Caroline went. Caroline stayed. Then done."
    found = extract_identifiers(text)
    assert "Melanie Smith" in found
    assert "Paris" in found
    assert "Caroline" in found  # opens two sentences, so it is a name
    assert not {"Hello", "Please", "Then"} & set(found)


def test_each_identifier_comes_once_in_order_of_first_appearance() -> None:
    found = extract_identifiers("HAT123 then ZFA04Y then hat123 again and HAT123.")
    assert found == ["HAT123", "ZFA04Y"]


def test_kinds_are_reported() -> None:
    kinds = {i.value: i.kind for i in find_identifiers("Mail bob@x.org about $40 on 2024-01-02.")}
    assert kinds == {"bob@x.org": "email", "$40": "amount", "2024-01-02": "date"}


def test_a_url_is_one_identifier_not_also_a_path() -> None:
    assert extract_identifiers("see https://x.io/a/b.py") == ["https://x.io/a/b.py"]


def test_lost_identifiers_are_those_the_summary_does_not_contain() -> None:
    folded = ["Book HAT123 for mia_li_3668 on 2024-05-14.", "It costs $1,250 total."]
    summary = "The user booked hat123 for MIA_LI_3668 (USD 1,250 = $1250)."
    assert lost_identifiers(folded, summary) == ["2024-05-14"]


def test_nothing_is_lost_from_a_summary_that_quotes_everything() -> None:
    text = "Ship order #77 to 12 Baker Street, London by 3 June."
    assert lost_identifiers([text], text) == []


def test_extraction_finishes_on_long_unbroken_runs() -> None:
    # A backtracking pattern would not come back from these (the speed itself
    # is a benchmark's business, not a test's).
    text = "a" * 200_000 + " " + "Z9" * 50_000 + " " + "/x" * 50_000
    assert extract_identifiers(text) == ["Z9" * 50_000, "/x" * 50_000]


@given(st.text(max_size=300))
def test_every_identifier_is_text_of_the_input_and_is_kept_by_the_input_itself(
    text: str,
) -> None:
    found = extract_identifiers(text)
    assert all(identifier in text for identifier in found)
    assert lost_identifiers([text], text) == []


def test_kept_in_pairs_each_identifier_with_whether_the_summary_has_it() -> None:
    found = find_identifiers("Ship 23 kg to Seattle under ref ABC-123.")
    kept = {i.value: ok for i, ok in kept_in("Shipped 23kg, ref abc-123.", found)}
    assert kept == {"23 kg": True, "Seattle": False, "ABC-123": True}
