"""Finding identifiers in text, and whether a summary kept them."""

from __future__ import annotations

import subprocess
import sys

from memory.compaction.identifiers import Identifier, find_identifiers, kept_in

TEXT = (
    "Hi, I'm Mia Chen. Please rebook booking B12 (ref ABC-123) to Seattle on 2024-05-01, "
    "budget $1,200.50 or 300 EUR. See /home/mia/notes.txt and https://example.com/x?y=1. "
    "Mail mia@example.org. The bag weighs 23 kg; order #4411; commit deadbeefcafe1234; "
    "meeting May 3rd, 2024 with John Smith at Acme Corp about config.yaml."
)


def test_it_finds_every_kind_of_identifier_once_in_order() -> None:
    found = find_identifiers(TEXT)

    assert found == [
        Identifier("name", "Mia Chen"),
        Identifier("id", "B12"),
        Identifier("id", "ABC-123"),
        Identifier("name", "Seattle"),
        Identifier("date", "2024-05-01"),
        Identifier("amount", "$1,200.50"),
        Identifier("amount", "300 EUR"),
        Identifier("path", "/home/mia/notes.txt"),
        Identifier("url", "https://example.com/x?y=1"),
        Identifier("email", "mia@example.org"),
        Identifier("number", "23 kg"),
        Identifier("id", "#4411"),
        Identifier("id", "deadbeefcafe1234"),
        Identifier("date", "May 3rd, 2024"),
        Identifier("name", "John Smith"),
        Identifier("name", "Acme Corp"),
        Identifier("path", "config.yaml"),
    ]


def test_common_capitalised_words_are_not_names() -> None:
    assert find_identifiers("The answer is yes. Please check. Thanks!") == []


def test_a_summary_keeps_an_identifier_whatever_its_case_and_spacing() -> None:
    found = find_identifiers("Ship 23 kg to Seattle under ref ABC-123.")

    checked = kept_in("shipped 23kg to SEATTLE.", found)

    assert checked == [
        (Identifier("number", "23 kg"), True),
        (Identifier("name", "Seattle"), True),
        (Identifier("id", "ABC-123"), False),
    ]


def test_it_comes_back_from_long_unbroken_text() -> None:
    # A backtracking pattern would not return (its speed is a benchmark's business).
    found = find_identifiers("a" * 200_000 + " /" + "b/" * 50_000 + " " + "9" * 100_000)
    assert [(i.kind, len(i.value)) for i in found] == [("path", 100_000), ("id", 100_000)]


def test_it_is_a_pure_module_without_django() -> None:
    code = "import sys, memory.compaction.identifiers; print('django' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "False"


def test_json_keys_and_css_are_not_identifiers_but_what_they_hold_is() -> None:
    tool_result = '{"user_id": "mia_li_3668", "reservation": {"code": "ZFA04Y", "seats": 2}}'
    css = 'body { font-family: "Segoe UI", Roboto; margin-top: 12px; color: #1d2330 } see #4411'
    python = "{'booking_ref': 'HAT123'}"

    assert [i.value for i in find_identifiers(tool_result)] == ["mia_li_3668", "ZFA04Y"]
    assert [i.value for i in find_identifiers(css)] == ["#4411"]
    assert [i.value for i in find_identifiers(python)] == ["HAT123"]
    assert find_identifiers('<p style="font-size: 14px; color: red">') == []
