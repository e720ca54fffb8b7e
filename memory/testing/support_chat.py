"""A 60-turn support conversation in which the user names 16 identifiers in
passing, amid long tool results full of decoys: the scenario that measures
whether compaction keeps what the user named (issue 28, point 2).

Each turn is the user's message, the assistant's tool call, the tool's
result (a JSON listing of 8 records whose ids have the shapes of the
user's: other order numbers, invoices, tickets, serials) and the assistant's
answer. The user's identifiers come one or two to a message, in the words a
person uses ("the order was 771-20394-5, I think"), never listed together and
never with "please remember". ``SUPPORT_IDENTIFIERS`` are ``(label, value)``:
the label is only how this module names them, not what the user wrote.
Deterministic: no randomness, no I/O.
"""

from __future__ import annotations

import json

from ..messages import ChatMessage, ToolCall

__all__ = ["SUPPORT_IDENTIFIERS", "fragments_in", "named_in", "support_chat"]

SUPPORT_IDENTIFIERS: tuple[tuple[str, str], ...] = (
    ("order number", "771-20394-5"),
    ("invoice", "INV/2024/00817"),
    ("support ticket", "SUP-20931"),
    ("IBAN", "DE89 3704 0044 0532 0130 00"),
    ("e-mail", "mia.li+billing@example.co.uk"),
    ("mobile", "+44 20 7946 0958"),
    ("landline", "0161 496 0734"),
    ("tracking number", "1Z999AA10123456784"),
    ("account manager", "Priya Raman"),
    ("delivery date", "14 March 2025"),
    ("refund amount", "€1,249.50"),
    ("serial number", "SN-4471-XK-09"),
    ("case URL", "https://portal.example.com/cases/88213"),
    ("receipt", "/Users/mia/Documents/receipt_0317.pdf"),
    ("firmware", "3.14.2"),
    ("voucher", "GIFT-7Q4M-22"),
)

# What the user says, by turn: the identifiers in passing, in varied forms.
_SAID: dict[int, str] = {
    1: "Hi, my dishwasher arrived broken. The order was 771-20394-5, I think, from last month.",
    4: "I already opened a ticket about it (SUP-20931) but nobody replied.",
    7: "The invoice says INV/2024/00817 at the top, if that helps.",
    10: "It was meant to arrive on 14 March 2025 but came a week late.",
    13: "You can write to me at mia.li+billing@example.co.uk.",
    16: "My account manager Priya Raman said a refund would be quick.",
    19: "The serial on the back plate reads SN-4471-XK-09.",
    22: "I'd like the refund of €1,249.50 paid back to my bank.",
    25: "My IBAN is DE89 3704 0044 0532 0130 00, it's a German account.",
    28: "The courier's tracking number was 1Z999AA10123456784.",
    31: "I have the receipt saved as /Users/mia/Documents/receipt_0317.pdf on my laptop.",
    34: "If you need to call, my mobile is +44 20 7946 0958.",
    37: "Or the landline, 0161 496 0734, in the evenings.",
    40: "The display shows firmware 3.14.2 when it boots.",
    43: "Your portal lists it under https://portal.example.com/cases/88213 as well.",
    46: "Last thing: I have a voucher GIFT-7Q4M-22 I never used.",
}
_ASKS = (
    "Can you check where things stand?",
    "Is there any update on this?",
    "What happens next?",
    "Could you look that up for me?",
    "How long will it take?",
)


def _decoys(turn: int) -> str:
    """A tool's listing: records whose ids look like the user's, none of them."""
    records = [
        {
            "order_id": f"771-{20400 + 7 * turn + k}-{k % 9}",
            "invoice": f"INV/2024/{900 + 13 * turn + k:05d}",
            "ticket": f"SUP-{21000 + 11 * turn + k}",
            "serial": f"SN-{4500 + turn}-{'ABCDEFGHJK'[k % 10]}X-{k:02d}",
            "status": ("shipped", "refunded", "open", "closed")[(turn + k) % 4],
            "updated": f"2025-0{1 + k % 9}-{10 + turn % 18} {8 + k % 10:02d}:{(7 * k) % 60:02d}",
            "amount": round(100 + 37.5 * k + turn, 2),
        }
        for k in range(8)
    ]
    return json.dumps({"customer_orders": records})


def support_chat(turns: int = 60) -> list[ChatMessage]:
    """The conversation: ``turns`` turns of four messages each (see the module)."""
    messages: list[ChatMessage] = []
    for turn in range(1, turns + 1):
        said = _SAID.get(turn, _ASKS[turn % len(_ASKS)])
        messages.append(ChatMessage.user(said))
        call = ToolCall(
            id=f"call_{turn:03d}",
            name="lookup_orders",
            arguments=json.dumps({"query": "recent", "page": turn}),
        )
        messages.append(ChatMessage.assistant(None, [call]))
        messages.append(ChatMessage.tool(_decoys(turn), call.id))
        messages.append(
            ChatMessage.assistant(
                f"I checked page {turn} of the order history; the case is still being "
                "reviewed by the returns team and I will keep following it."
            )
        )
    return messages


def named_in(context: str) -> list[str]:
    """The ``SUPPORT_IDENTIFIERS`` values ``context`` holds whole."""
    return [value for _, value in SUPPORT_IDENTIFIERS if value in context]


def fragments_in(context: str) -> list[str]:
    """Lines of ``context`` that show a strict fragment of one of the user's
    identifiers as a value ("order number: 771" for ``771-20394-5``): each
    ``label: value`` line whose value is part of one and not the whole."""
    out = []
    for line in context.splitlines():
        _, colon, value = line.rpartition(": ")
        value = value.strip().rstrip(".")
        if not colon or not value:
            continue
        for _, whole in SUPPORT_IDENTIFIERS:
            if value != whole and value in whole and whole not in line:
                out.append(line)
    return out
