"""How the pages word the library's compaction warnings: every figure once, grouped.

The library writes a warning's reason as plain text with bare figures ("the
summary and the kept messages alone need about 3501 tokens") and states the
figures apart (``floor_tokens``, ``threshold``). A page shows one sentence:
the reason with its figures grouped ("3,501"), and only the figures it does
not already name.
"""

from __future__ import annotations

import re

from django.contrib.humanize.templatetags.humanize import intcomma

# A bare whole number of four digits or more, not part of a longer token (an id, a decimal).
_FIGURE = re.compile(r"(?<![\w.,])\d{4,}(?![\w.,]\d)")


def grouped(text: str) -> str:
    """``text`` with each bare whole number of 4+ digits written with thousands separators."""
    return _FIGURE.sub(lambda match: intcomma(int(match[0])), text)


def warning_text(reason: str, floor_tokens: int | None, threshold: int | None) -> str:
    """One sentence for a "still over the threshold" warning, each figure once.

    ``floor_tokens`` (what the summary and kept messages alone take) and
    ``threshold`` are in tokens; either may be unknown (``None``).
    """
    text = reason.strip().rstrip(".")
    named = {int(figure) for figure in re.findall(r"\d+", text)}
    text = grouped(text) or "Still over the threshold"
    if floor_tokens is not None and floor_tokens not in named:
        text += f"; the part that cannot be compacted takes {intcomma(floor_tokens)} tokens"
    if threshold is not None and threshold not in named:
        text += f", against a threshold of {intcomma(threshold)}"
    return text[:1].upper() + text[1:] + "."
