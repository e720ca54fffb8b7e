"""The websocket's origin check: the page must come from this server, scheme, host and port.

Channels' ``AllowedHostsOriginValidator`` compares the Origin's host with
``ALLOWED_HOSTS`` only, so a page on another port or over plain http on the
same host could open a logged-in user's socket (the browser sends the session
cookie with it). This check is Django's CSRF origin rule
(``CsrfViewMiddleware._origin_verified``) for the handshake: the Origin must
be the request's own origin (its scheme, ``ws`` for ``http`` and ``wss`` for
``https``, the ``Host`` header, which ``ALLOWED_HOSTS`` must allow, and its
port, the scheme's default when none is given) or one of
``CSRF_TRUSTED_ORIGINS`` (``https://*.example.com`` covers the subdomains).
No Origin header, ``null`` or anything unparsable is refused: every browser
sends one with a websocket, so only a page's own script gets through.
A refused handshake is answered 403 before the application sees it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
_HTTP_SCHEME = {"ws": "http", "wss": "https", "http": "http", "https": "https"}

Origin = tuple[str, str, int]  # scheme, host (lower case, IPv6 in brackets), port


def parse_origin(value: str) -> Origin | None:
    """``(scheme, host, port)`` of an origin such as ``http://[::1]:8000``; ``None`` for
    ``null``, another scheme, a path, user info, or anything that is not an origin."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.username is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return scheme, host, port or DEFAULT_PORTS[scheme]


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """The origin the handshake was made to: its scheme and ``Host`` header, when
    ``ALLOWED_HOSTS`` allows that host (else ``None``)."""
    scheme = _HTTP_SCHEME.get(str(scope.get("scheme", "ws")))
    host_header = _header(scope, b"host")
    if scheme is None or host_header is None:
        return None
    domain, _ = split_domain_port(host_header)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # what Django's own check allows
    if not domain or not validate_host(domain, allowed):
        return None
    return parse_origin(f"{scheme}://{host_header}")


def trusted(origin: Origin) -> bool:
    """Whether ``CSRF_TRUSTED_ORIGINS`` names ``origin`` (a ``*.`` host covers subdomains)."""
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        wildcard = "://*." in entry
        parsed = parse_origin(entry.replace("://*.", "://", 1))
        if parsed is None or parsed[0] != scheme or parsed[2] != port:
            continue
        if host == parsed[1] or (wildcard and host.endswith("." + parsed[1])):
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    value = _header(scope, b"origin")
    origin = parse_origin(value) if value is not None else None
    if origin is None:
        return False
    return origin == own_origin(scope) or trusted(origin)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            try:
                return bytes(value).decode("ascii")
            except UnicodeDecodeError:
                return None
    return None


class SameOriginValidator:
    """ASGI middleware refusing (403) a websocket handshake from another origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
