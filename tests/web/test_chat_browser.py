"""The live chat in a real browser: type a message, watch the reply stream in."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.layers import channel_layers
from channels.routing import ProtocolTypeRouter
from django.contrib.auth.models import User
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.db import connections
from pytest_django import Settings

from memory.testing.scripted_server import ScriptedReply, ScriptedServer
from motus_web.asgi import application, django_asgi_app
from motus_web.chat.frames import MAX_FRAME_BYTES
from motus_web.chat.replay import ReplaySettings, create_replay
from motus_web.providers import ChatModel
from motus_web.sessions.models import Session

from .chat_helpers import chat_session, scripted_model
from .helpers import make_session
from .test_browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def makefile_ws_max_size() -> int:
    """The ``--ws-max-size`` that ``make run`` gives uvicorn."""
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    found = re.search(r"--ws-max-size (\d+)", makefile)
    assert found, "make run sets no --ws-max-size"
    return int(found.group(1))


@pytest.fixture
def asgi_url() -> Iterator[str]:
    """The whole ASGI application (websockets too) under uvicorn on 127.0.0.1.

    pytest-django's live server speaks WSGI only; this one serves static files
    from the finders, as ``runserver`` would, since tests run without collectstatic.
    """
    import uvicorn

    app = ProtocolTypeRouter(
        {
            "http": ASGIStaticFilesHandler(django_asgi_app),
            "websocket": application.application_mapping["websocket"],
        }
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        ws="websockets-sansio",
        ws_max_size=makefile_ws_max_size(),  # as `make run` starts it
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=5)
    # The server's threads took database connections of their own; on
    # PostgreSQL they wait idle in psycopg's pool, which would keep the test
    # database from being dropped: close them, as a server process does at exit.
    for connection in connections.all():
        if hasattr(connection, "close_pool"):  # PostgreSQL (a no-op without a pool)
            connection.close_pool()
    # A consumer of this server's loop may have been receiving when it stopped:
    # the next test's loop gets a layer of its own (channels_redis refuses two loops).
    channel_layers.backends.clear()


@pytest.fixture
def model_server(settings: Settings) -> Iterator[ScriptedServer]:
    calc = {"id": "call_1", "name": "calculator", "arguments": {"expression": "6 * 7"}}
    replies = [
        ScriptedReply(tool_calls=[calc]),
        ScriptedReply(text="Six times seven is 42, as the calculator says.", chunk_delay_s=0.05),
    ]
    with ScriptedServer(openai=replies, api_key="test-key-123") as server:
        settings.MOTUS_CHAT_MODELS = (scripted_model(server.openai_base_url),)
        yield server


@pytest.fixture
def page() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `make test` installs it when run as root")
    from playwright.sync_api import expect, sync_playwright

    # A loaded CI machine (two test workers, a database, a browser) can take
    # more than Playwright's 5 s default to show a streamed turn: waits end at
    # the expected state, so a longer bound only delays a real failure.
    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        SCREENSHOTS.mkdir(exist_ok=True)
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        # A context of its own, so a test may open a second tab of the same login.
        yield browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        browser.close()


@pytest.fixture
def session(owner: User) -> Session:
    return chat_session(owner)


def test_a_user_types_a_message_and_watches_the_reply_stream_in(
    asgi_url: str, model_server: ScriptedServer, session: Session, page: Any
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{session.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")

    page.get_by_label("Message").fill("What is 6 times 7?")
    page.get_by_role("button", name="Send").click()

    # The streamed text shows in the live answer until its stored message
    # replaces it: either holds it, depending on how fast the reply came.
    expect(page.locator("#live-answer, #m3").filter(has_text="Six times").first).to_be_visible(
        timeout=10_000
    )
    page.screenshot(path=SCREENSHOTS / "chat-streaming.png")
    expect(page.locator("#m3")).to_contain_text("Six times seven is 42", timeout=10_000)
    expect(page.locator("#m1")).to_contain_text("calculator")
    expect(page.locator("#m2")).to_contain_text("42")
    expect(page.get_by_role("status")).to_have_text("Done.")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.locator("#m0")).to_have_count(1)  # each record once
    page.screenshot(path=SCREENSHOTS / "chat-answered.png", full_page=True)
    body = model_server.requests[-1].body
    assert body["messages"][-1]["role"] == "tool"


def test_compact_now_with_nothing_to_fold_says_so_and_no_turn_failed(
    asgi_url: str, model_server: ScriptedServer, session: Session, page: Any
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{session.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")

    page.locator("#compact-instructions").fill("keep every booking reference")
    page.locator("#compact-now").click()

    status = page.get_by_role("status")
    expect(status).to_have_text(
        "Not compacted: nothing to fold: the context holds no message yet. "
        "The context is as it was."
    )
    notes = page.locator(".live-note")
    expect(notes.first).to_contain_text(
        "Compacting now, as asked, with the instructions “keep every booking reference”"
    )
    expect(notes.first).not_to_contain_text("passed the threshold")
    expect(status).not_to_contain_text("turn failed")
    page.screenshot(path=SCREENSHOTS / "chat-compact-nothing.png")


def log_in_at(page: Any, url: str) -> None:
    page.goto(url)
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("owner-pass-1234")
    page.get_by_role("button", name="Log in").click()


@pytest.fixture
def replay(owner: User) -> Session:
    original = make_session(owner, turns=8, filler=80, title="Rebook Mia")
    settings = ReplaySettings(
        token_threshold=700, safety_ratio=0.75, max_tool_result_tokens=50_000, model_name="gpt-4o"
    )
    return create_replay(original, settings, owner)


def test_a_replay_streams_live_and_draws_where_compaction_fires(
    asgi_url: str, replay: Session, page: Any
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{replay.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")
    page.get_by_label("Speed").select_option("0")
    page.get_by_role("button", name="Replay").click()

    expect(page.locator("#replay-progress")).to_have_text(
        "32 of 32 messages replayed — done.", timeout=20_000
    )
    expect(page.locator("#m31")).to_be_visible()
    expect(page.locator(".event-ok").first).to_contain_text("Compaction 1")
    assert page.locator("#replay-fires circle").count() >= 1
    points = page.locator("#replay-curve").get_attribute("points") or ""
    assert len(points.split()) == 32
    page.locator("#token-curves").scroll_into_view_if_needed()
    page.screenshot(path=SCREENSHOTS / "chat-replay.png")


@pytest.fixture
def slow_model(settings: Settings) -> Iterator[ScriptedServer]:
    story = ScriptedReply(text="Once upon a time " + "there was a story " * 60, chunk_delay_s=0.05)
    with ScriptedServer(openai=[story], api_key="test-key-123") as server:
        settings.MOTUS_CHAT_MODELS = (scripted_model(server.openai_base_url),)
        yield server


def test_stop_ends_the_turn_and_keeps_the_partial_answer(
    asgi_url: str, slow_model: ScriptedServer, session: Session, page: Any
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{session.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")
    page.get_by_label("Message").fill("Tell me a story")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#live-answer")).to_contain_text("Once upon a time")
    page.get_by_role("button", name="Stop").click()

    expect(page.get_by_role("status")).to_contain_text("Stopped")
    expect(page.locator("#m1")).to_contain_text("Once upon a time")
    page.screenshot(path=SCREENSHOTS / "chat-stopped.png")
    page.reload()
    expect(page.locator("#m1")).to_contain_text("Once upon a time")
    expect(page.locator("#m2")).to_have_count(0)


@pytest.fixture
def compacting_model(settings: Settings) -> Iterator[ScriptedServer]:
    # The compaction comes after the second answer, which is long: the tool
    # schemas (counted in every request) leave no room for it before.
    replies = [
        ScriptedReply(text="Noted."),
        ScriptedReply(text="Still here, with what you said: " + "noted " * 600),
        ScriptedReply(text="The user listed many facts; the assistant noted them."),
    ]
    with ScriptedServer(openai=replies, api_key="test-key-123") as server:
        settings.MOTUS_CHAT_MODELS = (scripted_model(server.openai_base_url),)
        yield server


@pytest.fixture
def small_session(owner: User) -> Session:
    return chat_session(owner, threshold=1000)


def test_a_compaction_shows_up_in_the_chat_with_its_token_counts(
    asgi_url: str, compacting_model: ScriptedServer, small_session: Session, page: Any
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{small_session.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")
    page.get_by_label("Message").fill("Remember: " + "fact " * 150)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status")).to_have_text("Done.")
    page.get_by_label("Message").fill("And more: " + "words " * 100)
    page.get_by_role("button", name="Send").click()

    expect(page.locator(".live-note.compacted")).to_contain_text("Compaction 1:")
    expect(page.locator(".event-ok")).to_contain_text("Compaction 1")
    expect(page.locator("#m3")).to_contain_text("Still here")
    page.screenshot(path=SCREENSHOTS / "chat-compaction.png", full_page=True)


@pytest.fixture
def slow_model_server(settings: Settings) -> Iterator[ScriptedServer]:
    """A reply that streams for about four seconds: long enough to act mid-turn."""
    replies = [ScriptedReply(text="word " * 80, chunk_delay_s=0.05)]
    with ScriptedServer(openai=replies, api_key="test-key-123") as server:
        settings.MOTUS_CHAT_MODELS = (scripted_model(server.openai_base_url),)
        yield server


def test_send_waits_for_the_turn_and_a_refused_message_comes_back_with_its_error(
    asgi_url: str,
    slow_model_server: ScriptedServer,
    session: Session,
    page: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import Page, expect

    from motus_web.chat import limits

    # One send at once, then one a minute: the second send of this test is refused.
    monkeypatch.setattr(limits, "WORK_BURST", 1)
    monkeypatch.setattr(limits, "WORK_PER_MINUTE", 1)
    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{session.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")
    box = page.get_by_label("Message")
    send = page.get_by_role("button", name="Send")

    box.fill("What is 6 times 7?")
    send.click()
    expect(send).to_be_disabled()  # at once, before the server has answered
    expect(page.locator("#live-answer")).to_contain_text("word", timeout=10_000)
    box.fill("A second question")
    box.press("Control+Enter")  # ignored while the turn streams
    expect(send).to_be_disabled()
    expect(page.get_by_role("button", name="Stop")).to_be_enabled()  # still mid-turn
    expect(page.get_by_role("status")).to_have_text("Done.", timeout=20_000)
    expect(send).to_be_enabled()
    expect(box).to_have_value("A second question")  # kept, never sent
    expect(page.locator("#m2")).to_have_count(0)  # one user message and one answer only

    box.press("Control+Enter")  # now sent, and refused by the rate limit

    error = page.locator("#chat-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("too many messages: send again in")
    expect(page.get_by_role("button", name="Retry")).to_be_hidden()  # resend instead
    expect(box).to_have_value("A second question")  # back in the box, to send again
    expect(send).to_be_enabled()
    expect(page.locator("#m2")).to_have_count(0)
    page.screenshot(path=SCREENSHOTS / "chat-refused.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=SCREENSHOTS / "chat-refused-390.png", full_page=True)


@pytest.fixture
def echo_model(settings: Settings) -> Iterator[ScriptedServer]:
    """The README's recipe: the scripted echo at a human pace, the offline summariser."""
    with ScriptedServer(fallback="echo", pace_s=0.03) as server:
        settings.MOTUS_CHAT_MODELS = (
            ChatModel(
                name="echo",
                provider="openai",
                model="gpt-4o",
                base_url=server.openai_base_url,
                compact_model="offline",
            ),
        )
        yield server


def test_the_readme_recipe_finds_the_chat_streams_compacts_and_closes_on_logout(
    asgi_url: str,
    echo_model: ScriptedServer,
    owner: User,
    page: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import Page, expect

    from motus_web.chat import limits

    monkeypatch.setattr(limits, "WORK_BURST", 10)  # a test types faster than a person

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/")
    page.locator(".head-actions").get_by_role("link", name="New chat").click()
    page.get_by_label("Token threshold").fill("1000")  # as the recipe says
    page.get_by_role("button", name="Start chatting").click()
    expect(page.get_by_role("status")).to_have_text("Connected")

    topics = [
        "booking ZFA04Y, please remember it",
        "the weather in Oslo in March, and whether it rains much in the evening",
        "a trip to Lisbon with two colleagues, and which neighbourhoods suit a long walk",
        "the hotel near the river, quiet rooms, and breakfast before seven",
        "dinner for six people, two of them vegetarians, somewhere without loud music",
        "packing for five days of meetings and one free day at the coast",
        "the train from the airport, and whether a night bus runs after midnight",
        "the museum on Monday, which is closed, and what to do instead",
        "the flight home, and what to ask the airline about changing it",
        "the budget for the whole trip, meals and taxis included",
    ]
    for number, topic in enumerate(topics, start=1):
        page.get_by_label("Message").fill(f"Message {number}: tell me about {topic}.")
        page.get_by_role("button", name="Send").click()
        if number == 1:
            # Streamed: the live box holds part of the echo before the stored reply.
            expect(page.locator("#live-answer")).to_contain_text("echo: Message 1")
            page.screenshot(path=SCREENSHOTS / "chat-recipe-streaming.png")
        expect(page.locator("#chat-log")).to_contain_text(f"echo: Message {number}:")
        expect(page.get_by_role("status")).to_have_text("Done.")
        if page.locator("#chat-log .event-ok").count():
            break
    note = page.locator(".live-note.compacted")
    expect(note).to_contain_text("offline summariser")
    assert number <= 10, "the recipe's threshold compacts within a few messages"
    expect(page.locator("#chat-log .event-ok")).to_contain_text("Compaction 1")
    page.screenshot(path=SCREENSHOTS / "chat-recipe-compacted.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=SCREENSHOTS / "chat-recipe-390.png", full_page=False)
    page.set_viewport_size({"width": 1280, "height": 900})

    other = page.context.new_page()
    other.goto(f"{asgi_url}/sessions/")
    other.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("status")).to_contain_text("You are logged out")
    expect(page.locator("#chat")).to_have_attribute("data-socket", "closed 4401")
    expect(page.locator("#chat-error")).to_contain_text("no longer logged in")
    expect(other.get_by_role("button", name="Log in")).to_be_visible()  # its redirect is done
    other.close()


def test_the_server_refuses_a_frame_over_the_apps_limit_before_reading_it(
    asgi_url: str, owner: User
) -> None:
    from django.conf import settings
    from django.test import Client
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect
    from websockets.typing import Origin

    assert makefile_ws_max_size() == MAX_FRAME_BYTES
    session = chat_session(owner)
    client = Client()
    client.force_login(owner)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    url = asgi_url.replace("http", "ws") + f"/ws/sessions/{session.public_id}/"
    origin = Origin(asgi_url)
    with connect(url, origin=origin, additional_headers={"Cookie": cookie}) as ws:
        assert '"hello"' in str(ws.recv(timeout=5))
        ws.send("x" * 15_000_000)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1009


@pytest.fixture
def long_echo(settings: Settings) -> Iterator[ScriptedServer]:
    """A reply that streams for about three seconds."""
    reply = ScriptedReply(text=" ".join(f"b{n:02d}" for n in range(40)), chunk_delay_s=0.15)
    with ScriptedServer(openai=[reply], api_key="test-key-123") as server:
        settings.MOTUS_CHAT_MODELS = (scripted_model(server.openai_base_url),)
        yield server


def test_a_reconnect_clears_the_live_box_before_it_catches_up(
    asgi_url: str, long_echo: ScriptedServer, session: Session, page: Any
) -> None:
    from playwright.sync_api import Page, WebSocketRoute, expect

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{session.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")
    watcher = page.context.new_page()
    routes: list[WebSocketRoute] = []

    def through(route: WebSocketRoute) -> None:
        routes.append(route)
        route.connect_to_server()

    watcher.route_web_socket(re.compile(r"/ws/sessions/"), through)
    watcher.goto(f"{asgi_url}/sessions/{session.public_id}/chat/")
    expect(watcher.get_by_role("status")).to_have_text("Connected")

    page.get_by_label("Message").fill("Count for me.")
    page.get_by_role("button", name="Send").click()
    live = watcher.locator("#live-answer")
    expect(live).to_contain_text("b05")
    before = live.inner_text()
    routes[-1].close(code=1012, reason="the proxy restarted")  # the watcher's socket drops
    # The page opens a new socket (its status says the turn's state, not "Connected",
    # so it cannot tell the reconnect); text may still stream in before the drop.
    for _ in range(300):
        if len(routes) > 1:
            break
        watcher.wait_for_timeout(100)
    assert len(routes) > 1, "the page did not reconnect"
    # Text streamed after the reconnect (b10 and on), however slowly the machine streams.
    expect(watcher.locator("#live-answer")).to_contain_text(re.compile(r"b[1-3]\d"), timeout=30_000)
    # The resumed text is not spliced onto the old partial text: once the new
    # socket is open, the box starts afresh (text may still arrive on the old one
    # before the drop takes effect, so this waits for the new socket's text).
    expect(watcher.locator("#live-answer")).not_to_have_text(
        re.compile("^" + re.escape(before)), timeout=30_000
    )
    expect(
        watcher.locator(".role-assistant, .message").filter(has_text="b39").first
    ).to_be_visible()


def test_a_message_too_big_to_send_is_said_in_the_chat_and_kept_in_the_box(
    asgi_url: str, server: ScriptedServer, session: Session, page: Any
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    log_in_at(page, f"{asgi_url}/login/?next=/sessions/{session.public_id}/chat/")
    expect(page.get_by_role("status")).to_have_text("Connected")
    huge = "\x01" * 19_000  # within the box's 20,000 characters; 114,000 bytes as JSON
    page.get_by_label("Message").fill(huge)
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#chat-error")).to_contain_text("too big to send")
    expect(page.get_by_label("Message")).to_have_value(huge)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert not server.requests
