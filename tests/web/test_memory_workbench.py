"""The Memories page as a workbench: add by hand, split one into several (the owner's,
exactly once), and for each reply the memories placed with the parts of their scores."""

from __future__ import annotations

import re
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from memory import (
    BackgroundMemory,
    ChatMessage,
    CompactionMemoryConfig,
    InMemoryLogStore,
    Scope,
    SQLiteLongTermStore,
)
from memory.background import Filters, Provenance
from motus_web.sessions.log_store import DatabaseLogStore
from motus_web.sessions.long_term_store import DjangoLongTermStore, owner_scope
from motus_web.sessions.models import Session

from .helpers import logged_in

pytestmark = pytest.mark.django_db

store = DjangoLongTermStore()
HX = {"HTTP_HX_REQUEST": "true"}


def page_url(scope: Scope) -> str:
    return f"/memories/{scope.user_id}/named/{scope.agent_id}/"


def hidden_of(page: str, action: str) -> dict[str, str]:
    """The hidden fields of the form posting to ``action``, as the page gives them."""
    at = page.index(f'action="{action}"')
    section = page[at : page.index("</form>", at)]
    return dict(re.findall(r'name="(once|version)" value="([^"]+)"', section))


def a_scope(owner: User) -> tuple[Scope, str]:
    scope = owner_scope(owner.pk, "trips")
    link = Provenance("s1", 2, 3, "offline", "2025-05-01T10:00:00+00:00")
    memory, _ = store.add(
        scope,
        text="My sister Jane lives in Boston and I like green tea.",
        kind="fact",
        provenance=link,
    )
    store.link(scope, memory.id, Provenance("s2", 7, 7, "offline", "2025-06-01T10:00:00+00:00"))
    return scope, memory.id


@pytest.mark.parametrize("headers", [{}, HX], ids=["full page", "htmx"])
def test_the_owner_adds_a_memory_by_hand_once(owner: User, headers: dict[str, str]) -> None:
    scope, _ = a_scope(owner)
    client = logged_in(owner)
    page = client.get(page_url(scope), **headers)  # type: ignore[arg-type]
    assert page.status_code == 200
    text = page.content.decode()
    assert "Add a memory by hand" in text
    add = f"{page_url(scope)}add/"
    form = {**hidden_of(text, add), "text": "  I  am vegetarian. ", "kind": "preference"}
    done = client.post(add, form, **headers)  # type: ignore[arg-type]
    assert done.status_code == 303
    added = [m for m in store.memories(scope) if m.text == "I am vegetarian."]
    assert len(added) == 1
    assert added[0].kind == "preference"
    assert [(p.session_id, p.extractor) for p in added[0].provenance] == [(None, "operator:olivia")]
    again = client.post(add, form, **headers)  # type: ignore[arg-type]
    assert again.status_code == 409
    assert "Already done" in again.content.decode()
    assert store.count(scope) == 2


def test_an_empty_or_unknown_kind_memory_is_refused_and_nothing_is_added(owner: User) -> None:
    scope, _ = a_scope(owner)
    client = logged_in(owner)
    add = f"{page_url(scope)}add/"
    hidden = hidden_of(client.get(page_url(scope)).content.decode(), add)
    assert client.post(add, {**hidden, "text": "   ", "kind": "fact"}).status_code == 400
    assert client.post(add, {**hidden, "text": "x", "kind": "rumour"}).status_code == 400
    assert client.post(add, {**hidden, "text": "x" * 2001, "kind": "fact"}).status_code == 400
    assert store.count(scope) == 1


def test_the_owner_splits_a_memory_and_every_part_keeps_its_provenance(owner: User) -> None:
    scope, memory_id = a_scope(owner)
    client = logged_in(owner)
    split = f"{page_url(scope)}{memory_id}/split/"
    page = client.get(page_url(scope)).content.decode()
    hidden = hidden_of(page, split)
    one = client.post(split, {**hidden, "parts": "Just one statement."})
    assert one.status_code == 400
    assert store.get(scope, memory_id).status == "active"  # nothing changed
    parts = "My sister Jane lives in Boston.\n\n I like green tea. \n"
    done = client.post(split, {**hidden, "parts": parts})
    assert done.status_code == 303
    old = store.get(scope, memory_id)
    assert old.status == "superseded"
    assert "split by operator:olivia into 2" in store.history(scope, memory_id)[-1].reason
    active = {m.text: m for m in store.memories(scope, Filters(status="active"))}
    assert set(active) == {"My sister Jane lives in Boston.", "I like green tea."}
    for memory in active.values():
        assert [(p.session_id, p.first_seq) for p in memory.provenance] == [("s1", 2), ("s2", 7)]
        assert memory.kind == "fact"
    assert old.superseded_by == active["My sister Jane lives in Boston."].id
    # The same form again: done once; the memory's page shows the chain.
    assert client.post(split, {**hidden, "parts": parts}).status_code == 409
    assert store.count(scope) == 2


def test_a_split_of_a_memory_changed_since_the_page_is_refused(owner: User) -> None:
    scope, memory_id = a_scope(owner)
    client = logged_in(owner)
    split = f"{page_url(scope)}{memory_id}/split/"
    hidden = hidden_of(client.get(page_url(scope)).content.decode(), split)
    store.update(scope, memory_id, text="My sister Jane lives in Lisbon.", actor="agent")
    refused = client.post(split, {**hidden, "parts": "a b c.\nd e f."})
    assert refused.status_code == 409
    assert "changed since this page was opened" in refused.content.decode()
    assert store.count(scope) == 1


def test_only_the_owner_may_add_or_split(
    owner: User, staff: User, teammate: User, outsider: User
) -> None:
    scope, memory_id = a_scope(owner)
    split = f"{page_url(scope)}{memory_id}/split/"
    add = f"{page_url(scope)}add/"
    hidden = hidden_of(logged_in(owner).get(page_url(scope)).content.decode(), split)
    staff_page = logged_in(staff).get(page_url(scope)).content.decode()
    assert "Add a memory by hand" not in staff_page
    assert split not in staff_page
    refused = logged_in(staff).post(split, {**hidden, "parts": "a b c.\nd e f."})
    assert refused.status_code == 403
    assert logged_in(staff).post(add, {"text": "x y z", "kind": "fact"}).status_code == 403
    for other in (teammate, outsider):
        assert logged_in(other).post(add, {"text": "x", "kind": "fact"}).status_code == 404
        assert logged_in(other).post(split, {**hidden, "parts": "a.\nb."}).status_code == 404
    assert Client().post(add, {"text": "x", "kind": "fact"}).status_code == 302  # to log in
    assert [m.id for m in store.memories(scope)] == [memory_id]
    assert store.get(scope, memory_id).status == "active"


def recalled_session(owner: User) -> Session:
    """A background session whose second reply's request carried recalled memories,
    logged by the library's own recall and written to the database as an import would."""
    scope = owner_scope(owner.pk, "trips")
    # The step page reads the log only; the memory recalls from a store of its own
    # (the Django store cannot be called from the event loop of this sync test).
    own = SQLiteLongTermStore()
    for text in ("My sister Jane lives in Boston.", "I moved to Lisbon in 2019."):
        own.add(scope, text=text, kind="fact", provenance=Provenance("s0", 0, 0, "offline", "t"))
    session_id = uuid.uuid4().hex
    log = InMemoryLogStore()
    memory = BackgroundMemory(
        store=own,
        scope=scope,
        log_store=log,
        enable_memory_tools=False,
        config=CompactionMemoryConfig(session_id=session_id),
    )

    async def talk() -> None:
        await memory.add_message(ChatMessage.user("Hello there."))
        await memory.add_message(ChatMessage.assistant("Hi!"))
        await memory.add_message(ChatMessage.user("Where does my sister Jane live?"))
        await memory.add_message(ChatMessage.assistant("In Boston."))
        await memory.drain()

    async_to_sync(talk)()
    DatabaseLogStore().extend(session_id, list(log.read(session_id)))
    Session.objects.filter(public_id=session_id).update(owner=owner)
    return Session.objects.get(public_id=session_id)


@pytest.mark.parametrize("headers", [{}, HX], ids=["full page", "htmx"])
def test_the_step_page_shows_each_placed_memory_and_the_parts_of_its_score(
    owner: User, headers: dict[str, str]
) -> None:
    session = recalled_session(owner)
    client = logged_in(owner)
    replies = list(session.messages.filter(role="assistant").order_by("seq"))
    # "Hello there." shares no word with a memory: the newest are placed, by recency alone.
    first = client.get(reverse("dashboard:step_detail", args=[session.public_id, replies[0].seq]))
    greeting = first.content.decode()
    assert "Memories placed: 2" in greeting
    assert "recalled for &ldquo;Hello there.&rdquo;" in greeting
    step = reverse("dashboard:step_detail", args=[session.public_id, replies[1].seq])
    response = client.get(step, headers={"HX-Request": "true"} if headers else None)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Memories placed: 2" in page
    assert "recalled for &ldquo;Where does my sister Jane live?&rdquo;" in page
    at = page.index('id="recalled"')
    rows = re.findall(r"<tr><td><code>(\w+)</code> (.*?)</td>(.*?)</tr>", page[at:])
    assert rows[0][1].endswith("My sister Jane lives in Boston.")
    cells = re.findall(r"<td>(?:<strong>)?([\d.]+)", rows[0][2])
    total, text, names, time, recency, importance = (float(c) for c in cells)
    assert (text, names, time) == (1.0, 1.0, 0.0)
    assert total == pytest.approx(text + 0.5 * names + 0.35 * recency + 0.1 * importance, abs=0.02)


def test_a_block_without_recorded_scores_is_shown_as_such(owner: User) -> None:
    session = recalled_session(owner)
    recall = session.context_changes.filter(kind="memory_recall").order_by("position").last()
    assert recall is not None
    extra = dict(recall.record_extra)
    extra.pop("scores")  # a log written before scores were recorded
    recall.record_extra = extra
    recall.save()
    reply = session.messages.filter(role="assistant").order_by("-seq").first()
    assert reply is not None
    page = logged_in(owner).get(
        reverse("dashboard:step_detail", args=[session.public_id, reply.seq])
    )
    text = page.content.decode()
    assert "Memories placed: 2" in text
    assert "Their scores were not recorded" in text
