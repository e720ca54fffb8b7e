"""An ASGI middleware that refuses a request body over a size limit without reading it.

Django reads the whole body before a view can look at it (into a temporary
file past ``FILE_UPLOAD_MAX_MEMORY_SIZE``), so the upload form's own check
comes after the server has taken every byte. This middleware answers 413 as
soon as it knows: from ``Content-Length`` before the first byte is read, or,
for a body streamed without one, at the chunk that passes the limit; the
application then sees the client gone (``http.disconnect``), as if it had
hung up.

It only helps behind a server that streams the body to the application as it
arrives and stops reading while the application does (uvicorn). Daphne does
not: Twisted spools the whole body, parses a multipart one in memory, and
daphne queues all of it before the application is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from csp.utils import build_policy
from django.conf import settings
from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string

# The shapes django-stubs gives ASGIHandler (asgiref.typing's TypedDicts do not match it).
Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequestBodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope["headers"])
        if length is not None and length > self.max_bytes:
            await self._refuse(scope, send)
            return

        received = 0
        over = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, limited_receive, watched_send)
        if over and not started:
            await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        """413, as a page for a browser (it asked for HTML), else as one line of text."""
        if _accepts_html(scope["headers"]):
            kind = b"text/html; charset=utf-8"
            body = render_to_string("errors/413.html", {"limit": self.max_bytes}).encode()
        else:
            kind = b"text/plain; charset=utf-8"
            body = (
                f"Request body too large: this server accepts at most "
                f"{filesizeformat(self.max_bytes)} ({self.max_bytes} bytes) per request.\n"
            ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", kind),
                    (b"content-length", str(len(body)).encode()),
                    # The rest of the body was never read: the connection cannot be reused.
                    (b"connection", b"close"),
                    *_security_headers(),
                ],
                "trailers": False,
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _security_headers() -> list[tuple[bytes, bytes]]:
    """What Django's middleware adds to every other answer (this one never reaches
    it): the CSP of ``settings.CONTENT_SECURITY_POLICY``, nosniff, frame and
    referrer policies, and the permissions policy."""
    return [
        (b"content-security-policy", build_policy().encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", settings.X_FRAME_OPTIONS.encode()),
        (b"referrer-policy", settings.SECURE_REFERRER_POLICY.encode()),
        (b"permissions-policy", settings.PERMISSIONS_POLICY.encode()),
    ]


def _accepts_html(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    return any(name.lower() == b"accept" and b"text/html" in value for name, value in headers)


def _content_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The declared body size; None when absent or malformed (the server refuses those)."""
    for name, value in headers:
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else None
    return None
