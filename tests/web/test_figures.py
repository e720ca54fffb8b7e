"""Honest figures: how a reply ended, and what the reported usage cost."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from genai_prices import Usage, calc_price

from motus_web.chat.render import record_frames
from motus_web.dashboard.costs import dollars
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.models import Session
from tests.test_log_store_contract import message, meta

from .helpers import logged_in

pytestmark = pytest.mark.django_db


def url(name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=args)


def stored(owner: User, *replies: dict[str, Any], model: str = "gpt-4o") -> Session:
    log = [{**meta("figures"), "model_name": model}, message(0, "user", "Write a long story.")]
    log += [
        {**message(seq, "assistant", "Once upon"), **fields}
        for seq, fields in enumerate(replies, 1)
    ]
    DatabaseLogStore(owner=owner).extend("figures", log)
    return Session.objects.get(public_id="figures")


@pytest.mark.parametrize(
    ("extra", "badge"),
    [
        ({"finish_reason": "length"}, "cut off at the output limit"),
        ({"finish_reason": "content_filter"}, "stopped by a content filter"),
        ({"interrupted": True}, "interrupted"),  # as the agent stored it before finish_reason
        ({"finish_reason": "interrupted", "interrupted": True}, "interrupted"),
    ],
)
def test_a_reply_that_did_not_end_normally_says_so_on_every_page_and_in_the_chat(
    owner: User, extra: dict[str, Any], badge: str
) -> None:
    cut = message(1, "assistant", "Once upon a ti")
    cut["message"].update(extra)
    session = stored(owner, {"message": cut["message"]})
    client = logged_in(owner)

    pages = [
        client.get(url("session_detail", "figures")).content.decode(),
        client.get(url("message_detail", "figures", 1)).content.decode(),
        *(frame["html"] for frame in record_frames(session, -1) if frame.get("seq") == 1),
    ]

    assert len(pages) == 3
    for html in pages:
        assert 'class="badge warn finish-reason"' in html
        assert f">{badge}</span>" in html


def test_a_normal_reply_has_no_finish_badge(owner: User) -> None:
    stored(owner, {})

    html = logged_in(owner).get(url("session_detail", "figures")).content.decode()

    assert "finish-reason" not in html


def price(model: str, input_tokens: int, cached: int, output: int) -> float:
    usage = Usage(input_tokens=input_tokens, cache_read_tokens=cached, output_tokens=output)
    return float(calc_price(usage, model).total_price)


def test_each_reply_and_the_session_show_the_estimated_cost_of_the_reported_usage(
    owner: User,
) -> None:
    first = {"input_tokens": 12_000, "cached_input_tokens": 4_000, "output_tokens": 800}
    second = {"input_tokens": 30_000, "cached_input_tokens": 0, "output_tokens": 1_500}
    stored(
        owner,
        {"provider_tokens": 12_000, "usage": first},
        {"provider_tokens": 30_000, "usage": second},
    )

    html = logged_in(owner).get(url("session_detail", "figures")).content.decode()

    one = price("gpt-4o", 12_000, 4_000, 800)
    both = one + price("gpt-4o", 30_000, 0, 1_500)
    assert f"&asymp; {dollars(one)}</span>" in html
    assert f"<dt>Cost (estimate)</dt><dd>&asymp; {dollars(both)} " in html
    assert "2 replies; genai-prices 0.2.3 prices" in html


def test_a_reply_with_only_its_input_counted_costs_its_input_and_says_so(owner: User) -> None:
    stored(owner, {"provider_tokens": 10_000})

    html = logged_in(owner).get(url("session_detail", "figures")).content.decode()

    assert f"&asymp; {dollars(price('gpt-4o', 10_000, 0, 0))} (input)</span>" in html
    assert "output not reported" in html


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (0, "$0"),
        (7.5e-05, "$0.000075"),
        (3e-07, "< $0.000001"),
        (0.04125, "$0.04125"),
        (0.123456, "$0.1235"),
        (0.5, "$0.50"),
        (1234.567, "$1,234.57"),
    ],
)
def test_an_amount_reads_as_dollars_never_in_scientific_notation(amount: float, shown: str) -> None:
    assert dollars(amount) == shown


def test_a_tiny_reply_cost_is_shown_readably_on_the_page(owner: User) -> None:
    stored(owner, {"provider_tokens": 30})  # 30 input tokens of gpt-4o: $0.000075

    html = logged_in(owner).get(url("session_detail", "figures")).content.decode()

    assert price("gpt-4o", 30, 0, 0) == pytest.approx(7.5e-05)
    assert "&asymp; $0.000075 (input)</span>" in html
    assert "e-0" not in html


def test_a_model_the_price_data_does_not_know_has_no_cost(owner: User) -> None:
    stored(owner, {"provider_tokens": 10_000}, model="a-model-nobody-prices")

    html = logged_in(owner).get(url("session_detail", "figures")).content.decode()

    assert "&asymp; $" not in html
    assert "Cost (estimate)" not in html
