"""A session's long-term memories are its owner's, whatever a file, a log or a fork says.

Issue 27: Bob exported his own remembering session, edited its session_meta to
name Alice's scope, imported it, and his chats then recalled Alice's memories
and wrote his into her scope. Every way a session comes to be (import, import
again, restore from a file, fork by its owner or by staff, restore before a
compaction) and every way it is acted on (the chat, rewind, undo) now use the
scope of the session's owner (``memories.scope_of``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from memory import BackgroundMemory, ChatMessage, CompactionMemoryConfig, Scope
from memory.background import Provenance
from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.sessions import memories, operations
from motus_web.sessions.long_term_store import DjangoLongTermStore, owner_scope
from motus_web.sessions.models import ImportJob, Session

from .helpers import confirmation_form, import_upload, logged_in, make_session, run_tasks
from .test_chat_background_memory import extraction, remembering_chat, server, turn

__all__ = ["server"]  # the scripted model server fixture, shared with the chat's tests

store = DjangoLongTermStore()
PIN = "The user's bank PIN is 4417."


def alices_pin(alice: User) -> Scope:
    """Alice's scope, holding her PIN."""
    scope = owner_scope(alice.pk)
    store.add(scope, text=PIN, kind="fact", provenance=Provenance(None, 0, 0, "test", "2026-12-01"))
    return scope


def exported(user: User, session: Session) -> list[dict[str, Any]]:
    response = logged_in(user).get(reverse("dashboard:export_jsonl", args=[session.public_id]))
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[attr-defined]
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def naming(records: list[dict[str, Any]], scope: Scope) -> bytes:
    """The log with its session_meta edited to name ``scope``: the attack's one field."""
    meta = {**records[0], "long_term": {**records[0]["long_term"], "scope": scope.to_dict()}}
    return b"\n".join(json.dumps(r).encode() for r in [meta, *records[1:]]) + b"\n"


def bobs_edited_export(bob: User, alice_scope: Scope) -> bytes:
    """Bob's own remembering chat, with a turn, exported and edited to name Alice's scope."""
    mine = remembering_chat(bob)
    memory = memories.restore(mine)
    assert isinstance(memory, BackgroundMemory)

    async def say_hello() -> None:
        await memory.add_message(ChatMessage(role="user", content="Hello."))
        await memory.add_message(ChatMessage(role="assistant", content="Hi."))
        await memory.drain()
        await memory.flush()

    async_to_sync(say_hello)()
    return naming(exported(bob, mine), alice_scope)


def imported_session(page: str) -> Session:
    job = ImportJob.objects.order_by("-pk").first()
    assert job is not None, page
    assert job.report is not None, page
    return Session.objects.get(public_id=job.report["imported"][0])


def assert_owned(session: Session, user: User) -> None:
    """The session reads and writes ``user``'s memories: in its record and restored."""
    own = owner_scope(user.pk).to_dict()
    assert session.record_extra["long_term"]["scope"] == own
    restored = memories.restore(session)
    assert isinstance(restored, BackgroundMemory)
    assert restored.scope.to_dict() == own


@pytest.mark.django_db
def test_an_imported_file_naming_anothers_scope_gets_the_importers_with_a_note(
    owner: User, outsider: User
) -> None:
    alice = alices_pin(owner)
    edited = bobs_edited_export(outsider, alice)
    page = import_upload(logged_in(outsider), "mine.jsonl", edited).content.decode()
    session = imported_session(page)
    assert session.owner_id == outsider.pk
    assert_owned(session, outsider)
    assert "not yours: it was dropped" in page
    assert f"user_id=user-{owner.pk}" in page
    restored = memories.restore(session)
    assert isinstance(restored, BackgroundMemory)
    assert restored.search("What is my bank PIN?") == []
    # Exported again, the log names his own scope, and importing it again changes nothing.
    assert (
        exported(outsider, session)[0]["long_term"]["scope"] == owner_scope(outsider.pk).to_dict()
    )
    again = import_upload(logged_in(outsider), "mine.jsonl", edited).content.decode()
    assert "Already there" in again
    assert Session.objects.filter(owner=outsider, memory_type="background").count() == 2


@pytest.mark.django_db
def test_restoring_the_edited_file_gets_the_restorers_scope_with_a_note(
    owner: User, outsider: User
) -> None:
    edited = bobs_edited_export(outsider, alices_pin(owner))
    client = logged_in(outsider)
    page = client.get(reverse("dashboard:restore_upload_form")).content.decode()
    url, hidden = confirmation_form(page, reverse("dashboard:restore_upload"))
    response = client.post(url, {**hidden, "file": SimpleUploadedFile("mine.jsonl", edited)})
    assert response.status_code == 303
    assert run_tasks() == 1
    job_page = client.get(response["Location"]).content.decode()
    assert "not yours: it was dropped" in job_page
    session = imported_session(job_page)
    assert session.owner_id == outsider.pk
    assert memories.scope_of(session) == owner_scope(outsider.pk)
    # A restore from a file continues the conversation without long-term memory.
    assert session.memory_type == "compact"
    assert "long_term" not in session.record_extra


@pytest.mark.django_db
def test_a_stored_log_naming_anothers_scope_is_restored_in_the_owners(
    owner: User, outsider: User
) -> None:
    # A session stored before this fix, its session_meta naming Alice's scope:
    # every restore (the chat's, undo's, rewind's, a fork's) takes the owner's.
    bob = remembering_chat(outsider)
    Session.objects.filter(pk=bob.pk).update(
        record_extra={"long_term": {"scope": alices_pin(owner).to_dict()}}
    )
    bob.refresh_from_db()
    assert memories.scope_of(bob) == owner_scope(outsider.pk)
    for restored in (memories.restore(bob), memories.restore_view(bob)):
        assert isinstance(restored, BackgroundMemory)
        assert restored.scope == owner_scope(outsider.pk)
        assert restored.search("bank PIN") == []
    with operations.writing(bob, "rewind", as_of=bob.record_count) as live:
        assert isinstance(live, BackgroundMemory)
        assert live.scope == owner_scope(outsider.pk)


@pytest.mark.django_db
def test_a_session_nobody_owns_remembers_in_a_scope_no_user_owns(owner: User) -> None:
    session = remembering_chat(owner, "trips")
    Session.objects.filter(pk=session.pk).update(owner=None)
    session.refresh_from_db()
    assert memories.scope_of(session) == Scope(user_id=memories.UNOWNED, agent_id="trips")


@pytest.mark.django_db(transaction=True)
async def test_bob_chatting_in_his_edited_import_recalls_nothing_of_alices_and_writes_his_own(
    owner: User, outsider: User, server: ScriptedServer
) -> None:
    alice = await database_sync_to_async(alices_pin)(owner)
    mine = await database_sync_to_async(remembering_chat)(outsider)
    server.add("openai", ScriptedReply(text="Hi."), extraction())
    await turn(outsider, mine, "Hello.")
    records = await database_sync_to_async(exported)(outsider, mine)
    edited = naming(records, alice)

    def bob_imports() -> Session:
        page = import_upload(logged_in(outsider), "mine.jsonl", edited)
        return imported_session(page.content.decode())

    session = await database_sync_to_async(bob_imports)()
    server.add(
        "openai",
        ScriptedReply(text="I do not know your PIN."),
        extraction({"kind": "fact", "text": "The user's cat is called Tom.", "action": "add"}),
    )
    await turn(outsider, session, "What is my bank PIN? My cat is called Tom.")
    asked = json.dumps(server.requests[2].body)
    assert "4417" not in asked
    alices = await database_sync_to_async(store.memories)(alice)
    assert [m.text for m in alices] == [PIN]  # nothing he said landed in her scope
    his = await database_sync_to_async(store.memories)(owner_scope(outsider.pk))
    assert [m.text for m in his] == ["The user's cat is called Tom."]
    # Alice's next chat is reminded of her PIN, not of Bob's cat.
    theirs = await database_sync_to_async(remembering_chat)(owner)
    server.add("openai", ScriptedReply(text="4417."), extraction())
    await turn(owner, theirs, "What is my bank PIN, and my cat's name?")
    reminded = server.requests[4].body["messages"][0]["content"]
    assert "4417" in reminded
    assert "Tom" not in reminded


@pytest.mark.django_db(transaction=True)
async def test_a_staff_fork_of_alices_chat_remembers_in_staffs_scope(
    owner: User, staff: User, server: ScriptedServer
) -> None:
    alice = await database_sync_to_async(alices_pin)(owner)
    hers = await database_sync_to_async(remembering_chat)(owner)
    server.add("openai", ScriptedReply(text="Your PIN is 4417."), extraction())
    await turn(owner, hers, "What is my bank PIN?")

    def fork_as(user: User) -> Session:
        reply = hers.messages.filter(role="assistant").order_by("seq").first()
        assert reply is not None
        client = logged_in(user)
        page = client.get(reverse("dashboard:fork_confirm", args=[hers.public_id, reply.seq]))
        url, hidden = confirmation_form(page.content.decode())
        response = client.post(url, hidden)
        assert response.status_code == 303, response.content.decode()
        return Session.objects.exclude(pk=hers.pk).get(owner=user)

    fork = await database_sync_to_async(fork_as)(staff)
    await database_sync_to_async(assert_owned)(fork, staff)
    server.add(
        "openai",
        ScriptedReply(text="I cannot tell."),
        extraction({"kind": "fact", "text": "The user's desk is on floor 3.", "action": "add"}),
    )
    await turn(staff, fork, "My desk is on floor 3. What is my bank PIN?")
    # The request after staff's message carries staff's memories (none), not Alice's.
    assert "4417" not in server.requests[2].body["messages"][0]["content"]
    alices = await database_sync_to_async(store.memories)(alice)
    assert [m.text for m in alices] == [PIN]
    staffs = await database_sync_to_async(store.memories)(owner_scope(staff.pk))
    assert [m.text for m in staffs] == ["The user's desk is on floor 3."]
    # Her own fork keeps her scope.
    own = await database_sync_to_async(fork_as)(owner)
    await database_sync_to_async(assert_owned)(own, owner)


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_nobody_else_forks_a_remembering_chat(
    owner: User, who: str, request: pytest.FixtureRequest
) -> None:
    hers = remembering_chat(owner)
    client = logged_in(request.getfixturevalue(who))
    page = client.get(reverse("dashboard:fork_confirm", args=[hers.public_id, 0]))
    assert page.status_code == 404
    assert Session.objects.count() == 1


@pytest.mark.django_db
def test_a_what_if_replay_of_a_remembering_chat_touches_no_long_term_memory(
    owner: User, staff: User
) -> None:
    from motus_web.chat.replay import ReplaySettings, create_replay

    hers = remembering_chat(owner)
    settings = ReplaySettings(
        token_threshold=None, safety_ratio=0.8, max_tool_result_tokens=1000, model_name="gpt-4o"
    )
    replay = create_replay(hers, settings, staff)
    assert replay.owner_id == staff.pk
    assert replay.memory_type == "compact"
    assert "long_term" not in replay.record_extra


@pytest.mark.django_db
def test_the_memories_page_names_only_the_sessions_the_viewer_may_see(
    owner: User, teammate: User, staff: User
) -> None:
    hers = make_session(owner, turns=2)
    hers.title = "Alice's private chat"
    hers.save(update_fields=["title"])
    staffs = make_session(staff, turns=2)
    staffs.title = "Staff's secret chat"
    staffs.save(update_fields=["title"])
    scope = owner_scope(owner.pk)
    for session in (hers, staffs):
        link = Provenance(session.public_id, 1, 1, "offline", "2026-12-01T10:00:00+00:00")
        store.add(scope, text="The user likes tea.", kind="preference", provenance=link)
    url = f"/memories/{scope.user_id}/"
    page = logged_in(owner).get(url).content.decode()
    assert "Alice&#x27;s private chat" in page
    assert "Staff" not in page
    assert staffs.public_id not in page
    assert "another session" in page
    seen_by_staff = logged_in(staff).get(url).content.decode()
    assert "Staff&#x27;s secret chat" in seen_by_staff
    assert "Alice&#x27;s private chat" in seen_by_staff
    assert logged_in(teammate).get(url).status_code == 404


@pytest.mark.django_db
def test_a_new_session_naming_anothers_scope_is_made_in_its_owners(
    owner: User, outsider: User
) -> None:
    theirs = owner_scope(owner.pk, "trips")
    session = operations.create_session(
        outsider,
        CompactionMemoryConfig(),
        title="Mine",
        model_name="gpt-4o",
        memory_type="background",
        extra={"long_term": {"scope": theirs.to_dict()}},
    )
    assert session.record_extra["long_term"]["scope"] == owner_scope(outsider.pk, "trips").to_dict()
    assert memories.scope_of(session) == owner_scope(outsider.pk, "trips")
