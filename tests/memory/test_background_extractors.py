"""The extractors: the offline one's rules, the model one over HTTP (scripted server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory import BackgroundMemory, ChatMessage, InMemoryLogStore, OpenAIChatClient, Scope
from memory.background import Excerpt, ModelExtractor, OfflineExtractor, SQLiteLongTermStore
from memory.background.extract import EXTRACTION_PROMPT
from memory.errors import ExtractionError
from memory.testing.scripted_server import ScriptedServer

ANN = Scope(user_id="ann")


def excerpt(*said: tuple[str, str], existing: Any = ()) -> Excerpt:
    messages = [
        (i, ChatMessage.from_dict({"role": r, "content": t})) for i, (r, t) in enumerate(said)
    ]
    return Excerpt("s1", messages, existing)


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("I really love spicy Thai food.", "preference"),
        ("My husband Tom works at the hospital.", "fact"),
        ("We went to Kyoto last year for our anniversary.", "event"),
        ("My flat costs 1450 euros a month.", "fact"),
        ("I'm a nurse in the children's ward.", "fact"),
    ],
)
def test_the_offline_extractor_keeps_statements_about_the_user_verbatim(
    sentence: str, kind: str
) -> None:
    (candidate,) = OfflineExtractor().extract_now(excerpt(("user", f"Hi! {sentence} Anyway.")))
    assert (candidate.text, candidate.kind, candidate.first_seq) == (sentence, kind, 0)


@pytest.mark.parametrize(
    "said",
    [
        ("user", "Do I like spicy food?"),  # a question
        ("user", "Wow, that sounds so great to me!"),  # small talk, no content
        ("user", "I agree."),  # too short, nothing specific
        ("assistant", "I love helping you with Paris in 2024."),  # not the user
    ],
)
def test_the_offline_extractor_leaves_out_the_rest(said: tuple[str, str]) -> None:
    assert OfflineExtractor().extract_now(excerpt(said)) == []


def test_in_a_conversation_between_people_every_speaker_speaks_for_themselves() -> None:
    between = excerpt(
        ("user", "Caroline: I went to an LGBTQ support group yesterday."),
        ("assistant", "Melanie: My kids and I painted a lake sunrise last year."),
    )
    texts = [c.text for c in OfflineExtractor().extract_now(between)]
    assert texts == [
        "Caroline: I went to an LGBTQ support group yesterday.",
        "Melanie: My kids and I painted a lake sunrise last year.",
    ]
    # Asked for the user's lines only, or an agent's chat (no names): the user's.
    assert len(OfflineExtractor(roles=("user",)).extract_now(between)) == 1
    agent = excerpt(
        ("user", "I moved to Oslo in March 2021."),
        ("assistant", "I love helping you with Paris in 2024."),
    )
    assert [c.text for c in OfflineExtractor().extract_now(agent)] == [
        "I moved to Oslo in March 2021."
    ]


def test_a_transcript_speaker_label_is_not_part_of_the_sentence() -> None:
    (candidate,) = OfflineExtractor().extract_now(
        excerpt(("user", "[8 May 2023] Caroline: I went to an LGBTQ support group yesterday."))
    )
    assert candidate.text == "Caroline: I went to an LGBTQ support group yesterday."
    assert candidate.when == "yesterday"


def test_a_line_is_one_memory_of_its_statements_and_its_time_is_when_it_was_said() -> None:
    said = (
        "Guess what? Last Fri I took my kids to a pottery workshop. We all made our own pots! "
        "It was so fun.\nOh wow, that's so great!\nWe moved to Oslo in March 2021."
    )
    pottery, oslo = OfflineExtractor().extract_now(
        Excerpt("s1", [(4, ChatMessage.user(said))], said_on="9 June, 2023")
    )
    assert pottery.text == (
        "Last Fri I took my kids to a pottery workshop. We all made our own pots!"
    )
    assert (pottery.kind, pottery.when, pottery.first_seq) == ("fact", "9 June, 2023", 4)
    assert (oslo.kind, oslo.when) == ("event", "March 2021")


def reply(memories: list[dict[str, Any]]) -> dict[str, Any]:
    return {"text": json.dumps({"memories": memories})}


async def test_the_model_extractor_adds_updates_and_supersedes_against_the_store() -> None:
    store = SQLiteLongTermStore()
    log = InMemoryLogStore()
    seed = BackgroundMemory(store=store, scope=ANN, log_store=log)
    await seed.add_message(ChatMessage.user("I live in Porto.\nI drive a blue Fiat."))
    await seed.add_message(ChatMessage.assistant("Nice."))
    await seed.drain()
    by_text = {m.text: m.id for m in store.memories(ANN)}
    porto, fiat = by_text["I live in Porto."], by_text["I drive a blue Fiat."]
    script = [
        {
            "text": "```json\n"
            + json.dumps(
                {
                    "memories": [
                        {
                            "kind": "event",
                            "text": "Ann moved to Lisbon in May 2024.",
                            "when": "May 2024",
                            "importance": 0.9,
                            "action": "supersede",
                            "target": porto,
                        },
                        {
                            "kind": "fact",
                            "text": "Ann drives a blue Fiat 500.",
                            "action": "update",
                            "target": fiat,
                        },
                        {
                            "kind": "preference",
                            "text": "Ann prefers window seats.",
                            "action": "add",
                        },
                        {
                            "kind": "fact",
                            "text": "Bogus.",
                            "action": "update",
                            "target": "not-shown",
                        },
                        {"kind": "opinion", "text": "Unknown kind.", "action": "add"},
                    ]
                }
            )
            + "\n```"
        },
    ]
    with ScriptedServer(openai=script, strict=True) as server:
        async with OpenAIChatClient(server.openai_base_url, api_key="k", timeout_s=5) as client:
            memory = BackgroundMemory(
                store=store,
                scope=ANN,
                log_store=log,
                client=client,
                model_name="gpt-4o",
                extract_model_name="gpt-4o-mini",
            )
            await memory.add_message(
                ChatMessage.user(
                    "I moved to Lisbon in May, and my Fiat is a 500. I like window seats."
                )
            )
            await memory.add_message(ChatMessage.assistant("Noted!"))
            await memory.drain()
        (request,) = server.requests
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["messages"][0]["content"] == EXTRACTION_PROMPT
    shown = request.body["messages"][1]["content"]
    assert f"[{porto}] (fact) I live in Porto." in shown
    assert f"[{fiat}]" in shown
    assert "[0] user: I moved to Lisbon" in shown
    active = {m.text: m for m in store.memories(ANN) if m.status == "active"}
    assert set(active) == {
        "Ann moved to Lisbon in May 2024.",
        "Ann drives a blue Fiat 500.",
        "Ann prefers window seats.",
    }
    old = store.get(ANN, porto)
    assert (old.status, old.superseded_by) == (
        "superseded",
        active["Ann moved to Lisbon in May 2024."].id,
    )
    assert active["Ann moved to Lisbon in May 2024."].when == "May 2024"
    assert [v.text for v in store.history(ANN, fiat)] == [
        "I drive a blue Fiat.",
        "Ann drives a blue Fiat 500.",
    ]
    (extraction,) = [r for r in log.read(memory.session_id) if r["type"] == "memory_extraction"]
    assert extraction["extractor"] == "model:gpt-4o-mini"
    assert [w["action"] for w in extraction["written"]] == ["supersede", "update", "add"]


@pytest.mark.parametrize(
    "text",
    [
        "Sure! Here is what I found: the user likes tea.",
        '{"memories": "tea"}',
        '{"facts": []}',
        '{"memories": [',
    ],
)
async def test_a_malformed_reply_is_an_extraction_error_and_writes_nothing(text: str) -> None:
    store = SQLiteLongTermStore()
    log = InMemoryLogStore()
    with ScriptedServer(openai=[{"text": text}]) as server:
        async with OpenAIChatClient(server.openai_base_url, api_key="k", timeout_s=5) as client:
            extractor = ModelExtractor(client, "small")
            with pytest.raises(ExtractionError, match="memories"):
                await extractor.extract(excerpt(("user", "I like tea.")))
            memory = BackgroundMemory(store=store, scope=ANN, log_store=log, extractor=extractor)
            await memory.add_message(ChatMessage.user("I like tea."))
            reply_message = await memory.add_message(ChatMessage.assistant("Tea it is."))
            await memory.drain()
    assert reply_message.text == "Tea it is."
    (failed,) = [r for r in log.read(memory.session_id) if r["type"] == "memory_extraction"]
    assert "ExtractionError" in failed["error"]
    assert store.count(ANN) == 0


async def test_an_echoed_reply_is_described_never_quoted() -> None:
    # An echo model answers with the excerpt itself: the error must not show it.
    echoed = "echo: EXISTING MEMORIES: (none) NEW MESSAGES: my passport number is P4829173"
    with ScriptedServer(openai=[{"text": echoed}]) as server:
        async with OpenAIChatClient(server.openai_base_url, api_key="k", timeout_s=5) as client:
            with pytest.raises(ExtractionError) as raised:
                await ModelExtractor(client, "small").extract(excerpt(("user", "I like tea.")))
    message = str(raised.value)
    assert "P4829173" not in message
    assert "EXISTING" not in message
    assert f"{len(echoed)} characters, not JSON" in message


async def test_a_cut_reply_or_a_server_error_is_an_extraction_error() -> None:
    script = [{"text": '{"memories": []}', "finish_reason": "length"}, {"error": "server"}]
    with ScriptedServer(openai=script) as server:
        async with OpenAIChatClient(
            server.openai_base_url, api_key="k", timeout_s=5, max_retries=0
        ) as client:
            extractor = ModelExtractor(client, "small")
            with pytest.raises(ExtractionError, match="length"):
                await extractor.extract(excerpt(("user", "I like tea.")))
            with pytest.raises(ExtractionError, match="call failed"):
                await extractor.extract(excerpt(("user", "I like tea.")))


def test_a_reply_to_a_question_is_kept_with_the_question_it_answers() -> None:
    said = excerpt(
        ("assistant", "That sounds lovely. How did your kids react at the memorial?"),
        ("user", "They were awestruck and humbled."),
        ("user", "They were awestruck and humbled again."),
    )
    (candidate,) = OfflineExtractor().extract_now(said)
    assert candidate.text == (
        'They were awestruck and humbled. (answering "How did your kids react at the memorial?")'
    )
    assert candidate.first_seq == 1
