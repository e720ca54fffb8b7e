"""When a login ends, every kind of request gets an answer its page can follow.

A full page is redirected to the login page; an htmx fragment request (the
session list's filters, an import job's polling, the context panel) is told
to send the whole page there (``HX-Redirect``), rather than getting the login
page swapped into the fragment; a chat socket is closed with 4401, which the
page says in words.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, User
from django.urls import reverse

from motus_web.chat.consumers import CLOSE_UNAUTHENTICATED
from motus_web.chat.routing import websocket_urlpatterns
from motus_web.sessions.models import Session

from .helpers import logged_in, make_session

HTMX = {"HX-Request": "true"}


def fragments(session: Session) -> list[tuple[str, str]]:
    """(fragment URL, the page it is requested from) of the pages' htmx requests."""
    detail = reverse("dashboard:session_detail", args=[session.public_id])
    trace = reverse("dashboard:session_trace", args=[session.public_id])
    listing = reverse("dashboard:session_list")
    return [
        (f"{listing}?q=oslo", f"{listing}?sort=title"),
        (f"{trace}?kind=compaction", trace),
        (reverse("dashboard:session_context", args=[session.public_id]), detail),
    ]


@pytest.mark.django_db
def test_a_fragment_request_after_logout_sends_the_whole_page_to_the_login(owner: User) -> None:
    session = make_session(owner, turns=3)
    client = logged_in(owner)
    for url, _ in fragments(session):
        assert client.get(url, headers=HTMX).status_code == 200
    client.logout()
    login = reverse("login")
    for url, page in fragments(session):
        response = client.get(url, headers={**HTMX, "HX-Current-URL": f"http://testserver{page}"})
        assert response.status_code == 200, url
        assert response["HX-Redirect"] == f"{login}?next={quote(page, safe='/')}"
        assert not response.has_header("Location")
        assert b"<form" not in response.content  # no login page to swap into the fragment
        # The same address as a full page is redirected to the login as before.
        full = client.get(url)
        assert full.status_code == 302
        assert full["Location"].startswith(f"{login}?next=")
        assert not full.has_header("HX-Redirect")


@pytest.mark.django_db
def test_a_fragment_of_a_page_not_found_is_not_taken_for_a_logout(
    owner: User, outsider: User
) -> None:
    session = make_session(owner, turns=3)
    url, page = fragments(session)[2]
    response = logged_in(outsider).get(url, headers={**HTMX, "HX-Current-URL": page})
    assert response.status_code == 404
    assert not response.has_header("HX-Redirect")


@pytest.mark.django_db
def test_an_htmx_post_after_logout_is_sent_to_the_login_and_does_nothing(owner: User) -> None:
    session = make_session(owner, turns=6, filler=80, threshold=600)
    client = logged_in(owner)
    client.logout()
    detail = reverse("dashboard:session_detail", args=[session.public_id])
    response = client.post(
        reverse("dashboard:compact_now", args=[session.public_id]),
        {"instructions": "keep"},
        headers={**HTMX, "HX-Current-URL": detail},
    )
    assert response["HX-Redirect"].startswith(reverse("login"))
    assert Session.objects.get(pk=session.pk).record_count == session.record_count


@pytest.mark.django_db(transaction=True)
async def test_a_chat_socket_without_a_login_is_closed_with_4401() -> None:
    from channels.routing import URLRouter

    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), "/ws/sessions/0123456789abcdef/"
    )
    communicator.scope["user"] = AnonymousUser()
    connected, _ = await communicator.connect(timeout=5)
    assert connected  # accepted first, so that the close carries its code
    closed = await communicator.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await communicator.disconnect()
