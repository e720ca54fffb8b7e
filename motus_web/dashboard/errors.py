"""The product's own 403 and 404 pages: styled, with a way back, readable on a phone."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from .rendering import render


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "errors/404.html", {}, status=404)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "errors/403.html", {}, status=403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form refused by the CSRF check (an old page, cookies off): 403, saying so."""
    return render(request, "errors/403.html", {"csrf": True}, status=403)
