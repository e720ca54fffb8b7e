"""The chat pages: a new chat, a session's chat, and creating a replay."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings

from motus_web.sessions.models import Session

from .chat_helpers import chat_session, scripted_model
from .helpers import logged_in, make_session

pytestmark = pytest.mark.django_db


def test_without_a_model_the_new_chat_page_says_how_to_configure_one(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = ()
    response = logged_in(owner).get("/chat/new/")
    assert response.status_code == 200
    assert b"No chat model is configured" in response.content
    assert b"MOTUS_CHAT_LOCAL_BASE_URL" in response.content


def test_a_new_chat_is_a_session_of_its_owner_with_the_settings_chosen(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    response = logged_in(owner).post(
        "/chat/new/",
        {
            "title": "Trip",
            "model": "scripted",
            "system_prompt": "Be brief.",
            "token_threshold": 900,
        },
    )
    session = Session.objects.get(title="Trip")
    assert response.status_code == 302
    assert response["Location"] == f"/sessions/{session.public_id}/chat/"
    assert session.owner == owner
    assert (session.model_name, session.system_prompt) == ("gpt-4o", "Be brief.")
    assert session.config["token_threshold"] == 900
    assert session.config["compact_model_name"] == "gpt-4o"


def test_the_chat_page_shows_the_latest_records_and_never_the_key(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    session = make_session(owner, turns=2)
    response = logged_in(owner).get(f"/sessions/{session.public_id}/chat/")
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="m0"' in body
    assert 'id="m7"' in body
    assert f'data-ws-path="/ws/sessions/{session.public_id}/"' in body
    assert 'id="composer"' in body
    assert "test-key-123" not in body
    assert "127.0.0.1:9" not in body
    assert "<script>" not in body  # only our static script: no inline code for the CSP


def test_the_chat_page_of_a_session_without_models_still_shows_it(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = ()
    session = chat_session(owner)
    response = logged_in(owner).get(f"/sessions/{session.public_id}/chat/")
    assert b"No chat model is configured" in response.content
    assert b'id="composer"' not in response.content


def test_nobody_else_sees_a_chat(owner: User, outsider: User) -> None:
    session = chat_session(owner)
    assert logged_in(outsider).get(f"/sessions/{session.public_id}/chat/").status_code == 404
    assert logged_in(outsider).get(f"/sessions/{session.public_id}/replay/").status_code == 404


def test_a_replay_is_a_new_session_linked_to_the_original(owner: User) -> None:
    original = make_session(owner, turns=3, filler=40, title="Booking")
    client = logged_in(owner)
    form = client.get(f"/sessions/{original.public_id}/replay/")
    assert form.status_code == 200
    assert b"<svg" in form.content
    assert b'class="original"' in form.content

    response = client.post(
        f"/sessions/{original.public_id}/replay/",
        {
            "token_threshold": 500,
            "safety_ratio": 0.75,
            "model_name": "gpt-4o",
            "max_tool_result_tokens": 1000,
            "compactor": "offline",
        },
    )
    replay = Session.objects.get(parent=original)
    assert response["Location"] == f"/sessions/{replay.public_id}/chat/"
    assert replay.title == "Replay of Booking"
    assert replay.config["token_threshold"] == 500
    assert replay.config["max_tool_result_tokens"] == 1000
    assert replay.config["compact_model_name"] is None
    page = client.get(response["Location"]).content.decode()
    assert 'id="replay-controls"' in page
    assert 'id="replay-curve"' in page


def test_a_replay_with_settings_out_of_range_is_refused(owner: User) -> None:
    original = make_session(owner, turns=1)
    response = logged_in(owner).post(
        f"/sessions/{original.public_id}/replay/",
        {
            "token_threshold": 5,
            "safety_ratio": 2,
            "model_name": "gpt-4o",
            "max_tool_result_tokens": 0,
        },
    )
    assert response.status_code == 400
    assert not Session.objects.filter(parent=original).exists()


def test_the_chat_page_costs_the_same_few_queries_however_long_the_session(
    owner: User, settings: Settings, django_assert_max_num_queries: object
) -> None:
    settings.MOTUS_CHAT_MODELS = ()
    client = logged_in(owner)
    short, long = make_session(owner, turns=1), make_session(owner, turns=40)
    client.get(f"/sessions/{short.public_id}/chat/")  # warm the session and user caches
    for session in (short, long):
        with django_assert_max_num_queries(6):  # type: ignore[operator]
            assert client.get(f"/sessions/{session.public_id}/chat/").status_code == 200


def test_the_chat_pages_answer_head_like_get(owner: User) -> None:
    from django.test import Client

    session = make_session(owner)
    urls = [
        "/chat/new/",
        f"/sessions/{session.public_id}/chat/",
        f"/sessions/{session.public_id}/replay/",
    ]
    for url in urls:
        assert logged_in(owner).head(url).status_code == 200, url
        assert Client().head(url).status_code == 302, url  # to the login page


def agent_memory_estimate(session: Session, settings: Settings) -> tuple[int, int]:
    """What a chat turn's memory estimates for ``session`` before any new message,
    and its tool schemas' share, built as a turn builds it (restore, then the agent)."""
    from memory import ReActAgent
    from motus_web.chat.tools import CHAT_TOOLS
    from motus_web.chat.turns import restore_memory

    model = settings.MOTUS_CHAT_MODELS[0]
    client = model.client()
    memory = restore_memory(session, model, client)
    ReActAgent(client=client, model_name=model.model, memory=memory, tools=list(CHAT_TOOLS))
    return memory.estimate_context_tokens(), memory.tool_schema_tokens


def test_a_threshold_under_what_every_request_carries_is_refused_naming_the_floor(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    from memory.log import records
    from motus_web.sessions.log_store import DatabaseLogStore

    prompt = ("You are a helpful assistant. " * 20).strip()  # as the form keeps it
    client = logged_in(owner)
    # The floor a turn's memory would count for this prompt: a session with only it.
    public_id = "floor-probe"
    DatabaseLogStore().append(
        public_id,
        records.SessionMeta(
            ts=records.now_iso(),
            session_id=public_id,
            system_prompt=prompt,
            config={"token_threshold": 5000, "compact_model_name": "gpt-4o"},
            model_name="gpt-4o",
            format_version=records.FORMAT_VERSION,
            memory_type="compaction",
        ),
    )
    floor, tools = agent_memory_estimate(Session.objects.get(public_id=public_id), settings)
    assert tools > 0

    form = {"title": "Tight", "model": "scripted", "system_prompt": prompt}
    refused = client.post("/chat/new/", {**form, "token_threshold": floor})
    accepted = client.post("/chat/new/", {**form, "token_threshold": floor + 1})

    assert refused.status_code == 400
    page = refused.content.decode()
    assert f"At least {floor + 1:,} tokens" in page
    assert f"alone take {floor:,} tokens of every request ({tools:,} of them tool schemas)" in page
    assert not Session.objects.filter(title="Tight", config__token_threshold=floor).exists()
    assert accepted.status_code == 302


def test_the_chat_gauge_names_the_tool_schemas_every_request_carries(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    session = make_session(owner, turns=2, title="Chatted")
    Session.objects.filter(pk=session.pk).update(model_name="gpt-4o")
    session.refresh_from_db()
    _, tools = agent_memory_estimate(session, settings)

    chat_page = logged_in(owner).get(f"/sessions/{session.public_id}/chat/").content.decode()

    assert f"the tool schemas ({tools:,} tokens for calculator, current_time" in chat_page


def test_the_new_chat_page_names_the_least_threshold_that_leaves_room_to_talk(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    from motus_web.chat.forms import NewChatForm
    from motus_web.chat.tools import CONVERSATION_ROOM_TOKENS

    fixed = NewChatForm().overhead()
    assert fixed is not None
    assert fixed.recall_tokens == 0
    page = logged_in(owner).get("/chat/new/").content.decode()
    suggested = fixed.context_tokens + CONVERSATION_ROOM_TOKENS
    assert (
        f"The least threshold that leaves room for the conversation is <strong>{suggested:,}"
        in (page)
    )
    assert "every turn would compact" not in page


def test_a_threshold_that_leaves_no_room_above_the_recall_budget_is_warned_before_creating(
    owner: User, settings: Settings
) -> None:
    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    from memory.background.memory import DEFAULT_RECALL_BUDGET

    client = logged_in(owner)
    fields = {"title": "Tight", "model": "scripted", "system_prompt": "Be brief."}
    plain = client.post(
        "/chat/new/check/", {**fields, "token_threshold": 4000}, HTTP_HX_REQUEST="true"
    )
    remembering = client.post(
        "/chat/new/check/",
        {**fields, "token_threshold": 600, "remember": "on"},
        HTTP_HX_REQUEST="true",
    )

    assert plain.status_code == remembering.status_code == 200
    assert "<html" not in remembering.content.decode()  # the fragment alone
    assert "every turn would compact" not in plain.content.decode()
    warned = remembering.content.decode()
    assert "A threshold of 600 leaves nothing for the conversation" in warned
    assert f"up to {DEFAULT_RECALL_BUDGET:,} of recalled memories" in warned
    # Nothing is created by asking.
    assert not Session.objects.filter(title="Tight").exists()


def test_asking_about_a_threshold_needs_a_login(settings: Settings) -> None:
    from django.test import Client

    settings.MOTUS_CHAT_MODELS = (scripted_model("http://127.0.0.1:9/v1"),)
    response = Client().post("/chat/new/check/", {"token_threshold": 600})
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
