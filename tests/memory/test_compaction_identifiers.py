"""Identifier extraction and the lost-identifier check the LLM compactor relies on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.compaction.identifiers import (
    Identifier,
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


# -- what agents' transcripts are full of, and is not an identifier ----------------------------


@pytest.mark.parametrize(
    "text",
    [
        'Traceback (most recent call last):\n  File "a.py", line 3\n  File "b.py", line 9',
        "error: Cannot find module.\nCannot open it either.",
        "Installing collected packages: foo\nInstalling bar\nSuccessfully installed.\n"
        "Successfully built.",
        "→ Fetching from origin\n→ Checking out main\n→ Fetching tags\n→ Checking out dev",
        "| Fixed | yes |\n| Fixed | no |",
        "- Fixed the bug.\n- Fixed the test.",
    ],
)
def test_words_that_only_open_lines_of_tool_output_are_not_names(text: str) -> None:
    assert [i for i in find_identifiers(text) if i.kind == "name"] == []


def test_programming_literals_are_never_names() -> None:
    text = "x = True\ny = False if z is None else Null\nTrue. False. None. NULL, TRUE, NaN."
    assert find_identifiers(text) == []


def test_a_sentence_opener_that_also_appears_mid_sentence_is_a_name() -> None:
    found = extract_identifiers("Installing went well. We met Installing at noon.")
    assert found == ["Installing"]


def test_a_name_that_opens_several_lines_is_still_a_name_unless_the_text_uses_it_lowercase() -> (
    None
):
    assert "Emily" in extract_identifiers("Emily ran.\nEmily sat.")
    assert "Review" not in extract_identifiers("Review it.\nReview again. A review helps.")


@pytest.mark.parametrize(
    "text",
    ["The screen is 1.5 in wide and 5.1 in tall.", "Put 2 in the box.", "Wait 5 s, I have 3 m."],
)
def test_english_words_and_lone_letters_are_not_units(text: str) -> None:
    assert [i for i in find_identifiers(text) if i.kind == "number"] == []


def test_units_written_against_their_number_still_count() -> None:
    found = extract_identifiers("It took 5s, then 3m, at 10x, over 12 inches and 2 hours.")
    assert found == ["5s", "3m", "10x", "12 inches", "2 hours"]


def test_terminal_colour_codes_are_not_identifiers() -> None:
    assert find_identifiers("\x1b[31mbold\x1b[0m done \x1b[1;32mok\x1b[0m") == []


@pytest.mark.parametrize(
    "text", ["n/a", "and/or", "w/o", "/tmp", "/0", "</div>", "12/05/24", "application/json"]
)
def test_words_with_a_slash_are_not_paths(text: str) -> None:
    assert [i for i in find_identifiers(f"It is {text} here.") if i.kind == "path"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/etc/hosts",
        "/notes.txt",
        "~/notes",
        "./run.sh",
        "../lib",
        "config/.env",
        "lib/app/web",
        "src/a.py",
        "C:\\Users\\mia\\a.txt",
    ],
)
def test_real_paths_are_paths(path: str) -> None:
    assert find_identifiers(f"Open {path} now.") == [Identifier("path", path)]


def test_a_function_with_its_arity_is_an_id_not_a_path() -> None:
    assert find_identifiers("Call String.trim/1 and handle_info/2.") == [
        Identifier("id", "String.trim/1"),
        Identifier("id", "handle_info/2"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("uv 0.7.12 is out", Identifier("version", "0.7.12")),
        ("pin 1.1.22.", Identifier("version", "1.1.22")),
        ("bump to v2.3", Identifier("version", "v2.3")),
        ("Codex 0.104.0-alpha.1 wrote it", Identifier("version", "0.104.0-alpha.1")),
        ("due 1.10.2024", Identifier("date", "1.10.2024")),
        ("due 12/05/2024", Identifier("date", "12/05/2024")),
        ("due 2024.05.01", Identifier("date", "2024.05.01")),
    ],
)
def test_versions_are_versions_and_dates_need_a_four_digit_year(
    text: str, expected: Identifier
) -> None:
    assert find_identifiers(text) == [expected]


def test_an_ip_address_is_not_a_version() -> None:
    assert [i.kind for i in find_identifiers("host 192.168.1.10 answered")] == ["id"]


def test_colour_codes_written_as_code_are_not_identifiers() -> None:
    assert find_identifiers(r'strip("\e[31mred\e[0m") or "\x1b[1mbold\u001b[0m"') == []


def test_the_line_numbers_of_a_file_listing_are_not_identifiers() -> None:
    listing = "   252→def run():\n   253→    return 404\n   254\tpass\n"
    assert extract_identifiers(listing) == ["404"]
    assert extract_identifiers("Port 8080 and\n1234 rows") == ["8080", "1234"]
