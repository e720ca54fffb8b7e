"""The offline summary names who spoke whatever the whitespace after a label,
and keeps no pleasantries or scraps in what it carries verbatim."""

from __future__ import annotations

import re

import pytest

from memory import ChatMessage, TokenCounter, offline_summary

SPEAKER = re.compile(r"^- (?:\[[^\]]+\] )?([^:\n]+): ", re.MULTILINE)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.for_model(None)


def conversation(after_label: list[str]) -> list[ChatMessage]:
    """Two people taking turns, each turn ``Name:`` then one of ``after_label``."""
    said = [
        ("Caroline", "I went to the LGBTQ support group on Tuesday and it was powerful."),
        ("Melanie", "That sounds great! I finished painting a sunrise over Lake Tahoe."),
        ("Caroline", "I am researching adoption agencies in Portland this month."),
        ("Melanie", "My daughter Luna starts violin lessons with Ms Park next week."),
        ("Caroline", "The counselling course at Riverside College begins on 3 March 2024."),
        ("Melanie", "We booked a camping trip to Yosemite for the second weekend of June."),
    ]
    out = []
    for n, (name, text) in enumerate(said):
        gap = after_label[n % len(after_label)]
        message = f"{name}:{gap}{text}"
        out.append(
            ChatMessage.user(message) if name == "Caroline" else ChatMessage.assistant(message)
        )
    return out


@pytest.mark.parametrize("gaps", [["\n"], [" ", "\n"], ["\t", " \n  "], [" ", "\r\n"]])
def test_speakers_are_named_whatever_the_whitespace_after_their_label(
    counter: TokenCounter, gaps: list[str]
) -> None:
    summary = offline_summary(conversation(gaps), budget_tokens=400, counter=counter)

    speakers = set(SPEAKER.findall(summary))

    assert speakers, summary
    assert speakers <= {"Caroline", "Melanie"}, summary


def test_a_turn_without_its_label_is_still_its_speakers(counter: TokenCounter) -> None:
    messages = conversation([" "])
    messages[3] = ChatMessage.assistant(messages[3].text.removeprefix("Melanie: "))

    summary = offline_summary(messages, budget_tokens=400, counter=counter)

    assert set(SPEAKER.findall(summary)) <= {"Caroline", "Melanie"}, summary
    assert "Luna" in summary


def test_roles_are_shown_where_no_name_is_known(counter: TokenCounter) -> None:
    messages = [
        ChatMessage.user("I need a new passport before the trip to Lisbon in May."),
        ChatMessage.assistant("The renewal form DS-82 takes about six weeks by mail."),
    ]

    summary = offline_summary(messages, budget_tokens=200, counter=counter)

    assert set(SPEAKER.findall(summary)) == {"user", "assistant"}, summary
