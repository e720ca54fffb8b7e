"""What the provider's reported usage cost, estimated from genai-prices' price data.

The prices are the ones the installed ``genai-prices`` package bundles (its
version is the price date shown); nothing is fetched at run time (its
``UpdatePrices`` is never started). A reply's usage is what its message
record carries: ``usage`` (``input_tokens``, cached part included,
``cached_input_tokens``, ``output_tokens``, ``model``) when the library logged
it, else only ``provider_tokens``, the input, whose cost is then all the
page can say. A model the price data does not know has no cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from importlib.metadata import version
from typing import Any

from genai_prices import Usage, calc_price

from motus_web.sessions.aggregates import ReplyUsage, usage_sums

PRICE_DATA = f"genai-prices {version('genai-prices')}"
SMALLEST = Decimal("0.000001")  # below it an amount reads "< $0.000001"


def dollars(amount: Decimal | float) -> str:
    """An estimated amount in dollars, as a person reads it, never in
    scientific notation: cents from $1 (``"$1,234.57"``), four significant
    digits below (``"$0.04125"``, ``"$0.000075"``), ``"< $0.000001"`` for a
    smaller non-zero amount, ``"$0"`` for none."""
    value = Decimal(str(amount))
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    if value < SMALLEST:
        return f"< ${SMALLEST:f}"
    places = 3 - value.adjusted()  # adjusted(): the exponent of the first digit
    text = f"{value:.{places}f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


# A reply's reported usage, as the log store sums it per model.
Tokens = ReplyUsage


@dataclass(frozen=True, slots=True)
class Cost:
    """Dollars, estimated; ``output`` is ``None`` when the output was not reported."""

    input: Decimal  # the uncached input
    cached: Decimal
    output: Decimal | None

    @property
    def total(self) -> Decimal:
        return self.input + self.cached + (self.output or Decimal(0))

    @property
    def complete(self) -> bool:
        return self.output is not None

    def __add__(self, other: Cost) -> Cost:
        output = None
        if self.output is not None and other.output is not None:
            output = self.output + other.output
        return Cost(self.input + other.input, self.cached + other.cached, output)


@lru_cache(maxsize=4096)
def _price(model: str, input_tokens: int, cached: int, output: int) -> tuple[Decimal, Decimal]:
    calc = calc_price(
        Usage(input_tokens=input_tokens, cache_read_tokens=cached, output_tokens=output), model
    )
    return calc.input_price, calc.output_price


def cost(tokens: Tokens) -> Cost | None:
    """The cost of one reply's usage; ``None`` for a model the price data lacks."""
    try:
        cached, _ = _price(tokens.model, tokens.cached, tokens.cached, 0)
        whole_input, output = _price(tokens.model, tokens.input, tokens.cached, tokens.output or 0)
    except LookupError:
        return None
    return Cost(whole_input - cached, cached, output if tokens.output is not None else None)


def of_totals(totals: Mapping[str, Any]) -> tuple[Cost | None, int]:
    """The cost of a session's replies from its stored usage sums
    (``Session.usage_totals``, per model), and how many replies it counts;
    ``None`` when no model of them has a price. One row, not every reply's."""
    found: Cost | None = None
    count = 0
    for usage, replies in usage_sums(totals):
        if not usage.model:
            continue  # a reply whose model nobody named has no price
        count += replies
        part = cost(usage)
        if part is not None:
            found = part if found is None else found + part
    return found, count
