"""The product's own 403, 404 and 405 pages: styled, with a way back, readable on a phone."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from motus_web.ui.rendering import render


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "errors/404.html", {}, status=404)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "errors/403.html", {}, status=403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form refused by the CSRF check (an old page, cookies off): 403, saying so."""
    return render(request, "errors/403.html", {"csrf": True}, status=403)


def method_not_allowed(request: HttpRequest, allowed: str) -> HttpResponse:
    """405 for an address opened with a method it does not take (an action's
    POST-only URL opened with GET: a bookmark, a typed or reloaded address),
    saying what to do instead, with a link back to the session it is under
    (its page 404s for anyone who may not see it). ``allowed``: the ``Allow``
    header's value, kept."""
    match = request.resolver_match
    public_id = match.kwargs.get("public_id") if match is not None else None
    context = {"public_id": public_id, "method": request.method, "posts_only": "POST" in allowed}
    response = render(request, "errors/405.html", context, status=405)
    response["Allow"] = allowed
    return response


class MethodNotAllowedPageMiddleware:
    """Gives Django's empty 405 (``require_POST``, ``require_safe``) the
    product's page (``method_not_allowed``); HEAD keeps its empty answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if response.status_code != 405 or request.method == "HEAD":
            return response
        if getattr(response, "content", b""):  # a view's own 405 page
            return response
        return method_not_allowed(request, response.get("Allow", ""))
