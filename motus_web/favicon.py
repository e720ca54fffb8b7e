"""``/favicon.ico``: browsers ask for it on every page whatever the ``<link rel=icon>``
says; answer with a redirect to the static SVG icon rather than a 404."""

from __future__ import annotations

from django.contrib.staticfiles.storage import staticfiles_storage
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

ICON = "dashboard/favicon.svg"


@require_safe
@cache_control(public=True, max_age=86_400)
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """A permanent redirect to the icon's static URL (hashed when collected), cacheable
    for a day: no login, no database."""
    return HttpResponsePermanentRedirect(staticfiles_storage.url(ICON))
