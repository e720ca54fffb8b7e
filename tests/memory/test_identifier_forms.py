"""The identifier finder returns every form people write an identifier in
whole, wherever it sits in prose and punctuation: never a strict fragment."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.compaction.identifiers import find_identifiers

DIGITS = string.digits
UPPER = string.ascii_uppercase
HEX = "0123456789abcdef"


def _text(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=low, max_size=high)


def _joined(parts: st.SearchStrategy[list[str]], sep: str) -> st.SearchStrategy[str]:
    return parts.map(sep.join)


_dashed_numbers = _joined(st.lists(_text(DIGITS, 1, 6), min_size=3, max_size=5), "-")
_two_long_groups = st.tuples(_text(DIGITS, 4, 6), _text(DIGITS, 4, 6)).map("-".join)
_slashed = st.tuples(_text(UPPER, 2, 4), st.integers(1990, 2035).map(str), _text(DIGITS, 3, 6)).map(
    "/".join
)
_reference = st.tuples(_text(UPPER, 2, 4), st.sampled_from("-/"), _text(DIGITS, 3, 8)).map("".join)
_mixed_code = st.tuples(_text(UPPER, 2, 3), _text(DIGITS, 1, 3), _text(UPPER, 1, 2)).map("".join)
_iban = st.tuples(
    _text(UPPER, 2, 2),
    _text(DIGITS, 2, 2),
    st.lists(_text(UPPER + DIGITS, 4, 4), min_size=3, max_size=6).map(" ".join),
    _text(DIGITS, 0, 3),
).map(lambda p: f"{p[0]}{p[1]} {p[2]}" + (f" {p[3]}" if p[3] else ""))
_card = st.tuples(st.lists(_text(DIGITS, 4, 4), min_size=4, max_size=4), st.sampled_from(" -")).map(
    lambda p: p[1].join(p[0])
)
_email = st.tuples(
    _text(string.ascii_lowercase, 2, 8),
    st.sampled_from(["", ".li", "_x"]),
    st.sampled_from(["", "+billing", "+t2"]),
    _text(string.ascii_lowercase, 3, 8),
    st.sampled_from(["com", "co.uk", "org"]),
).map(lambda p: f"{p[0]}{p[1]}{p[2]}@{p[3]}.{p[4]}")
_url = st.tuples(
    _text(string.ascii_lowercase, 3, 8),
    st.lists(_text(string.ascii_lowercase + DIGITS, 1, 6), min_size=0, max_size=3),
    st.sampled_from(["", "?id=42", "?q=a&b=2", "#top"]),
).map(lambda p: f"https://{p[0]}.example.com/" + "/".join(p[1]) + p[2])
_path = st.tuples(
    st.sampled_from(["/var/", "~/", "./", "/home/mia/"]),
    st.lists(_text(string.ascii_lowercase, 1, 8), min_size=1, max_size=3).map("/".join),
    st.sampled_from([".log", ".py", ".txt", ".json"]),
).map("".join)
_version = st.tuples(
    st.sampled_from(["v", ""]),
    st.lists(st.integers(0, 99).map(str), min_size=3, max_size=3).map(".".join),
    st.sampled_from(["", "-rc.1", "-beta.2"]),
).map("".join)
_hash = _text(HEX, 12, 40).filter(
    lambda h: any(c.isdigit() for c in h) and any(c.isalpha() for c in h)
)
_phone = st.one_of(
    st.tuples(
        st.integers(1, 99), _text(DIGITS, 2, 3), _text(DIGITS, 3, 4), _text(DIGITS, 4, 4)
    ).map(lambda p: f"+{p[0]} {p[1]} {p[2]} {p[3]}"),
    st.tuples(_text(DIGITS, 3, 3), _text(DIGITS, 3, 3), _text(DIGITS, 4, 4)).map(
        lambda p: f"({p[0]}) {p[1]}-{p[2]}"
    ),
    st.tuples(_text(DIGITS, 1, 3), _text(DIGITS, 4, 4), _text(DIGITS, 4, 4)).map(
        lambda p: f"0{p[0]} {p[1]} {p[2]}"
    ),
)
_amount = st.tuples(
    st.integers(1, 999_999).map(lambda n: f"{n:,}"),
    st.sampled_from(["", ".50", ".00"]),
    st.sampled_from(["$", "€", "£", " EUR", " USD", "EUR "]),
).map(lambda p: f"{p[2]}{p[0]}{p[1]}" if p[2] in "$€£EUR " else f"{p[0]}{p[1]}{p[2]}")
_date = st.tuples(
    st.integers(1, 28),
    st.sampled_from(["March", "Sept", "December", "Jan"]),
    st.integers(1990, 2035),
).flatmap(
    lambda p: st.sampled_from(
        [f"{p[0]} {p[1]} {p[2]}", f"{p[1]} {p[0]}, {p[2]}", f"{p[2]}-03-{p[0]:02d}"]
    )
)

FORMS = st.one_of(
    _dashed_numbers,
    _two_long_groups,
    _slashed,
    _reference,
    _mixed_code,
    _iban,
    _card,
    _email,
    _url,
    _path,
    _version,
    _hash,
    _phone,
    _amount,
    _date,
)
_WORDS = st.lists(
    st.sampled_from(
        [
            *("please", "check", "the", "order", "for", "me", "it", "is", "was", "noted"),
            *("thanks", "and", "my", "number", "reference", "here", "ok", "so"),
        ]
    ),
    min_size=0,
    max_size=4,
).map(" ".join)
_WRAP = st.sampled_from(
    [
        ("", ""),
        ("", "."),
        ("", ","),
        ("", "!"),
        ("", "?"),
        ("(", ")"),
        ("(", ")."),
        ("[", "]"),
        ('"', '"'),
        ('"', '".'),
        ("'", "'"),
        ("\u201c", "\u201d"),
        ("", ":"),
        ("", ";"),
    ]
)


@settings(max_examples=600, deadline=None)
@given(form=FORMS, before=_WORDS, after=_WORDS, wrap=_WRAP)
def test_the_finder_returns_each_form_whole_in_prose_and_punctuation(
    form: str, before: str, after: str, wrap: tuple[str, str]
) -> None:
    open_, close = wrap
    text = " ".join(filter(None, [before, f"{open_}{form}{close}", after]))

    values = [identifier.value for identifier in find_identifiers(text)]

    assert form in values, (text, values)
    assert not [v for v in values if v != form and v in form], (text, values)


def test_the_forms_of_the_issue_are_found_whole() -> None:
    text = (
        "My order 771-20394-5 came with invoice INV/2024/00817. Refund to IBAN "
        "DE89 3704 0044 0532 0130 00, not the card 4111 1111 1111 1111 (expires soon). "
        "Call me on 020 7946 0958 or +44 20 7946 0958, or write to mia.li+billing@example.co.uk."
    )

    values = [identifier.value for identifier in find_identifiers(text)]

    for form in (
        "771-20394-5",
        "INV/2024/00817",
        "DE89 3704 0044 0532 0130 00",
        "4111 1111 1111 1111",
        "020 7946 0958",
        "+44 20 7946 0958",
        "mia.li+billing@example.co.uk",
    ):
        assert form in values
    assert not {"771", "2024", "0044"} & set(values)


def test_spans_of_years_fractions_and_ranges_are_not_references() -> None:
    text = "open 24/7 for 10-15 guests, 1990-1995 and 2023/24"

    values = [i.value for i in find_identifiers(text)]

    assert not [v for v in values if "-" in v or "/" in v]
