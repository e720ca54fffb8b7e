"""Headers on every answer: private pages are never stored by browsers or
proxies, and no page may use the browser's powerful features; and a login
that ended answers an htmx fragment request in a way its page can follow."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import resolve_url
from django.utils.cache import add_never_cache_headers
from django_htmx.http import HttpResponseClientRedirect


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


class LoginRedirectForHtmxMiddleware:
    """When a login has ended, ``login_required`` answers with a redirect to the
    login page. A full page follows it; htmx would follow it inside the request
    and swap the login page into the fragment. So an htmx request (``HX-Request``)
    whose answer is that redirect gets ``HX-Redirect`` instead
    (``HttpResponseClientRedirect``, status 200): htmx sends the whole page to
    the login, which comes back to the page the fragment was on
    (``HX-Current-URL``), not to the fragment's address."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        htmx = getattr(request, "htmx", None)
        if not htmx or not isinstance(response, HttpResponseRedirect):
            return response
        login = resolve_url(settings.LOGIN_URL)
        if urlsplit(response["Location"]).path != login:
            return response
        back = htmx.current_url_abs_path or request.get_full_path()
        return HttpResponseClientRedirect(redirect_to_login(back, login)["Location"])
