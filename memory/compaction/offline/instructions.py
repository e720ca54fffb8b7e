"""Which pieces compaction instructions pin ("keep every booking reference").

The offline summariser cannot follow instructions the way a model does, so
it reads their content terms and pins the pieces that match, which are then
chosen first (``digest``). A term is a word of the instructions that is not
a stop word and not a word of asking (``keep``, ``remember``, ``every``...);
a piece matches when one of its words, or a part of one (``booking_ref``),
is a term, compared by ``stem`` (so "bookings" and "booked" match
"booking"). The identifiers a matching piece
holds set what the instructions mean by their terms ("my booking reference
is QX7T2M"), so a piece holding an identifier of the same ``shape``
(``ZZ81KP``: capitals and digits, six characters) is pinned too, even
without the term ("change it to ZZ81KP"). Matching is on the words ``scan``
found, lower case, so it is linear in the pieces' words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .scan import IDENTIFIER, WORD, Item, words_of

# Words that ask rather than say what: "keep every ...", "please remember all ...".
_ASKING = """keep kept retain preserve remember include mention save
    summary summarise summarize summarised compact compaction detail details information
    info everything lose losing lost drop dropping forget forgetting exact exactly
    verbatim important every each all any"""
ASKING = frozenset(_ASKING.split())
_SUFFIXES = ("ings", "ing", "ed", "es", "s")
_ES_AFTER = ("ses", "xes", "zes", "ches", "shes")
STEM_CHARS = 6  # "reference", "references", "referenced" share "refere"
_PARTS = re.compile(r"[_./@:+'\u2019-]")


def stem(word: str) -> str:
    """A crude stem: the word without a plural or verb ending, cut to
    ``STEM_CHARS`` characters."""
    word = word.lower().removesuffix("'s")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "es" and not word.endswith(_ES_AFTER):
                continue  # "notes" is "note" + "s"; "boxes" is "box" + "es"
            word = word[: -len(suffix)]
            break
    return word[:STEM_CHARS]


def stems(word: str) -> set[str]:
    """The stems of a word's parts: ``booking_ref`` has ``book`` and ``ref``."""
    return {stem(part) for part in _PARTS.split(word) if part}


def terms(instructions: str | None) -> frozenset[str]:
    """The stems of the content terms of ``instructions``."""
    if not instructions:
        return frozenset()
    found = {s for w, _ in words_of(instructions) for s in stems(w)}
    return frozenset(found - _ASKING_STEMS)


def shape(identifier: str) -> tuple[frozenset[str], int]:
    """The kinds of characters of an identifier and its length: ``QX7T2M`` and
    ``ZZ81KP`` have one shape, ``HTL-88231`` another."""
    kinds = frozenset(
        "A" if c.isupper() else "a" if c.isalpha() else "9" if c.isdigit() else c
        for c in identifier
    )
    return kinds, len(identifier)


def pinned(items: Sequence[Item], instructions: str | None) -> set[tuple[int, int]]:
    """``(item index, piece index)`` of the pieces ``instructions`` pin: the ones
    holding a term, then the ones holding an identifier shaped like one of those."""
    wanted = terms(instructions)
    if not wanted:
        return set()
    out: set[tuple[int, int]] = set()
    shapes: set[tuple[frozenset[str], int]] = set()
    for n, item in enumerate(items):
        for piece in item.pieces:
            if any(not wanted.isdisjoint(stems(word)) for word, _ in piece.words):
                out.add((n, piece.index))
                shapes.update(shape(i) for i in _identifiers(piece.text, piece.words))
    if not shapes:
        return out
    for n, item in enumerate(items):
        for piece in item.pieces:
            if (n, piece.index) not in out and any(
                shape(i) in shapes for i in _identifiers(piece.text, piece.words)
            ):
                out.add((n, piece.index))
    return out


def _identifiers(text: str, words: Sequence[tuple[str, float]]) -> list[str]:
    """The identifiers of a piece, as written (``words`` holds them lower case)."""
    ids = {word for word, kind in words if kind >= IDENTIFIER}
    if not ids:
        return []
    return [m.group() for m in WORD.finditer(text) if m.group().lower() in ids]


_ASKING_STEMS = frozenset(stem(word) for word in ASKING)
