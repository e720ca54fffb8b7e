"""``render`` that no stored text can break or disguise.

A lone surrogate (``"\\ud800"``, valid in JSON and so in a log) cannot be
encoded as UTF-8: Django's own ``render`` would answer 500 on every page that
shows it. Here it shows as U+FFFD instead.

Bidirectional embedding, override and isolate controls (U+202A-U+202E,
U+2066-U+2069) in stored text would reorder what follows them on the page
(``"invoice\u202eexe.pdf"`` reads as ``invoicefdp.exe``), past the end of the
value into the page's own words. An inspection tool shows what is there, so
each is written out as a visible ``⟨U+202E⟩``. Everything else is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from django.http import HttpRequest, HttpResponse
from django.template import loader

_SURROGATE = re.compile("[\ud800-\udfff]")
_BIDI_CONTROL = re.compile("[\u202a-\u202e\u2066-\u2069]")


def encodable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return _BIDI_CONTROL.sub(lambda match: f"⟨U+{ord(match[0]):04X}⟩", text)


def render(
    request: HttpRequest,
    template_name: str,
    context: Mapping[str, object] | None = None,
    status: int = 200,
) -> HttpResponse:
    text = loader.render_to_string(template_name, dict(context or {}), request)
    return HttpResponse(encodable(text), status=status)
