"""Headers on every answer: private pages are never stored by browsers or
proxies, and no page may use the browser's powerful features."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import add_never_cache_headers


class PrivateNoStoreMiddleware:
    """Every answer to a logged-in user says ``Cache-Control: no-store``
    (unless a view set its own): a shared or back-button cache must not keep
    someone's sessions after they log out."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response


class PermissionsPolicyMiddleware:
    """Every answer (static files too: it sits before WhiteNoise) sends
    ``Permissions-Policy: settings.PERMISSIONS_POLICY``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        response.setdefault("Permissions-Policy", settings.PERMISSIONS_POLICY)
        return response
