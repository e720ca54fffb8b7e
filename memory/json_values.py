"""The one rule for text the log cannot encode, applied wherever text enters.

A log is UTF-8 (a JSONL file, a database), and UTF-8 cannot hold a *lone
surrogate*: a code point in U+D800..U+DFFF that is not half of a pair. Python
strings can hold them (a model reply cut in the middle of an emoji, a terminal,
``json.loads`` of ``"\\ud83d"``). So every string that enters the library (each
field of a ``ChatMessage`` and of its tool calls, at any depth, dictionary keys
included; a system prompt; a summary; every field of a log record) goes
through ``clean_text``:

- a surrogate *pair* written as two code points (as UTF-16 sources produce)
  becomes the one character it encodes (``"\\ud83d\\ude00"`` -> ``"😀"``);
- every lone surrogate becomes U+FFFD REPLACEMENT CHARACTER.

The rule is applied on ingest, before anything is stored or counted, so the
live context and the one restored from the log hold the same text. Text
without surrogates is returned as the same object, untouched.

``clean_json`` applies it to a whole JSON value; with ``strict`` it also
refuses what a JSON log cannot give back as it was (a set, a datetime, a
non-string key, NaN, an integer past 64 bits, lists and objects nested more
than ``MAX_DEPTH`` deep), which a message must not hold.
``loads`` reads JSON text that spells a lone surrogate as an escape
(``"\\ud83d"``, as Python's ``json.dumps`` writes one), which orjson refuses,
and cleans it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import orjson

# The integers orjson (and so every store) can write: signed and unsigned 64-bit.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
# Lists and objects inside one another, at most: orjson writes no value nested
# deeper than 254, and a log record puts a message two levels down; it also
# keeps the cleaning's recursion far from Python's limit.
MAX_DEPTH = 200


class NotJSONError(TypeError):
    """A value a JSON log cannot hold as it is; ``str(error)`` says which and where."""

    def __init__(self, problem: str, path: str = "") -> None:
        self.problem = problem
        self.path = path
        # A path hundreds of levels long says no more than its two ends.
        shown = path if len(path) <= 80 else f"{path[:48]}\u2026{path[-24:]}"
        super().__init__(f"{shown or 'the value'} {problem}")

    def inside(self, step: str, where: str = "") -> NotJSONError:
        """The same error one level up: at ``where`` + ``step`` + the path so far."""
        return NotJSONError(self.problem, f"{where}{step}{self.path}")


def loads(data: bytes | str) -> Any:
    """Parse one JSON document, like ``orjson.loads``, cleaning what it holds.

    A document orjson refuses only because of an escaped lone surrogate is
    read by the standard library instead and passed through ``clean_json``.
    Raises ``orjson.JSONDecodeError`` (orjson's own error) for anything that is
    not JSON (``NaN`` and ``Infinity`` included).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if b"\\u" not in (data if isinstance(data, bytes) else data.encode("utf-8", "replace")):
            raise
        try:
            value = json.loads(data, parse_constant=_not_json)
        except ValueError:
            raise error from None
        return clean_json(value)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def clean_text(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")  # in C, about twice as fast as searching with a regex
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def clean_json(value: Any, *, strict: bool = False, where: str = "") -> Any:
    """``value`` with ``clean_text`` applied to every string in it, keys included.

    Lists and dicts are copied only where something changed (a tuple becomes
    a list, a ``Mapping`` a ``dict``, as they come back from JSON). With
    ``strict``, raises ``NotJSONError`` (naming the place, under ``where``)
    for a value JSON cannot hold exactly; without it, such values pass
    through for the store to refuse.
    """
    try:
        return _clean(value, strict, 0)
    except NotJSONError as error:
        raise error.inside("", where) from None


def _clean(value: Any, strict: bool, depth: int) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if strict and not _INT_MIN <= value <= _INT_MAX:
            raise NotJSONError("is an integer past 64 bits")
        return value
    if isinstance(value, float):
        if strict and not math.isfinite(value):
            raise NotJSONError(f"is {value}, which JSON cannot hold")
        return value
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_DEPTH:
        if strict:
            raise NotJSONError(f"is nested more than {MAX_DEPTH} levels deep")
        return value  # left as it is: the store refuses what it cannot write
    if isinstance(value, Mapping):
        return _clean_mapping(value, strict, depth + 1)
    if isinstance(value, list | tuple):
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_clean(item, strict, depth + 1))
            except NotJSONError as error:
                raise error.inside(f"[{index}]") from None
        same = isinstance(value, list) and all(a is b for a, b in zip(items, value, strict=True))
        return value if same else items
    if strict:
        raise NotJSONError(f"is a {type(value).__name__}, not a JSON value")
    return value


def _clean_mapping(value: Mapping[Any, Any], strict: bool, depth: int) -> Any:
    out: dict[Any, Any] = {}
    changed = not isinstance(value, dict)
    for key, item in value.items():
        if not isinstance(key, str):
            if strict:
                raise NotJSONError(f"has a key {key!r} that is not a string")
            new_key = key
        else:
            new_key = clean_text(key)
        try:
            new_item = _clean(item, strict, depth)
        except NotJSONError as error:
            raise error.inside(f"[{key!r}]") from None
        changed = changed or new_key is not key or new_item is not item
        out[new_key] = new_item
    return out if changed else value
