"""``render`` that no stored text can break.

A lone surrogate (``"\\ud800"``, valid in JSON and so in a log) cannot be
encoded as UTF-8: Django's own ``render`` would answer 500 on every page that
shows it. Here it shows as U+FFFD instead; everything else is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from django.http import HttpRequest, HttpResponse
from django.template import loader

_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def render(
    request: HttpRequest,
    template_name: str,
    context: Mapping[str, object] | None = None,
    status: int = 200,
) -> HttpResponse:
    text = loader.render_to_string(template_name, dict(context or {}), request)
    return HttpResponse(encodable(text), status=status)
