"""What the ledger carries verbatim: whole identifiers under their labels,
no pleasantries, no two-word scraps."""

from __future__ import annotations

from memory import ChatMessage
from memory.compaction.ledger import Ledger


def entries(*texts: str) -> list[str]:
    messages = [(seq, ChatMessage.user(text)) for seq, text in enumerate(texts)]
    return [entry.line() for entry in Ledger().updated(messages).entries]


def test_an_identifier_is_carried_whole_under_its_label_never_a_fragment() -> None:
    lines = entries(
        "My order number is 771-20394-5 and it never arrived.",
        "The invoice INV/2024/00817 was charged twice.",
        "Please refund it to IBAN DE89 3704 0044 0532 0130 00 instead of the card.",
        "You can call me on 020 7946 0958 after six.",
    )

    assert "order number: 771-20394-5" in lines
    assert "invoice: INV/2024/00817" in lines
    assert "iban: DE89 3704 0044 0532 0130 00" in lines
    assert "call me: 020 7946 0958" in lines or "020 7946 0958" in lines
    for fragment in ("771", "20394", "2024", "00817", "DE89", "0044", "7946"):
        assert not [line for line in lines if line.endswith(f": {fragment}")], lines
        assert fragment not in lines


def test_pleasantries_and_scraps_are_not_carried() -> None:
    lines = entries(
        "Keep up the good work!",
        "That is great! Gatsby is my favourite book.",
        "The ticket was only $10 at the door.",
        "Never book red-eye flights for me.",
    )

    assert '"Keep up the good work!"' not in lines
    assert not [line for line in lines if line.startswith(("great:", "only:"))], lines
    assert '"Never book red-eye flights for me."' in lines
