"""A JSONField that keeps any JSON, NUL characters included, the same on every database.

PostgreSQL refuses ``\\u0000`` in ``jsonb`` (and a NUL in ``text``); SQLite
takes it. So that both store the same thing and give back exactly what they
were given, every string in the value (keys too) is escaped on the way in:
U+0000 becomes ``ESC + "0"`` and ``ESC`` itself ``ESC + "e"``, where ``ESC``
is U+10FFFF, a code point Unicode guarantees never to assign. Reading undoes
it; a value without ``ESC`` in its JSON text (nearly all) is not walked at all.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import models

ESC = "\U0010ffff"
_ESC_IN_JSON = ("\\udbff\\udfff", ESC)  # as json.dumps writes it, and as it is
_TO_ESCAPE = re.compile("[\x00\U0010ffff]")
_ESCAPED = re.compile("\U0010ffff(.)", re.DOTALL)


def escape(text: str) -> str:
    if "\x00" not in text and ESC not in text:
        return text
    return _TO_ESCAPE.sub(lambda match: ESC + ("0" if match[0] == "\x00" else "e"), text)


def unescape(text: str) -> str:
    if ESC not in text:
        return text
    return _ESCAPED.sub(lambda match: "\x00" if match[1] == "0" else ESC, text)


def _walk(value: Any, change: Any) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_walk(item, change) for item in value]
    if isinstance(value, dict):
        return {change(key): _walk(item, change) for key, item in value.items()}
    return value


class LosslessJSONField(models.JSONField):
    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(_walk(value, escape))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        loaded = super().from_db_value(value, expression, connection)
        if isinstance(value, str) and not any(form in value for form in _ESC_IN_JSON):
            return loaded
        return _walk(loaded, unescape)
