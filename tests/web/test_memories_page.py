"""The Memories pages: per scope, owner and staff only, corrections exactly once."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from memory import Scope
from memory.background import Provenance
from motus_web.sessions import once
from motus_web.sessions.long_term_store import DjangoLongTermStore, owner_scope
from motus_web.sessions.models import ActionToken, Session

from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db

store = DjangoLongTermStore()


def remembered(owner: User, session: Session | None = None) -> tuple[Scope, str, str]:
    scope = owner_scope(owner.pk, "trips")
    link = Provenance(
        session.public_id if session else "s1", 2, 2, "offline", "2025-05-01T10:00:00+00:00"
    )
    sister, _ = store.add(
        scope, text="My sister Jane lives in Boston.", kind="fact", provenance=link
    )
    tea, _ = store.add(scope, text="I like green tea.", kind="preference", provenance=link)
    return scope, sister.id, tea.id


def page_url(scope: Scope) -> str:
    return f"/memories/{scope.user_id}/named/{scope.agent_id}/"


def form(client: Client, scope: Scope, memory_id: str, action: str) -> tuple[str, dict[str, str]]:
    """The action URL and hidden fields of one memory's form, as the page gives them."""
    page = client.get(page_url(scope)).content.decode()
    url = f"{page_url(scope)}{memory_id}/{action}/"
    at = page.index(f'action="{url}"')
    section = page[at : page.index("</form>", at)]
    return url, dict(re.findall(r'name="(once|version)" value="([^"]+)"', section))


def test_the_owner_sees_each_memory_with_its_provenance_and_history(owner: User) -> None:
    session = make_session(owner, turns=3)
    scope, sister, _ = remembered(owner, session)
    store.update(scope, sister, text="My sister Jane lives in Boston now.", actor="agent")
    page = logged_in(owner).get(page_url(scope)).content.decode()
    assert "My sister Jane lives in Boston now." in page
    assert f'href="/sessions/{session.public_id}/#m2"' in page  # the message it came from
    assert "<code>add</code> by offline" in page
    assert "<code>update</code> by agent" in page
    listing = logged_in(owner).get("/memories/").content.decode()
    assert page_url(scope) in listing


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_nobody_but_the_owner_and_staff_sees_or_changes_a_scope(
    owner: User, who: str, request: pytest.FixtureRequest, staff: User
) -> None:
    scope, sister, _ = remembered(owner)
    _, hidden = form(logged_in(owner), scope, sister, "forget")
    other = logged_in(request.getfixturevalue(who))
    assert other.get(page_url(scope)).status_code == 404
    assert other.post(f"{page_url(scope)}{sister}/forget/", hidden).status_code == 404
    assert page_url(scope) not in other.get("/memories/").content.decode()
    assert store.get(scope, sister).status == "active"
    assert logged_in(staff).get(page_url(scope)).status_code == 200
    assert page_url(scope) in logged_in(staff).get("/memories/").content.decode()
    assert Client().get(page_url(scope)).status_code == 302  # to the login page


def test_forget_is_done_once_and_a_second_submission_does_nothing(owner: User) -> None:
    scope, sister, _ = remembered(owner)
    client = logged_in(owner)
    url, hidden = form(client, scope, sister, "forget")
    first = client.post(url, {**hidden, "reason": "moved"})
    assert first.status_code == 303
    again = client.post(url, {**hidden, "reason": "moved"})
    assert again.status_code == 409
    assert "Already done" in again.content.decode()
    history = store.history(scope, sister)
    assert [(v.action, v.actor, v.reason) for v in history][1:] == [
        ("forget", "operator:olivia", "moved")
    ]
    assert (
        ActionToken.objects.filter(token=once.spent_key(hidden["once"], "memory_forget")).count()
        == 1
    )
    # Forgotten memories are listed on asking, and can be restored (once).
    forgotten = client.get(page_url(scope) + "?status=forgotten").content.decode()
    assert "My sister Jane lives in Boston." in forgotten


def test_a_forgotten_memory_is_restored_and_an_edit_adds_a_version(
    staff: User, owner: User
) -> None:
    scope, sister, tea = remembered(owner)
    store.forget(scope, sister, actor="agent")
    client = logged_in(staff)
    page = client.get(page_url(scope) + "?status=forgotten").content.decode()
    url = f"{page_url(scope)}{sister}/restore/"
    at = page.index(f'action="{url}"')
    hidden = dict(
        re.findall(r'name="(once|version)" value="([^"]+)"', page[at : page.index("</form>", at)])
    )
    assert client.post(url, hidden).status_code == 303
    assert store.get(scope, sister).status == "active"
    url, hidden = form(client, scope, tea, "edit")
    assert client.post(url, {**hidden, "text": "  "}).status_code == 400
    assert client.post(url, {**hidden, "text": "I like jasmine tea."}).status_code == 303
    assert [v.text for v in store.history(scope, tea)] == [
        "I like green tea.",
        "I like jasmine tea.",
    ]
    assert store.history(scope, tea)[-1].actor == "operator:stella"


def test_a_memory_changed_since_the_page_was_opened_is_not_changed(owner: User) -> None:
    scope, sister, _ = remembered(owner)
    client = logged_in(owner)
    url, hidden = form(client, scope, sister, "edit")
    store.update(scope, sister, text="My sister Jane lives in Denver.", actor="model:gpt-4o-mini")
    refused = client.post(url, {**hidden, "text": "My sister lives in Boston."})
    assert refused.status_code == 409
    assert "version 2 (update by model:gpt-4o-mini), not 1" in refused.content.decode()
    assert store.get(scope, sister).text == "My sister Jane lives in Denver."
    # Nothing was spent: the same form, opened again, works.
    url, hidden = form(client, scope, sister, "edit")
    assert client.post(url, {**hidden, "text": "My sister lives in Boston."}).status_code == 303


def test_search_and_filters_narrow_the_list(owner: User) -> None:
    scope, _, _ = remembered(owner)
    other = Provenance("s9", 0, 0, "agent", "2025-06-01T10:00:00+00:00")
    store.add(scope, text="We flew to Oslo in May 2024.", kind="event", provenance=other)
    client = logged_in(owner)

    def shown(query: str) -> list[str]:
        page = client.get(page_url(scope) + query).content.decode()
        return re.findall(r'<p class="memory-text">([^<]+)</p>', page)

    assert len(shown("")) == 3
    assert shown("?q=Oslo") == ["We flew to Oslo in May 2024."]
    assert shown("?kind=preference") == ["I like green tea."]
    assert shown("?session=s9") == ["We flew to Oslo in May 2024."]
    assert shown("?since=2999-01-01") == []
    assert client.get(page_url(scope) + "?kind=opinion").status_code == 400
